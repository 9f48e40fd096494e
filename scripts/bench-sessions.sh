#!/usr/bin/env bash
# `make bench` (and alone: `scripts/bench-sessions.sh [BIN] [LOAD]`): the buy path's latency while
# sessions end (docs/security.md). A server of its own on a database of its own; one shopper's
# buy sent at a constant rate (`seckill-load pace`, open loop: latency from each request's due instant)
# for 10 s, three times: with no ended session, with 200,000 ended sessions loaded, and with those
# while 10,000 more sign-outs arrive beside it. Every buy after the first is refused by the gate
# script (the shopper's limit, `403 limit_reached`; the buckets are opened wide so that no
# in-process block answers instead): each one checks the session, then makes the Redis call.
# Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/server}
LOAD=${2:-target/release/seckill-load}
PORT=3251
RATE=${SESSIONS_BENCH_RATE:-2000}
RUN=$(date +%s)
DB=seckill_bench_sessions
SECRET=bench-secret-bench-secret-bench-secret
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -q"
BASE="http://127.0.0.1:$PORT"
out=$(mktemp -d)
server=
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null || true; if [ -n "${SESSIONS_BENCH_KEEP:-}" ]; then echo "kept: $out" >&2; fi; }
trap cleanup EXIT
command -v wrk >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null

start() {
  env DATABASE_URL=postgres://seckill@127.0.0.1:55432/$DB SECKILL_SECRET=$SECRET \
    SECKILL_REDIS_PREFIX="benchsessions:$RUN:" SECKILL_AMQP_PREFIX="benchsessions$RUN" SECKILL_QUEUE_EXPIRES_MS=60000 \
    SECKILL_ADDR=127.0.0.1:$PORT RUST_LOG=warn LEPTOS_SITE_ROOT=target/site SECKILL_DEMO=0 \
    SECKILL_STOCK_PER_MINUTE=100000000 SECKILL_SIGNUP_POW_DIFFICULTY=0 SECKILL_USER_BURST=100000000 \
    SECKILL_USER_PER_SEC=100000000 SECKILL_IP_BURST=100000000 SECKILL_IP_PER_SEC=100000000 \
    "$BIN" serve >>"$out/server.log" 2>&1 &
  server=$!
  for _ in $(seq 150); do curl -sf "$BASE/readyz" >/dev/null && return; sleep 0.2; done
  cat "$out/server.log" >&2; exit 1
}
stop() { kill "$server"; wait "$server" 2>/dev/null || true; server=; }

$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
start
SECKILL_MERCHANT_PASSWORD=bench-merchant-password DATABASE_URL=postgres://seckill@127.0.0.1:55432/$DB \
  "$BIN" create-merchant --shop "Bench shop" --username bench_merchant >/dev/null
jar="$out/merchant.jar"
curl -sf -c "$jar" -o /dev/null -H 'content-type: application/json' \
  -d '{"username":"bench_merchant","password":"bench-merchant-password"}' "$BASE/api/auth/login"
now=$(date -u +%s)
sale=$(curl -sf -b "$jar" -H 'content-type: application/json' -d "{\"title\":\"Sessions bench\",\"price_cents\":100,
  \"seckill_price_cents\":50,\"starts_at\":\"$(date -u -d @$((now - 5)) +%FT%TZ)\",
  \"ends_at\":\"$(date -u -d @$((now + 3600)) +%FT%TZ)\",\"stock\":1000,\"bot_check\":\"none\",\"waiting_room\":false}" \
  "$BASE/api/admin/activities")
ACT=$(sed -E 's/^\{"id":([0-9]+).*/\1/' <<<"$sale")
shopper="$out/shopper.jar"
curl -sf -c "$shopper" -o /dev/null -H 'content-type: application/json' \
  -d '{"username":"bench_shopper","password":"bench-shopper-password"}' "$BASE/api/auth/register"
COOKIE="sid=$(awk '$6 == "sid" {print $7}' "$shopper")"
USER_ID=$($PSQL -d $DB -tAc "SELECT id FROM users WHERE username = 'bench_shopper'")
PATHV=$(curl -sf -H "cookie: $COOKIE" "$BASE/api/activities/$ACT/path" | sed -E 's/.*"path":"([^"]+)".*/\1/')

