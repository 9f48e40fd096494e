#!/usr/bin/env bash
# The image tested as it ships (`make image-check`, in `make test`). No container can start on
# the machines this project is tested on, so the image's own root filesystem is mounted
# (`podman image mount`) and its entry run under `chroot` as the image's non-root user, with the
# image's own environment, against the services of `make services`:
#  1. a missing setting is named in one line and the process exits non-zero;
#  2. `migrate` from the image prepares a database of its own;
#  3. two instances `serve` from the image: /readyz 200, the storefront and a hashed asset
#     (brotli, immutable) served from the image's files;
#  4. a crowd buys through both; mid-crowd the first gets SIGTERM: it refuses new connections,
#     answers the buys in flight, exits 0 within its drain; the shoppers it refused retry on the
#     second (same Idempotency-Key) and the load tool's invariants hold: exactly the stock sold,
#     every accepted unit an order in PostgreSQL (no reservation lost), nobody over the limit.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work="$root/target/image-check"
PG_PORT=${SECKILL_PG_PORT:-55432}
DATABASE=seckill_image_check
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p $PG_PORT -U seckill -v ON_ERROR_STOP=1 -qtA"
PORT_A=${SECKILL_IMAGE_CHECK_PORT:-3610}
PORT_B=$((PORT_A + 1))
DRAIN_SECS=20
LOAD="$root/target/release/seckill-load"

fail() { echo "image check: FAILED: $*" >&2; exit 1; }
step() { echo "image check: $*"; }

[ "$(id -u)" = 0 ] || fail "chroot needs root"
command -v unshare >/dev/null && command -v chroot >/dev/null || fail "unshare and chroot (util-linux, coreutils) are missing"
[ -x "$LOAD" ] || fail "no load tool at target/release/seckill-load (make load-tool)"
image=$("$root/scripts/image.sh" name)
rootfs=$("$root/scripts/image.sh" root) || fail "the image $image cannot be mounted"
[ -x "$rootfs/app/server" ] || fail "the mounted image has no /app/server"
user=$(podman image inspect --format '{{.Config.User}}' "$image")
[ -n "$user" ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] || fail "the image runs as '$user', not a non-root user"
entry=$(podman image inspect --format '{{join .Config.Entrypoint " "}}' "$image")

mkdir -p "$work"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  podman image unmount "$image" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# The image's entry with ARGS, as a runtime would start it (scripts/image.sh run). It replaces the
# shell it runs in: call it in a subshell (`( in_image … )`, `$(…)` or `… &`), so that a
# background one's $! is the server's own pid.
in_image() { SECKILL_IMAGE_ROOT="$rootfs" exec "$root/scripts/image.sh" run "$@"; }

step "$image: $(podman image inspect --format '{{.Size}}' "$image") bytes, user $user, entry $entry"

