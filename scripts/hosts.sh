#!/usr/bin/env bash
# `make hosts`: the many-box shape on hosts of their own (docs/operations.md "`make hosts`").
# Each host is a network namespace with one address on a bridge this script makes; every
# service binds its host's address, so nothing crosses hosts over loopback:
#
#   edge          10.231.0.10   nginx (port 80), the front door: scripts/nginx.conf
#   app1..app3    10.231.0.11-13  `serve` from the image's root filesystem (port 3000)
#   redis1..6     10.231.0.21-26  a Redis Cluster: masters on 21-23, a replica of each on 24-26
#   mq1..mq3      10.231.0.31-33  a RabbitMQ cluster (quorum queues get a member on each)
#   pg            10.231.0.40   PostgreSQL (port 5432)
#
# The machine itself is 10.231.0.1 on the bridge: the load tool and the e2e suite run there and
# reach the hosts through the bridge only. The range is used on this bridge and these namespaces
# alone; every packet stays on them.
#
#   scripts/hosts.sh up      make the hosts and start everything (fails on a machine without
#                            network namespaces, leaving nothing behind)
#   scripts/hosts.sh down    end every process, namespace, link and file the script made, and
#                            nothing else (`make hosts-stop`)
#   scripts/hosts.sh env     the variables that point a tool at the hosts (eval it)
#   scripts/hosts.sh exec HOST CMD...   run a command on a host
#   scripts/hosts.sh release N [IMAGE]  a rollout's step: instance appN replaced by one from IMAGE
#                            (default this build's), after IMAGE's migrations (its release's Job)
#   scripts/hosts.sh edge-site IMAGE    the edge's copy of the site switched to IMAGE's (which
#                            carries the release before's assets: a rollout's first step)
#
# The partition suite's nemesis (server/tests/partitions), with iptables inside the hosts' own
# namespaces (the machine's tables are never touched):
#   scripts/hosts.sh cut A B...      A and each B no longer reach each other (both ways)
#   scripts/hosts.sh cut-oneway A B  A's packets reach B, B's packets to A are dropped
#   scripts/hosts.sh heal            every cut made above undone, on every host
#   scripts/hosts.sh pause HOST      the host's Redis stopped (SIGSTOP); resume HOST: SIGCONT
#   scripts/hosts.sh master-of KEY   the host whose Redis masters KEY's slot now
#   scripts/hosts.sh settle          waits until the Redis and RabbitMQ clusters and the
#                                    instances are whole again
#
# The instances run the image `make image` built (SECKILL_IMAGE names another); SECKILL_*
# variables of the caller's environment are handed to them (the doors the e2e suite opens, the
# accounts it uses).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.local/hosts"
NET=10.231.0
BRIDGE=skbr0
PREFIX_NS=sk-
HOSTS=(edge app1 app2 app3 redis1 redis2 redis3 redis4 redis5 redis6 mq1 mq2 mq3 pg)
PG_BIN=/usr/lib/postgresql/15/bin
RABBIT_BIN=/usr/lib/rabbitmq/bin
# The instances run deployed (the image sets SECKILL_DEPLOYED), and refuse a secret any file of
# the repository holds: the caller's, else one drawn when the hosts come up, kept with them.
SECRET=${SECKILL_SECRET:-$(cat "$dir/secret" 2>/dev/null || true)}
MQ_USER=seckill
MQ_PASS=seckill-hosts
COOKIE=seckill-hosts-rabbitmq-cookie
# Redis asks every client for this password (requirepass; masterauth for the replicas), as a
# Redis reachable from other hosts must; redis-cli reads it from REDISCLI_AUTH.
REDIS_PASS=seckill-hosts-redis
export REDISCLI_AUTH=$REDIS_PASS

addr() { # host name -> address
  case $1 in
    machine) echo "$NET.1" ;;
    edge) echo "$NET.10" ;;
    app[1-3]) echo "$NET.1${1#app}" ;;
    redis[1-6]) echo "$NET.2${1#redis}" ;;
    mq[1-3]) echo "$NET.3${1#mq}" ;;
    pg) echo "$NET.40" ;;
    *) echo "no host $1" >&2; return 1 ;;
  esac
}
on() { local h=$1; shift; ip netns exec "$PREFIX_NS$h" "$@"; }
say() { echo "hosts: $*"; }
fail() { echo "hosts: $*" >&2; exit 1; }
answers() { # address port
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}
wait_until() { # seconds what command...
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "$what: not within $(( $1 )) s (logs under .local/hosts/)"
    sleep 0.3
  done
}

