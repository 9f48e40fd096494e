#!/usr/bin/env bash
# `make image-push-check` (in `make test`): the image's way to a cluster, through a registry of
# this check's own. Debian's docker-registry on the loopback (its storage under .local, removed
# after), then:
#   1. `scripts/image.sh push` sends seckill:<release> and prints its reference by digest;
#   2. skopeo reads that digest back from the registry, with the image's revision label;
#   3. podman pulls it by digest alone, and it is the very image built (the same image id);
#   4. a copy of the cluster overlay is pinned to it (`push … OVERLAY`): rendered, every container
#      of the server names the image by that digest and the migrations Job is named after the
#      release;
#   5. the SBOM the image carries is valid CycloneDX and names the server's crates and libraries.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# Below the kernel's ephemeral range (32768-60999), where no outgoing connection can hold it.
PORT=${SECKILL_REGISTRY_PORT:-15500}
REGISTRY="127.0.0.1:$PORT/seckill-check"
work="$root/.local/registry"
IMAGE=$("$root/scripts/image.sh" name)
RELEASE=$("$root/scripts/image.sh" release)
PY="$root/.venv/bin/python"
KUBECTL="$root/.venv/bin/kubectl"

fail() { echo "image-push-check: $*" >&2; exit 1; }
step() { echo "image-push-check: $*"; }

pid= mounted=
finish() {
  [ -z "$mounted" ] || podman image unmount "$IMAGE" >/dev/null 2>&1 || true
  [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
  [ -z "$pid" ] || wait "$pid" 2>/dev/null || true
  podman rmi --ignore "$REGISTRY/seckill:$RELEASE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap finish EXIT

podman image exists "$IMAGE" || fail "no image $IMAGE (make image)"
rm -rf "$work" && mkdir -p "$work/data"
cat >"$work/config.yml" <<EOF
version: 0.1
storage:
  filesystem:
    rootdirectory: $work/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$PORT
EOF
docker-registry serve "$work/config.yml" >"$work/registry.log" 2>&1 &
pid=$!
deadline=$((SECONDS + 30))
until curl -fsS -o /dev/null "http://127.0.0.1:$PORT/v2/" 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || { cat "$work/registry.log"; fail "the registry did not start"; }
  ((SECONDS < deadline)) || fail "the registry did not answer within 30 s"
  sleep 0.2
done
step "a registry on 127.0.0.1:$PORT"

# 1. Pushed by the release tag; the reference by digest.
ref=$("$root/scripts/image.sh" push "$REGISTRY" | tail -1)
[[ $ref == "$REGISTRY/seckill:$RELEASE@sha256:"* ]] || fail "push printed $ref"
digest=${ref##*@}
step "pushed $REGISTRY/seckill:$RELEASE, $digest"

# 2. The registry's own word on it.
inspected=$(skopeo inspect --tls-verify=false "docker://$REGISTRY/seckill@$digest")
[ "$("$PY" -c 'import json,sys; print(json.load(sys.stdin)["Digest"])' <<<"$inspected")" = "$digest" ] ||
  fail "skopeo read another digest: $inspected"
revision=$("$PY" -c 'import json,sys; print(json.load(sys.stdin)["Labels"]["org.opencontainers.image.revision"])' <<<"$inspected")
[ "$revision" = "$(git -C "$root" rev-parse HEAD)" ] || fail "the pushed image's revision is $revision"
step "skopeo reads $digest back, revision $revision"

# 3. Pulled back by the digest alone: the image built.
podman rmi --ignore "$REGISTRY/seckill:$RELEASE" >/dev/null 2>&1 || true
podman pull --quiet --tls-verify=false "$REGISTRY/seckill@$digest" >/dev/null
pulled=$(podman image inspect --format '{{.Id}}' "$REGISTRY/seckill@$digest")
built=$(podman image inspect --format '{{.Id}}' "$IMAGE")
[ "$pulled" = "$built" ] || fail "pulled image $pulled is not the one built ($built)"
step "pulled by digest: image $pulled, the one built"

# 4. An overlay pinned to it.
cp -r "$root/deploy/kubernetes" "$work/kubernetes"
"$root/scripts/image.sh" push "$REGISTRY" "$work/kubernetes/overlays/cluster" >/dev/null
rendered=$("$KUBECTL" kustomize "$work/kubernetes/overlays/cluster")
images=$(grep -E '^\s+image: .*seckill' <<<"$rendered" | sed 's/^ *image: //' | sort -u)
[ "$images" = "$REGISTRY/seckill:$RELEASE@$digest" ] || fail "the pinned overlay's images: $images"
grep -qx "  name: seckill-migrate-$RELEASE" <<<"$rendered" || fail "no Job seckill-migrate-$RELEASE in the pinned overlay"
step "the cluster overlay pinned: every server container runs …@$digest, the Job seckill-migrate-$RELEASE"

# 5. The SBOM in the image.
rootfs=$(podman image mount "$IMAGE") mounted=1
"$PY" "$root/scripts/sbom.py" --check "$rootfs/app/sbom.cdx.json"
