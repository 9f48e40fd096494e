#!/usr/bin/env bash
# `make upgrade-check`: the release before (deploy/previous-release) and this one serve side by
# side on one database after this one's migrations, as during a rolling upgrade, with a crowd
# through both; the load tool's invariants must hold (docs/deploy.md "Upgrades"). Long: it builds
# the release before from scratch in target/previous-release (kept for the next run).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
prev=$(grep -v '^#' "$root/deploy/previous-release" | head -1 | tr -d '[:space:]')
tree="$root/target/previous-release"
work="$root/target/upgrade-check"
PG_PORT=${SECKILL_PG_PORT:-55432}
DATABASE=seckill_upgrade_check
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p $PG_PORT -U seckill -v ON_ERROR_STOP=1 -qtA"
PORT_OLD=3620 PORT_NEW=3621
# The site build takes wasm-opt from npm's binaryen (the Makefile's PATH), as `make build-release` does.
export PATH="$root/e2e/node_modules/.bin:$PATH"

fail() { echo "upgrade check: FAILED: $*" >&2; exit 1; }
step() { echo "upgrade check: $*"; }

commit=$(git -C "$root" rev-parse --verify -q "$prev^{commit}") || fail "deploy/previous-release names $prev, which this clone does not have"
[ -x "$root/target/release/server" ] || fail "no release build of this release (make build-release)"
[ -x "$root/target/release/seckill-load" ] || fail "no load tool (make load-tool)"
if [ "$(cat "$tree/.commit" 2>/dev/null)" != "$commit" ]; then
  rm -rf "$tree"; mkdir -p "$tree"
  git -C "$root" archive "$commit" | tar -x -C "$tree"
  echo "$commit" >"$tree/.commit"
fi
step "building the release before, ${commit:0:12} (cold: long)"
# This checkout's site build on the tree before (the same steps and settings as cargo-leptos).
(cd "$tree" && LEPTOS_OUTPUT_NAME=seckill node "$root/scripts/site.mjs" --release --dir="$tree" >"$tree.build.log" 2>&1 && "$root/scripts/precompress.sh" target/site/pkg) ||
  { tail -n 20 "$tree.build.log"; fail "the release before does not build"; }

mkdir -p "$work"
pids=()
# The two servers end before their database is dropped, and whenever the script stops.
stop_servers() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_servers EXIT
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DATABASE WITH (FORCE)" -c "CREATE DATABASE $DATABASE"
stamp=$(date +%s%N)
export DATABASE_URL="postgres://seckill@127.0.0.1:$PG_PORT/$DATABASE" SECKILL_SECRET=upgrade-check-secret-upgrade-check \
  SECKILL_REDIS_PREFIX="upg:$stamp:" SECKILL_AMQP_PREFIX="upg$stamp" SECKILL_QUEUE_EXPIRES_MS=600000 \
  SECKILL_TRUST_FORWARDED_FOR=1 SECKILL_STOCK_PER_MINUTE=1000000 SECKILL_QUEUE_PER_MINUTE=1000000 RUST_LOG=warn \
  SECKILL_METRICS_TOKEN=upgrade-check-metrics-token
"$root/target/release/server" migrate
step "this release's migrations applied"
# The release before starts on the database this release migrated (as an old instance that
# restarts mid-rollout does), then this release beside it.
(cd "$tree" && SECKILL_ADDR="127.0.0.1:$PORT_OLD" LEPTOS_SITE_ROOT="$tree/target/site" exec target/release/server serve) >"$work/old.log" 2>&1 &
pids+=($!)
(cd "$root" && SECKILL_ADDR="127.0.0.1:$PORT_NEW" LEPTOS_SITE_ROOT="$root/target/site" exec target/release/server serve) >"$work/new.log" 2>&1 &
pids+=($!)
for port in $PORT_OLD $PORT_NEW; do
  deadline=$((SECONDS + 60))
  until curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz"; do
    ((SECONDS < deadline)) || { tail -n 5 "$work"/*.log; fail "no /readyz on :$port"; }
    sleep 0.3
  done
done
step "both releases ready on one database"
"$root/target/release/seckill-load" crowd --base-url "http://127.0.0.1:$PORT_OLD,http://127.0.0.1:$PORT_NEW" \
  --users 6000 --stock 3000 --stock-shards 2 --concurrency 256 | tee "$work/crowd.log"
# Each release took its share: a crowd that only one of them answered would prove nothing.
for port in $PORT_OLD $PORT_NEW; do
  sold=$(curl -fsS -H "Authorization: Bearer $SECKILL_METRICS_TOKEN" "http://127.0.0.1:$port/metrics" |
    awk '/^seckill_buy_requests_total\{result="accepted"\}/ {print $2}')
  [ "${sold:-0}" -gt 0 ] 2>/dev/null || fail "the release on :$port accepted no buy"
  step "the release on :$port accepted $sold buys"
done
step "OK: a crowd through both releases, invariants held"
stop_servers
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DATABASE WITH (FORCE)"
