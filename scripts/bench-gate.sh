#!/usr/bin/env bash
# `make bench-gate` (and a part of `make bench`): like measured against like. Everything here is
# driven by wrk with two threads over 1,000 connections for 10 s, three runs each, in one sitting:
# the bare ceilings (an axum hello, an axum handler of one EVALSHA), the product's /healthz, the
# sold-out buy, and the in-stock buy with pre-signed shoppers (each request the next shopper, with
# an address of its own; only 202s counted), with the gate's batches on (the default) and off.
# For the first in-stock run of each, until every accepted unit is an order: the CPU each process
# spent per sold unit (from /proc), and every Redis command per sold unit (INFO commandstats).
# Prints a Markdown section on stdout (bench.sh puts it in docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export LEPTOS_OUTPUT_NAME=seckill
BIN=${BIN:-target/release/server}
LOAD=${LOAD:-target/release/seckill-load}
PORT=3210
SECRET=bench-secret-bench-secret-bench-secret
RUN=$(date +%s)
export DATABASE_URL=postgres://seckill@127.0.0.1:55432/seckill_bench_gate
export SECKILL_SECRET=$SECRET SECKILL_REDIS_PREFIX="gate:$RUN:" SECKILL_AMQP_PREFIX="gate$RUN" SECKILL_QUEUE_EXPIRES_MS=60000
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -q"
REDIS="redis-cli -p 56379"
out=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
log() { echo "$@" >&2; }
WRK=(wrk -t2 -c1000 -d10s)

$PSQL -d postgres -c "DROP DATABASE IF EXISTS seckill_bench_gate WITH (FORCE)" -c "CREATE DATABASE seckill_bench_gate"
serve() { # serve [extra env...]
  env SECKILL_ADDR=127.0.0.1:$PORT SECKILL_TRUST_FORWARDED_FOR=1 SECKILL_MAX_IN_FLIGHT=8192 RUST_LOG=warn "$@" "$BIN" serve >"$out/server.log" 2>&1 &
  SERVER=$!; pids+=("$SERVER")
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && return; sleep 0.2; done
  log "server did not become ready"; cat "$out/server.log" >&2; exit 1
}
stop() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
fig() { printf '%s (%s–%s)' "$(median "$@")" "$(printf '%s\n' "$@" | sort -g | head -1)" "$(printf '%s\n' "$@" | sort -g | tail -1)"; }
wrk_rate() { grep Requests/sec "$1" | awk '{print int($2)}'; }
wrk_p99() { awk '$1 == "99%" {print $2}' "$1"; }
accepted_rate() { sed -n 's/.* = \([0-9]*\) accepted\/s$/\1/p' "$1"; }
accepted_of() { sed -n 's/^accepted \([0-9]*\) .*/\1/p' "$1"; }
ratio() { echo "scale=0; 100 * $1 / $2" | bc; }
wrk_requests() { awk '/ requests in / {print $1}' "$1"; }
# µs of CPU a process spent per request of a wrk run, from its ticks before and after.
per_request() { # per_request TICKS_BEFORE TICKS_AFTER WRK_OUTPUT
  echo "scale=1; 1000000 * ($2 - $1) / $HZ / $(wrk_requests "$3")" | bc
}

# The CPU time (clock ticks) a process and its children spent so far: its own, its children's
# that ended (cutime, cstime), and each living child's.
ticks() { # ticks PID
  local total=0 pid
  for pid in "$1" $(pgrep -P "$1" || true); do
    [ -r "/proc/$pid/stat" ] || continue
    # Fields after the command's closing parenthesis: utime is the 12th, stime the 13th, then cutime, cstime.
    total=$((total + $(sed 's/^.*) //' "/proc/$pid/stat" | awk -v own="$([ "$pid" = "$1" ] && echo 1 || echo 0)" \
      '{print $12 + $13 + (own ? $14 + $15 : 0)}')))
  done
  echo "$total"
}
listener() { ss -ltnpH "sport = :$1" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2; }
REDIS_PID=$($REDIS INFO server | sed -n 's/^process_id:\([0-9]*\).*/\1/p')
RABBIT_PID=$(listener 55672)
POSTGRES_PID=$(listener 55432)
HZ=$(getconf CLK_TCK)

