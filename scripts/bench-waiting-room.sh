#!/usr/bin/env bash
# `make bench-waiting-room` (and `make bench`): the waiting room at a crowd's scale, on this box.
# One release instance behind nginx with its cache on (scripts/nginx.conf), a crowd of USERS
# shoppers (100,000; the issue asks 250,000, which this box's load tool cannot drive, see CLAIM_MS)
# for STOCK units (40,000) through the room: everyone joins before the start,
# follows the line as the page does, and buys when admitted. Twenty seconds after the start the
# sale is paused for 30 s: everyone still in line waits and polls as told, and that window is
# measured — Redis commands per poll (INFO commandstats, less a quiet window of the same length
# before the crowd), the share of board reads nginx answered from its cache, the instance's and
# nginx's CPU per poll. Then the crowd finishes: 0 oversold, the order kept (rank correlation of
# place and admission), the spread of waits. Last, the line's memory per million waiters (Redis
# MEMORY USAGE of a line of a million). Prints a Markdown section (docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export LEPTOS_OUTPUT_NAME=seckill
USERS=${USERS:-100000}
STOCK=${STOCK:-40000}
LEAD=${LEAD:-60}
# The claim window of the bench's server (SECKILL_QUEUE_CLAIM_MS). On this box the load tool shares
# 2 cores with everything else and its 1,000 requests in flight queue the polls of 250,000
# shoppers for seconds: with 15 s, turns lapse because the generator is late, and the lapsed
# queue again at the back (a run of 250,000 saw 1 M lapses in 10 minutes and did not finish).
CLAIM_MS=${CLAIM_MS:-60000}
PORT=3260
NGINX_PORT=3261
RUN=$(date +%s)
export DATABASE_URL=postgres://seckill@127.0.0.1:55432/seckill_bench_wr
export SECKILL_SECRET=bench-secret-bench-secret-bench-secret SECKILL_REDIS_PREFIX="benchwr:$RUN:" \
  SECKILL_AMQP_PREFIX="benchwr$RUN" SECKILL_QUEUE_EXPIRES_MS=60000
BIN=${BIN:-target/release/server}
LOAD=${LOAD:-target/release/seckill-load}
REDIS_PORT=${SECKILL_REDIS_PORT:-56379}
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -q"
out=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  scripts/services.sh nginx-stop >/dev/null 2>&1 || true
  redis-cli -p "$REDIS_PORT" --scan --pattern "benchwr:$RUN:*" 2>/dev/null \
    | xargs -r -n 1000 redis-cli -p "$REDIS_PORT" unlink >/dev/null 2>&1 || true
}
trap cleanup EXIT

$PSQL -d postgres -c "DROP DATABASE IF EXISTS seckill_bench_wr WITH (FORCE)" -c "CREATE DATABASE seckill_bench_wr"
# Shoppers poll every second near the front: the per-shopper door is opened wide, as for a
# crowd that comes from one load generator.
env SECKILL_ADDR=127.0.0.1:$PORT SECKILL_TRUST_FORWARDED_FOR=1 SECKILL_MAX_IN_FLIGHT=8192 \
  SECKILL_QUEUE_PER_MINUTE=1000000 SECKILL_QUEUE_CLAIM_MS="$CLAIM_MS" RUST_LOG=warn "$BIN" serve >"$out/server.log" 2>&1 &
server=$!
for _ in $(seq 150); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null || { cat "$out/server.log" >&2; exit 1; }
scripts/services.sh nginx-start "$NGINX_PORT" target/site "$PORT" >/dev/null
nginx_pids=$(pgrep -P "$(cat .local/nginx/nginx.pid)" | paste -sd, -)

calls() { redis-cli -p "$REDIS_PORT" info commandstats | sed -n 's/^cmdstat_[^:]*:calls=\([0-9]*\),.*/\1/p' | paste -sd+ - | bc; }
# The quiet window: the instance running, no crowd, as long as the polling window.
quiet_before=$(calls)
sleep 30
quiet=$(( $(calls) - quiet_before ))

"$LOAD" crowd --base-url "http://127.0.0.1:$NGINX_PORT" --users "$USERS" --stock "$STOCK" \
  --concurrency 1000 --lead-secs "$LEAD" --waiting-room on \
  --poll-window-after 20 --poll-window-secs 30 --pids "$server,$nginx_pids" 2>/dev/null | tee "$out/crowd.txt" >&2

# The line's memory: a line of a million waiters as the room keeps it (a sorted set of user ids
# by place, and the drawing's receipts), measured by Redis itself.
python3 - "$RUN" <<'PY' | redis-cli -p "$REDIS_PORT" --pipe >/dev/null
import secrets, sys
run = sys.argv[1]
line, receipts = f"benchwr:{run}:{{q:0}}:line", f"benchwr:{run}:{{q:0}}:receipts"
def cmd(*args):
    parts = [f"${len(a.encode())}\r\n{a}\r\n" for a in map(str, args)]
    return f"*{len(args)}\r\n" + "".join(parts)
