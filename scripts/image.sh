#!/usr/bin/env bash
# The OCI image a shop deploys (docs/deploy.md "The image"), built with buildah and no registry:
# FROM scratch, holding the release server, the site's hashed and precompressed assets, CA
# certificates, the shared libraries the binary links (as `ldd` names them, from this machine's
# Debian packages) and a non-root user. No shell, no package manager, no time zone data (the
# shop's time zone is PostgreSQL's business).
#
#   scripts/image.sh build   seckill:<version> and seckill:<release> (<version>-<commit>) from
#                            target/release/server and target/site, with its SBOM; with
#                            SECKILL_PREVIOUS_IMAGE (`make image PREVIOUS_IMAGE=…`: the release
#                            before's image, local or in a registry) carrying that release's
#                            hashed assets in /app/site/pkg-previous, served for the names this
#                            release lacks, so the pages its instances rendered keep their assets
#                            through a rollout (docs/deploy.md "Upgrades")
#   scripts/image.sh push REGISTRY [OVERLAY]
#                            pushes seckill:<release> to REGISTRY/seckill:<release> and prints
#                            its reference by digest; with OVERLAY (a folder of
#                            deploy/kubernetes/overlays), pins that overlay's image and release
#   scripts/image.sh release prints <release>
#   scripts/image.sh root    prints the image's root filesystem, mounted (for chroot)
#   scripts/image.sh run [VAR=value…] -- ARGS…
#                            the image's entry with ARGS, as a runtime would start it (below)
#   scripts/image.sh size    the image's size in bytes
#
# Layout: /app/server (the entry), /app/hash.txt (the asset hashes, read next to the binary),
# /app/site (LEPTOS_SITE_ROOT; /app/site/pkg-previous the release before's assets), /app/sbom.cdx.json (the SBOM: scripts/sbom.py). User 10001:10001. Entry `/app/server`, command `serve`; the
# other commands (`worker`, `migrate`, `reconcile`, `create-merchant`, …) replace the command.
#
# SECKILL_IMAGE_FROM=DIR builds from another checkout's build (DIR/target/release/server, its
# hash.txt, DIR/target/site; its version from DIR/Cargo.toml, else this checkout's; its commit
# from DIR/.commit, else git): `make upgrade-check` makes the
# release before's image so. SECKILL_IMAGE names the image (default seckill:<version>),
# SECKILL_IMAGE_RELEASE its release tag (default <version>-<commit>).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
from=$(cd "${SECKILL_IMAGE_FROM:-$root}" && pwd)
manifest=$from/Cargo.toml; [ -f "$manifest" ] || manifest=$root/Cargo.toml
VERSION=$(awk -F'"' '/^\[workspace.package\]/{p=1} p && /^version/{print $2; exit}' "$manifest")
IMAGE=${SECKILL_IMAGE:-seckill:$VERSION}
PREVIOUS=${SECKILL_PREVIOUS_IMAGE:-}
revision() { cat "$from/.commit" 2>/dev/null || git -C "$from" rev-parse HEAD 2>/dev/null || echo unknown; }
# A release is the version and the commit it was built from: a tag no other build reuses.
release() { echo "${SECKILL_IMAGE_RELEASE:-$VERSION-$(revision | cut -c1-12)}"; }
PY="$root/.venv/bin/python"
UID_GID=10001:10001

fail() { echo "image: $*" >&2; exit 1; }

need_buildah() {
  command -v buildah >/dev/null && command -v podman >/dev/null ||
    fail "buildah and podman are not installed (make image installs them: apt-get install buildah podman)"
}

