#!/usr/bin/env bash
# Starts (or stops) the PostgreSQL, Redis and RabbitMQ this project uses for local runs and tests.
# Each service is started only when nothing already answers on its configured port; everything it
# writes stays under .local/ (git-ignored), and `stop` ends exactly the processes started here.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
state="$root/.local"
PG_PORT=${SECKILL_PG_PORT:-55432}
REDIS_PORT=${SECKILL_REDIS_PORT:-56379}
AMQP_PORT=${SECKILL_AMQP_PORT:-55672}
PG_BIN=/usr/lib/postgresql/15/bin

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # name port seconds
  local deadline=$((SECONDS + $3))
  until answers "$2"; do
    if ((SECONDS > deadline)); then echo "$1 did not answer on port $2 within $3 s" >&2; return 1; fi
    sleep 0.2
  done
}

# A Redis answers on its port while it still loads its data (`-LOADING` to every command):
# ready is when PING says PONG. A large append-only file (after `make bench`) takes minutes.
wait_for_redis() { # port seconds
  local deadline=$((SECONDS + $2))
  until [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ]; do
    if ((SECONDS > deadline)); then echo "redis on port $1 still loading after $2 s" >&2; return 1; fi
    sleep 0.5
  done
}

start_postgres() {
  if answers "$PG_PORT"; then echo "postgres: already answering on $PG_PORT"; return; fi
  local data="$state/postgres"
  mkdir -p "$data"
  chown postgres:postgres "$data"
  chmod 700 "$data"
  if [ ! -f "$data/PG_VERSION" ]; then
    runuser -u postgres -- "$PG_BIN/initdb" -D "$data" -U seckill --auth=trust -E UTF8 --locale=C.UTF-8 >"$state/postgres-initdb.log"
  fi
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
    -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories='$data' -c max_connections=400 -c fsync=on" start >/dev/null
  echo "$data/postmaster.pid" >"$state/postgres.started"
  wait_for postgres "$PG_PORT" 30
  if ! "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U seckill -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='seckill'" | grep -q 1; then
    "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U seckill seckill
  fi
  echo "postgres: started on 127.0.0.1:$PG_PORT"
}

start_redis() { # [data folder: the one of a Redis that redis-kill ended]
  if answers "$REDIS_PORT"; then echo "redis: already answering on $REDIS_PORT"; wait_for_redis "$REDIS_PORT" 600; return; fi
  local dir="${1:-$state/redis}"
  mkdir -p "$dir"
  # AOF with fsync every second, rewritten by the workers between sales (not by Redis on its own),
  # and noeviction: see docs/operations.md "Redis persistence".
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$dir" \
    --appendonly yes --appendfsync everysec --auto-aof-rewrite-percentage 0 --maxmemory-policy noeviction \
    --save "" --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
  wait_for redis "$REDIS_PORT" 30
  wait_for_redis "$REDIS_PORT" 600
  [ "$dir" = "$state/redis" ] && echo "$dir/redis.pid" >"$state/redis.started"
  echo "redis: started on 127.0.0.1:$REDIS_PORT"
}

# PostgreSQL, Redis and RabbitMQ (its AMQP and distribution ports) listen inside the kernel's
# ephemeral range: an outgoing connection handed one of those ports as its own would keep a
# service stopped by a fault test from listening again (`eaddrinuse`). They are taken out of the
# range (best effort: root on Linux).
reserve_ports() {
  local file=/proc/sys/net/ipv4/ip_local_reserved_ports current
  [ -w "$file" ] || return 0
  current=$(cat "$file")
  echo "${current:+$current,}55432,55672,55673,56379" >"$file" 2>/dev/null || true
}

# A Redis Cluster of 3 masters + 3 replicas on loopback (for the many-box shape and its tests;
# `start` does not need it). A node's cluster bus listens on its port + 10000; both stay below the
# kernel's ephemeral ports (32768–60999 on Debian), where an outgoing connection (even one in
# TIME-WAIT) can hold the port a restarted node needs. Nodes keep their data and nodes.conf under .local/redis-cluster/PORT: started
# again, they form the same cluster. Ready means every slot served and every replica in sync
# (a master killed before its replica synced is never replaced).
CLUSTER_BASE=${SECKILL_REDIS_CLUSTER_PORT_BASE:-17001}
cluster_ports() { for i in 0 1 2 3 4 5; do echo $((CLUSTER_BASE + i)); done; }