redis_urls() { local i out=""; for i in 1 2 3 4 5 6; do out+="redis://:$REDIS_PASS@$(addr "redis$i"):6379,"; done; echo "${out%,}"; }
amqp_urls() { local i out=""; for i in 1 2 3; do out+="amqp://$MQ_USER:$MQ_PASS@$(addr "mq$i"):5672/%2f,"; done; echo "${out%,}"; }
database_url() { echo "postgres://seckill@$(addr pg):5432/seckill"; }

env_lines() {
  echo "export DATABASE_URL='$(database_url)'"
  echo "export REDIS_CLUSTER_URLS='$(redis_urls)'"
  echo "export AMQP_URL='$(amqp_urls)'"
  echo "export SECKILL_SECRET='$SECRET'"
  echo "export SECKILL_HOSTS_URL='http://$(addr edge)'"
  echo "export REDISCLI_AUTH='$REDIS_PASS' E2E_REDIS_HOST='$(addr redis1)' E2E_REDIS_CLUSTER_PORT=6379"
}

# --- the network -------------------------------------------------------------------------------

preflight() {
  [ "$(id -u)" = 0 ] || fail "making network namespaces needs root"
  command -v ip >/dev/null || fail "no ip command (apt-get install iproute2)"
  if ! ip netns add "${PREFIX_NS}probe" 2>/dev/null; then
    fail "this machine cannot make network namespaces (ip netns add failed); nothing was made"
  fi
  ip netns delete "${PREFIX_NS}probe"
  if ip -4 route show | grep -q "^$NET\.0/24" && ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    fail "$NET.0/24 is already routed on this machine; nothing was made"
  fi
}

network_up() {
  mkdir -p "$dir"
  ip link add "$BRIDGE" type bridge
  echo "link $BRIDGE" >>"$dir/made"
  ip addr add "$(addr machine)/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  local h ns
  for h in "${HOSTS[@]}"; do
    ns=$PREFIX_NS$h
    ip netns add "$ns"
    echo "netns $ns" >>"$dir/made"
    ip link add "skv-$h" type veth peer name eth0 netns "$ns"
    echo "link skv-$h" >>"$dir/made"
    ip link set "skv-$h" master "$BRIDGE" up
    on "$h" ip addr add "$(addr "$h")/24" dev eth0
    on "$h" ip link set eth0 up
    on "$h" ip link set lo up
  done
}

# --- the services ------------------------------------------------------------------------------

postgres_up() {
  local data="$dir/pg" a
  a=$(addr pg)
  mkdir -p "$data"; chown postgres:postgres "$data"; chmod 700 "$data"
  runuser -u postgres -- "$PG_BIN/initdb" -D "$data" -U seckill --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/pg-initdb.log"
  # The instances and the machine's tools connect from the bridge's range (trust: a test range
  # no one else reaches; docs/deploy.md says what a real host needs).
  echo "host all all $NET.0/24 trust" >>"$data/pg_hba.conf"
  on pg runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
    -o "-p 5432 -c listen_addresses=$a -c unix_socket_directories='$data' -c max_connections=300" start >/dev/null
  "$PG_BIN/createdb" -h "$a" -p 5432 -U seckill seckill
  say "postgres on $a:5432"
}

redis_up() {
  local i h a nodes=()
  for i in 1 2 3 4 5 6; do
    h=redis$i a=$(addr "$h")
    mkdir -p "$dir/$h"
    # As docs/deploy.md has a shop set them: AOF every second, a memory ceiling past which writes
    # are refused (never a key evicted), a password asked of every client and replica.
    on "$h" redis-server --bind "$a" --port 6379 --dir "$dir/$h" --cluster-enabled yes \
      --cluster-config-file "$dir/$h/nodes.conf" --cluster-node-timeout 1000 --cluster-require-full-coverage no --repl-diskless-sync-delay 0 \
      --requirepass "$REDIS_PASS" --masterauth "$REDIS_PASS" \
      --appendonly yes --appendfsync everysec --auto-aof-rewrite-percentage 0 --maxmemory 1gb --maxmemory-policy noeviction \
      --save "" --daemonize yes --pidfile "$dir/$h/redis.pid" --logfile "$dir/$h/redis.log"
    nodes+=("$a:6379")
  done
  for i in 1 2 3 4 5 6; do wait_until 30 "redis$i" redis-cli -h "$(addr "redis$i")" ping; done
  # The first three are the masters; each replica goes to a host of its own (every node has one).
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$dir/redis-create.log"
  wait_until 60 "the Redis Cluster's slots and replicas" "$root/scripts/services.sh" redis-cluster-ready "${nodes[@]}"
  # No master shares a host with its replica: every node is alone on its host, checked anyway.
  redis-cli -h "$(addr redis1)" cluster nodes | awk '$3 ~ /slave/ {split($2, a, ":"); r[$4] = a[1]}
    $3 ~ /master/ {split($2, a, ":"); m[$1] = a[1]} END {for (id in r) if (r[id] == m[id]) exit 1}' ||
    fail "a replica shares its master's host"
  say "redis cluster: masters on $(addr redis1)-$(addr redis3), replicas on $(addr redis4)-$(addr redis6)"
}