# The files of the image, laid out in a folder of its own.
stage() { # folder
  local out=$1 bin="$from/target/release/server" site="$from/target/site" lib
  [ -x "$bin" ] || fail "no release server at target/release/server (make build-release)"
  [ -f "$from/target/release/hash.txt" ] || fail "no target/release/hash.txt: the release build names its assets there"
  [ -d "$site/pkg" ] || fail "no site at target/site (make build-release)"
  ls "$site"/pkg/*.wasm.br >/dev/null 2>&1 || fail "the site's assets are not precompressed (scripts/precompress.sh)"
  rm -rf "$out"
  mkdir -p "$out/app" "$out/etc/ssl/certs" "$out/tmp" "$out/proc" "$out/dev" "$out/sys"
  chmod 1777 "$out/tmp"
  install -m 0755 "$bin" "$out/app/server"
  strip --strip-debug "$out/app/server"
  install -m 0644 "$from/target/release/hash.txt" "$out/app/hash.txt"
  cp -r "$site" "$out/app/site"
  rm -rf "$out/app/site/pkg-previous"
  # TypeScript declarations of the wasm's bindings: for editors, not for browsers.
  find "$out/app/site" -name '*.d.*ts' -delete
  # Only what the pages and the server name: no source maps, no leftovers of older builds.
  LEPTOS_SITE_ROOT="$out/app/site" "$bin" check-assets >/dev/null
  [ -z "$PREVIOUS" ] || previous_assets "$out/app/site"
  # The loader and every library it resolves for the binary, at the paths it resolves them.
  for lib in $(ldd "$bin" | awk '/=> \// {print $3} /^[ \t]*\/[^ ]*ld-linux/ {print $1}'); do
    mkdir -p "$out$(dirname "$lib")"
    cp -L "$lib" "$out$lib"
  done
  # Debian's bundle of the CA certificates (for TLS to the services and a payment provider).
  cp -L /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/:/sbin/nologin\nseckill:x:10001:10001:seckill:/tmp:/sbin/nologin\n' >"$out/etc/passwd"
  printf 'root:x:0:\nseckill:x:10001:\n' >"$out/etc/group"
  printf 'hosts: files dns\n' >"$out/etc/nsswitch.conf"
  # The SBOM last: it hashes the server and names the packages of every library copied above.
  [ -x "$PY" ] || fail "no .venv (make py-tools): the SBOM is built with cyclonedx-python-lib"
  "$PY" "$root/scripts/sbom.py" "$out" "$VERSION" "$(revision)" >"$out/app/sbom.cdx.json"
  cp "$out/app/sbom.cdx.json" "$root/target/image-sbom.cdx.json"
}

# The release before's own assets (its pkg, not what it carried of the one before it: a rollout
# has two releases live, never three), those this release lacks, into SITE/pkg-previous.
previous_assets() { # site
  local site=$1 prev f tls=()
  case $PREVIOUS in 127.0.0.1:* | localhost:* | localhost/*) tls=(--tls-verify=false) ;; esac
  podman image exists "$PREVIOUS" || podman pull --quiet "${tls[@]}" "$PREVIOUS" >/dev/null ||
    fail "no image $PREVIOUS (SECKILL_PREVIOUS_IMAGE) here or in its registry"
  prev=$(podman image mount "$PREVIOUS") || fail "the image $PREVIOUS cannot be mounted"
  if [ ! -d "$prev/app/site/pkg" ]; then
    podman image unmount "$PREVIOUS" >/dev/null
    fail "$PREVIOUS has no /app/site/pkg: no image of this server"
  fi
  mkdir -p "$site/pkg-previous"
  for f in "$prev/app/site/pkg"/*; do
    [ -e "$site/pkg/${f##*/}" ] || cp -r "$f" "$site/pkg-previous/"
  done
  podman image unmount "$PREVIOUS" >/dev/null
  echo "image: $(find "$site/pkg-previous" -type f | wc -l) files of $PREVIOUS's assets that this release lacks, in /app/site/pkg-previous"
}

# The release whose assets the image carries in /app/site/pkg-previous (its label), empty for none.
carries() { podman image inspect --format '{{index .Labels "io.seckill.assets.previous"}}' "$IMAGE" 2>/dev/null | sed 's/<no value>//'; }

