#!/usr/bin/env bash
# `make bench`: measures, in ONE run on this machine, the HTTP ceiling (/healthz), the Redis ceiling
# (the gate script under redis-benchmark), the sold-out path, the in-stock buy path, the persister
# draining a backlog, and a 200,000-shopper crowd for 100,000 units; then writes docs/benchmarks.md.
# The load runs beside the server on the same 2 cores, as the targets demand.
set -euo pipefail
cd "$(dirname "$0")/.."
export LEPTOS_OUTPUT_NAME=seckill
PORT=3200
SECRET=bench-secret-bench-secret-bench-secret
RUN=$(date +%s)
export DATABASE_URL=postgres://seckill@127.0.0.1:55432/seckill_bench
export SECKILL_SECRET=$SECRET SECKILL_REDIS_PREFIX="bench:$RUN:" SECKILL_AMQP_PREFIX="bench$RUN" SECKILL_QUEUE_EXPIRES_MS=60000
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -q"
out=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# PROFILE=1: every measured phase is also recorded with `perf record -a` (the whole machine: the
# server, Redis, RabbitMQ, PostgreSQL and the load generator share it), and docs/profile.md gets, per
# phase, the CPU split by process and the server's hottest functions.
PROFILE=${PROFILE:-0}
profile_start() { # profile_start NAME
  [ "$PROFILE" = 1 ] || return 0
  perf record -a -F 499 -o "$out/$1.perf" -- sleep 600 >/dev/null 2>&1 & PERF=$!; pids+=("$PERF")
  sleep 0.5
}
profile_stop() { # profile_stop NAME PID
  [ "$PROFILE" = 1 ] || return 0
  kill -INT "$PERF"; wait "$PERF" 2>/dev/null || true
  ( set +o pipefail # `head` closing the pipe early is fine here
    echo "## $1"
    echo '```'
    echo "CPU by process (share of all samples on all cores):"
    perf report -i "$out/$1.perf" --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12
    echo
    echo "$(ps -o comm= -p "$2") process: hottest functions (share of all samples):"
    perf report -i "$out/$1.perf" --no-children --pid "$2" --sort dso,symbol --stdio 2>/dev/null \
      | grep -E '^ +[0-9]' | head -40 | cut -c1-160
    echo '```'
  ) >>"$out/profile.md"
}

node scripts/site.mjs --release 2>&1 | tail -1
scripts/precompress.sh target/site/pkg
# `serve` refuses a site folder without the assets its pages name: the release site goes with it.
BIN=target/release/server
# The layers' costs need a build that reads SECKILL_BENCH_WITHOUT_LAYERS (the `bench` feature; a
# production build never does), beside the release one, with its asset hashes.
cargo build --release -p server --features bench --target-dir target/bench 2>&1 | tail -1
cp target/release/hash.txt target/bench/release/ 2>/dev/null || true
BENCH_BIN=target/bench/release/server
# The load tool (crowd, pace, ceiling, the costs): a crate of its own, not in the server.
make --no-print-directory load-tool 2>&1 | tail -1
cargo build --release -p server --example session_cost 2>&1 | tail -1
LOAD=target/release/seckill-load
$PSQL -d postgres -c "DROP DATABASE IF EXISTS seckill_bench WITH (FORCE)" -c "CREATE DATABASE seckill_bench"

serve() { # serve [extra env...]; SERVE_BIN picks another build
  env SECKILL_ADDR=127.0.0.1:$PORT SECKILL_TRUST_FORWARDED_FOR=1 SECKILL_MAX_IN_FLIGHT=8192 RUST_LOG=warn "$@" "${SERVE_BIN:-$BIN}" serve >"$out/server.log" 2>&1 &
  SERVER=$!; pids+=("$SERVER")
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && return; sleep 0.2; done
  echo "server did not become ready" >&2; cat "$out/server.log" >&2; exit 1
}
rss_peak() { awk '/VmHWM/ {print int($2/1024)}' "/proc/$SERVER/status"; }
crowd() { "$LOAD" crowd --base-url "http://127.0.0.1:$PORT" "$@" 2>/dev/null | tee -a "$out/crowd-all.txt"; }

# Three runs of every headline figure: this VM moves by ±20 % from one run to the next. A figure
# is written "median (lowest–highest)".
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
fig() { printf '%s (%s–%s)' "$(median "$@")" "$(printf '%s\n' "$@" | sort -g | head -1)" "$(printf '%s\n' "$@" | sort -g | tail -1)"; }
wrk_rate() { grep Requests/sec "$1" | awk '{print int($2)}'; }
shoppers_of() { sed -n 's/.* = \([0-9]*\) shoppers\/s/\1/p' "$1"; }
p99_of() { sed -n 's/^buy latency ms: .*p99 \([0-9.]*\) .*/\1/p' "$1"; }
paced_of() { # paced_of FILE p50|p99|p99.9: the open-loop latency from the due instant
  sed -n "s/^open loop at .*from its due instant ms:.* $2 \([0-9.]*\) .*/\1/p" "$1"
}
pace_of() { # pace_of FILE p99|rate
  case $2 in
    rate) sed -n 's/.* = \([0-9]*\) req\/s$/\1/p' "$1" ;;
    *) sed -n "s/^latency ms: .* $2 \([0-9.]*\) .*/\1/p" "$1" ;;
  esac
}
ratio() { echo "scale=0; 100 * $1 / $2" | bc; }