# RabbitMQ nodes are named rabbit@mqN; ERL_INETRC tells every Erlang VM of the script (the
# nodes and rabbitmqctl) the three names' addresses, so /etc/hosts stays as it is.
mq_env() { # N
  local n=$1 a base="$dir/mq$1"
  a=$(addr "mq$n")
  export HOME="$base" RABBITMQ_NODENAME="rabbit@mq$n" RABBITMQ_NODE_IP_ADDRESS="$a" RABBITMQ_NODE_PORT=5672 \
    RABBITMQ_DIST_PORT=25672 RABBITMQ_MNESIA_BASE="$base/mnesia" RABBITMQ_LOG_BASE="$base/log" \
    RABBITMQ_PID_FILE="$base/rabbitmq.pid" RABBITMQ_CONFIG_FILE="$base/rabbitmq" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$base/enabled_plugins" ERL_INETRC="$dir/erl_inetrc" ERL_EPMD_ADDRESS="$a" \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {${a//./,}}"
}

mq_ctl() { # N args...
  local n=$1; shift
  ( mq_env "$n"; on "mq$n" env "$RABBIT_BIN/rabbitmqctl" -n "rabbit@mq$n" "$@" )
}

rabbitmq_up() {
  local n base
  { for n in 1 2 3; do printf '{host, {%s}, ["mq%s"]}.\n' "$(addr "mq$n" | tr . ,)" "$n"; done
    echo '{lookup, [file, native]}.'; } >"$dir/erl_inetrc"
  for n in 1 2 3; do
    base="$dir/mq$n"
    mkdir -p "$base/log" "$base/mnesia"
    printf '%s' "$COOKIE" >"$base/.erlang.cookie"; chmod 400 "$base/.erlang.cookie"
    echo "[]." >"$base/enabled_plugins"
    printf 'listeners.tcp.default = %s:5672\nloopback_users = none\ndefault_user = %s\ndefault_pass = %s\n' \
      "$(addr "mq$n")" "$MQ_USER" "$MQ_PASS" >"$base/rabbitmq.conf"
    ( mq_env "$n"; on "mq$n" env "$RABBIT_BIN/rabbitmq-server" -detached >/dev/null 2>&1 )
  done
  for n in 1 2 3; do
    wait_until 120 "rabbitmq on mq$n" answers "$(addr "mq$n")" 5672
    wait_until 60 "rabbitmq on mq$n started" mq_ctl "$n" -q await_startup
  done
  for n in 2 3; do
    mq_ctl "$n" -q stop_app >/dev/null
    mq_ctl "$n" -q join_cluster rabbit@mq1 >/dev/null
    mq_ctl "$n" -q start_app >/dev/null
  done
  wait_until 60 "the RabbitMQ cluster's three nodes" mq_three_running
  say "rabbitmq cluster: rabbit@mq1-3 on $(addr mq1)-$(addr mq3)"
}

mq_three_running() {
  [ "$(mq_ctl 1 -q cluster_status --formatter json | grep -o '"running_nodes":\[[^]]*\]' | grep -o 'rabbit@mq' | wc -l)" = 3 ]
}

instance_env() { # N
  local n=$1
  echo "SECKILL_ADDR=$(addr "app$n"):3000"
  echo "DATABASE_URL=$(database_url)"
  echo "REDIS_CLUSTER_URLS=$(redis_urls)"
  echo "AMQP_URL=$(amqp_urls)"
  echo "SECKILL_SECRET=$SECRET"
  echo "SECKILL_TRUST_FORWARDED_FOR=1"
  echo "SECKILL_RESERVATION_QUEUES=3"
  echo "RUST_LOG=${RUST_LOG:-info}"
  # The caller's settings (the doors the e2e suite opens, its accounts), the first instance alone
  # creating the accounts.
  local line
  while IFS= read -r line; do
    case $line in
      SECKILL_SECRET=* | SECKILL_ADDR=*) ;;
      SECKILL_ADMIN_* | SECKILL_OPERATOR_* | SECKILL_DEMO=*) ((n == 1)) && echo "$line" ;;
      *) echo "$line" ;;
    esac
  done < <(env | grep -E '^SECKILL_[A-Z_]+=' | grep -vE '^SECKILL_(HOSTS|IMAGE|CLUSTER|NGINX)(_|=)' || true)
}

