#!/usr/bin/env python3
"""The image's software bill of materials, CycloneDX 1.6 JSON (`scripts/image.sh build` writes it to
/app/sbom.cdx.json in the image and beside it, target/image-sbom.cdx.json).

  scripts/sbom.py ROOT VERSION REVISION   the BOM of the staged image root ROOT, on stdout
  scripts/sbom.py --check FILE            FILE is valid CycloneDX 1.6 and names the server's crates
                                          and the libraries of the image (image-check runs it)

Components: every crate compiled into the server (`cargo tree` of the release build's features,
normal dependencies: what is linked, not the build tools), as pkg:cargo purls with their licenses;
and every file of the image that Debian shipped (the shared libraries `ldd` named, the loader, the
CA certificates), as the pkg:deb purl of the package that owns it (`dpkg -S`). Built and checked
with cyclonedx-python-lib (`make py-tools`), which validates against the CycloneDX schema.
"""
import json
import os
import re
import subprocess
import sys

from cyclonedx.contrib.license.factories import LicenseFactory
from cyclonedx.model import HashAlgorithm, HashType
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Shipped by Debian into the image (scripts/image.sh stage): everything under these.
DEBIAN_PATHS = ("lib", "lib64", "usr/lib", "etc/ssl/certs")


def crates():
    out = subprocess.run(
        ["cargo", "tree", "--locked", "-p", "server", "--no-default-features", "--edges", "normal",
         "--prefix", "none", "--format", "{p}|{l}"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    seen = {}
    for line in out.splitlines():
        m = re.match(r"^([\w-]+) v(\S+)(?: \(([^)]*)\))?(?: \(\*\))?\|(.*)$", line.strip())
        if not m:
            continue
        name, version, source, lic = m.groups()
        if source and source not in ("proc-macro", "*"):
            source = "workspace"  # a crate of this repository (its path is this machine's)
        seen[(name, version)] = (lic.strip(), source)
    return seen


def debian_packages(root):
    owners = {}
    for top in DEBIAN_PATHS:
        base = os.path.join(root, top)
        for folder, _, files in os.walk(base):
            for f in files:
                inside = "/" + os.path.relpath(os.path.join(folder, f), root)
                owners.setdefault(owner_of(inside), []).append(inside)
    packages = {}
    for package, files in owners.items():
        if package is None:
            raise SystemExit(f"sbom: no Debian package owns {files}")
        version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package],
                                 capture_output=True, text=True, check=True).stdout
        packages[package] = (version, sorted(files))
    return packages


# Made on the machine from the package's certificates (update-ca-certificates), so no package
# lists the file itself.
GENERATED = {"/etc/ssl/certs/ca-certificates.crt": "ca-certificates"}


def owner_of(path):
    if path in GENERATED:
        return GENERATED[path]
    for candidate in (path, os.path.realpath(path), "/usr" + path):
        out = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout.split(":")[0].split(",")[0].strip()
    return None


def sha256(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def build(root, version, revision):
    licenses = LicenseFactory()
    bom = Bom()
    server = Component(
        type=ComponentType.APPLICATION, name="seckill", version=version, bom_ref="seckill",
        description=f"The seckill flash-sale server (revision {revision})",
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=sha256(os.path.join(root, "app", "server")))],
    )
    bom.metadata.component = server
    for (name, ver), (lic, source) in sorted(crates().items()):
        if source == "workspace":
            continue  # this repository's own crates: the server itself
        purl = PackageURL(type="cargo", name=name, version=ver)
        comp = Component(type=ComponentType.LIBRARY, name=name, version=ver, purl=purl, bom_ref=str(purl))
        if lic:
            comp.licenses.add(licenses.make_from_string(lic))
        bom.components.add(comp)
        bom.register_dependency(server, [comp])
    for package, (ver, files) in sorted(debian_packages(root).items()):
        purl = PackageURL(type="deb", namespace="debian", name=package, version=ver,
                          qualifiers={"arch": "amd64", "distro": "debian-12"})
        comp = Component(type=ComponentType.LIBRARY if package != "ca-certificates" else ComponentType.DATA,
                         name=package, version=ver, purl=purl, bom_ref=str(purl),
                         description="files in the image: " + ", ".join(files))
        bom.components.add(comp)
        bom.register_dependency(server, [comp])
    return JsonV1Dot6(bom).output_as_string(indent=1)


def check(path):
    text = open(path).read()
    errors = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if errors:
        raise SystemExit(f"sbom: {path} is not valid CycloneDX 1.6: {errors}")
    doc = json.loads(text)
    purls = [c.get("purl", "") for c in doc.get("components", [])]
    cargo = [p for p in purls if p.startswith("pkg:cargo/")]
    deb = [p for p in purls if p.startswith("pkg:deb/")]
    for needed in ("pkg:cargo/axum@", "pkg:cargo/redis@", "pkg:cargo/sqlx@", "pkg:deb/debian/libc6@"):
        if not any(p.startswith(needed) for p in purls):
            raise SystemExit(f"sbom: {path} does not name {needed}…")
    print(f"sbom: {path}: CycloneDX 1.6, valid; {len(cargo)} crates, {len(deb)} Debian packages")


def main():
    if sys.argv[1:2] == ["--check"]:
        check(sys.argv[2])
        return
    root, version, revision = sys.argv[1:4]
    sys.stdout.write(build(root, version, revision))


if __name__ == "__main__":
    main()