# Redis rewrites its append-only file in a forked child when the file has doubled; one rewrite
# inside a 3-second measurement takes a core from everything else. Before such a measurement the
# rewrite is done on purpose, so that runs compare (the rewrite's own cost is Redis's, at any time).
settle_redis() {
  redis-cli -p 56379 BGREWRITEAOF >/dev/null 2>&1 || true
  until redis-cli -p 56379 INFO persistence | grep -q '^aof_rewrite_in_progress:0' &&
        redis-cli -p 56379 INFO persistence | grep -q '^aof_rewrite_scheduled:0'; do sleep 0.2; done
}
echo "== persister draining a backlog of 50,000 (relay + persister in their own process), 3 runs"
serve env SECKILL_NO_WORKERS=1
BACKLOG=50000
persist_runs=()
# Every order raises its sale's `sold` in the same transaction: a cheap figure to poll, asked on one
# open connection (a psql per look would cost PostgreSQL a new backend each time).
coproc POLL { $PSQL -d seckill_bench -tA 2>&1; }
sold_now() { echo "SELECT COALESCE(sum(sold), 0) FROM activities;" >&"${POLL[1]}"; read -r v <&"${POLL[0]}"; echo "$v"; }
for run in 1 2 3; do
  crowd --users $BACKLOG --stock $BACKLOG --concurrency 256 --lead-secs 1 --no-settle >"$out/backlog-$run.txt"
  settle_redis
  before=$(sold_now)
  [ "$run" = 1 ] && profile_start persister
  # The clock starts once the worker is connected and running (its start-up is not throughput).
  RUST_LOG=warn,server=info "$BIN" worker >"$out/worker-$run.log" 2>&1 & WORKER=$!; pids+=("$WORKER")
  until grep -q "relay and persister running" "$out/worker-$run.log"; do sleep 0.01; done
  start=$(date +%s.%N)
  until [ "$(sold_now)" -ge $((before + BACKLOG)) ]; do sleep 0.05; done
  drain=$(echo "$(date +%s.%N) - $start" | bc)
  [ "$run" = 1 ] && profile_stop persister "$WORKER"
  kill "$WORKER"; wait "$WORKER" 2>/dev/null || true
  persist_runs+=("$(echo "$BACKLOG / $drain" | bc)")
  echo "   run $run: $BACKLOG orders in ${drain}s = ${persist_runs[-1]} orders/s"
done

echo "== bare ceilings (no middleware): axum hello, one EVALSHA check-and-decrement; 3 runs"
"$LOAD" ceiling --addr 127.0.0.1:3299 >"$out/ceiling.log" 2>&1 & CEILING=$!; pids+=("$CEILING")
for _ in $(seq 100); do curl -sf http://127.0.0.1:3299/hello >/dev/null && break; sleep 0.1; done
printf 'wrk.method = "POST"\n' >"$out/post.lua"
hello_runs=(); evalsha_runs=()
for run in 1 2 3; do
  wrk -t1 -c256 -d10s http://127.0.0.1:3299/hello >"$out/hello-$run.txt"
  hello_runs+=("$(wrk_rate "$out/hello-$run.txt")")
  wrk -t1 -c256 -d10s -s "$out/post.lua" http://127.0.0.1:3299/decrement >"$out/evalsha-$run.txt"
  evalsha_runs+=("$(wrk_rate "$out/evalsha-$run.txt")")
  echo "   run $run: hello ${hello_runs[-1]} req/s, EVALSHA ${evalsha_runs[-1]} req/s"
done
kill "$CEILING"; wait "$CEILING" 2>/dev/null || true
hello=$(median "${hello_runs[@]}"); evalsha=$(median "${evalsha_runs[@]}")

echo "== HTTP ceiling of the product: /healthz through the whole stack, 3 runs"
healthz_runs=()
for run in 1 2 3; do
  [ "$run" = 1 ] && profile_start healthz
  wrk -t1 -c256 -d10s "http://127.0.0.1:$PORT/healthz" >"$out/healthz-$run.txt"
  [ "$run" = 1 ] && profile_stop healthz "$SERVER"
  healthz_runs+=("$(wrk_rate "$out/healthz-$run.txt")")
done
healthz=$(median "${healthz_runs[@]}")
echo "   $(fig "${healthz_runs[@]}") req/s"

echo "== sold-out path, 3 runs"
crowd --users 2 --stock 1 --concurrency 2 --lead-secs 1 >"$out/soldout-setup.txt" || true
ACT=$(sed -n 's/^activity \([0-9]*\):.*/\1/p' "$out/soldout-setup.txt")
# A shopper of that sale who holds no unit: the answer is sold_out, never limit_reached.
USER=$($PSQL -d seckill_bench -tAc "SELECT max(u.id) FROM users u WHERE u.username LIKE 'crowd\_%' AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.user_id = u.id AND o.activity_id = $ACT)")
read -r COOKIE PATHV < <(SECKILL_SECRET="$SECRET" $LOAD sign --user "$USER" --activity "$ACT" --wrk-script "$out/soldout.lua")
first=$(curl -s -w " %{http_code}" -X POST -H "Content-Type: application/json" -H "Cookie: sid=$COOKIE" -H "X-Forwarded-For: 10.200.0.1" -d "{\"path\":\"$PATHV\"}" "http://127.0.0.1:$PORT/api/activities/$ACT/buy")
echo "   first answer: $first"
case $first in *sold_out*) ;; *) echo "the sold-out buyer is not answered sold_out: $first" >&2; exit 1 ;; esac
soldout_runs=()
for run in 1 2 3; do
  [ "$run" = 1 ] && profile_start sold-out
  wrk -t1 -c256 -d10s -s "$out/soldout.lua" "http://127.0.0.1:$PORT/api/activities/$ACT/buy" >"$out/soldout-$run.txt"
  [ "$run" = 1 ] && profile_stop sold-out "$SERVER"
  soldout_runs+=("$(wrk_rate "$out/soldout-$run.txt")")
