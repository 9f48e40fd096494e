#!/usr/bin/env bash
# The cluster part of `make bench` (called by scripts/bench.sh, which passes BIN, SECRET, OUT):
# the sold-out and in-stock paths through nginx with 1, 2 and 3 instances on the Redis Cluster and
# the RabbitMQ cluster, 4 stock shards (and 1 with 3 instances); the CPU time each process spends
# per buy during the 3-instance in-stock run, and from it the capacity model. Writes
# $OUT/cluster.md, which bench.sh puts into docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BIN:?}" "${SECRET:?}" "${OUT:?}"
NGINX_PORT=3500
DB=seckill_bench_cluster
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -q"
REDIS_BASE=${SECKILL_REDIS_CLUSTER_PORT_BASE:-17001}
RABBIT_BASE=${SECKILL_RABBIT_CLUSTER_PORT_BASE:-18001}
export DATABASE_URL=postgres://seckill@127.0.0.1:55432/$DB
export REDIS_CLUSTER_URLS=$(for i in 0 1 2 3 4 5; do printf 'redis://127.0.0.1:%s,' $((REDIS_BASE + i)); done | sed 's/,$//')
export AMQP_URL=$(for i in 0 1 2; do printf 'amqp://guest:guest@127.0.0.1:%s/%%2f,' $((RABBIT_BASE + i)); done | sed 's/,$//')
export SECKILL_SECRET=$SECRET SECKILL_REDIS_PREFIX="benchc:$(date +%s):"
TICK=$(getconf CLK_TCK)

scripts/services.sh redis-cluster >/dev/null
scripts/services.sh rabbitmq-cluster >/dev/null
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"

instances=()
start_instances() { # count
  local i port ports=()
  for ((i = 1; i <= $1; i++)); do
    port=$((NGINX_PORT + i))
    env SECKILL_ADDR=127.0.0.1:$port SECKILL_TRUST_FORWARDED_FOR=1 SECKILL_MAX_IN_FLIGHT=8192 SECKILL_RESERVATION_QUEUES=3 RUST_LOG=warn \
      "$BIN" serve >"$OUT/cluster-instance-$i.log" 2>&1 &
    instances+=("$!")
    ports+=("$port")
  done
  for port in "${ports[@]}"; do
    for _ in $(seq 150); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { echo "instance on $port not ready" >&2; exit 1; }
  done
  scripts/services.sh nginx-start "$NGINX_PORT" target/site "${ports[@]}"
}
stop_instances() {
  local p
  for p in "${instances[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${instances[@]}"; do wait "$p" 2>/dev/null || true; done
  instances=()
  scripts/services.sh nginx-stop >/dev/null
}
trap 'stop_instances' EXIT

crowd() { "${LOAD:-target/release/seckill-load}" crowd --base-url "http://127.0.0.1:$NGINX_PORT" "$@" 2>/dev/null; }
shoppers_of() { sed -n 's/.* = \([0-9]*\) shoppers\/s/\1/p' "$1"; }
p99_of() { sed -n 's/.*p99 \([0-9.]*\) .*/\1/p' "$1"; }