build() {
  need_buildah
  [ -f /etc/ssl/certs/ca-certificates.crt ] || fail "no /etc/ssl/certs/ca-certificates.crt (apt-get install ca-certificates)"
  local staged="$root/target/image-root" ctr revision before carried=""
  stage "$staged"
  revision=$(revision)
  if [ -n "$PREVIOUS" ]; then
    carried=$(podman image inspect --format '{{index .Labels "io.seckill.release"}}' "$PREVIOUS" | sed 's/<no value>//')
    [ -n "$carried" ] || carried=$(podman image inspect --format '{{index .Labels "org.opencontainers.image.version"}}-{{index .Labels "org.opencontainers.image.revision"}}' "$PREVIOUS" | cut -c1-60)
  fi
  before=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  ctr=$(buildah from scratch)
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
  buildah copy --quiet "$ctr" "$staged" / >/dev/null
  buildah config \
    --user "$UID_GID" \
    --workingdir /tmp \
    --entrypoint '["/app/server"]' \
    --cmd serve \
    --port 3000/tcp \
    --env LEPTOS_SITE_ROOT=/app/site \
    --env SECKILL_ADDR=0.0.0.0:3000 \
    --env SECKILL_DEPLOYED=1 \
    --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --label org.opencontainers.image.title=seckill \
    --label org.opencontainers.image.description="The seckill flash-sale server" \
    --label org.opencontainers.image.version="$VERSION" \
    --label org.opencontainers.image.revision="$revision" \
    --label io.seckill.release="$(release)" \
    --label io.seckill.assets.previous="$carried" \
    "$ctr"
  buildah commit --quiet --rm "$ctr" "$IMAGE" >/dev/null
  podman tag "$IMAGE" "seckill:$(release)"
  trap - EXIT
  # The release tags of earlier builds go with them (a registry keeps what was pushed).
  local old
  for old in $(podman images --format '{{.Repository}}:{{.Tag}}' | grep -E "/seckill:$VERSION-[0-9a-f]+$" | grep -v ":$(release)$" || true); do
    podman rmi "$old" >/dev/null 2>&1 || true
  done
  # The build before, now untagged, goes (and nothing else).
  if [ -n "$before" ] && [ "$before" != "$(podman image inspect --format '{{.Id}}' "$IMAGE")" ]; then
    podman rmi "$before" >/dev/null 2>&1 || true
  fi
  local bytes
  bytes=$(size)
  echo "image: $IMAGE and seckill:$(release), $bytes bytes ($((bytes / 1024 / 1024)) MiB); files: $(du -sh "$staged" | cut -f1) in $(find "$staged" -type f | wc -l) files"
  echo "image: parts: the server $(du -b "$staged/app/server" | cut -f1) B, the site $(du -sb "$staged/app/site" | cut -f1) B, the libraries $(du -scb "$staged"/lib* "$staged/usr" 2>/dev/null | tail -1 | cut -f1) B, the certificates $(du -b "$staged/etc/ssl/certs/ca-certificates.crt" | cut -f1) B, the SBOM $(du -b "$staged/app/sbom.cdx.json" | cut -f1) B (files; the image's layer is their tar)"
}

