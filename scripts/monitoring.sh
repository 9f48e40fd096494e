#!/usr/bin/env bash
# Prometheus on the loopback for `make run` (one) and `make cluster` (cluster), scraping every
# process of the shape: the instances (each runs its workers), the engines through the exporters
# Debian packages (PostgreSQL, Redis; RabbitMQ's built-in `rabbitmq_prometheus` plugin), the node,
# and Prometheus itself. The rules of deploy/monitoring/alerts.yml are loaded. docs/operations.md
# "Monitoring" says what is where. Idempotent; `down` ends exactly what `up` started.
#
#   scripts/monitoring.sh up one|cluster [INSTANCE_PORT...]   start (or keep) the exporters and Prometheus
#   scripts/monitoring.sh down one|cluster                    stop that shape's Prometheus and exporters
#
# Settings (environment): SECKILL_PROMETHEUS_PORT (one: 59090, cluster: 19090), the engines' ports
# as scripts/services.sh has them.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
state="$root/.local"
shape=${2:-one}
case "$shape" in
  one) PROM_PORT=${SECKILL_PROMETHEUS_PORT:-59090} ;;
  cluster) PROM_PORT=${SECKILL_PROMETHEUS_PORT:-19090} ;;
  *) echo "usage: $0 up|down one|cluster [INSTANCE_PORT...]" >&2; exit 2 ;;
esac
dir="$state/monitoring-$shape"
PG_PORT=${SECKILL_PG_PORT:-55432}
REDIS_PORT=${SECKILL_REDIS_PORT:-56379}
REDIS_BASE=${SECKILL_REDIS_CLUSTER_PORT_BASE:-17001}
AMQP_PORT=${SECKILL_AMQP_PORT:-55672}
RABBIT_BASE=${SECKILL_RABBIT_CLUSTER_PORT_BASE:-18001}
# The exporters: one per engine and shape (the Redis exporter scrapes any node it is pointed at).
NODE_EXPORTER_PORT=$((PROM_PORT + 10))
PG_EXPORTER_PORT=$((PROM_PORT + 11))
REDIS_EXPORTER_PORT=$((PROM_PORT + 12))

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

packages() {
  local wanted=(prometheus prometheus-alertmanager prometheus-node-exporter prometheus-postgres-exporter prometheus-redis-exporter)
  if ! dpkg -s "${wanted[@]}" >/dev/null 2>&1; then
    apt-get update -qq
    # Debian's packages would start their daemons through init scripts: nothing starts here.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${wanted[@]}" >/dev/null
  fi
}

