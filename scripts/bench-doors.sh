#!/usr/bin/env bash
# `make bench` (and alone: `scripts/bench-doors.sh [BIN]`): sign-in's latency with and without a
# sign-up flood beside it (docs/security.md). A server of its own on a database of its own; wrk
# signs one user in from one address, 4 connections for 10 s; the floods come from one address
# (refused past its budget) and from many (up to the platform's budget, hashed in the sign-up
# slot). The sign-up's proof of work is off here: the flood is the worst case, every sign-up
# within budget reaching argon2 (with it on, each would first cost its sender the solve). Prints a
# Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/server}
PORT=3250
RUN=$(date +%s)
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -q"
out=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
command -v wrk >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null

$PSQL -d postgres -c "DROP DATABASE IF EXISTS seckill_bench_doors WITH (FORCE)" -c "CREATE DATABASE seckill_bench_doors"
env DATABASE_URL=postgres://seckill@127.0.0.1:55432/seckill_bench_doors \
  SECKILL_SECRET=bench-secret-bench-secret-bench-secret SECKILL_REDIS_PREFIX="benchdoors:$RUN:" \
  SECKILL_AMQP_PREFIX="benchdoors$RUN" SECKILL_QUEUE_EXPIRES_MS=60000 \
  SECKILL_ADDR=127.0.0.1:$PORT SECKILL_TRUST_FORWARDED_FOR=1 RUST_LOG=warn \
  SECKILL_LOGIN_MAX_FAILURES_PER_IP=1000000 SECKILL_SIGNUP_POW_DIFFICULTY=0 LEPTOS_SITE_ROOT=target/site \
  "$BIN" serve >"$out/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 150); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null || { cat "$out/server.log" >&2; exit 1; }

# Eight members (one verification per username runs at a time: the 4 connections sign in
# different ones).
for i in 1 2 3 4 5 6 7 8; do
  curl -sf -o /dev/null -H 'content-type: application/json' -H "x-forwarded-for: 203.0.113.$i" \
    -d "{\"username\":\"bench_member_$i\",\"password\":\"bench-member-password\"}" "http://127.0.0.1:$PORT/api/auth/register"
done

cat >"$out/login.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  local body = '{"username":"bench_member_' .. (n % 8 + 1) .. '","password":"bench-member-password"}'
  return wrk.format("POST", "/api/auth/login", {["content-type"] = "application/json", ["x-forwarded-for"] = "203.0.113.1"}, body)
end
LUA
# ONE: every sign-up from one address. MANY: each from an address of its own.
for mode in one many; do
  cat >"$out/flood-$mode.lua" <<LUA
math.randomseed(os.time() + ${#mode})
local n = 0
request = function()
  n = n + 1
  local addr = "198.51.100.1"
  if "$mode" == "many" then addr = "198." .. math.random(18, 19) .. "." .. math.random(0, 255) .. "." .. math.random(1, 254) end
  local body = '{"username":"flood_' .. math.random(1, 1000000000) .. '_' .. n .. '","password":"flood-password-1"}'
  return wrk.format("POST", "/api/auth/register", {["content-type"] = "application/json", ["x-forwarded-for"] = addr}, body)
end
LUA
done

p99() { awk '/^ +99%/ {print $2}' "$1"; }
rps() { awk '/^Requests\/sec/ {print int($2)}' "$1"; }
# Answered 2xx per second (wrk counts the others apart).
ok_per_sec() { awk '/requests in/ {n=$1; split($4, t, "s"); d=t[1]} /Non-2xx/ {bad=$NF} END {printf "%d", (n-bad)/d}' "$1"; }
codes() { # non-2xx count from wrk's summary
  awk '/Non-2xx/ {print $NF}' "$1" | tr -d '\n'; }
signin() { wrk -t1 -c4 -d10s --latency -s "$out/login.lua" "http://127.0.0.1:$PORT/api/auth/login" >"$out/$1.txt"; }

signin alone
wrk -t1 -c16 -d12s -s "$out/flood-one.lua" "http://127.0.0.1:$PORT/" >"$out/flood-one.txt" &
flood=$!; sleep 1; signin with-one; wait $flood
wrk -t1 -c16 -d12s -s "$out/flood-many.lua" "http://127.0.0.1:$PORT/" >"$out/flood-many.txt" &
flood=$!; sleep 1; signin with-many; wait $flood
accounts=$($PSQL -d seckill_bench_doors -tAc "SELECT count(*) FROM users WHERE username LIKE 'flood\_%'")

echo "| sign-in (wrk, 4 connections, 10 s, one address, 8 users) | signed in /s | answers /s | p99 | sign-up flood beside it |"
echo "|---|---|---|---|---|"
for run in alone with-one with-many; do
  case $run in
    alone) flood="—" ;;
    with-one) flood="$(rps "$out/flood-one.txt") sign-ups/s asked from one address, $(codes "$out/flood-one.txt") refused" ;;
    with-many) flood="$(rps "$out/flood-many.txt") sign-ups/s asked from many addresses, $(codes "$out/flood-many.txt") refused" ;;
  esac
  echo "| ${run/with-/during a flood: } | $(ok_per_sec "$out/$run.txt") | $(rps "$out/$run.txt") | $(p99 "$out/$run.txt") | $flood |"
done
echo
echo "Accounts the floods created: $accounts (the platform's budget: 600 a minute; from one address: 10 an hour)."
$PSQL -d postgres -c "DROP DATABASE IF EXISTS seckill_bench_doors WITH (FORCE)"
