#!/usr/bin/env bash
# Two builds of the server side by side in one sitting, turn about (A B A B A B), each on a fresh
# sale: the sold-out answer (wrk, 256 connections, 10 s) and the in-stock buy path (the load
# tool's crowd: 30,000 shoppers for 30,000 units, 1,000 at once). Prints each run and the
# medians, and B's as a share of A's: the rates, and the server's own CPU time per answer (per
# shopper in stock), which the load tool and wrk sharing the two cores move less than a rate; each
# as the median of the rounds' own shares too (a round's A and B ran a minute apart, so what
# slows the machine for a while slows both). `make bench-compare BEFORE=<revision>` builds the
# revision's server and compares it with this checkout's (docs/benchmarks.md says when it ran).
#
#   scripts/bench-compare.sh A_BINARY B_BINARY [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
A=$1 B=$2 ROUNDS=${3:-3}
export LEPTOS_OUTPUT_NAME=seckill LEPTOS_SITE_ROOT=target/site
PORT=3210
SECRET=bench-compare-secret-bench-compare-secret
RUN=$(date +%s)
export DATABASE_URL=postgres://seckill@127.0.0.1:55432/seckill_compare
export SECKILL_SECRET=$SECRET SECKILL_AMQP_PREFIX="cmp$RUN" SECKILL_QUEUE_EXPIRES_MS=60000
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -q"
LOAD=target/release/seckill-load
out=$(mktemp -d)
SERVER=
cleanup() { [ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null || true; }
trap cleanup EXIT

$PSQL -d postgres -c "DROP DATABASE IF EXISTS seckill_compare WITH (FORCE)" -c "CREATE DATABASE seckill_compare"

serve() { # binary; a keyspace of its own (the load tool checks the invariants in it). Each build
  # logs as it ships (no RUST_LOG: its default filter, its spans at the level they are made at).
  export SECKILL_REDIS_PREFIX="cmp:$RUN:$(date +%s%N):"
  env -u RUST_LOG SECKILL_ADDR=127.0.0.1:$PORT SECKILL_TRUST_FORWARDED_FOR=1 SECKILL_MAX_IN_FLIGHT=8192 \
    "$1" serve >"$out/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 150); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && return; sleep 0.2; done
  echo "server did not become ready" >&2; cat "$out/server.log" >&2; exit 1
}
stop() { kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

ticks() { awk '{print $14 + $15}' "/proc/$SERVER/stat"; } # the server's CPU time, user + system
HZ=$(getconf CLK_TCK)
per() { echo "scale=1; 1000000 * ($2) / $HZ / $1" | bc; } # per COUNT TICKS: µs of CPU each

soldout() { # prints req/s and the server's µs of CPU per answer
  "$LOAD" crowd --base-url "http://127.0.0.1:$PORT" --users 2 --stock 1 --concurrency 2 --lead-secs 1 >"$out/setup.txt" 2>/dev/null || true
  local act user cookie pathv
  act=$(sed -n 's/^activity \([0-9]*\):.*/\1/p' "$out/setup.txt")
  user=$($PSQL -d seckill_compare -tAc "SELECT max(u.id) FROM users u WHERE u.username LIKE 'crowd\_%' AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.user_id = u.id AND o.activity_id = $act)")
  read -r cookie pathv < <("$LOAD" sign --user "$user" --activity "$act" --wrk-script "$out/soldout.lua")
  local before
  before=$(ticks)
  wrk -t1 -c256 -d10s -s "$out/soldout.lua" "http://127.0.0.1:$PORT/api/activities/$act/buy" >"$out/wrk.txt"
  echo "$(awk '/Requests\/sec/ {print int($2)}' "$out/wrk.txt") $(per "$(awk '/requests in/ {print $1}' "$out/wrk.txt")" "$(ticks) - $before")"
}
instock() { # prints shoppers/s, p99 ms and the server's µs of CPU per shopper (the crowd's sign-ups included)
  local before
  before=$(ticks)
  "$LOAD" crowd --base-url "http://127.0.0.1:$PORT" --users 30000 --stock 30000 --concurrency 1000 --lead-secs 2 2>/dev/null >"$out/instock.txt"
  grep -q '→ OK' "$out/instock.txt" || { echo "invariants broken:" >&2; cat "$out/instock.txt" >&2; exit 1; }
  echo "$(sed -n 's/.* = \([0-9]*\) shoppers\/s/\1/p' "$out/instock.txt") $(sed -n 's/^buy latency ms: .*p99 \([0-9.]*\) .*/\1/p' "$out/instock.txt") $(per 30000 "$(ticks) - $before")"
}

declare -A sold soldcpu in incpu p99
for round in $(seq "$ROUNDS"); do
  for side in A B; do
    bin=${!side}
    serve "$bin"
    read -r s sc < <(soldout); read -r i p ic < <(instock)
    stop
    sold[$side]+="$s "; soldcpu[$side]+="$sc "; in[$side]+="$i "; incpu[$side]+="$ic "; p99[$side]+="$p "
    echo "round $round $side: sold-out $s req/s ($sc µs CPU each), in-stock $i shoppers/s (p99 $p ms, $ic µs CPU each)"
  done
done
# shellcheck disable=SC2086
for side in A B; do
  echo "$side ($(basename "$(dirname "$(dirname "${!side}")")")/$(basename "${!side}")): sold-out median $(median ${sold[$side]}) req/s, $(median ${soldcpu[$side]}) µs CPU each; in-stock median $(median ${in[$side]}) shoppers/s, p99 median $(median ${p99[$side]}) ms, $(median ${incpu[$side]}) µs CPU each"
done
share() { echo "scale=1; 100 * $1 / $2" | bc; }
paired() { # the median of the rounds' B ÷ A, of a measure's "B-runs" "A-runs"
  local -a b a
  read -r -a b <<<"$1"; read -r -a a <<<"$2"
  local -a s=()
  for k in "${!b[@]}"; do s+=("$(share "${b[$k]}" "${a[$k]}")"); done
  median "${s[@]}"
}
echo "B / A, the median of the rounds' shares: sold-out $(paired "${sold[B]}" "${sold[A]}") % of the rate, $(paired "${soldcpu[B]}" "${soldcpu[A]}") % of the CPU; in-stock $(paired "${in[B]}" "${in[A]}") % of the rate, $(paired "${incpu[B]}" "${incpu[A]}") % of the CPU"
# shellcheck disable=SC2086
echo "B / A, of the medians: sold-out $(share "$(median ${sold[B]})" "$(median ${sold[A]})") % of the rate, $(share "$(median ${soldcpu[B]})" "$(median ${soldcpu[A]})") % of the CPU; in-stock $(share "$(median ${in[B]})" "$(median ${in[A]})") % of the rate, $(share "$(median ${incpu[B]})" "$(median ${incpu[A]})") % of the CPU"