# The image pushed to REGISTRY by its release tag; prints REGISTRY/seckill:<release>@<digest>. A
# registry on the loopback is spoken to without TLS (the tests' own); any other needs TLS. With
# OVERLAY, that overlay's kustomization pins the image by digest and its release.yaml names
# the release (the migrations Job's name).
push() { # REGISTRY [OVERLAY]
  local registry=${1:?push REGISTRY [OVERLAY]: REGISTRY=host[:port]/path} overlay=${2:-} tag ref digest tls=() file
  need_buildah
  podman image exists "$IMAGE" || fail "no image $IMAGE (make image)"
  tag=$(release)
  case $registry in 127.0.0.1:* | localhost:* | localhost/*) tls=(--tls-verify=false) ;; esac
  ref="$registry/seckill:$tag"
  file=$(mktemp)
  podman push --quiet "${tls[@]}" --digestfile "$file" "$IMAGE" "docker://$ref" >/dev/null
  digest=$(cat "$file"); rm -f "$file"
  [[ $digest == sha256:* ]] || fail "the registry gave no digest for $ref"
  echo "$ref@$digest"
  [ -z "$overlay" ] || pin "$overlay" "$registry/seckill" "$tag" "$digest"
}

# OVERLAY's image pinned (its kustomization's `images:` entry for seckill) and its release named.
pin() { # OVERLAY NAME TAG DIGEST
  local overlay=$1 name=$2 tag=$3 digest=$4
  [ -f "$overlay/kustomization.yaml" ] && [ -f "$overlay/release.yaml" ] || fail "$overlay is no overlay with a release.yaml"
  python3 - "$overlay" "$name" "$tag" "$digest" <<'PY'
import re, sys
overlay, name, tag, digest = sys.argv[1:]
path = f"{overlay}/kustomization.yaml"
text = open(path).read()
block = f"images:\n  - name: seckill\n    newName: {name}\n    newTag: \"{tag}\"\n    digest: {digest}\n"
text, n = re.subn(r"(?m)^images:\n(?:  .*\n)*", block, text)
assert n == 1, f"{path} has no images: block"
open(path, "w").write(text)
path = f"{overlay}/release.yaml"
text = open(path).read()
text, n = re.subn(r'(?m)^(  release: ).*$', f'\\1"{tag}"', text)
assert n == 1, f"{path} names no release"
open(path, "w").write(text)
PY
  echo "image: $overlay pinned to $name:$tag@$digest"
}

size() { podman image inspect --format '{{.Size}}' "$IMAGE"; }

# The image's root filesystem, mounted read-only by podman (kept until `unmount`).
mounted_root() {
  need_buildah
  podman image exists "$IMAGE" || fail "no image $IMAGE (make image)"
  podman image mount "$IMAGE"
}

# No container can start on the machines this project is tested on (crun is refused setrlimit),
# so `run` does what a runtime would, by hand: the image's root filesystem (mounted), its entry,
# its user, its environment plus the given variables and nothing of the caller's, and a /proc of
# its own in a private mount namespace (the server finds its asset hashes next to
# /proc/self/exe), gone when it ends. It replaces this script's process: a caller that starts it
# in the background has the server's own pid.
run() { # VAR=value... -- args...
  local vars=() rootfs user entry image_env
  while [ "$#" -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  [ "${1:-}" = -- ] || fail "run: VAR=value… -- ARGS…"
  shift
  # A caller that mounted the image once (`root`) names its folder; else it is mounted here.
  rootfs=${SECKILL_IMAGE_ROOT:-$(mounted_root)} || fail "the image $IMAGE cannot be mounted"
  user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
  entry=$(podman image inspect --format '{{join .Config.Entrypoint " "}}' "$IMAGE")
  mapfile -t image_env < <(podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$IMAGE" | sed '/^$/d')
  exec env -i "${image_env[@]}" "${vars[@]}" /usr/bin/unshare --mount --propagation private -- \
    /bin/sh -c 'r=$0 u=$1; shift; /usr/bin/mount -t proc proc "$r/proc" && exec /usr/sbin/chroot --userspec="$u" "$r" "$@"' \
    "$rootfs" "$user" $entry "$@"
}

case "${1:-build}" in
  build) build ;;
  stage) stage "${2:?folder}" ;;
  root) mounted_root ;;
  run) shift; run "$@" ;;
  unmount) podman image unmount "$IMAGE" >/dev/null ;;
  size) size ;;
  push) shift; push "$@" ;;
  release) release ;;
  carries) carries ;;
  name) echo "$IMAGE" ;;
  *) echo "usage: $0 build|root|run [VAR=value…] -- ARGS…|unmount|size|push REGISTRY [OVERLAY]|release|carries|name" >&2; exit 2 ;;
esac
