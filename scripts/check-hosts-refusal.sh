#!/usr/bin/env bash
# `make hosts` on a machine that cannot make network namespaces must say so and stop, leaving
# nothing behind. Played here with an `ip` first on PATH that refuses `netns add`, as a container
# without CAP_SYS_ADMIN does, and passes every other command to the real one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
real_ip=$(command -v ip)
cat >"$fake/ip" <<STUB
#!/bin/sh
if [ "\$1" = netns ] && [ "\$2" = add ]; then
  echo "mount --make-shared /run/netns failed: Operation not permitted" >&2; exit 1
fi
exec $real_ip "\$@"
STUB
chmod +x "$fake/ip"
set +e
out=$(PATH="$fake:$PATH" "$root/scripts/hosts.sh" up 2>&1); status=$?
set -e
[ "$status" != 0 ] || { echo "hosts refusal: make hosts went on without network namespaces: $out" >&2; exit 1; }
grep -q 'cannot make network namespaces' <<<"$out" || { echo "hosts refusal: it did not say why: $out" >&2; exit 1; }
"$root/scripts/hosts.sh" gone
echo "hosts refusal: without network namespaces make hosts says so and leaves nothing: OK"
