#!/usr/bin/env bash
# `make bench-tail` (and a part of `make bench`): the in-stock open loop at 80 % of the closed
# loop's maximum, one server with its workers, two kinds of run taking turns (three runs each, a
# fresh server each), in one sitting:
# - before: Redis rewrites its AOF on its own (auto-aof-rewrite-percentage, as this product's Redis
#   ran before the workers took the rewrites over);
# - now: the workers rewrite it between sales (auto-aof-rewrite-percentage 0, as the set-up and
#   the manifests start Redis).
# Before each run the AOF is rewritten and PostgreSQL checkpointed, so each starts from the same
# place. Whether a file doubles during a sale depends on what Redis held before it; here both kinds
# are given a threshold the run's writes reach about a third of the way in (Redis's percentage from
# the growth the first run measured; the workers' at 1 %, held until the sale is sold out). Each
# run counts the rewrites Redis made during it and after it. Prints a Markdown section on stdout
# (bench.sh puts it in docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export LEPTOS_OUTPUT_NAME=seckill
BIN=${BIN:-target/release/server}
LOAD=${LOAD:-target/release/seckill-load}
PORT=3211
RUN=$(date +%s)
export DATABASE_URL=postgres://seckill@127.0.0.1:55432/seckill_bench_tail
export SECKILL_SECRET=bench-secret-bench-secret-bench-secret SECKILL_REDIS_PREFIX="tail:$RUN:" \
  SECKILL_AMQP_PREFIX="tail$RUN" SECKILL_QUEUE_EXPIRES_MS=60000
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -q"
REDIS="redis-cli -p 56379"
out=$(mktemp -d)
SERVER=
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null
  $REDIS CONFIG SET auto-aof-rewrite-percentage 0 auto-aof-rewrite-min-size 64mb >/dev/null || true
}
trap cleanup EXIT
log() { echo "$@" >&2; }

$PSQL -d postgres -c "DROP DATABASE IF EXISTS seckill_bench_tail WITH (FORCE)" -c "CREATE DATABASE seckill_bench_tail"
# The workers look every 2 s (30 by default), so the rewrite a run leaves due is done before the next.
serve() { # serve AOF_CHECK_EVERY_SECS (0: the workers leave the AOF alone)
  env SECKILL_ADDR=127.0.0.1:$PORT SECKILL_TRUST_FORWARDED_FOR=1 SECKILL_MAX_IN_FLIGHT=8192 \
    SECKILL_AOF_CHECK_EVERY_SECS="$1" SECKILL_AOF_REWRITE_GROWTH_PERCENT=1 SECKILL_AOF_REWRITE_MIN_MB=1 \
    RUST_LOG=warn,server::pipeline::compaction=info "$BIN" serve >>"$out/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && return; sleep 0.2; done
  log "server did not become ready"; cat "$out/server.log" >&2; exit 1
}
stop() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=; }

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
fig() { printf '%s (%s–%s)' "$(median "$@")" "$(printf '%s\n' "$@" | sort -g | head -1)" "$(printf '%s\n' "$@" | sort -g | tail -1)"; }
paced_of() { sed -n "s/^open loop at .*from its due instant ms:.* $2 \([0-9.]*\) .*/\1/p" "$1"; }
persistence() { $REDIS INFO persistence | tr -d '\r' | sed -n "s/^$1:\(.*\)/\1/p"; }
rewrites() { persistence aof_rewrites; }
quiet() { until [ "$(persistence aof_rewrite_in_progress)" = 0 ] && [ "$(persistence aof_rewrite_scheduled)" = 0 ]; do sleep 0.2; done; }
crowd() { "$LOAD" crowd --base-url "http://127.0.0.1:$PORT" "$@" 2>/dev/null; }
cpu_mark() { awk '/^cpu / {t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $5}' /proc/stat; }
idle_pct() { local b a; read -ra b <<<"$1"; read -ra a <<<"$2"; echo $((100 * (a[1] - b[1]) / (a[0] - b[0]))); }