log "== bare ceilings: axum hello, axum + one EVALSHA; the product's /healthz"
SECKILL_REDIS_PREFIX="gate:$RUN:ceiling:" "$LOAD" ceiling --addr 127.0.0.1:3298 >"$out/ceiling.log" 2>&1 & CEILING=$!; pids+=("$CEILING")
for _ in $(seq 100); do curl -sf http://127.0.0.1:3298/hello >/dev/null && break; sleep 0.1; done
printf 'wrk.method = "POST"\n' >"$out/post.lua"
serve
hello=(); evalsha=(); healthz=(); hello_p99=(); healthz_p99=(); hello_cpu=()
for run in 1 2 3; do
  t0=$(ticks "$CEILING")
  "${WRK[@]}" --latency http://127.0.0.1:3298/hello >"$out/hello.txt"
  hello_cpu+=("$(per_request "$t0" "$(ticks "$CEILING")" "$out/hello.txt")")
  hello+=("$(wrk_rate "$out/hello.txt")"); hello_p99+=("$(wrk_p99 "$out/hello.txt")")
  "${WRK[@]}" -s "$out/post.lua" http://127.0.0.1:3298/decrement >"$out/evalsha.txt"
  evalsha+=("$(wrk_rate "$out/evalsha.txt")")
  "${WRK[@]}" --latency "http://127.0.0.1:$PORT/healthz" >"$out/healthz.txt"
  healthz+=("$(wrk_rate "$out/healthz.txt")"); healthz_p99+=("$(wrk_p99 "$out/healthz.txt")")
  log "   run $run: hello ${hello[-1]}, EVALSHA ${evalsha[-1]}, /healthz ${healthz[-1]} req/s"
done
kill "$CEILING"; wait "$CEILING" 2>/dev/null || true

# A sale made by `seckill-load wrk-sale`, waited for until it starts; its activity id in $ACT.
wrk_sale() { # wrk_sale SCRIPT [wrk-sale options...]
  local script=$1; shift
  read -r ACT STARTS < <(SECKILL_ADDR=127.0.0.1:$PORT "$LOAD" wrk-sale --base-url "http://127.0.0.1:$PORT" --script "$script" "$@")
  until [ "$(date +%s%3N)" -gt "$STARTS" ]; do sleep 0.1; done
}

# perf's view of one more run, not counted (`perf record -a`: every process on the machine):
# the CPU by process and the server's hottest functions, into $out/NAME-profile.txt.
profiled() { # profiled NAME COMMAND...
  local name=$1 perf; shift
  if ! command -v perf >/dev/null; then echo "(perf is not installed: no profile)" >"$out/$name-profile.txt"; "$@"; return; fi
  perf record -a -F 499 -o "$out/$name.perf" -- sleep 600 >/dev/null 2>&1 & perf=$!
  sleep 0.5
  "$@"
  kill -INT "$perf"; wait "$perf" 2>/dev/null || true
  ( set +o pipefail # `head` closing the pipe early is fine here
    echo "CPU by thread name, share of all samples on all cores (tokio-rt-worker: the server's threads):"
    perf report -i "$out/$name.perf" --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8 | sed 's/ *$//'
    echo
    echo "The server's hottest functions, share of all samples:"
    perf report -i "$out/$name.perf" --no-children --pid "$SERVER" --sort dso,symbol --stdio 2>/dev/null \
      | grep -E '^ +[0-9]' | head -25 | cut -c1-140 | sed 's/ *$//'
  ) >"$out/$name-profile.txt"
}

log "== sold-out buy (in-process answer)"
wrk_sale "$out/soldout.lua" --users 2 --per-user-limit 1 --stock 1 --stock-shards 1 --lead-secs 2
# Two buys: one unit sold, then this instance learns the sale is sold out.
wrk -t1 -c1 -d1s -s "$out/soldout.lua" "http://127.0.0.1:$PORT" -- 1 >/dev/null
soldout=(); soldout_p99=(); soldout_cpu=()
for run in 1 2 3; do
  t0=$(ticks "$SERVER")
  "${WRK[@]}" --latency -s "$out/soldout.lua" "http://127.0.0.1:$PORT" -- 2 >"$out/soldout.txt"
  soldout_cpu+=("$(per_request "$t0" "$(ticks "$SERVER")" "$out/soldout.txt")")
  grep -q '^accepted 0 ' "$out/soldout.txt" || { log "the sold-out run sold something"; cat "$out/soldout.txt" >&2; exit 1; }
  soldout+=("$(wrk_rate "$out/soldout.txt")"); soldout_p99+=("$(wrk_p99 "$out/soldout.txt")")
  log "   run $run: ${soldout[-1]} req/s, p99 ${soldout_p99[-1]}, ${soldout_cpu[-1]} µs of the server's CPU an answer"
