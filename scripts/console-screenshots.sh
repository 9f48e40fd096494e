#!/usr/bin/env bash
# make screenshots (docs/console.md "Languages"): the release server on a database of its own, then
# scripts/console-screenshots.mjs: the console, a sale's dashboard and a sale's report, in English
# and in Simplified Chinese, written to docs/*.png.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${SECKILL_SHOTS_PORT:-3600}
DB=seckill_shots
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -v ON_ERROR_STOP=1 -q"
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
password=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
DATABASE_URL=postgres://seckill@127.0.0.1:55432/$DB SECKILL_ADDR=127.0.0.1:$PORT LEPTOS_SITE_ROOT=target/site \
  SECKILL_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n') SECKILL_REDIS_PREFIX="shots:$(date +%s%N):" \
  SECKILL_ADMIN_USER=shots_merchant SECKILL_ADMIN_PASSWORD="$password" SECKILL_DEMO=0 RUST_LOG=warn \
  SECKILL_SIGNUP_POW_DIFFICULTY=0 \
  target/release/server serve &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; $PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"' EXIT
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null
BASE="http://127.0.0.1:$PORT" MERCHANT_USER=shots_merchant MERCHANT_PASSWORD="$password" node scripts/console-screenshots.mjs
