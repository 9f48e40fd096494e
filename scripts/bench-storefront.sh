#!/usr/bin/env bash
# make bench-storefront (docs/operations.md "Benchmarks"): the release server on a database of its own, then
# Lighthouse's mobile profile on the storefront list and a sale page, and the proof of work's
# solve time in Chromium with the CPU slowed 4x (scripts/storefront-bench/run.mjs). Writes the
# Markdown section to target/bench/storefront.md (make bench puts it in docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${SECKILL_BENCH_WEB_PORT:-3500}
DB=seckill_bench_web
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -v ON_ERROR_STOP=1 -q"
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
if [ ! -d scripts/storefront-bench/node_modules ] || [ scripts/storefront-bench/package-lock.json -nt scripts/storefront-bench/node_modules/.package-lock.json ]; then
  # A dependency of Lighthouse asks for another package's "latest": each release of that package
  # makes the lock file stale for `npm ci`, and then `npm install` brings the lock up to date.
  (cd scripts/storefront-bench && { npm ci --no-audit --no-fund || npm install --no-audit --no-fund; })
fi
mkdir -p target/bench
password=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
DATABASE_URL=postgres://seckill@127.0.0.1:55432/$DB SECKILL_ADDR=127.0.0.1:$PORT LEPTOS_SITE_ROOT=target/site \
  SECKILL_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n') SECKILL_REDIS_PREFIX="bw:$(date +%s%N):" \
  SECKILL_ADMIN_USER=bench_merchant SECKILL_ADMIN_PASSWORD="$password" SECKILL_DEMO=0 RUST_LOG=warn \
  SECKILL_SIGNUP_POW_DIFFICULTY=0 SECKILL_SIGNUPS_PER_ADDRESS=1000 \
  target/release/server serve &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null
BASE="http://127.0.0.1:$PORT" MERCHANT_USER=bench_merchant MERCHANT_PASSWORD="$password" \
  node scripts/storefront-bench/run.mjs | tee target/bench/storefront.md