# Instance N started from the mounted image (the caller waits for it).
instance_start() { # N image rootfs
  local n=$1 image=$2 rootfs=$3
  mapfile -t vars < <(instance_env "$n")
  # As a runtime would start it: the image's root, user and environment, our settings.
  on "app$n" env SECKILL_IMAGE="$image" SECKILL_IMAGE_ROOT="$rootfs" "$root/scripts/image.sh" run "${vars[@]}" -- serve \
    >>"$dir/app$n.log" 2>&1 </dev/null &
  echo "$image" >"$dir/app$n.image"
}

# IMAGE's migrations, run from it on app1 as its release's Job would (deployed, the instances
# never migrate by themselves); a release's second run finds nothing to do.
migrate_from() { # image rootfs
  mapfile -t vars < <(instance_env 1)
  on app1 env SECKILL_IMAGE="$1" SECKILL_IMAGE_ROOT="$2" "$root/scripts/image.sh" run "${vars[@]}" -- migrate >>"$dir/migrate.log" 2>&1 </dev/null ||
    { tail -n 20 "$dir/migrate.log" >&2; fail "the migrations from $1 failed"; }
}

image_root() { # image -> its root filesystem, mounted (unmounted by `down`)
  local rootfs
  rootfs=$(SECKILL_IMAGE=$1 "$root/scripts/image.sh" root) || fail "no image $1 to run an instance from (make image)"
  grep -qx "image $1" "$dir/made" || echo "image $1" >>"$dir/made"
  echo "$rootfs"
}

instances_up() {
  local rootfs image n
  image=$("$root/scripts/image.sh" name)
  rootfs=$(image_root "$image")
  echo "$rootfs" >"$dir/rootfs"
  # The release's migrations first, from the image, as its migrations Job would.
  migrate_from "$image" "$rootfs"
  for n in 1 2 3; do
    instance_start "$n" "$image" "$rootfs"
    ((n > 1)) || wait_until 120 "app1's /readyz" curl -fsS -o /dev/null "http://$(addr app1):3000/readyz"
  done
  for n in 2 3; do wait_until 120 "app$n's /readyz" curl -fsS -o /dev/null "http://$(addr "app$n"):3000/readyz"; done
  say "instances from $image on $(addr app1)-$(addr app3):3000"
}

edge_up() {
  local a rootfs
  a=$(addr edge) rootfs=$(cat "$dir/rootfs")
  # The edge's own copy of the image's site (as a real edge host would hold one): nginx's
  # workers cannot read inside the image's mount, which only root may enter.
  cp -r "$rootfs/app/site" "$dir/edge-site"
  LISTEN="$a:80" SERVERS="$(addr app1):3000 $(addr app2):3000 $(addr app3):3000" SITE="$dir/edge-site" \
    PREFIX="$dir/edge" REAL_IP_FROM="$(addr machine)" "$root/scripts/nginx-render.sh" >"$dir/edge.conf"
  mv "$dir/edge.conf" "$dir/edge/nginx.conf"
  on edge nginx -c "$dir/edge/nginx.conf" -p "$dir/edge"
  wait_until 30 "nginx on edge" curl -fsS -o /dev/null "http://$a/readyz"
  say "nginx on $a:80 in front of the three instances"
}

up() {
  if [ -f "$dir/up" ] && curl -fsS -o /dev/null "http://$(addr edge)/readyz" 2>/dev/null; then
    say "already up (make hosts-stop ends them)"; return
  fi
  [ ! -e "$dir/made" ] || down >/dev/null
  preflight
  command -v nginx redis-server >/dev/null && [ -x "$RABBIT_BIN/rabbitmq-server" ] && [ -x "$PG_BIN/initdb" ] ||
    fail "nginx, redis, rabbitmq and postgresql are needed (make setup test-tools)"
  rm -rf "$dir"; mkdir -p "$dir"
  if [ -z "${SECKILL_SECRET:-}" ]; then
    SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
    (umask 077 && printf '%s' "$SECRET" >"$dir/secret")
  fi
  trap 'echo "hosts: failed; taking down what was made" >&2; down >/dev/null 2>&1' EXIT
  network_up
  say "${#HOSTS[@]} hosts on $BRIDGE, $NET.0/24"
  postgres_up & local pg=$!
  redis_up & local redis=$!
  rabbitmq_up
  wait "$pg" || fail "postgres did not start"
  wait "$redis" || fail "the redis cluster did not start"
  instances_up
  edge_up
  trap - EXIT
  touch "$dir/up"
  say "up: open http://$(addr edge) ; tools: eval \"\$(scripts/hosts.sh env)\""
}