done
soldout=$(median "${soldout_runs[@]}")
echo "   $(fig "${soldout_runs[@]}") req/s"

echo "== sold-out path at 1,000 connections: the maximum (closed loop), then an open loop at 80 % of it"
pace_soldout() { # pace_soldout RATE FILE
  "$LOAD" pace --url "http://127.0.0.1:$PORT/api/activities/$ACT/buy" --body "{\"path\":\"$PATHV\"}" \
    --header "Cookie: sid=$COOKIE" --header "X-Forwarded-For: 10.200.0.1" \
    --connections 1000 --secs 10 --rate "$1" >"$2"
}
soldout_max_runs=(); soldout_p99_runs=()
for run in 1 2 3; do
  pace_soldout 0 "$out/soldout-max-$run.txt"
  soldout_max_runs+=("$(pace_of "$out/soldout-max-$run.txt" rate)")
done
soldout_max=$(median "${soldout_max_runs[@]}")
soldout_rate=$((soldout_max * 80 / 100))
for run in 1 2 3; do
  pace_soldout "$soldout_rate" "$out/soldout-paced-$run.txt"
  soldout_p99_runs+=("$(pace_of "$out/soldout-paced-$run.txt" p99)")
done
echo "   max $(fig "${soldout_max_runs[@]}") req/s; at $soldout_rate req/s p99 $(fig "${soldout_p99_runs[@]}") ms"

echo "== what each layer of the stack costs: /healthz and the sold-out buy without it, 3 runs each"
layer_rows=""
# Every layer SECKILL_BENCH_WITHOUT_LAYERS names (server/src/infra/config LAYERS).
ALL_LAYERS=request_id,http_metrics,trace,connection,timeout,compression,security_headers,cache_policy,guard_pages,require_json
for layer in none ${ALL_LAYERS//,/ } all; do
  case $layer in
    none) off="" ;;
    all) off=$ALL_LAYERS ;;
    *) off=$layer ;;
  esac
  kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
  SERVE_BIN=$BENCH_BIN serve env SECKILL_BENCH_WITHOUT_LAYERS="$off"
  h=(); b=()
  for run in 1 2 3; do
    wrk -t1 -c256 -d4s "http://127.0.0.1:$PORT/healthz" >"$out/layer.txt"; h+=("$(wrk_rate "$out/layer.txt")")
    wrk -t1 -c256 -d4s -s "$out/soldout.lua" "http://127.0.0.1:$PORT/api/activities/$ACT/buy" >"$out/layer.txt"; b+=("$(wrk_rate "$out/layer.txt")")
  done
  label=$([ "$layer" = none ] && echo "the whole stack" || echo "without $layer")
  layer_rows+="| $label | $(fig "${h[@]}") | $(fig "${b[@]}") |"$'\n'
  echo "   $label: healthz $(fig "${h[@]}"), sold-out $(fig "${b[@]}")"
done
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
serve

echo "== Redis ceiling: the gate script, before and after the lean-down"
P="rb:$RUN:"
redis-cli -p 56379 SET "${P}stock" 1000000000 >/dev/null
redis-cli -p 56379 SET "${P}before-stock" 1000000000 >/dev/null
# Before: 13 keys (separate bucket, strike and block keys per client; captcha read and deleted inside).
SHA=$(redis-cli -p 56379 SCRIPT LOAD "$(cat scripts/gate-before.lua)")
redis-benchmark -p 56379 -c 50 -n 200000 -r 10000000 -q EVALSHA "$SHA" 13 \
  "${P}before-stock" "${P}meta" "${P}users" "${P}journal" "${P}tok:__rand_int__" "${P}unused" "${P}unused" \
  "${P}b:u:__rand_int__" "${P}s:u:__rand_int__" "${P}k:u:__rand_int__" "${P}b:ip:__rand_int__" "${P}s:ip:__rand_int__" "${P}k:ip:__rand_int__" \
  __rand_int__ 1 tok-__rand_int__ 1700000000000 0 "" 0 5 1 400 200 30 60000 60 60 1 1000000000 >"$out/redis-before.txt" 2>&1