log "== the closed loop's maximum (1,000 in flight, 30,000 shoppers)"
serve 2
$REDIS CONFIG SET auto-aof-rewrite-percentage 0 >/dev/null
quiet; $REDIS BGREWRITEAOF >/dev/null 2>&1 || true; quiet
a0=$(persistence aof_current_size)
crowd --users 30000 --stock 30000 --concurrency 1000 --lead-secs 2 >"$out/max.txt"
a1=$(persistence aof_current_size)
max=$(sed -n 's/.* = \([0-9]*\) shoppers\/s/\1/p' "$out/max.txt")
rate=$((max * 80 / 100))
# The AOF bytes a shopper writes, and so a run's.
run_bytes=$(((a1 - a0) / 30000 * rate * 10))
log "   $max shoppers/s; the open loops at $rate shoppers/s, each writing about $((run_bytes >> 20)) MB to the AOF"
stop

declare -A p50 p99 p999 during after idle
for run in 1 2 3; do
  for kind in before now; do
    serve "$([ $kind = before ] && echo 0 || echo 2)"
    $REDIS CONFIG SET auto-aof-rewrite-percentage 0 >/dev/null
    quiet
    $REDIS BGREWRITEAOF >/dev/null 2>&1 || true
    quiet
    base=$(persistence aof_base_size)
    # Redis's own: reached a third of the way into the run.
    pct=$((100 * run_bytes / 3 / base)); [ "$pct" -ge 1 ] || pct=1
    [ $kind = before ] && $REDIS CONFIG SET auto-aof-rewrite-min-size 1mb auto-aof-rewrite-percentage "$pct" >/dev/null
    $PSQL -d seckill_bench_tail -c CHECKPOINT
    r0=$(rewrites); m0=$(cpu_mark)
    crowd --users $((rate * 10)) --stock $((rate * 10)) --concurrency 2000 --lead-secs 2 --rate "$rate" >"$out/$kind-$run.txt"
    m1=$(cpu_mark); r1=$(rewrites)
    $REDIS CONFIG SET auto-aof-rewrite-percentage 0 >/dev/null
    # The sale is sold out: the workers may rewrite now (Redis on its own may have already).
    deadline=$((SECONDS + 30))
    while [ "$kind" != before ] && [ "$(rewrites)" = "$r1" ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
    quiet
    f=$out/$kind-$run.txt
    p50[$kind]+="$(paced_of "$f" p50) "; p99[$kind]+="$(paced_of "$f" p99) "; p999[$kind]+="$(paced_of "$f" p99.9) "
    during[$kind]+="$((r1 - r0)) "; after[$kind]+="$(($(rewrites) - r1)) "; idle[$kind]+="$(idle_pct "$m0" "$m1") "
    grep -q "→ OK" "$f" || { log "run $run ($kind): the invariants failed"; cat "$f" >&2; exit 1; }
    stop
    log "   run $run, $kind: p99 $(paced_of "$f" p99) ms; rewrites during $((r1 - r0)), after $(($(rewrites) - r1)) (Redis's percentage $pct of a base of $((base >> 20)) MB)"
  done
done

row() { # row KIND LABEL
  # shellcheck disable=SC2086
  echo "| $2 | $(fig ${p50[$1]}) | $(fig ${p99[$1]}) | $(fig ${p999[$1]}) | ${during[$1]% } | ${after[$1]% } | ${idle[$1]% } |"
}
cat <<MD
\`scripts/bench-tail.sh\`: the in-stock open loop (\`seckill-load crowd --rate\`, each purchase timed from its due
instant) at 80 % of the closed loop's maximum ($max shoppers/s, 1,000 in flight): $rate shoppers/s for 10 s, one
Redis, everything on this machine's $(nproc) cores, one server with its workers. The two kinds of run take turns,
three each, a fresh server for each; before each, the AOF is
rewritten and PostgreSQL checkpointed. A run writes about $((run_bytes >> 20)) MB to the AOF; whether a file doubles within a
sale depends on what Redis held before it, so both kinds are given a threshold the run reaches about a third of the
way in: Redis's \`auto-aof-rewrite-percentage\` set from the base before each run, the workers' at 1 % (and 1 MB),
held while the sale is on. "During" counts the AOF rewrites Redis made while the run's shoppers
arrived, "after" those made once its sale was sold out (the workers look every 2 s here, 30 s by default).

| AOF rewrites | p50 ms | p99 ms | p99.9 ms | rewrites during (each run) | after (each run) | CPU idle % (each run) |
|---|---|---|---|---|---|---|
$(row before "by Redis on its own (its \`auto-aof-rewrite-percentage\`, before)")
$(row now "by the workers between sales (\`auto-aof-rewrite-percentage 0\`, now)")
MD
