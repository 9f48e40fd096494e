#!/usr/bin/env bash
# `make cluster`: the many-box shape on loopback. nginx on one port in front of three `serve`
# instances, a Redis Cluster of 3 masters + 3 replicas, a RabbitMQ cluster of 3 nodes, and the
# PostgreSQL of `make run`, and Prometheus scraping them all (scripts/monitoring.sh). Idempotent: what already runs is left as it is. `down` ends exactly
# what `up` started (PostgreSQL stays: it is `make run`'s).
#
# Settings (environment), with the defaults of `make cluster`:
#   SECKILL_CLUSTER_PROFILE   release | debug                                        release
#   SECKILL_CLUSTER_BUILT     1: use the build as it is (make test built it already)  unset
#   SECKILL_CLUSTER_PORT      nginx's port; instances listen on the three after it  3400
#   SECKILL_CLUSTER_DATABASE  database name (created if missing)                    seckill_cluster
#   SECKILL_ADMIN_USER / SECKILL_ADMIN_PASSWORD  the merchant created at start-up   demo / .local/demo-password
#   SECKILL_RESERVATION_QUEUES  reservations queues, their leaders spread over the nodes 3
#   SECKILL_SECRET, SECKILL_REDIS_PREFIX, SECKILL_TRUST_FORWARDED_FOR, SECKILL_DEMO pass through.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
state="$root/.local"
dir="$state/cluster"
services="$root/scripts/services.sh"
PROFILE=${SECKILL_CLUSTER_PROFILE:-release}
PORT=${SECKILL_CLUSTER_PORT:-3400}
DATABASE=${SECKILL_CLUSTER_DATABASE:-seckill_cluster}
PG="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p ${SECKILL_PG_PORT:-55432} -U seckill -v ON_ERROR_STOP=1 -q"
REDIS_BASE=${SECKILL_REDIS_CLUSTER_PORT_BASE:-17001}
RABBIT_BASE=${SECKILL_RABBIT_CLUSTER_PORT_BASE:-18001}

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
urls() { # scheme suffix base count
  local i out=""
  for ((i = 0; i < $4; i++)); do out+="$1127.0.0.1:$(($3 + i))$2,"; done
  echo "${out%,}"
}

instance_port() { echo $((PORT + $1)); }

start_instance() { # number
  local n=$1 port pidfile="$dir/instance-$1.pid"
  port=$(instance_port "$n")
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then return; fi
  # Only the first instance creates the merchant, the operator and the demo sale.
  local extra=()
  if ((n == 1)); then
    extra=(SECKILL_ADMIN_USER="$ADMIN_USER" SECKILL_ADMIN_PASSWORD="$ADMIN_PASSWORD" SECKILL_DEMO="${SECKILL_DEMO:-1}"
      SECKILL_OPERATOR_USER="$OPERATOR_USER" SECKILL_OPERATOR_PASSWORD="$OPERATOR_PASSWORD")
  fi
  env SECKILL_ADDR="127.0.0.1:$port" \
    DATABASE_URL="postgres://seckill@127.0.0.1:${SECKILL_PG_PORT:-55432}/$DATABASE" \
    REDIS_CLUSTER_URLS="$(urls redis:// "" "$REDIS_BASE" 6)" \
    AMQP_URL="$(urls amqp://guest:guest@ /%2f "$RABBIT_BASE" 3)" \
    SECKILL_SECRET="$SECRET" \
    SECKILL_METRICS_TOKEN="$METRICS_TOKEN" \
    SECKILL_TRUST_FORWARDED_FOR="${SECKILL_TRUST_FORWARDED_FOR:-1}" \
    SECKILL_RESERVATION_QUEUES="${SECKILL_RESERVATION_QUEUES:-3}" \
    SECKILL_ASSET_BASE_URL="http://127.0.0.1:$PORT" \
    LEPTOS_SITE_ROOT="$root/target/site" \
    RUST_LOG="${RUST_LOG:-info}" \
    "${extra[@]}" \
    setsid "$root/target/$PROFILE/server" serve >>"$dir/instance-$n.log" 2>&1 </dev/null &
  echo $! >"$pidfile"
}

wait_ready() { # number
  local port deadline=$((SECONDS + 120))
  port=$(instance_port "$1")
  until curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; do
    if ! kill -0 "$(cat "$dir/instance-$1.pid")" 2>/dev/null; then
      echo "instance $1 ended; see $dir/instance-$1.log" >&2; tail -5 "$dir/instance-$1.log" >&2; return 1
    fi
    ((SECONDS < deadline)) || { echo "instance $1 not ready within 120 s; see $dir/instance-$1.log" >&2; return 1; }
    sleep 0.2
  done
}

up() {
  mkdir -p "$dir"
  if ! dpkg -s nginx libnginx-mod-http-brotli-static >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx libnginx-mod-http-brotli-static >/dev/null
  fi
  if [ "$PROFILE" = release ] && [ -z "${SECKILL_CLUSTER_BUILT:-}" ]; then
    (cd "$root" && node scripts/site.mjs --release && scripts/precompress.sh target/site/pkg)
  fi
  [ -x "$root/target/$PROFILE/server" ] || { echo "no $PROFILE build of the server" >&2; exit 1; }
  "$services" start >/dev/null
  "$services" redis-cluster
  "$services" rabbitmq-cluster
  if ! $PG -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'" | grep -q 1; then
    $PG -d postgres -c "CREATE DATABASE \"$DATABASE\""
  fi
  [ -f "$state/secret" ] || (head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$state/secret")
  [ -f "$state/demo-password" ] || (head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$state/demo-password")
  SECRET=${SECKILL_SECRET:-$(cat "$state/secret")}
  ADMIN_USER=${SECKILL_ADMIN_USER:-demo}
  ADMIN_PASSWORD=${SECKILL_ADMIN_PASSWORD:-$(cat "$state/demo-password")}
  [ -f "$state/operator-password" ] || (head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$state/operator-password")
  OPERATOR_USER=${SECKILL_OPERATOR_USER:-operator}
  OPERATOR_PASSWORD=${SECKILL_OPERATOR_PASSWORD:-$(cat "$state/operator-password")}
  [ -f "$state/metrics-token" ] || (head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$state/metrics-token")
  METRICS_TOKEN=$(cat "$state/metrics-token")
  start_instance 1
  wait_ready 1
  for n in 2 3; do start_instance "$n"; done
  for n in 2 3; do wait_ready "$n"; done
  "$services" nginx-start "$PORT" "$root/target/site" "$(instance_port 1)" "$(instance_port 2)" "$(instance_port 3)"
  "$root/scripts/monitoring.sh" up cluster "$(instance_port 1)" "$(instance_port 2)" "$(instance_port 3)"
  echo "Merchant: username '$ADMIN_USER', password '$ADMIN_PASSWORD'"
  echo "Operator: username '$OPERATOR_USER', password '$OPERATOR_PASSWORD'"
  echo "Open http://127.0.0.1:$PORT  (nginx → instances on $(instance_port 1)-$(instance_port 3), $PROFILE build)"
}

stop_instance() { "$services" stop-pidfile "$dir/instance-$1.pid"; } # number

down() {
  for n in 1 2 3; do stop_instance "$n"; done
  "$root/scripts/monitoring.sh" down cluster
  "$services" nginx-stop
  "$services" rabbitmq-cluster-stop
  "$services" redis-cluster-stop
  echo "cluster: stopped"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