redis_before=$(grep -o '[0-9.]* requests per second' "$out/redis-before.txt" | awk '{print int($1)}' | tail -1)
# After: gate.lua as the server calls it (buy/batch.rs): the shard's ten keys and fourteen rules,
# then three keys and ten arguments per buy. `gate_bench BUYS CHECK OUT`: each call a batch of
# BUYS buys of distinct shoppers, each with an Idempotency-Key as the storefront sends (CHECK 3:
# each spends a proof of work, its challenge's SET NX). No record per token and none per key
# (SECKILL_GATE_TOKEN_RECORDS and SECKILL_GATE_IDEMPOTENCY_STRINGS off, the defaults); the
# buckets' generation hashes at 1700000000000 / 10 s.
SHA=$(redis-cli -p 56379 SCRIPT LOAD "$(cat server/src/infra/scripts/gate.lua)")
gate_bench() {
  local buys=$1 check=$2 keys=() args=() i expiry=0 pow="${P}unused"
  [ "$check" = 3 ] && expiry=1700000600000
  keys=("${P}stock" "${P}meta" "${P}users" "${P}granted" "${P}unsettled" \
    "${P}rates:169999999" "${P}rates:170000000" "${P}rates:170000001" "${P}owners" "${P}idem")
  args=(5 1 400 200 30 60000 60 60 1 1000000000 1 30000 0 0)
  for ((i = 0; i < buys; i++)); do
    [ "$check" = 3 ] && pow="${P}pow:__rand_int__"
    keys+=("${P}tok:__rand_int__" "${P}unused" "$pow")
    args+=("__rand_int__" 1 "tok-__rand_int__" 1700000000000 "$check" "k-__rand_int__" "$expiry" "" "u:__rand_int__" "ip:__rand_int__")
  done
  redis-benchmark -p 56379 -c 50 -n $((200000 / buys)) -r 10000000 -q EVALSHA "$SHA" "${#keys[@]}" \
    "${keys[@]}" "${args[@]}" >"$3" 2>&1
  # A refused call (a layout out of step) is an error reply, and redis-benchmark counts it alike.
  if redis-cli -p 56379 EVALSHA "$SHA" "${#keys[@]}" "${keys[@]//__rand_int__/1}" "${args[@]//__rand_int__/1}" 2>&1 | grep -qi err; then
    echo "the gate script refused the benchmark's call" >&2
    exit 1
  fi
  grep -o '[0-9.]* requests per second' "$3" | awk '{print int($1)}' | tail -1
}
redis_ceiling=$(gate_bench 1 0 "$out/redis.txt")
redis_pow=$(gate_bench 1 3 "$out/redis-pow.txt")
redis_batch=$(gate_bench 32 0 "$out/redis-batch.txt")
redis-cli -p 56379 --scan --pattern "${P}*" | xargs -r -n 1000 redis-cli -p 56379 DEL >/dev/null
echo "   before $redis_before, after $redis_ceiling scripts/s, spending a proof of work $redis_pow scripts/s, 32 buys a call $redis_batch calls/s ($((redis_batch * 32)) buys/s)"

echo "== in-stock buy path (each shopper: GET path + POST buy), closed loop of 1,000, 3 runs"
instock_runs=(); instock_p99_runs=()
for run in 1 2 3; do
  [ "$run" = 1 ] && profile_start in-stock
  crowd --users 30000 --stock 30000 --concurrency 1000 --lead-secs 2 | tee "$out/instock-$run.txt"
  [ "$run" = 1 ] && profile_stop in-stock "$SERVER"
  instock_runs+=("$(shoppers_of "$out/instock-$run.txt")"); instock_p99_runs+=("$(p99_of "$out/instock-$run.txt")")
done
cp "$out/instock-1.txt" "$out/instock.txt"
instock_shoppers=$(median "${instock_runs[@]}")
instock_p99=$(median "${instock_p99_runs[@]}")
echo "== the same with the proof-of-work check: every shopper solves before the start (difficulty 1,000:"
echo "   the server's verify costs the same at any difficulty), 3 runs"
pow_runs=(); pow_p99_runs=()
for run in 1 2 3; do
  crowd --users 30000 --stock 30000 --concurrency 1000 --lead-secs 20 --proof-of-work 1000 | tee "$out/instock-pow-$run.txt"
  pow_runs+=("$(shoppers_of "$out/instock-pow-$run.txt")"); pow_p99_runs+=("$(p99_of "$out/instock-pow-$run.txt")")
done

echo "== the in-stock buy path without any layer (SECKILL_BENCH_WITHOUT_LAYERS=all of them), 3 runs"
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
SERVE_BIN=$BENCH_BIN serve env SECKILL_BENCH_WITHOUT_LAYERS=$ALL_LAYERS
bare_runs=()
for run in 1 2 3; do
  crowd --users 30000 --stock 30000 --concurrency 1000 --lead-secs 2 >"$out/instock-bare-$run.txt"
  bare_runs+=("$(shoppers_of "$out/instock-bare-$run.txt")")
done
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
serve
echo "   $(fig "${bare_runs[@]}") shoppers/s without the layers, $(fig "${instock_runs[@]}") with"

