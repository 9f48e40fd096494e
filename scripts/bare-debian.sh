#!/usr/bin/env bash
# `make bare-debian`: `make run` in a bare Debian 12, as a newcomer would start it. A root made by
# `debootstrap --variant=minbase bookworm` (target/bare-debian), given only what the README asks
# for — the Rust toolchain (this machine's rustup, mounted; gcc to link), Node.js and npm (this
# machine's, copied), make and git — and a clone of this checkout's HEAD; then `make run` under
# chroot, which must install everything else and serve :3000 (`/readyz` 200, a sale's page).
# With BARE_TARGET=DIR the clone's target/ is DIR (a release build of the same commit: the run
# then measures the installs and the start, not the compile). Writes the programs of the bare
# root to target/bare-debian-programs.txt (compare with scripts/debian12-base.txt).
# This machine's services are stopped for the run (the chroot's use the same ports) and started
# again after it; everything the run started is ended and unmounted.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
R=${BARE_ROOT:-$root/target/bare-debian}
log() { echo "bare-debian: $*"; }
fail() { echo "bare-debian: FAILED: $*" >&2; exit 1; }

command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
# A new root every run (an earlier run installed into its own). Never through a mount left over.
if grep -q " $R/" /proc/mounts; then fail "mounts are left under $R: umount them first"; fi
rm -rf "$R"
if [ ! -x "$R/usr/bin/apt-get" ]; then
  log "debootstrap --variant=minbase bookworm (a few minutes)"
  debootstrap --variant=minbase bookworm "$R" http://deb.debian.org/debian >"$R.debootstrap.log" 2>&1 ||
    fail "debootstrap (see $R.debootstrap.log)"
fi
(cd "$R" && for d in bin usr/bin sbin usr/sbin; do find "$d" -maxdepth 1 \( -type f -o -type l \) -printf '%f\n'; done) |
  sort -u >"$root/target/bare-debian-programs.txt"

mounts=()
cleanup() {
  set +e
  chroot "$R" bash -c 'cd /src && make services-stop' >/dev/null 2>&1
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null
  pkill -f "$R/" 2>/dev/null
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null; done
  "$root/scripts/services.sh" start >/dev/null 2>&1
}
trap cleanup EXIT
bind() { mkdir -p "$R$2"; mount --bind "$1" "$R$2"; mounts+=("$R$2"); }

# The README's prerequisites.
cp /etc/resolv.conf "$R/etc/resolv.conf"
mount -t proc proc "$R/proc"; mounts+=("$R/proc")
bind /dev /dev; bind /dev/pts /dev/pts; bind /sys /sys
bind "$HOME/.rustup" /root/.rustup
mkdir -p "$R/root/.cargo/bin"
for tool in cargo rustc rustup rustfmt cargo-clippy clippy-driver; do
  [ -e "$HOME/.cargo/bin/$tool" ] && cp -P "$HOME/.cargo/bin/$tool" "$R/root/.cargo/bin/" || true
done
node=$(command -v node)
cp "$node" "$R/usr/bin/node"
mkdir -p "$R/usr/lib/node_modules" && rm -rf "$R/usr/lib/node_modules/npm" && cp -a "$(dirname "$(readlink -f "$(command -v npm)")")/.." "$R/usr/lib/node_modules/npm"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$R/usr/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$R/usr/bin/npx"
chroot "$R" bash -c 'command -v make >/dev/null && command -v git >/dev/null && command -v cc >/dev/null ||
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq make git gcc libc6-dev ca-certificates >/dev/null; }'

# Only what the README asks for is there: none of what `make run` must install.
for p in psql redis-server rabbitmq-server brotli python3 curl wasm-bindgen wasm-opt; do
  chroot "$R" bash -c "PATH=/root/.cargo/bin:\$PATH command -v $p" >/dev/null && fail "the bare root already has $p"
done

rm -rf "$R/src"
git clone -q "$root" "$R/src"
git -C "$R/src" checkout -q "$(git rev-parse HEAD)"
if [ -n "${BARE_TARGET:-}" ]; then
  bind "$BARE_TARGET" /src/target
fi

# This machine's trust store, as the root's own: a network that reaches the registries through a
# TLS-inspecting proxy needs its authority (npm, cargo and pip are told where it is).
cp /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/host-ca.crt"
trust=()
for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE CARGO_HTTP_CAINFO PIP_CERT GIT_SSL_CAINFO CURL_CA_BUNDLE; do
  trust+=("$v=/etc/ssl/host-ca.crt")
done

"$root/scripts/services.sh" stop >/dev/null 2>&1 || true
log "make run in the bare root"
start=$SECONDS
chroot "$R" env -i HOME=/root PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  TERM=dumb "${trust[@]}" bash -c 'cd /src && make run' >"$root/target/bare-debian-run.log" 2>&1 &
pid=$!
deadline=$((SECONDS + ${BARE_DEADLINE:-3600}))
until curl -fsS -o /dev/null http://127.0.0.1:3000/readyz 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || { tail -n 30 "$root/target/bare-debian-run.log"; fail "make run ended before serving"; }
  [ $SECONDS -lt $deadline ] || fail "make run did not serve within ${BARE_DEADLINE:-3600} s"
  sleep 2
done
took=$((SECONDS - start))
curl -fsS http://127.0.0.1:3000/ | grep -q '<html' || fail "the storefront did not render"
installed=$(for p in psql redis-server rabbitmq-server brotli curl wasm-bindgen; do
  chroot "$R" bash -c "PATH=/root/.cargo/bin:/usr/lib/postgresql/15/bin:\$PATH command -v $p >/dev/null" && echo "$p"; done | paste -sd' ')
log "make run served :3000 after $took s in the bare root (installed there: $installed)"