done
profiled soldout "${WRK[@]}" -s "$out/soldout.lua" "http://127.0.0.1:$PORT" -- 2 >/dev/null

sold() { $PSQL -d seckill_bench_gate -tAc "SELECT sold FROM activities WHERE id = $ACT"; }
# Until every accepted unit of the sale is an order and no token of it is unsettled.
drain() { # drain ACCEPTED
  local deadline=$((SECONDS + 180))
  until [ "$(sold)" -ge "$1" ] && [ "$($REDIS ZCARD "${SECKILL_REDIS_PREFIX}{a:$ACT.0}:unsettled")" = 0 ]; do
    [ $SECONDS -lt $deadline ] || { log "the pipeline did not drain: sold $(sold) of $1"; exit 1; }
    sleep 0.1
  done
}

# One in-stock run by wrk on a fresh sale; with ACCOUNT=1, the CPU by process and the Redis
# commands per sold unit go to $out/$1-cpu.txt and $out/$1-commands.txt.
instock_run() { # instock_run NAME
  wrk_sale "$out/$1.lua" --users 60000 --per-user-limit 10 --stock-shards 1
  if [ "${ACCOUNT:-0}" = 1 ]; then
    $REDIS CONFIG RESETSTAT >/dev/null
    before=("$(ticks "$SERVER")" "$(ticks "$REDIS_PID")" "$(ticks "$RABBIT_PID")" "$(ticks "$POSTGRES_PID")")
    redis_before=$($REDIS INFO cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.3f", s}')
  fi
  ( "${WRK[@]}" --latency -s "$out/$1.lua" "http://127.0.0.1:$PORT" -- 2; times ) >"$out/$1.txt"
  local accepted; accepted=$(accepted_of "$out/$1.txt")
  [ "$accepted" -gt 0 ] || { log "nothing accepted"; cat "$out/$1.txt" >&2; exit 1; }
  drain "$accepted"
  if [ "${ACCOUNT:-0}" = 1 ]; then
    after=("$(ticks "$SERVER")" "$(ticks "$REDIS_PID")" "$(ticks "$RABBIT_PID")" "$(ticks "$POSTGRES_PID")")
    # wrk's own CPU: the subshell's children's user and system times (`times`, second line).
    wrk_secs=$(tail -1 "$out/$1.txt" | awk '{split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2]}')
    {
      i=0
      for name in server redis-server "RabbitMQ (beam.smp)" PostgreSQL; do
        echo "$name $(echo "scale=4; 1000 * (${after[$i]} - ${before[$i]}) / $HZ / $accepted" | bc)"
        i=$((i + 1))
      done
      echo "wrk $(echo "scale=4; 1000 * $wrk_secs / $accepted" | bc)"
    } >"$out/$1-cpu.txt"
    $REDIS INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_\([a-z|]*\):calls=\([0-9]*\),usec=\([0-9]*\),.*/\1 \2 \3/p' |
      awk -v n="$accepted" '{printf "%s %.3f %.2f\n", $1, $2 / n, $3 / n}' | sort -k2 -g -r >"$out/$1-commands.txt"
  fi
  log "   $1: $(cat "$out/$1.txt" | grep accepted)"
}

# Three in-stock runs named KIND-1..3 (the first one accounted): their rates into the array KIND,
# their p99s into KIND_p99.
instock_runs() { # instock_runs KIND
  local -n rates=$1 p99s=$1_p99
  local run
  rates=(); p99s=()
  for run in 1 2 3; do
    ACCOUNT=$([ "$run" = 1 ] && echo 1 || echo 0) instock_run "$1-$run"
    rates+=("$(accepted_rate "$out/$1-$run.txt")"); p99s+=("$(wrk_p99 "$out/$1-$run.txt")")
  done
}
log "== in-stock buy, batches on (the default)"
instock_runs on
profiled instock instock_run on-4
stop
log "== in-stock buy, batches off (SECKILL_GATE_BATCH_MAX=1)"
serve env SECKILL_GATE_BATCH_MAX=1
instock_runs off
stop

h=$(median "${hello[@]}"); e=$(median "${evalsha[@]}")
cat <<MD
### The buy against its ceilings, driven alike (wrk)

\`scripts/bench-gate.sh\`: every row driven by wrk (2 threads, 1,000 connections, 10 s), three runs each, in one sitting on
this machine; median (lowest–highest). The in-stock rows are shoppers signed ahead by \`seckill-load wrk-sale\` (60,000 of
them, a limit of 10 each), each request the next shopper with an address of its own; only \`202\`s are counted.

| measure | req/s | p99 | ratio to bare hello ($h) | ratio to one EVALSHA ($e) |
|---|---|---|---|---|
| bare axum hello | $(fig "${hello[@]}") | $(median "${hello_p99[@]}") | — | — |
| bare axum + one EVALSHA check-and-decrement | $(fig "${evalsha[@]}") | — | $(ratio "$e" "$h") % | — |
| product \`GET /healthz\` | $(fig "${healthz[@]}") | $(median "${healthz_p99[@]}") | $(ratio "$(median "${healthz[@]}")" "$h") % | — |
| sold-out buy (\`409\`) | $(fig "${soldout[@]}") | $(median "${soldout_p99[@]}") | $(ratio "$(median "${soldout[@]}")" "$h") % | — |
| in-stock buy, gate batches on (\`202\`s/s) | $(fig "${on[@]}") | $(median "${on_p99[@]}") | — | $(ratio "$(median "${on[@]}")" "$e") % |
| in-stock buy, gate batches off (\`202\`s/s) | $(fig "${off[@]}") | $(median "${off_p99[@]}") | — | $(ratio "$(median "${off[@]}")" "$e") % |

The rates move ±15 % between runs of one build on this machine (wrk and the server share its two cores). The steadier
figure for the sold-out answer is its CPU: the µs a process spent per answer over each run (\`/proc\`), the hello's
process against the server's: hello $(fig "${hello_cpu[@]}") µs, sold-out answer $(fig "${soldout_cpu[@]}") µs, the hello's
$(echo "scale=0; 100 * $(median "${hello_cpu[@]}") / $(median "${soldout_cpu[@]}")" | bc) % of the sold-out answer's.

### CPU per sold unit by process (one box)

The first in-stock run of each kind, from its first request until every accepted unit was an order: the CPU time each
process spent (\`/proc/PID/stat\`, children included) over the units sold, in CPU-ms per unit.

| process | batches on | batches off |
|---|---|---|
$(paste -d'|' "$out/on-1-cpu.txt" "$out/off-1-cpu.txt" | awk -F'|' '{on = $1; sub(/ [0-9.]*$/, "", $1); n = split(on, a, " "); m = split($2, b, " "); printf "| %s | %.3f | %.3f |\n", $1, a[n], b[m]}')
| all but wrk | $(grep -v '^wrk' "$out/on-1-cpu.txt" | awk '{s += $NF} END {printf "%.3f", s}') | $(grep -v '^wrk' "$out/off-1-cpu.txt" | awk '{s += $NF} END {printf "%.3f", s}') |

### Redis commands per sold unit (one box)

The same runs: \`INFO commandstats\` reset before the run and read once the pipeline drained, over the units sold (calls
and Redis's own µs per unit; the commands a script calls are counted under their own names as well as in its EVALSHA).

| command | calls per unit, on | µs per unit, on | calls per unit, off | µs per unit, off |
|---|---|---|---|---|
$(join -a1 -a2 -e0 -o 0,1.2,1.3,2.2,2.3 <(sort "$out/on-1-commands.txt") <(sort "$out/off-1-commands.txt") | sort -k2 -g -r | awk '{printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5}')

### Where the time goes (perf)

One more run of each, not counted, under \`perf record -a -F 499\` (the whole machine: the server, Redis, RabbitMQ,
PostgreSQL and wrk share its cores). The sold-out buy:

\`\`\`
$(cat "$out/soldout-profile.txt")
\`\`\`

The in-stock buy, batches on, from its first request until every accepted unit was an order:

\`\`\`
$(cat "$out/instock-profile.txt")
\`\`\`
MD