echo "== in-stock latency at an operating point: open loops at 50, 80 and 95 % of $instock_shoppers shoppers/s, 3 runs each"
# The host's share of this VM's CPU time over each run (/proc/stat: idle and stolen), since a tail
# that comes and goes between runs is often the hypervisor's and not the product's.
cpu_mark() { awk '/^cpu / {t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $5, $9}' /proc/stat; }
cpu_pct() { # cpu_pct "MARK BEFORE" "MARK AFTER" idle|steal
  local b a; read -r -a b <<<"$1"; read -r -a a <<<"$2"
  case $3 in
    idle) echo $((100 * (a[1] - b[1]) / (a[0] - b[0]))) ;;
    steal) echo $((100 * (a[2] - b[2]) / (a[0] - b[0]))) ;;
  esac
}
open_loop() { # open_loop RATE FILE [crowd flags]: one run, Redis's AOF rewritten and PostgreSQL checkpointed before
  local rate=$1 file=$2; shift 2
  settle_redis; $PSQL -d seckill_bench -c CHECKPOINT
  local m0; m0=$(cpu_mark)
  crowd --users $((rate * 10)) --stock $((rate * 10)) --concurrency 1000 --lead-secs 2 --rate "$rate" "$@" >"$file"
  local m1; m1=$(cpu_mark)
  steals+=("$(cpu_pct "$m0" "$m1" steal)"); idles+=("$(cpu_pct "$m0" "$m1" idle)")
}
open_rows=""
for pct in 50 80 95; do
  rate=$((instock_shoppers * pct / 100))
  users=$((rate * 10)) # ten seconds of arrivals
  p50s=(); p99s=(); p999s=(); steals=(); idles=()
  for run in 1 2 3; do
    open_loop "$rate" "$out/open-$pct-$run.txt"
    p50s+=("$(paced_of "$out/open-$pct-$run.txt" p50)"); p99s+=("$(paced_of "$out/open-$pct-$run.txt" p99)"); p999s+=("$(paced_of "$out/open-$pct-$run.txt" p99.9)")
  done
  [ "$pct" = 80 ] && { open80_p99=$(median "${p99s[@]}"); open80_rate=$rate; open80_p99s="${p99s[*]}"; open80_steals="${steals[*]}"; }
  open_rows+="| $pct % ($rate shoppers/s, $users shoppers) | $(fig "${p50s[@]}") | $(fig "${p99s[@]}") | $(fig "${p999s[@]}") | ${idles[*]} | ${steals[*]} |"$'\n'
  echo "   $pct %: p50 $(fig "${p50s[@]}"), p99 $(fig "${p99s[@]}"), p99.9 $(fig "${p999s[@]}") ms; idle ${idles[*]} %, stolen ${steals[*]} %"
done

echo "== the same open loop at 80 % with the relay and persister out of the server (they wait), 3 runs"
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
serve env SECKILL_NO_WORKERS=1
orders_now() { echo "SELECT count(*) FROM orders;" >&"${POLL[1]}"; read -r v <&"${POLL[0]}"; echo "$v"; }
# Orders are counted, not units sold: earlier phases' unpaid orders reach their deadline meanwhile.
before=$(orders_now)
p99s=(); steals=(); idles=()
for run in 1 2 3; do
  open_loop "$open80_rate" "$out/open-noworkers-$run.txt" --no-settle
  p99s+=("$(paced_of "$out/open-noworkers-$run.txt" p99)")
done
noworkers_row="| 80 % ($open80_rate shoppers/s), relay and persister stopped | — | $(fig "${p99s[@]}") | — | ${idles[*]} | ${steals[*]} |"
echo "   p99 $(fig "${p99s[@]}") ms without the workers (with: $open80_p99s); stolen ${steals[*]} %"
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
serve
# What the runs left in the journals becomes orders before anything else is measured.
until [ "$(orders_now)" -ge $((before + 3 * open80_rate * 10)) ]; do sleep 0.2; done

echo "== flash crowd: 200,000 shoppers for 100,000 units"
crowd --users 200000 --stock 100000 --concurrency 1000 --lead-secs 2 | tee "$out/crowd.txt"
crowd_ok=$(grep -c "→ OK" "$out/crowd.txt" || true)
rss=$(rss_peak)
echo "   server peak RSS ${rss} MB"

echo "== waiting room: 200,000 shoppers for 100,000 units, everyone in line before the start"
# Joins take a while for 200,000 (each a POST): the sale starts a minute after it is created.
crowd --users 200000 --stock 100000 --concurrency 1000 --lead-secs 60 --waiting-room on | tee "$out/waiting.txt"
waiting_p50=$(sed -n 's/^wait for admission s: p50 \([0-9.]*\) .*/\1/p' "$out/waiting.txt")
waiting_p99=$(sed -n 's/^wait for admission s: .*p99 \([0-9.]*\) .*/\1/p' "$out/waiting.txt")
echo "== waiting room's cost on the buy path: the in-stock run with tickets"
crowd --users 30000 --stock 30000 --concurrency 1000 --lead-secs 20 --waiting-room on | tee "$out/instock-waiting.txt"
wr_p50=$(sed -n 's/.*latency ms: p50 \([0-9.]*\) .*/\1/p' "$out/instock-waiting.txt")
wr_p99=$(sed -n 's/.*latency ms: .*p99 \([0-9.]*\) .*/\1/p' "$out/instock-waiting.txt")
instock_p50=$(sed -n 's/.*latency ms: p50 \([0-9.]*\) .*/\1/p' "$out/instock.txt")
ticket_ns=$("$LOAD" ticket-cost 2>/dev/null | sed -n 's/.* \([0-9.]*\) ns per check.*/\1/p')
pow_line=$("$LOAD" pow-cost 2>/dev/null | tee "$out/pow-cost.txt")
pow_issue_ns=$(echo "$pow_line" | sed -n 's/.*: \([0-9]*\) ns to issue.*/\1/p')
pow_verify_ns=$(echo "$pow_line" | sed -n 's/.*, \([0-9]*\) ns to verify.*/\1/p')
pow_solve_ms=$(echo "$pow_line" | sed -n 's/.*, \([0-9.]*\) ms to solve.*/\1/p')
echo "== sessions that can end: a session check before and after"
session_line=$(target/release/examples/session_cost 2>/dev/null | tee "$out/session-cost.txt")
session_before=$(echo "$session_line" | sed -n 's/.*: \([0-9.]*\) ns signature only.*/\1/p')
session_after=$(echo "$session_line" | sed -n 's/.*, \([0-9.]*\) ns with ended-session.*/\1/p')