launch() { # name port command...
  local name=$1 port=$2
  shift 2
  if answers "$port"; then
    # Ours from an earlier `up`: kept. Anything else on the port (another checkout's Prometheus)
    # would be checked in our place: refused.
    if [ -f "$dir/$name.pid" ] && kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null; then return; fi
    echo "monitoring: port $port ($name) is taken by a process this shape did not start" >&2
    exit 1
  fi
  setsid "$@" >>"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

wait_answering() { # name port
  local deadline=$((SECONDS + 60))
  until answers "$2"; do
    ((SECONDS < deadline)) || { echo "$1 not answering on $2; see $dir/$1.log" >&2; tail -5 "$dir/$1.log" >&2; return 1; }
    sleep 0.2
  done
}

# The engines' own ports for the scrape: the Redis nodes (by the one exporter's /scrape?target=)
# and RabbitMQ's plugin listeners (scripts/services.sh enables it on every node).
redis_nodes() {
  if [ "$shape" = cluster ]; then
    for i in 0 1 2 3 4 5; do printf '"redis://127.0.0.1:%s", ' $((REDIS_BASE + i)); done
  else
    printf '"redis://127.0.0.1:%s", ' "$REDIS_PORT"
  fi
}
rabbit_targets() {
  if [ "$shape" = cluster ]; then
    for n in 1 2 3; do printf '"127.0.0.1:%s", ' $((RABBIT_BASE + 19 + n)); done
  else
    printf '"127.0.0.1:%s", ' $((AMQP_PORT + 20))
  fi
}
instance_targets() {
  local port
  for port in "$@"; do printf '"127.0.0.1:%s", ' "$port"; done
}

write_config() { # instance ports...
  [ -f "$state/metrics-token" ] || (head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$state/metrics-token")
  cat >"$dir/prometheus.yml" <<EOF
# Written by scripts/monitoring.sh for the $shape shape; the rules are the repository's.
global:
  scrape_interval: 2s
  evaluation_interval: 2s
  external_labels:
    shape: $shape
rule_files:
  - $root/deploy/monitoring/alerts.yml
scrape_configs:
  - job_name: seckill
    authorization:
      type: Bearer
      credentials_file: $state/metrics-token
    static_configs:
      - targets: [$(instance_targets "$@")]
  - job_name: postgres
    static_configs:
      - targets: ["127.0.0.1:$PG_EXPORTER_PORT"]
  - job_name: redis
    metrics_path: /scrape
    static_configs:
      - targets: [$(redis_nodes)]
    relabel_configs:
      - source_labels: [__address__]
        target_label: __param_target
      - source_labels: [__param_target]
        target_label: instance
      - target_label: __address__
        replacement: 127.0.0.1:$REDIS_EXPORTER_PORT
  - job_name: rabbitmq
    static_configs:
      - targets: [$(rabbit_targets)]
  - job_name: node
    static_configs:
      - targets: ["127.0.0.1:$NODE_EXPORTER_PORT"]
  - job_name: prometheus
    static_configs:
      - targets: ["127.0.0.1:$PROM_PORT"]
EOF
  sed -i 's/, \]/]/' "$dir/prometheus.yml"
  promtool check config "$dir/prometheus.yml" >/dev/null
}

up() {
  (($# > 0)) || { echo "monitoring up $shape: name the instances' ports" >&2; exit 2; }
  mkdir -p "$dir/data"
  packages
  write_config "$@"
  launch node-exporter "$NODE_EXPORTER_PORT" prometheus-node-exporter \
    --web.listen-address="127.0.0.1:$NODE_EXPORTER_PORT" --collector.disable-defaults \
    --collector.cpu --collector.meminfo --collector.loadavg --collector.filesystem --collector.netdev --collector.stat
  DATA_SOURCE_NAME="postgresql://seckill@127.0.0.1:$PG_PORT/postgres?sslmode=disable" \
    launch postgres-exporter "$PG_EXPORTER_PORT" prometheus-postgres-exporter \
    --web.listen-address="127.0.0.1:$PG_EXPORTER_PORT"
  launch redis-exporter "$REDIS_EXPORTER_PORT" prometheus-redis-exporter \
    -web.listen-address "127.0.0.1:$REDIS_EXPORTER_PORT" -redis.addr ""
  launch prometheus "$PROM_PORT" prometheus --config.file="$dir/prometheus.yml" \
    --storage.tsdb.path="$dir/data" --storage.tsdb.retention.time=2d \
    --web.listen-address="127.0.0.1:$PROM_PORT" --web.enable-lifecycle
  for name in node-exporter:$NODE_EXPORTER_PORT postgres-exporter:$PG_EXPORTER_PORT redis-exporter:$REDIS_EXPORTER_PORT prometheus:$PROM_PORT; do
    wait_answering "${name%%:*}" "${name##*:}"
  done
  # Prometheus was already running: it reads the config written now.
  curl -fsS -X POST "http://127.0.0.1:$PROM_PORT/-/reload" >/dev/null
  echo "Prometheus: http://127.0.0.1:$PROM_PORT (targets: /targets, alerts: /alerts)"
}

down() {
  local name
  for name in prometheus redis-exporter postgres-exporter node-exporter; do
    "$root/scripts/services.sh" stop-pidfile "$dir/$name.pid"
  done
}

case "${1:-}" in
  up) shift 2; up "$@" ;;
  down) down ;;
  *) echo "usage: $0 up|down one|cluster [INSTANCE_PORT...]" >&2; exit 2 ;;
esac