out = []
for user in range(1_000_000):
    out.append(cmd("ZADD", line, secrets.randbelow((1 << 50) - (1 << 20)), 10_000_000 + user))
    out.append(cmd("HSET", receipts, 10_000_000 + user, secrets.token_hex(16)))
sys.stdout.write("".join(out))
PY
line_bytes=$(redis-cli -p "$REDIS_PORT" memory usage "benchwr:$RUN:{q:0}:line" samples 0)
receipt_bytes=$(redis-cli -p "$REDIS_PORT" memory usage "benchwr:$RUN:{q:0}:receipts" samples 0)

c="$out/crowd.txt"
get() { sed -n "$1" "$c" | head -1; }
polls=$(get 's/^polling window: \([0-9]*\) polls in \([0-9.]*\) s.*/\1/p')
window_secs=$(get 's/^polling window: [0-9]* polls in \([0-9.]*\) s.*/\1/p')
poll_rate=$(get 's/^polling window: .* s (\([0-9]*\)\/s).*/\1/p')
board=$(get 's/^polling window: .*, \([0-9]*\) of the board.*/\1/p')
cached_pct=$(get 's/^polling window: .* answered by the cache (\([0-9.]*\) %).*/\1/p')
cached=$(get 's/^polling window: .* of the board, \([0-9]*\) answered by the cache.*/\1/p')
cached_all=$( [ "${polls:-0}" -gt 0 ] && echo "scale=1; 100 * $cached / $polls" | bc || echo 0)
redis_calls=$(get 's/^polling window: \([0-9]*\) Redis commands.*/\1/p')
per_poll=$(get 's/^polling window: [0-9]* Redis commands = \([0-9.]*\) per poll.*/\1/p')
less_quiet=$( [ "${polls:-0}" -gt 0 ] && echo "scale=4; ($redis_calls - $quiet) / $polls" | bc || echo "n/a (no polls in the window)")
server_us=$(get "s/^polling window: process $server CPU .* = \([0-9.]*\) µs per poll.*/\1/p")
nginx_us=$(sed -n 's/^polling window: process \([0-9]*\) CPU .* = \([0-9.]*\) µs per poll.*/\1 \2/p' "$c" \
  | awk -v s="$server" '$1 != s {t += $2} END {printf "%.1f", t}')
rho=$(get 's/^order kept: rank correlation of place and admission (Spearman) \([-0-9.]*\) over \([0-9]*\).*/\1/p')
rho_n=$(get 's/^order kept: .* over \([0-9]*\) admitted.*/\1/p')
waits=$(get 's/^wait for admission s: \(.*\)/\1/p')
invariants=$(get 's/^invariants: \(.*\)/\1/p')
per_million=$(( (line_bytes + receipt_bytes) / 1024 / 1024 ))

cat <<MD
## The waiting room at scale (\`scripts/bench-waiting-room.sh\`, \`make bench-waiting-room\`)

$(date -u +%Y-%m-%d), claim window ${CLAIM_MS} ms. One release instance behind nginx (its cache on, \`scripts/nginx.conf\`), one Redis, and the
load tool on the same 2 cores: $USERS shoppers for $STOCK units, all in line before the start, following the line
as the page does (the signed place, then the board through nginx, the line itself at their turn). 20 s after the
start the sale is paused for a ${window_secs} s polling window (everyone still in line waits and polls as told);
then it resumes and the crowd finishes.

| target (issue 33) | figure | reached? |
|---|---|---|
| Redis commands per poll ≤ 0.05 (5.0 before the board) | $per_poll raw, $less_quiet less a quiet window of the same length ($redis_calls commands, $quiet quiet, $polls polls) | $( [ "$(echo "$less_quiet <= 0.05" | bc 2>/dev/null)" = 1 ] && echo yes || echo no ) |
| instance CPU per poll, reported | $server_us µs (nginx: $nginx_us µs) at $poll_rate polls/s | — |
| ≥ 95 % of polls answered by the cache | $cached_all % of all $polls polls; $cached_pct % of the $board board reads (HIT, STALE or UPDATING); the other $((polls - board)) polls asked the instance (\`GET …/queue\`: a place not numbered yet, or a turn come) | $( [ "$(echo "$cached_all >= 95" | bc 2>/dev/null)" = 1 ] && echo yes || echo no ) |
| the crowd through the room, 0 oversold | $invariants | $(echo "$invariants" | grep -q 'OK$' && echo yes || echo no) |
| the order kept: rank correlation of place and admission | Spearman ρ = $rho over $rho_n admitted shoppers | — |
| spread of waits (start → admission) | $waits | — |
| the line's memory per million waiters | $per_million MiB (sorted set $((line_bytes / 1024 / 1024)) MiB + receipts $((receipt_bytes / 1024 / 1024)) MiB, Redis MEMORY USAGE) | — |

The load tool's report:

\`\`\`
$(cat "$c")
\`\`\`
MD