echo "== in-stock buy path on a 3 + 3 Redis Cluster, 1 and 4 stock shards (same machine)"
scripts/services.sh redis-cluster >/dev/null
CLUSTER_URLS=$(for i in 0 1 2 3 4 5; do printf 'redis://127.0.0.1:%s,' $((${SECKILL_REDIS_CLUSTER_PORT_BASE:-17001} + i)); done | sed 's/,$//')
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
# A database of its own: the sales of the runs above keep their stock in the one Redis, and an
# instance starting on the cluster would first rebuild theirs there, waiting for what they still
# owe it (and refuse to start after 30 s).
$PSQL -d postgres -c "DROP DATABASE IF EXISTS seckill_bench_on_cluster WITH (FORCE)" -c "CREATE DATABASE seckill_bench_on_cluster"
ONE_REDIS_DATABASE_URL=$DATABASE_URL
export DATABASE_URL=postgres://seckill@127.0.0.1:55432/seckill_bench_on_cluster
serve env REDIS_CLUSTER_URLS="$CLUSTER_URLS"
crowd --users 30000 --stock 30000 --concurrency 1000 --lead-secs 2 --stock-shards 1 | tee "$out/cluster1.txt"
crowd --users 30000 --stock 30000 --concurrency 1000 --lead-secs 2 --stock-shards 4 | tee "$out/cluster4.txt"
# What waiting for a replica before each 202 costs (infra/replication.rs): the same run without it.
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
serve env REDIS_CLUSTER_URLS="$CLUSTER_URLS" SECKILL_REDIS_WAIT_REPLICAS=0
crowd --users 30000 --stock 30000 --concurrency 1000 --lead-secs 2 --stock-shards 4 | tee "$out/cluster4-nowait.txt"
# BEFORE_BIN=path/to/an/older/server: the same in-stock run against that build (its own database,
# one Redis, its own load tool), for a before/after figure of a change to the buy path.
before_row=""
if [ -n "${BEFORE_BIN:-}" ]; then
  echo "== in-stock buy path, the build in BEFORE_BIN"
  kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
  $PSQL -d postgres -c "DROP DATABASE IF EXISTS seckill_bench_before WITH (FORCE)" -c "CREATE DATABASE seckill_bench_before"
  # Its own database, Redis prefix and queues: the worker of the persister phase still consumes this run's.
  export SECKILL_REDIS_PREFIX="before:$RUN:" SECKILL_AMQP_PREFIX="before$RUN"
  SERVE_BIN=$BEFORE_BIN serve env DATABASE_URL=postgres://seckill@127.0.0.1:55432/seckill_bench_before
  # Its own load tool too: the tool reads the key layout of the build it belongs to.
  BIN=$BEFORE_BIN DATABASE_URL=postgres://seckill@127.0.0.1:55432/seckill_bench_before crowd --users 30000 --stock 30000 --concurrency 1000 --lead-secs 2 | tee "$out/before.txt"
  before_row="| in-stock buy path, the build before (BEFORE_BIN, one Redis) | $(sed -n 's/.* = \([0-9]*\) shoppers\/s/\1/p' "$out/before.txt") shoppers/s, p99 $(sed -n 's/.*p99 \([0-9.]*\) .*/\1/p' "$out/before.txt") ms | — | — | — |"$'\n'
fi
echo "== the cluster shape through nginx (1, 2, 3 instances) and the capacity model"
kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true
export DATABASE_URL=$ONE_REDIS_DATABASE_URL
BIN=$BIN LOAD=$LOAD SECRET=$SECRET OUT=$out scripts/bench-cluster.sh

cluster1=$(shoppers_of "$out/cluster1.txt"); cluster1_p99=$(p99_of "$out/cluster1.txt")
cluster4=$(shoppers_of "$out/cluster4.txt"); cluster4_p99=$(p99_of "$out/cluster4.txt")
nowait=$(shoppers_of "$out/cluster4-nowait.txt"); nowait_p99=$(p99_of "$out/cluster4-nowait.txt")

cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
# The benchmarks of their own scripts: one that fails leaves its section saying so, and the report
# of everything else is still written (make bench fails at the end).
failed=()
part() { # part FILE COMMAND...: the command's Markdown into FILE
  local file=$1; shift
  "$@" >"$file" && return 0
  local status=$?
  failed+=("$*")
  echo "**Not measured in this run: \`$*\` failed (exit $status); see make bench's output.**" >"$file"
}
echo "== the buy against its ceilings, driven alike; CPU and Redis commands per sold unit (scripts/bench-gate.sh)"
part "$out/gate.md" env BIN="$BIN" LOAD="$LOAD" scripts/bench-gate.sh
echo "== the tail: the open loop at 80 % with Redis's own AOF rewrites and with the workers' (scripts/bench-tail.sh)"
part "$out/tail.md" env BIN="$BIN" LOAD="$LOAD" scripts/bench-tail.sh
echo "== the waiting room at scale through nginx (scripts/bench-waiting-room.sh)"
part "$out/waiting-room.md" env BIN="$BIN" LOAD="$LOAD" scripts/bench-waiting-room.sh
echo "== sign-in beside a sign-up flood (scripts/bench-doors.sh)"
part "$out/doors.md" scripts/bench-doors.sh "$BIN"
echo "== the buy path while sessions end (scripts/bench-sessions.sh)"
part "$out/sessions.md" scripts/bench-sessions.sh "$BIN" "$LOAD"
echo "== the storefront on a phone: Lighthouse (mobile) and the proof of work's solve time (scripts/bench-storefront.sh)"
part "$out/storefront.md" scripts/bench-storefront.sh
report=docs/benchmarks.md
[ "$PROFILE" = 1 ] && report="$out/benchmarks.md" # a profiled run does not replace the figures
cat >"$report" <<MD
# Benchmarks

