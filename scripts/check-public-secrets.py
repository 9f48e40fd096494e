#!/usr/bin/env python3
"""Every secret this repository holds is known to the server as public (`make lint`).

A deployed process refuses a SECKILL_SECRET, SECKILL_SECRET_PREVIOUS or SECKILL_METRICS_TOKEN
whose SHA-256 is listed in server/src/infra/config/public-secrets.txt (strength.rs). This check
reads every file git tracks for the values given to those settings, or signing keys written in
the code (a byte string of 16 characters or more handed to a signer, a `SECRET` or
`METRICS_TOKEN` constant), and fails naming each one whose hash the list lacks, with the line to
add. `--self-test` plants a new secret in a scratch copy of a script and must see it caught.
"""
import hashlib
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST = os.path.join(ROOT, "server", "src", "infra", "config", "public-secrets.txt")
SETTINGS = r"(?:SECKILL_SECRET(?:_PREVIOUS)?|SECKILL_METRICS_TOKEN|METRICS_TOKEN)"
PATTERNS = [
    # SECKILL_SECRET=value, SECKILL_SECRET: "value", SECKILL_SECRET:-value (a shell default)
    re.compile(SETTINGS + r"""\s*(?:=|:-|:)\s*["']?([^\s"'$`(){}<>…,;]{12,})"""),
    # const SECRET: &[u8] = b"value"; const METRICS_TOKEN: &str = "value";
    re.compile(r"""(?:SECRET|TOKEN)\s*:\s*&(?:\[u8\]|str)\s*=\s*b?"([^"]{12,})\""""),
    # a signer built on a literal key: Signer::new(b"value")
    re.compile(r"""::new\(\s*b"([^"]{16,})\""""),
    # the hosts' and the checks' own: SECRET=${SECKILL_SECRET:-value}
    re.compile(r"""\bSECRET=\$\{SECKILL_SECRET:-([^}$][^}]{11,})\}"""),
    re.compile(r"""--from-literal=(?:SECKILL_SECRET|SECKILL_METRICS_TOKEN|password)=([^\s"'$…]{12,})"""),
]
SKIP = ("public-secrets.txt", "check-public-secrets.py")


def listed():
    return {l.strip().lower() for l in open(LIST) if l.strip() and not l.startswith("#")}


def found_in(path):
    try:
        text = open(path, encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        return
    for n, line in enumerate(text.splitlines(), 1):
        for pattern in PATTERNS:
            for value in pattern.findall(line):
                yield n, value


def check(paths, known):
    missing = []
    for path in paths:
        if os.path.basename(path) in SKIP:
            continue
        for n, value in found_in(path):
            digest = hashlib.sha256(value.encode()).hexdigest()
            if digest not in known:
                missing.append((os.path.relpath(path, ROOT), n, value, digest))
    return missing


def tracked():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [os.path.join(ROOT, p) for p in out.stdout.splitlines() if os.path.isfile(os.path.join(ROOT, p))]


def main():
    known = listed()
    if "--self-test" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            planted = os.path.join(tmp, "deploy.sh")
            with open(planted, "w") as f:
                f.write("export SECKILL_SECRET=a-secret-nobody-listed-yet-0000000000\n")
            caught = check([planted], known)
            if len(caught) != 1:
                print("public secrets: the self-test MISSED a planted secret", file=sys.stderr)
                sys.exit(1)
        print("public secrets: self-test: a planted secret caught")
        return
    files = tracked()
    missing = check(files, known)
    for path, n, value, digest in missing:
        print(f"public secrets: {path}:{n}: {value!r} is not in {os.path.relpath(LIST, ROOT)}; add the line {digest}",
              file=sys.stderr)
    if missing:
        sys.exit(1)
    print(f"public secrets: every secret of {len(files)} files is listed as public ({len(known)} known)")


if __name__ == "__main__":
    main()