# 1. A setting missing at start-up: one line naming it, a non-zero exit.
set +e
out=$(in_image -- serve 2>&1); status=$?
set -e
[ "$status" != 0 ] || fail "serve without DATABASE_URL exited 0"
[ "$(grep -c . <<<"$out")" = 1 ] && grep -q 'DATABASE_URL is not set' <<<"$out" || fail "serve without DATABASE_URL said: $out"
set +e
out=$(in_image DATABASE_URL=postgres://x@db/x REDIS_URL=redis://r AMQP_URL=amqp://m -- serve 2>&1); status=$?
set -e
[ "$status" != 0 ] && grep -q 'SECKILL_SECRET is not set' <<<"$out" || fail "serve without SECKILL_SECRET said: $out"
step "a missing setting is named in one line, exit $status"

# A weak secret: short, guessable, or one the repository holds (the public list): refused in one
# line, exit 1, each with its reason.
refused() { # reason setting=value...
  local why=$1; shift
  set +e
  out=$(in_image DATABASE_URL=postgres://x@db/x REDIS_URL=redis://r AMQP_URL=amqp://m "$@" -- serve 2>&1); status=$?
  set -e
  [ "$status" = 1 ] && [ "$(grep -c . <<<"$out")" = 1 ] && grep -q "$why" <<<"$out" ||
    fail "serve with $* exited $status and said: $out"
}
SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
refused 'SECKILL_SECRET is too short' SECKILL_SECRET=0123456789abcdef
# Made here, so no file of the repository holds them (those are refused as published).
refused 'SECKILL_SECRET looks guessable' SECKILL_SECRET="$(printf 'b%.0s' {1..48})"
refused 'SECKILL_SECRET is a value published in the seckill repository' \
  SECKILL_SECRET=replace-me-with-64-hex-characters-from-a-random-source-000000000
refused 'SECKILL_SECRET is a value published in the seckill repository' SECKILL_SECRET=image-check-secret-image-check-secret
refused 'SECKILL_SECRET_PREVIOUS looks guessable' SECKILL_SECRET="$SECRET" SECKILL_SECRET_PREVIOUS="$(printf 'letmein%.0s' 1 2 3 4 5)"
refused 'SECKILL_METRICS_TOKEN is a value published' SECKILL_SECRET="$SECRET" SECKILL_METRICS_TOKEN=test-metrics-token-0123456789
step "a short, guessable or published secret is refused in one line, exit 1 (6 cases)"

# 2. migrate from the image, on a database of its own.
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DATABASE WITH (FORCE)" -c "CREATE DATABASE $DATABASE"
stamp=$(date +%s%N)
settings=(
  DATABASE_URL="postgres://seckill@127.0.0.1:$PG_PORT/$DATABASE"
  REDIS_URL="${REDIS_URL:-redis://127.0.0.1:56379/0}"
  AMQP_URL="${AMQP_URL:-amqp://guest:guest@127.0.0.1:55672/%2f}"
  SECKILL_SECRET="$SECRET"
  SECKILL_REDIS_PREFIX="img:$stamp:"
  SECKILL_AMQP_PREFIX="img$stamp"
  SECKILL_QUEUE_EXPIRES_MS=600000
  SECKILL_TRUST_FORWARDED_FOR=1
  SECKILL_DRAIN_SECS=$DRAIN_SECS
  SECKILL_SIGNUPS_PER_ADDRESS=1000000 SECKILL_SIGNUPS_PER_MINUTE=1000000
  SECKILL_STOCK_PER_MINUTE=1000000 SECKILL_QUEUE_PER_MINUTE=1000000
  RUST_LOG=info
)
# Deployed, an instance never migrates by itself: on a database without this release's
# migrations it names the first one missing and exits; the pods' init step waits for them.
set +e
out=$(in_image "${settings[@]}" -- serve 2>&1 | tail -1); status=$?
waited=$(in_image "${settings[@]}" -- migrate --wait --timeout-secs 1 2>&1 | tail -1)
set -e
grep -q 'the database lacks migration' <<<"$out" || fail "serve on an unmigrated database said: $out"
grep -q 'still lacks migration' <<<"$waited" || fail "migrate --wait on an unmigrated database said: $waited"
step "deployed, serve does not migrate: \"$(cut -c1-60 <<<"$out")…\"; migrate --wait gives up naming it"
(in_image "${settings[@]}" -- migrate) >"$work/migrate.log" 2>&1 || { cat "$work/migrate.log"; fail "migrate from the image failed"; }
(in_image "${settings[@]}" -- migrate --wait --timeout-secs 10) >>"$work/migrate.log" 2>&1 ||
  { cat "$work/migrate.log"; fail "migrate --wait after migrate did not exit 0"; }
step "migrate from the image, then migrate --wait: $(tail -1 "$work/migrate.log")"

# 3. Two instances from the image.
serve() { # port log
  in_image "${settings[@]}" SECKILL_ADDR="127.0.0.1:$1" -- serve >"$2" 2>&1 &
  pids+=($!)
}
serve "$PORT_A" "$work/a.log"; pid_a=${pids[-1]}
serve "$PORT_B" "$work/b.log"
for port in "$PORT_A" "$PORT_B"; do
  deadline=$((SECONDS + 60))
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ]; do
    ((SECONDS < deadline)) || { tail -n 20 "$work"/*.log; fail "no /readyz 200 on :$port within 60 s"; }
    sleep 0.2
  done
done
step "two instances from the image: /readyz 200"
page=$(curl -fsS "http://127.0.0.1:$PORT_A/")
wasm=$(grep -o '/pkg/seckill[^"]*\.wasm' <<<"$page" | head -1)
[ -n "$wasm" ] || fail "the storefront names no wasm"
headers=$(curl -fsS -D - -o "$work/asset.br" -H 'Accept-Encoding: br' "http://127.0.0.1:$PORT_A$wasm")
grep -qi '^content-encoding: br' <<<"$headers" || fail "$wasm not sent precompressed: $headers"
grep -qi '^cache-control: public, max-age=31536000, immutable' <<<"$headers" || fail "$wasm not immutable: $headers"
cmp -s "$work/asset.br" "$rootfs/app/site$wasm.br" || fail "$wasm differs from the image's file"
step "the storefront and $wasm (brotli, immutable) served from the image's files"

# 4. A crowd through both; SIGTERM to the first mid-crowd.
export DATABASE_URL="postgres://seckill@127.0.0.1:$PG_PORT/$DATABASE" SECKILL_SECRET="$SECRET" \
  SECKILL_REDIS_PREFIX="img:$stamp:" SECKILL_AMQP_PREFIX="img$stamp"
"$LOAD" crowd --base-url "http://127.0.0.1:$PORT_A,http://127.0.0.1:$PORT_B" \
  --users 4000 --stock 2000 --rate 600 --concurrency 128 --retry-secs 30 --stock-shards 2 \
  >"$work/crowd.log" 2>&1 &
crowd=$!
pids+=("$crowd")
orders() { $PSQL -d "$DATABASE" -c "SELECT count(*) FROM orders"; }
deadline=$((SECONDS + 60))
until [ "$(orders)" -ge 200 ]; do
  kill -0 "$crowd" 2>/dev/null || { cat "$work/crowd.log"; fail "the crowd ended before 200 orders"; }
  ((SECONDS < deadline)) || { cat "$work/crowd.log"; fail "fewer than 200 orders within 60 s"; }
  sleep 0.1
done
sold_before=$(orders)
# A request in flight that outlives the signal: its body trickles in, and is finished only once
# the instance has closed its listener.
rm -f "$work/go"
python3 - "$PORT_A" "$work/go" >"$work/slow.out" 2>&1 <<'PY' &
import os, socket, sys, time
port, go = int(sys.argv[1]), sys.argv[2]
body = b'{"username":"image-check-nobody","password":"not-the-password"}'
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /api/auth/login HTTP/1.1\r\nHost: image-check\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body[:5])
print("started", flush=True)
deadline = time.monotonic() + 30
while not os.path.exists(go):
    if time.monotonic() > deadline:
        sys.exit("never told to finish")
    time.sleep(0.05)
s.sendall(body[5:])
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
PY
slow=$!
pids+=("$slow")
deadline=$((SECONDS + 10))
until grep -q started "$work/slow.out"; do ((SECONDS < deadline)) || fail "the slow request did not start"; sleep 0.05; done
term_at=$(date +%s%N)
kill -TERM "$pid_a"
# The listener closes at once (a balancer's next try goes elsewhere) while the request is in flight.
# A connection that is taken, or that hangs (a full accept queue), is not refused.
refused() {
  local status=0
  timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT_A" 2>/dev/null || status=$?
  [ "$status" = 1 ] # 0: taken, 124: hung
}
deadline=$((SECONDS + 5))
until refused; do
  ((SECONDS < deadline)) || fail "the instance still takes connections 5 s after SIGTERM"
  sleep 0.05
done
kill -0 "$pid_a" 2>/dev/null || fail "the instance exited with a request in flight"
touch "$work/go"
wait "$slow" || { cat "$work/slow.out"; fail "the request in flight was not answered"; }
answer=$(tail -n 1 "$work/slow.out")
[[ $answer =~ ^HTTP/1.1\ (401|429) ]] || fail "the request in flight got '$answer', not its answer (401)"
step "SIGTERM: new connections refused at once, the request in flight answered ($answer)"
set +e
wait "$pid_a"; status_a=$?
set -e
took_ms=$((($(date +%s%N) - term_at) / 1000000))
[ "$status_a" = 0 ] || { tail -n 20 "$work/a.log"; fail "the instance exited $status_a after SIGTERM"; }
((took_ms <= DRAIN_SECS * 1000 + 2000)) || fail "the instance took $took_ms ms to exit (drain $DRAIN_SECS s)"
grep -q 'every request in flight answered' "$work/a.log" || { tail -n 20 "$work/a.log"; fail "the instance did not answer every request in flight"; }
step "SIGTERM at $sold_before orders: every request in flight answered, exit 0 in $took_ms ms"
set +e
wait "$crowd"; status=$?
set -e
cat "$work/crowd.log" | grep -v '^\s*$' | tail -12
[ "$status" = 0 ] || fail "the crowd's invariants did not hold (exit $status)"
grep -q '→ OK' "$work/crowd.log" || fail "the crowd printed no verdict"
retried=$(grep -o 'retried[^,]*' "$work/crowd.log" | head -1 || true)
step "OK: the crowd's invariants held through the SIGTERM ${retried:+($retried)}"
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DATABASE WITH (FORCE)"