Produced by \`make bench\` (\`scripts/bench.sh\`) on $(date -u +%Y-%m-%d): $(nproc) cores ($cpu),
$(free -g | awk '/Mem:/ {print $2}') GiB RAM, Debian 12; release build; PostgreSQL, Redis, RabbitMQ and the load
generator on the same machine as the server. Figures marked "median (lowest–highest)" are three runs in a row
(this shared VM moves by up to ±20 % between runs); the others are one run.

### Against the bare ceilings

The ceilings are measured in the same run: \`seckill-load ceiling\` serves a minimal axum "hello" and a minimal handler of
one EVALSHA check-and-decrement on the same Redis, with the product's axum, hyper and Redis client and no middleware
at all. The product's own \`/healthz\`, which carries the whole stack, is kept beside them.

| measure | result | ratio to bare hello ($hello req/s) | ratio to bare EVALSHA ($evalsha req/s) | ratio to the product's /healthz ($healthz req/s) | target |
|---|---|---|---|---|---|
| bare hello (wrk, 256 connections) | $(fig "${hello_runs[@]}") req/s | — | — | — | — |
| bare EVALSHA check-and-decrement (wrk, 256 connections) | $(fig "${evalsha_runs[@]}") req/s | $(ratio "$evalsha" "$hello") % | — | — | — |
| product \`GET /healthz\` (wrk, 256 connections) | $(fig "${healthz_runs[@]}") req/s | $(ratio "$healthz" "$hello") % | — | — | — |
| sold-out path: \`POST …/buy\` on a sold-out sale (wrk, 256 connections) | $(fig "${soldout_runs[@]}") req/s | $(ratio "$soldout" "$hello") % | — | $(ratio "$soldout" "$healthz") % | ≥ 80 % of /healthz |
| in-stock path: shoppers/s, each GET path + POST buy (closed loop, 1,000 in flight) | $(fig "${instock_runs[@]}") shoppers/s = $((2 * instock_shoppers)) req/s | $(ratio "$((2 * instock_shoppers))" "$hello") % (requests) | $(ratio "$instock_shoppers" "$evalsha") % (one EVALSHA per shopper) | $(ratio "$((2 * instock_shoppers))" "$healthz") % | ≥ 40 % of /healthz |
| in-stock path without any middleware (\`SECKILL_BENCH_WITHOUT_LAYERS\`, all) | $(fig "${bare_runs[@]}") shoppers/s | — | $(ratio "$(median "${bare_runs[@]}")" "$evalsha") % | — | — |
| Redis alone: gate script (redis-benchmark, 50 clients), before the lean-down | $redis_before scripts/s | — | — | — | — |
| Redis alone: gate script (redis-benchmark, 50 clients), lean (today's) | $redis_ceiling scripts/s ($(ratio "$redis_ceiling" "$redis_before") % of before) | — | — | — | — |
| Redis alone: gate script spending a proof of work (its challenge's SET NX) | $redis_pow scripts/s ($(ratio "$redis_pow" "$redis_ceiling") % of without) | — | — | — | — |
| Redis alone: gate script, batches of 32 buys (as the server sends them under a crowd) | $((redis_batch * 32)) buys/s ($redis_batch calls/s) | — | — | — | — |

### Latency at an operating point (open loop)

\`seckill-load crowd --rate\` sends shoppers at a constant arrival rate; each purchase (GET path + POST buy) is timed from
the instant it was due, not from when it was sent, so a server that falls behind is charged its shoppers' wait
(no coordinated omission). Rates are shares of the in-stock maximum above (median, $instock_shoppers shoppers/s).
The sold-out path: \`seckill-load pace\` over 1,000 open keep-alive connections, first as fast as they go (the maximum),
then at 80 % of that maximum, each request timed from its due instant. Each in-stock run starts after Redis rewrote its
AOF and PostgreSQL checkpointed; the last two columns are this VM's CPU over each run as \`/proc/stat\` counts it:
idle, and stolen by the host (time the hypervisor gave to another guest). The last row runs the 80 % loop with the
relay and persister stopped (\`SECKILL_NO_WORKERS\`; the journal keeps the reservations until a server with workers
drains them after the row): what the workers in the server's process cost the tail.

| in-stock open loop | p50 ms | p99 ms | p99.9 ms | CPU idle % (each run) | CPU stolen by the host % (each run) |
|---|---|---|---|---|---|
$open_rows$noworkers_row

| measure | result | target |
|---|---|---|
| in-stock p99 at 80 % of the maximum rate | $open80_p99 ms | ≤ 30 ms |
| sold-out path, 1,000 connections: maximum (closed loop) | $(fig "${soldout_max_runs[@]}") req/s | — |
| sold-out path, 1,000 connections, open loop at $soldout_rate req/s (80 % of the maximum): p99 | $(fig "${soldout_p99_runs[@]}") ms | ≤ 30 ms |
| in-stock buy latency in the closed loop of 1,000 in flight (queueing, for comparison): p99 | $(fig "${instock_p99_runs[@]}") ms | — |

### What each layer of the stack costs

The server started with one layer left out (\`SECKILL_BENCH_WITHOUT_LAYERS\`, a measurement switch), wrk for 4 s
per figure, 256 connections, three runs each.

| stack | \`GET /healthz\` req/s | sold-out \`POST …/buy\` req/s |
|---|---|---|
$layer_rows
### Persistence and the rest

| measure | result | ceiling | ratio | target |
|---|---|---|---|---|
| persister draining a backlog of $BACKLOG (relay + persister, own process) | $(fig "${persist_runs[@]}") orders/s | — | — | ≥ 20,000 |
| in-stock buy path on the Redis Cluster, 4 stock shards, no wait for a replica (\`SECKILL_REDIS_WAIT_REPLICAS=0\`) | $nowait shoppers/s, p99 $nowait_p99 ms | $instock_shoppers (one Redis) | $(ratio "${nowait:-0}" "${instock_shoppers:-1}") % | — |
| in-stock buy path on the Redis Cluster, 1 stock shard (each 202 waits for a replica) | $cluster1 shoppers/s, p99 $cluster1_p99 ms | $instock_shoppers (one Redis) | $(ratio "${cluster1:-0}" "${instock_shoppers:-1}") % | — |
| in-stock buy path on the Redis Cluster, 4 stock shards | $cluster4 shoppers/s, p99 $cluster4_p99 ms | $instock_shoppers (one Redis) | $(ratio "${cluster4:-0}" "${instock_shoppers:-1}") % | — |
${before_row}| waiting room, 200,000 shoppers for 100,000 units: wait from the start to admission | p50 $waiting_p50 s, p99 $waiting_p99 s | — | — | — |
| waiting room's cost on the buy: ticket check in-process | $ticket_ns ns per check | — | — | — |
| proof-of-work check (default difficulty): issue a challenge / verify a solution, in-process | $pow_issue_ns ns / $pow_verify_ns ns (a native solve: $pow_solve_ms ms) | — | — | verify in µs |
| in-stock buy path with the proof-of-work check (closed loop, 1,000 in flight) | $(fig "${pow_runs[@]}") shoppers/s, p99 $(fig "${pow_p99_runs[@]}") ms | $instock_shoppers (no check) | $(ratio "$(median "${pow_runs[@]}")" "${instock_shoppers:-1}") % | — |
| revocable sessions' cost on the buy: session check, signature only (before) vs with ended-session lookups (100,000 ended sessions + 100,000 epochs) | $session_before ns vs $session_after ns per request | — | — | — |
| in-stock buy latency with tickets (admitted shoppers, 2,000 admitted/s) vs without (1,000 in flight) | p50 $wr_p50 / p99 $wr_p99 ms vs p50 $instock_p50 / p99 $instock_p99 ms | — | — | — |
| server peak RSS (the open loops and the 200,000-shopper crowd) | $rss MB | — | — | ≤ 200 MB |

## 200,000 shoppers for 100,000 units
\`\`\`
$(cat "$out/crowd.txt")
\`\`\`

## The gate in batches, against its ceilings (\`scripts/bench-gate.sh\`, \`make bench-gate\` alone)

$(cat "$out/gate.md")

## The tail and the AOF's rewrites (\`scripts/bench-tail.sh\`, \`make bench-tail\` alone)

$(cat "$out/tail.md")

<!-- bench-waiting-room -->
$(cat "$out/waiting-room.md")
<!-- /bench-waiting-room -->

## Sign-in beside a sign-up flood (\`scripts/bench-doors.sh\`)

$(cat "$out/doors.md")

## The buy path while sessions end (\`scripts/bench-sessions.sh\`)

$(cat "$out/sessions.md")

## The storefront on a phone (\`make bench-storefront\` alone)
$(cat "$out/storefront.md")

## In-stock run
\`\`\`
$(cat "$out/instock.txt")
\`\`\`

## Waiting room: 200,000 shoppers for 100,000 units, then the in-stock run through it
\`\`\`
$(cat "$out/waiting.txt")

$(cat "$out/instock-waiting.txt")
\`\`\`

## In-stock runs on the Redis Cluster (1 shard, then 4, then 4 without the replica wait)
\`\`\`
$(cat "$out/cluster1.txt")

$(cat "$out/cluster4.txt")

$(cat "$out/cluster4-nowait.txt")
\`\`\`

$(cat "$out/cluster.md")
MD
cat scripts/bench-analysis.md >>"$report"
echo "$report written"
if [ "$PROFILE" = 1 ]; then
  { echo "# Profiles from one \`make profile\` run ($(date -u +%Y-%m-%d), $(nproc) cores)"; echo; cat "$out/profile.md"; } >docs/profile.md
  echo "docs/profile.md written"
fi
if [ ${#failed[@]} -gt 0 ]; then printf 'failed: %s\n' "${failed[@]}" >&2; exit 1; fi