buy_once() { curl -s -H "cookie: $COOKIE" -H 'content-type: application/json' -d "{\"path\":\"$PATHV\"}" \
  -w ' %{http_code}' "$BASE/api/activities/$ACT/buy" | sed -E 's/.*"(error|status)":"([a-z_]+)".* ([0-9]+)$/\3 \2/'; }
first=$(buy_once)
second=$(buy_once)
buys() { # buys FILE: the shopper's buy at $RATE a second for 10 s
  "$LOAD" pace --url "$BASE/api/activities/$ACT/buy" --body "{\"path\":\"$PATHV\"}" --header "cookie: $COOKIE" \
    --rate "$RATE" --secs 10 --connections 64 >"$1"
}
paced() { sed -nE "s/.*latency ms: .*$2 ([0-9.]+).*/\1/p" "$1"; }
statuses() { awk '/status/ {printf "%s%s×%s", sep, $2, $3; sep=", "}' "$1"; }

buys "$out/none.txt"
stop

# 200,000 sessions signed out over the last days and not yet expired, as the database keeps them:
# loaded at start. (Signed out within the last minute, each instance's reload would re-read them
# every 10 s for that minute: a cost of the minute after a mass sign-out, not measured here.)
$PSQL -d $DB -c "INSERT INTO revoked_sessions (sid, user_id, expires_at, revoked_at)
  SELECT md5(random()::text || g::text), $USER_ID, now() + interval '7 days', now() - interval '1 hour'
  FROM generate_series(1, 200000) g"
start
buys "$out/ended.txt"

# 10,000 more sessions of the shopper's, each signed out once, beside the buys (16 connections,
# from the buys' second second on).
SECKILL_SECRET="$SECRET" "$LOAD" sign --user "$USER_ID" --count 10000 >"$out/cookies.txt"
cat >"$out/logout.lua" <<LUA
local cookies = {}
for line in io.lines("$out/cookies.txt") do cookies[#cookies + 1] = line end
local n = 0
request = function()
  n = n + 1
  local i = (n - 1) % #cookies + 1
  return wrk.format("POST", "/api/auth/logout", {["cookie"] = "sid=" .. cookies[i], ["content-type"] = "application/json"}, "{}")
end
-- Each cookie once: the run stops when every one was answered (the requests past the last cookie
-- start over, signing out sessions already ended; at most 16 are in flight).
local answered = 0
response = function()
  answered = answered + 1
  if answered >= #cookies + 16 then wrk.thread:stop() end
end
LUA
before=$($PSQL -d $DB -tAc "SELECT count(*) FROM revoked_sessions")
buys "$out/storm.txt" &
paced=$!
sleep 1
wrk -t1 -c16 -d60s --latency -s "$out/logout.lua" "$BASE/api/auth/logout" >"$out/logouts.txt"
wait $paced
after=$($PSQL -d $DB -tAc "SELECT count(*) FROM revoked_sessions")
ended=$((after - before))
# wrk divides by its whole duration though the thread stopped after the last cookie: the rate is
# the thread's average, the time it took follows from it.
logout_rate=$(awk '/Req\/Sec/ {v=$2; if (v ~ /k$/) v = v * 1000; print int(v)}' "$out/logouts.txt")
logout_p99=$(awk '/^ +99%/ {print $2}' "$out/logouts.txt")

echo "| one shopper's buy, $RATE /s for 10 s (open loop) | p50 ms | p99 ms | p99.9 ms | answers | beside it |"
echo "|---|---|---|---|---|---|"
for run in none ended storm; do
  case $run in
    none) what="no ended session"; beside="—" ;;
    ended) what="200,000 ended sessions loaded"; beside="—" ;;
    storm) what="200,000 ended, during 10,000 sign-outs"; beside="sign-outs at $logout_rate /s, p99 $logout_p99" ;;
  esac
  echo "| $what | $(paced "$out/$run.txt" p50) | $(paced "$out/$run.txt" p99) | $(paced "$out/$run.txt" 'p99\.9') | $(statuses "$out/$run.txt") | $beside |"
done
echo
echo "The shopper's first buy: $first; the second: $second (as every one the table counts)."
echo "Sessions the sign-outs ended: $ended of 10,000, in about $(( 10000 / (logout_rate > 0 ? logout_rate : 1) )) s of the buys' 10."
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"