down() {
  [ -f "$dir/made" ] || { say "nothing to take down"; return 0; }
  local what name ns
  # Every process on a host of ours ends with its host; the instances' chroots first.
  for ns in $(awk '$1 == "netns" {print $2}' "$dir/made"); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -TERM 2>/dev/null || true
  done
  local deadline=$((SECONDS + 20)) alive
  while ((SECONDS < deadline)); do
    alive=0
    for ns in $(awk '$1 == "netns" {print $2}' "$dir/made"); do
      [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] || alive=1
    done
    ((alive)) || break
    sleep 0.2
  done
  for ns in $(awk '$1 == "netns" {print $2}' "$dir/made"); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  done
  # Erlang's port mapper and the VMs' helpers, started on the hosts, ended with them above.
  tac "$dir/made" | while read -r what name; do
    case $what in
      netns) ip netns delete "$name" 2>/dev/null || true ;;
      link) ip link delete "$name" 2>/dev/null || true ;;
      image) podman image unmount "$name" >/dev/null 2>&1 || true ;;
    esac
  done
  rm -rf "$dir"
  say "down: every host, link and process of make hosts removed"
}

# A rollout's step, as an orchestrator takes it: the new release's migrations (its Job), then
# instance N stopped (SIGTERM: it drains what it holds; the front door sends the next requests to
# the others) and started again from IMAGE, ready before the call returns.
release_instance() { # N [image]
  local n=$1 image=${2:-$("$root/scripts/image.sh" name)} rootfs deadline
  [[ $n =~ ^[1-3]$ ]] || fail "release N [IMAGE]: N is 1, 2 or 3"
  [ -f "$dir/up" ] || fail "the hosts are not up (make hosts)"
  rootfs=$(image_root "$image")
  migrate_from "$image" "$rootfs"
  # Every process of the host (the instance and what started it there), as a runtime stops a
  # container: the instance is the host's only tenant.
  ip netns pids "${PREFIX_NS}app$n" | xargs -r kill -TERM 2>/dev/null || true
  deadline=$((SECONDS + 60))
  while [ -n "$(ip netns pids "${PREFIX_NS}app$n")" ]; do
    if ((SECONDS >= deadline)); then
      ip netns pids "${PREFIX_NS}app$n" | xargs -r kill -KILL 2>/dev/null || true
      fail "app$n did not stop within 60 s of SIGTERM"
    fi
    sleep 0.1
  done
  echo "--- started from $image" >>"$dir/app$n.log"
  instance_start "$n" "$image" "$rootfs"
  wait_until 120 "app$n's /readyz" curl -fsS -o /dev/null "http://$(addr "app$n"):3000/readyz"
  say "app$n runs $image"
}

# The edge's copy of the site replaced by IMAGE's: the new folder laid beside the old, then put
# in its place (nginx reads the files as it serves them).
edge_site() { # image
  local rootfs
  [ -f "$dir/up" ] || fail "the hosts are not up (make hosts)"
  rootfs=$(image_root "$1")
  rm -rf "$dir/edge-site.next" "$dir/edge-site.old"
  cp -r "$rootfs/app/site" "$dir/edge-site.next"
  mv "$dir/edge-site" "$dir/edge-site.old"
  mv "$dir/edge-site.next" "$dir/edge-site"
  rm -rf "$dir/edge-site.old"
  say "the edge serves the site of $1"
}