# Every node says the cluster is ok, and every replica's link to its master is up. The nodes are
# HOST:PORT (this machine's cluster by default; `make hosts` names its own, with REDISCLI_AUTH).
cluster_ready() { # [HOST:PORT…]
  local nodes=("$@") node port info
  ((${#nodes[@]})) || for port in $(cluster_ports); do nodes+=("127.0.0.1:$port"); done
  for node in "${nodes[@]}"; do
    info=$(redis-cli -h "${node%:*}" -p "${node##*:}" cluster info 2>/dev/null) || return 1
    grep -q '^cluster_state:ok' <<<"$info" || return 1
    info=$(redis-cli -h "${node%:*}" -p "${node##*:}" info replication 2>/dev/null) || return 1
    if grep -q '^role:slave' <<<"$info"; then
      grep -q '^master_link_status:up' <<<"$info" || return 1
    fi
  done
}

start_redis_cluster() {
  local port dir nodes=() fresh=0
  for port in $(cluster_ports); do
    nodes+=("127.0.0.1:$port")
    if answers "$port"; then continue; fi
    dir="$state/redis-cluster/$port"
    mkdir -p "$dir"
    [ -f "$dir/nodes.conf" ] || fresh=1
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --cluster-enabled yes \
      --cluster-config-file "$dir/nodes.conf" --cluster-node-timeout 1000 --cluster-require-full-coverage no --repl-diskless-sync-delay 0 \
      --appendonly yes --appendfsync everysec --auto-aof-rewrite-percentage 0 --maxmemory-policy noeviction \
      --save "" --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
    echo "$port" >>"$state/redis-cluster.started"
  done
  for port in $(cluster_ports); do wait_for "redis cluster node" "$port" 30; wait_for_redis "$port" 600; done
  if ((fresh)) && ! redis-cli -h 127.0.0.1 -p "$CLUSTER_BASE" cluster info | grep -q '^cluster_state:ok'; then
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$state/redis-cluster-create.log"
  fi
  local deadline=$((SECONDS + 60))
  until cluster_ready; do
    if ((SECONDS > deadline)); then echo "redis cluster: not ready within 60 s (see $state/redis-cluster/)" >&2; return 1; fi
    sleep 0.5
  done
  echo "redis cluster: 3 masters + 3 replicas ready on 127.0.0.1:$CLUSTER_BASE-$((CLUSTER_BASE + 5))"
}

stop_redis_cluster() {
  [ -f "$state/redis-cluster.started" ] || return 0
  local port pid
  for port in $(sort -u "$state/redis-cluster.started"); do
    pid=$(cat "$state/redis-cluster/$port/redis.pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  rm -f "$state/redis-cluster.started"; echo "redis cluster: stopped"
}

# The node listens on loopback only (AMQP, epmd and Erlang distribution), so a fixed cookie is
# safe, and it lets `rabbitmqctl` from any checkout of the project reach the node.
RABBITMQ_COOKIE=seckill-local-rabbitmq-node

rabbit_env() {
  export HOME="$state/rabbitmq"
  mkdir -p "$HOME"
  if [ "$(cat "$HOME/.erlang.cookie" 2>/dev/null)" != "$RABBITMQ_COOKIE" ]; then
    rm -f "$HOME/.erlang.cookie"
    printf '%s' "$RABBITMQ_COOKIE" >"$HOME/.erlang.cookie"
    chmod 400 "$HOME/.erlang.cookie"
  fi
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  export RABBITMQ_NODENAME="seckill@localhost"
  export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
  export RABBITMQ_NODE_PORT="$AMQP_PORT"
  export RABBITMQ_DIST_PORT=$((AMQP_PORT + 1))
  export RABBITMQ_MNESIA_BASE="$state/rabbitmq/mnesia"
  export RABBITMQ_LOG_BASE="$state/rabbitmq/log"
  export RABBITMQ_PID_FILE="$state/rabbitmq/rabbitmq.pid"
  export RABBITMQ_CONFIG_FILE="$state/rabbitmq/rabbitmq"
  export RABBITMQ_ENABLED_PLUGINS_FILE="$state/rabbitmq/enabled_plugins"
  export ERL_EPMD_ADDRESS=127.0.0.1
}

# A node's configuration: AMQP on its port, and the built-in Prometheus plugin's metrics on a
# port of their own (scripts/monitoring.sh scrapes it), both on loopback only. guest may connect
# over loopback only (the default).
rabbit_config() { # amqp-port prometheus-port
  echo "[rabbitmq_prometheus]." >"$RABBITMQ_ENABLED_PLUGINS_FILE"
  printf 'loopback_users.guest = true\nlisteners.tcp.default = %s\nprometheus.tcp.ip = 127.0.0.1\nprometheus.tcp.port = %s\n' "$1" "$2" >"$RABBITMQ_CONFIG_FILE.conf"
}

start_rabbitmq() {
  if answers "$AMQP_PORT"; then echo "rabbitmq: already answering on $AMQP_PORT"; return; fi
  mkdir -p "$state/rabbitmq/log" "$state/rabbitmq/mnesia"
  rabbit_env
  rabbit_config "$AMQP_PORT" $((AMQP_PORT + 20))
  /usr/lib/rabbitmq/bin/rabbitmq-server -detached >/dev/null 2>&1
  wait_for rabbitmq "$AMQP_PORT" 120
  /usr/lib/rabbitmq/bin/rabbitmqctl -q await_startup >/dev/null
  echo "$RABBITMQ_PID_FILE" >"$state/rabbitmq.started"
  echo "rabbitmq: started on 127.0.0.1:$AMQP_PORT"
}

# A RabbitMQ cluster of three nodes on loopback (for the many-box shape and its tests): nodes
# seckill1..3@localhost, AMQP on RABBIT_CLUSTER_BASE+0..2, Erlang distribution on +10..12, data
# under .local/rabbitmq-cluster/N. Nodes 2 and 3 join node 1 once; started again, a node rejoins
# the cluster it knew. Quorum queues declared on it get a member on every node.
RABBIT_CLUSTER_BASE=${SECKILL_RABBIT_CLUSTER_PORT_BASE:-18001}

rabbit_node_env() { # node number 1..3
  rabbit_env
  local dir="$state/rabbitmq-cluster/$1"
  mkdir -p "$dir/log" "$dir/mnesia"
  export RABBITMQ_NODENAME="seckill$1@localhost"
  export RABBITMQ_NODE_PORT=$((RABBIT_CLUSTER_BASE + $1 - 1))
  export RABBITMQ_DIST_PORT=$((RABBIT_CLUSTER_BASE + 9 + $1))
  export RABBITMQ_MNESIA_BASE="$dir/mnesia"
  export RABBITMQ_LOG_BASE="$dir/log"
  export RABBITMQ_PID_FILE="$dir/rabbitmq.pid"
  export RABBITMQ_CONFIG_FILE="$dir/rabbitmq"
  export RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins"
  rabbit_config "$RABBITMQ_NODE_PORT" $((RABBIT_CLUSTER_BASE + 19 + $1))
}

# Is an Erlang VM of this name registered with epmd (booting, serving, or still stopping)? A
# second `rabbitmq-server -detached` of a name in use exits 0 and logs nothing anywhere, so a
# launch must not be tried over a VM that is still there.
rabbit_vm_up() { # node name before the @
  epmd -names 2>/dev/null | grep -q "^name $1 at port "
}

rabbit_node_launch() { # node number; returns at once
  answers $((RABBIT_CLUSTER_BASE + $1 - 1)) && return
  rabbit_vm_up "seckill$1" && return
  ( rabbit_node_env "$1"
    echo "$(date -u +%FT%TZ) launch" >>"$state/rabbitmq-cluster/$1/launch.log"
    /usr/lib/rabbitmq/bin/rabbitmq-server -detached >>"$state/rabbitmq-cluster/$1/launch.log" 2>&1 )
}

rabbit_node_start() { # node number
  local port=$((RABBIT_CLUSTER_BASE + $1 - 1))
  if answers "$port"; then return; fi
  rabbit_node_launch "$1"
  rabbit_node_ready "$1"
}

# What a node that did not come up left behind, for the log of whatever waited for it.
rabbit_node_report() { # node number
  echo "rabbitmq node $1: epmd knows: $(epmd -names 2>/dev/null | grep '^name' | tr '\n' ';')" >&2
  tail -n 5 "$state/rabbitmq-cluster/$1/launch.log" 2>/dev/null | sed "s/^/rabbitmq node $1 launch: /" >&2
  tail -n 25 "$state/rabbitmq-cluster/$1/log/seckill$1@localhost.log" 2>/dev/null |
    cut -c1-300 | sed "s/^/rabbitmq node $1 log: /" >&2
}

rabbit_node_ready() { # node number: waits until it serves, and records it as started
  local port=$((RABBIT_CLUSTER_BASE + $1 - 1)) deadline=$((SECONDS + 120)) gone=0 launches=1
  # A launch that found the name still held (a VM of the node still on its way out) ends at once
  # and silently: the node is launched again once no VM holds its name, at most twice more.
  until answers "$port"; do
    if rabbit_vm_up "seckill$1"; then gone=0; else gone=$((gone + 1)); fi
    if ((gone >= 50 && launches < 3)); then
      echo "rabbitmq node $1: no VM of its name after its launch; launching it again" >&2
      rabbit_node_launch "$1"; launches=$((launches + 1)); gone=0
    fi
    if ((SECONDS > deadline)); then
      echo "rabbitmq node $1 did not answer on port $port within 120 s" >&2
      rabbit_node_report "$1"; return 1
    fi
    sleep 0.2
  done
  ( rabbit_node_env "$1"
    local tries=0
    until /usr/lib/rabbitmq/bin/rabbitmqctl -q await_startup >/dev/null 2>&1; do
      tries=$((tries + 1)); ((tries < 30)) || { echo "rabbitmq node $1 did not start" >&2; return 1; }
      sleep 1
    done )
  grep -qx "$1" "$state/rabbitmq-cluster.started" 2>/dev/null || echo "$1" >>"$state/rabbitmq-cluster.started"
}

start_rabbitmq_cluster() {
  local n
  # All three launched before any is waited for: after an unclean stop (the machine restarted)
  # a node waits at boot for the peers it last saw running, so starting them one after the
  # other would wait forever on the first.
  for n in 1 2 3; do rabbit_node_launch "$n"; done
  for n in 1 2 3; do rabbit_node_ready "$n"; done
  for n in 2 3; do
    ( rabbit_node_env "$n"
      if ! /usr/lib/rabbitmq/bin/rabbitmqctl -q cluster_status --formatter json 2>/dev/null | grep -q 'seckill1@localhost'; then
        /usr/lib/rabbitmq/bin/rabbitmqctl -q stop_app >/dev/null
        /usr/lib/rabbitmq/bin/rabbitmqctl -q join_cluster seckill1@localhost >/dev/null
        /usr/lib/rabbitmq/bin/rabbitmqctl -q start_app >/dev/null
      fi )
  done
  ( rabbit_node_env 1
    local deadline=$((SECONDS + 60))
    until [ "$(/usr/lib/rabbitmq/bin/rabbitmqctl -q cluster_status --formatter json | grep -o '"running_nodes":\[[^]]*\]' | grep -o '@localhost' | wc -l)" = 3 ]; do
      ((SECONDS < deadline)) || { echo "rabbitmq cluster: not 3 running nodes within 60 s" >&2; return 1; }
      sleep 0.5
    done )
  echo "rabbitmq cluster: 3 nodes on 127.0.0.1:$RABBIT_CLUSTER_BASE-$((RABBIT_CLUSTER_BASE + 2))"
}

# A node stopped, and returned from only once its VM is gone: asked to stop (and waited for), else
# SIGTERM, else SIGKILL after 30 s. A VM left on its way out would hold the node's name, and the
# next launch of the node would end at once.
rabbit_vm_stop() { # in a node's environment
  local pid deadline
  pid=$(cat "$RABBITMQ_PID_FILE" 2>/dev/null || true)
  timeout 60 /usr/lib/rabbitmq/bin/rabbitmqctl -q stop "$RABBITMQ_PID_FILE" >/dev/null 2>&1 && return
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || return 0
  deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 10))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
}

rabbit_node_stop() { # node number
  ( rabbit_node_env "$1"; rabbit_vm_stop )
}

stop_rabbitmq_cluster() {
  [ -f "$state/rabbitmq-cluster.started" ] || return 0
  local n
  # The last node to stop is the first to start again: stop them in the reverse order of joining.
  for n in 3 2 1; do grep -qx "$n" "$state/rabbitmq-cluster.started" && rabbit_node_stop "$n"; done
  rm -f "$state/rabbitmq-cluster.started"; echo "rabbitmq cluster: stopped"
}

# Fault injection: a cluster node SIGKILLed, as in a crash (the Erlang VM, not only the app).
rabbit_node_kill() { # node number
  local pid
  pid=$(cat "$state/rabbitmq-cluster/$1/rabbitmq.pid" 2>/dev/null || true)
  [ -n "$pid" ] || { echo "rabbitmq node $1 has no pid file" >&2; return 1; }
  kill -9 "$pid"
  local port=$((RABBIT_CLUSTER_BASE + $1 - 1)) deadline=$((SECONDS + 30))
  while answers "$port"; do
    ((SECONDS < deadline)) || { echo "rabbitmq node $1 still answers after SIGKILL" >&2; return 1; }
    sleep 0.1
  done
}

# Fault injection: the master serving a key's slot SIGKILLed; prints its port and returns once the
# cluster has promoted its replica. `redis-cluster` starts the node again (it rejoins as a replica).
master_port_of() { # slot: the port of the node that masters it, in its own view
  local port
  for port in $(cluster_ports); do
    # `cluster nodes`: the line of "myself,master" lists its slot ranges from field 9 on.
    if redis-cli -h 127.0.0.1 -p "$port" cluster nodes 2>/dev/null | awk -v s="$1" '
        $3 ~ /myself/ && $3 ~ /master/ { for (i = 9; i <= NF; i++) { n = split($i, r, "-");
          if (n == 1) r[2] = r[1]; if (s + 0 >= r[1] + 0 && s + 0 <= r[2] + 0) found = 1 } }
        END { exit !found }'; then
      echo "$port"; return 0
    fi
  done
  echo "no master serves slot $1" >&2; return 1
}

redis_cluster_kill_master() { # key
  local port slot
  slot=$(redis-cli -h 127.0.0.1 -p "$CLUSTER_BASE" cluster keyslot "$1")
  port=$(master_port_of "$slot") || return 1
  kill -9 "$(cat "$state/redis-cluster/$port/redis.pid")"
  echo "$port"
  wait_failover "$slot" "$port"
}

# The one-box form of a partition: the master stops (SIGSTOP) with every connection open, its
# replica is promoted behind it, and it wakes up (SIGCONT) believing it still leads, until the
# cluster's newer epoch demotes it to a replica.
redis_cluster_pause_master() { # key
  local port slot pid
  slot=$(redis-cli -h 127.0.0.1 -p "$CLUSTER_BASE" cluster keyslot "$1")
  port=$(master_port_of "$slot") || return 1
  pid=$(cat "$state/redis-cluster/$port/redis.pid")
  kill -STOP "$pid"
  echo "$port"
  wait_failover "$slot" "$port" || { kill -CONT "$pid"; return 1; }
  kill -CONT "$pid"
}

wait_failover() { # slot killed-port: until another node masters the slot and the cluster is ok
  local other=$CLUSTER_BASE deadline=$((SECONDS + 60)) served
  [ "$other" = "$2" ] && other=$((CLUSTER_BASE + 1))
  while :; do
    served=$(redis-cli -h 127.0.0.1 -p "$other" cluster nodes 2>/dev/null | awk -v s="$1" '
      $3 ~ /master/ && $3 !~ /fail/ { for (i = 9; i <= NF; i++) { n = split($i, r, "-");
        if (n == 1) r[2] = r[1]; if (s + 0 >= r[1] + 0 && s + 0 <= r[2] + 0) { split($2, a, "[:@]"); print a[2] } } }')
    if [ -n "$served" ] && [ "$served" != "$2" ] &&
       redis-cli -h 127.0.0.1 -p "$other" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; then
      return 0
    fi
    ((SECONDS < deadline)) || { echo "slot $1: no replica promoted within 60 s" >&2; return 1; }
    sleep 0.1
  done
}

# nginx in front of the instances: a load balancer on one port and the origin of /pkg/ (the
# template scripts/nginx.conf, filled in by scripts/nginx-render.sh).
NGINX_DIR="$state/nginx"
nginx_start() { # port site-root upstream-port...
  local port=$1 site=$2; shift 2
  command -v nginx >/dev/null || { echo "nginx is not installed (make cluster installs it)" >&2; return 1; }
  local servers="" p
  for p in "$@"; do servers+="127.0.0.1:$p "; done
  LISTEN="127.0.0.1:$port" SERVERS="$servers" SITE="$site" PREFIX="$NGINX_DIR" \
    REAL_IP_FROM="${SECKILL_NGINX_REAL_IP_FROM:-127.0.0.1}" \
    "$root/scripts/nginx-render.sh" >"$NGINX_DIR.conf.new"
  mv "$NGINX_DIR.conf.new" "$NGINX_DIR/nginx.conf"
  if [ -f "$NGINX_DIR/nginx.pid" ] && kill -0 "$(cat "$NGINX_DIR/nginx.pid")" 2>/dev/null; then
    nginx -c "$NGINX_DIR/nginx.conf" -p "$NGINX_DIR" -s reload
  else
    # A front door starting afresh forgets what it cached: the instances behind it may serve
    # another database now (the test suites recreate theirs), where the same sale id is another
    # sale, and a board cached for the old one would be served stale to the new one.
    rm -rf "$NGINX_DIR/cache" && mkdir -p "$NGINX_DIR/cache"
    nginx -c "$NGINX_DIR/nginx.conf" -p "$NGINX_DIR"
  fi
  wait_for nginx "$port" 30
  echo "$NGINX_DIR/nginx.pid" >"$state/nginx.started"
}

nginx_stop() {
  [ -f "$state/nginx.started" ] || return 0
  nginx -c "$NGINX_DIR/nginx.conf" -p "$NGINX_DIR" -s quit 2>/dev/null || true
  local deadline=$((SECONDS + 30))
  while [ -f "$NGINX_DIR/nginx.pid" ] && ((SECONDS < deadline)); do sleep 0.1; done
  rm -f "$state/nginx.started"; echo "nginx: stopped"
}

# Fault injection: nginx ended at once (SIGTERM: fast shutdown, open connections cut) and started
# again with the same configuration.
nginx_restart() {
  local pid
  pid=$(cat "$NGINX_DIR/nginx.pid")
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  nginx -c "$NGINX_DIR/nginx.conf" -p "$NGINX_DIR"
}

stop_pidfile() { # file: the process it names asked to stop, killed after 15 s; the file removed
  [ -f "$1" ] || return 0
  local pid deadline=$((SECONDS + 15))
  pid=$(cat "$1")
  if kill "$pid" 2>/dev/null; then
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

stop_all() {
  nginx_stop
  stop_rabbitmq_cluster
  stop_redis_cluster
  if [ -f "$state/rabbitmq.started" ]; then
    ( rabbit_env; rabbit_vm_stop )
    rm -f "$state/rabbitmq.started"; echo "rabbitmq: stopped"
  fi
  if [ -f "$state/redis.started" ]; then
    pid=$(cat "$state/redis/redis.pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    rm -f "$state/redis.started"; echo "redis: stopped"
  fi
  if [ -f "$state/postgres.started" ]; then
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$state/postgres" -m fast -w stop >/dev/null 2>&1 || true
    rm -f "$state/postgres.started"; echo "postgres: stopped"
  fi
}

# Fault injection for tests: take RabbitMQ's broker down and up without ending the node.
rabbitmq_app() {
  rabbit_env
  /usr/lib/rabbitmq/bin/rabbitmqctl -q "$1" >/dev/null
  if [ "$1" = start_app ]; then wait_for rabbitmq "$AMQP_PORT" 60; fi
}

# Fault injection. These act on whatever answers on the configured ports, also when another
# checkout of the project started it: each service is asked for its own process and data folder.
redis_cli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# Redis killed with SIGKILL, as in a crash; `redis-start` brings it back from the AOF in its folder.
redis_kill() {
  local pid dir
  pid=$(redis_cli INFO server | tr -d '\r' | awk -F: '$1 == "process_id" {print $2}')
  dir=$(redis_cli CONFIG GET dir | tail -n 1)
  [ -n "$pid" ] && [ -n "$dir" ] || { echo "redis does not answer on $REDIS_PORT" >&2; return 1; }
  printf '%s' "$dir" >"$state/redis.killed-dir"
  kill -9 "$pid"
  local deadline=$((SECONDS + 30))
  while answers "$REDIS_PORT"; do
    if ((SECONDS > deadline)); then echo "redis still answers after SIGKILL" >&2; return 1; fi
    sleep 0.1
  done
}

redis_restart() {
  local dir
  dir=$(cat "$state/redis.killed-dir" 2>/dev/null || echo "$state/redis")
  start_redis "$dir"
  rm -f "$state/redis.killed-dir"
}

# PostgreSQL stopped without a shutdown checkpoint (immediate mode: crash recovery from the WAL
# at the next start) and started again with the options it ran with (postmaster.opts).
postgres_crash_restart() {
  local data
  data=$("$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U seckill -d postgres -tAc "SHOW data_directory")
  [ -n "$data" ] || { echo "postgres does not answer on $PG_PORT" >&2; return 1; }
  # A checkpoint first: the crash still loses what is in flight, but the recovery replays only
  # the WAL since it, not everything the test databases created before (which took over 60 s
  # on a busy machine).
  "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U seckill -d postgres -qc "CHECKPOINT" >/dev/null
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" -l "$data/server.log" -m immediate -w -t 120 restart >/dev/null
  wait_for postgres "$PG_PORT" 30
}

mkdir -p "$state"
case "${1:-start}" in
  start) reserve_ports; start_postgres; start_redis; start_rabbitmq ;;
  stop) stop_all ;;
  redis-cluster) start_redis_cluster ;;
  redis-cluster-stop) stop_redis_cluster ;;
  redis-cluster-ready) shift; cluster_ready "$@" ;;
  redis-cluster-kill-master) redis_cluster_kill_master "$2" ;;
  redis-cluster-pause-master) redis_cluster_pause_master "$2" ;;
  rabbitmq-cluster) start_rabbitmq_cluster ;;
  rabbitmq-cluster-stop) stop_rabbitmq_cluster ;;
  rabbitmq-node-kill) rabbit_node_kill "$2" ;;
  rabbitmq-node-start) rabbit_node_start "$2" ;;
  nginx-start) shift; nginx_start "$@" ;;
  nginx-stop) nginx_stop ;;
  stop-pidfile) stop_pidfile "$2" ;;
  nginx-restart) nginx_restart ;;
  rabbitmq-down) rabbitmq_app stop_app ;;
  rabbitmq-up) rabbitmq_app start_app ;;
  rabbitmq-drop-connections) rabbit_env; /usr/lib/rabbitmq/bin/rabbitmqctl -q close_all_connections "fault test" >/dev/null ;;
  redis-kill) redis_kill ;;
  redis-start) redis_restart ;;
  postgres-restart) postgres_crash_restart ;;
  *) echo "usage: $0 start|stop|redis-cluster|redis-cluster-stop|redis-cluster-kill-master KEY|redis-cluster-pause-master KEY|rabbitmq-cluster|rabbitmq-cluster-stop|rabbitmq-node-kill N|rabbitmq-node-start N|nginx-start PORT SITE UPSTREAM...|nginx-stop|nginx-restart|stop-pidfile FILE|rabbitmq-down|rabbitmq-up|rabbitmq-drop-connections|redis-kill|redis-start|postgres-restart" >&2; exit 2 ;;
esac