# CPU ticks (user + system) of each kind of process, as "server redis rabbitmq postgres nginx".
ticks_of() { local t=0 p; for p in "$@"; do [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
cpu_snapshot() {
  local redis=() rabbit=() nginx=() port n master
  for port in $(seq "$REDIS_BASE" $((REDIS_BASE + 5))); do redis+=("$(cat ".local/redis-cluster/$port/redis.pid")"); done
  for n in 1 2 3; do rabbit+=("$(cat ".local/rabbitmq-cluster/$n/rabbitmq.pid")"); done
  master=$(cat .local/nginx/nginx.pid)
  nginx=("$master" $(pgrep -P "$master" || true))
  echo "$(ticks_of "${instances[@]}") $(ticks_of "${redis[@]}") $(ticks_of "${rabbit[@]}") $(ticks_of $(pgrep -u postgres)) $(ticks_of "${nginx[@]}")"
}

# A sold-out sale and a shopper of it who holds no unit, signed as bench.sh does.
soldout_setup() {
  crowd --users 2 --stock 1 --concurrency 2 --lead-secs 1 >"$OUT/cluster-soldout-setup.txt" || true
  ACT=$(sed -n 's/^activity \([0-9]*\):.*/\1/p' "$OUT/cluster-soldout-setup.txt")
  local user
  user=$($PSQL -d $DB -tAc "SELECT max(u.id) FROM users u WHERE u.username LIKE 'crowd\_%' AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.user_id = u.id AND o.activity_id = $ACT)")
  SECKILL_SECRET="$SECRET" "${LOAD:-target/release/seckill-load}" sign --user "$user" --activity "$ACT" \
    --wrk-script "$OUT/cluster-soldout.lua" >/dev/null
}

rows=""
for n in 1 2 3; do
  echo "== through nginx: $n instance(s)"
  start_instances "$n"
  soldout_setup
  soldout_before=$(cpu_snapshot)
  wrk -t1 -c1000 -d10s --latency -s "$OUT/cluster-soldout.lua" "http://127.0.0.1:$NGINX_PORT/api/activities/$ACT/buy" >"$OUT/cluster-soldout-$n.txt"
  soldout_after=$(cpu_snapshot)
  soldout=$(grep Requests/sec "$OUT/cluster-soldout-$n.txt" | awk '{print int($2)}')
  soldout_p99=$(awk '$1 == "99%" {print $2}' "$OUT/cluster-soldout-$n.txt")
  echo "   sold-out: $soldout req/s, p99 $soldout_p99"
  before=$(cpu_snapshot)
  crowd --users 20000 --stock 20000 --concurrency 1000 --lead-secs 2 --stock-shards 4 | tee "$OUT/cluster-instock-$n.txt"
  after=$(cpu_snapshot)
  rows+="| $n | $soldout req/s (p99 $soldout_p99) | $(shoppers_of "$OUT/cluster-instock-$n.txt") shoppers/s (p99 $(p99_of "$OUT/cluster-instock-$n.txt") ms) |"$'\n'
  if ((n == 3)); then
    CPU_BEFORE=$before CPU_AFTER=$after SOLDOUT_BEFORE=$soldout_before SOLDOUT_AFTER=$soldout_after
    soldout_requests=$(awk '/requests in/ {print $1}' "$OUT/cluster-soldout-$n.txt")
    crowd --users 20000 --stock 20000 --concurrency 1000 --lead-secs 2 --stock-shards 1 | tee "$OUT/cluster-instock-3-one-shard.txt"
  fi
  stop_instances
done
one_shard="$(shoppers_of "$OUT/cluster-instock-3-one-shard.txt") shoppers/s (p99 $(p99_of "$OUT/cluster-instock-3-one-shard.txt") ms)"

# CPU per shopper (GET path + POST buy, one unit sold, its order persisted) by kind of process.
read -r -a b <<<"$CPU_BEFORE"
read -r -a a <<<"$CPU_AFTER"
read -r -a sb <<<"$SOLDOUT_BEFORE"
read -r -a sa <<<"$SOLDOUT_AFTER"
sold=$(sed -n 's/^invariants: sold \([0-9]*\) .*/\1/p' "$OUT/cluster-instock-3.txt")
names=(server redis rabbitmq postgresql nginx)
model=""
total=0
for i in 0 1 2 3 4; do
  ms=$(printf '%.3f' "$(echo "scale=6; ($((a[i] - b[i])) * 1000 / $TICK) / $sold" | bc)")
  sold_out_ms=$(printf '%.4f' "$(echo "scale=6; ($((sa[i] - sb[i])) * 1000 / $TICK) / $soldout_requests" | bc)")
  total=$(echo "$total + $ms" | bc)
  # Cores for 100,000 and 1,000,000 such buys per second, and machines of 16 cores at 70 %.
  c100k=$(echo "scale=1; 100000 * $ms / 1000" | bc)
  c1m=$(echo "scale=1; 1000000 * $ms / 1000" | bc)
  m100k=$(echo "($c100k / 11.2) + 1" | bc)
  m1m=$(echo "($c1m / 11.2) + 1" | bc)
  c1m_soldout=$(echo "scale=1; 1000000 * $sold_out_ms / 1000" | bc)
  model+="| ${names[$i]} | $ms | $c100k | $m100k | $c1m | $m1m | $sold_out_ms | $c1m_soldout |"$'\n'
done

cat >"$OUT/cluster.md" <<MD
## The cluster shape through nginx (\`make cluster\`'s shape, same machine)

nginx in front of 1, 2 and 3 release instances (each with relay and persister), the Redis Cluster
(3 masters + 3 replicas, each \`202\` said once on a replica) and the RabbitMQ cluster (3 nodes,
quorum queues), all on these $(nproc) cores with the load tool. Sold-out path: wrk, 1,000
connections, 10 s. In-stock: 20,000 shoppers for 20,000 units over 4 stock shards, 1,000 in flight.

| instances | sold-out path | in-stock path, 4 shards |
|---:|---|---|
${rows}
With 3 instances and 1 stock shard: $one_shard.

On one box more instances cannot add cores: the figures show what nginx and the extra processes
cost, not scaling. Scaling comes from machines; the model below says how many.

### Capacity model

CPU time (user + system, from \`/proc/PID/stat\`) each kind of process spent during the 3-instance
in-stock run, divided by the units sold ($sold; each one a shopper's GET path + POST buy, the
reservation relayed through RabbitMQ and persisted in PostgreSQL). The load tool is not counted.
From it: cores needed for 100,000 and 1,000,000 such buys per second, and machines of 16 cores
run at 70 % (11.2 cores of work each). Every sale sells at most its stock, so the in-stock rate
is also bounded by the stock over the seconds it lasts; attempts after the sell-out take the
sold-out path, answered in-process by the instances (server and nginx only), which the sold-out
row above measures.

| process | CPU ms per buy | cores at 100k buys/s | machines | cores at 1M buys/s | machines | CPU ms per sold-out attempt | cores at 1M sold-out attempts/s |
|---|---:|---:|---:|---:|---:|---:|---:|
${model}| all | $total | | | | | | |

The sold-out columns come from the 3-instance wrk run ($soldout_requests requests): the instances
answer it from their in-process flag, so Redis, RabbitMQ and PostgreSQL do (next to) nothing.

Read with care: measured on one 2-core VM where every process competes for the same cores, in a
debug-free release build; Redis is single-threaded, so its cores mean masters (one per core, the
sale split into at least that many stock shards); RabbitMQ and PostgreSQL costs scale with orders,
not attempts.
MD
echo "cluster part written"