# After `down`: fails naming whatever of ours is left (a namespace, a link, a process, the folder).
gone() {
  local left=()
  mapfile -t left < <(ip netns list 2>/dev/null | awk -v p="$PREFIX_NS" 'index($1, p) == 1 {print "namespace " $1}')
  ip link show "$BRIDGE" >/dev/null 2>&1 && left+=("bridge $BRIDGE")
  while read -r link; do left+=("link $link"); done < <(ip -o link show | awk -F': ' '$2 ~ /^skv-/ {split($2, a, "@"); print a[1]}')
  [ ! -e "$dir" ] || left+=("folder .local/hosts")
  pgrep -f "$dir" >/dev/null 2>&1 && left+=("processes: $(pgrep -f "$dir" | tr '\n' ' ')")
  if ((${#left[@]})); then printf 'hosts: left behind: %s\n' "${left[@]}" >&2; return 1; fi
  say "nothing of make hosts is left"
}

# --- the nemesis -------------------------------------------------------------------------------

# Drops on HOST every packet from PEER (INPUT) or to PEER (OUTPUT): the rules live in the host's
# own namespace, in a chain of ours, so healing flushes exactly them.
drop_on() { # host direction(in|out) peer
  local h=$1 dir=$2 peer
  peer=$(addr "$3")
  on "$h" iptables -w -N sk-nemesis 2>/dev/null || true
  on "$h" iptables -w -C INPUT -j sk-nemesis 2>/dev/null || on "$h" iptables -w -I INPUT -j sk-nemesis
  on "$h" iptables -w -C OUTPUT -j sk-nemesis 2>/dev/null || on "$h" iptables -w -I OUTPUT -j sk-nemesis
  case $dir in
    in) on "$h" iptables -w -A sk-nemesis -s "$peer" -j DROP ;;
    out) on "$h" iptables -w -A sk-nemesis -d "$peer" -j DROP ;;
  esac
}

cut() { # host peer...
  local a=$1 b; shift
  for b in "$@"; do drop_on "$a" out "$b"; drop_on "$a" in "$b"; drop_on "$b" out "$a"; drop_on "$b" in "$a"; done
}
cut_oneway() { drop_on "$1" in "$2"; }
heal() {
  local h
  for h in "${HOSTS[@]}"; do
    on "$h" iptables -w -F sk-nemesis 2>/dev/null || true
  done
}
redis_pid() { cat "$dir/$1/redis.pid"; }
# Whole again after a fault: every slot served with its replica in sync, the three RabbitMQ
# nodes running, every instance ready.
settle() {
  local i nodes=()
  for i in 1 2 3 4 5 6; do nodes+=("$(addr "redis$i"):6379"); done
  wait_until 120 "the Redis Cluster's slots and replicas" "$root/scripts/services.sh" redis-cluster-ready "${nodes[@]}"
  wait_until 120 "the RabbitMQ cluster's three nodes" mq_three_running
  for i in 1 2 3; do wait_until 120 "app$i's /readyz" curl -fsS -o /dev/null "http://$(addr "app$i"):3000/readyz"; done
}
master_of() { # key -> host name
  local slot node
  slot=$(redis-cli -h "$(addr redis1)" cluster keyslot "$1" 2>/dev/null || redis-cli -h "$(addr redis2)" cluster keyslot "$1")
  for node in redis1 redis2 redis3 redis4 redis5 redis6; do
    redis-cli -h "$(addr "$node")" cluster shards 2>/dev/null | tr -d '\r' | awk -v slot="$slot" '
      /^slots$/ {getline a; getline b; lo = a; hi = b; next}
      $0 == "ip" {getline ip}
      $0 == "role" {getline role; if (role == "master" && slot >= lo && slot <= hi) {print ip; exit}}' >"$dir/master-of" || true
    if [ -s "$dir/master-of" ]; then break; fi
  done
  local ip
  ip=$(head -1 "$dir/master-of")
  [ -n "$ip" ] || fail "no master serves slot $slot"
  echo "redis${ip##*.2}"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  gone) gone ;;
  env) env_lines ;;
  exec) shift; h=$1; shift; on "$h" "$@" ;;
  release) release_instance "${2:?release N [IMAGE]}" "${3:-}" ;;
  edge-site) edge_site "${2:?edge-site IMAGE}" ;;
  cut) shift; cut "$@" ;;
  cut-oneway) cut_oneway "$2" "$3" ;;
  heal) heal ;;
  settle) settle ;;
  pause) kill -STOP "$(redis_pid "$2")" ;;
  resume) kill -CONT "$(redis_pid "$2")" ;;
  master-of) master_of "$2" ;;
  addr) addr "$2" ;;
  *) echo "usage: $0 up|down|gone|env|exec HOST CMD...|release N [IMAGE]|edge-site IMAGE|addr HOST|cut A B...|cut-oneway A B|heal|pause HOST|resume HOST|master-of KEY|settle" >&2; exit 2 ;;
esac
