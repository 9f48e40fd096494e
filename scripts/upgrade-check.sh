#!/usr/bin/env bash
# `make upgrade-check`: a rollout from the release before (deploy/previous-release) to this one
# on the hosts (scripts/hosts.sh: nginx, three instances, a Redis Cluster, a RabbitMQ cluster,
# PostgreSQL), step by step as docs/deploy.md "Upgrades" has an orchestrator take it, while a
# crowd buys through the front door:
#   1. the hosts run the release before, from its image (its migrations first, as its Job);
#   2. a crowd starts; once buys are accepted, this release's migrations run (its Job), the
#      edge's site becomes this release's (which carries the release before's assets), and each
#      instance in turn drains (SIGTERM) and starts again from this release's image;
#   3. with one instance on each release, the release before's pages get their assets from
#      either (scripts/check-rollout-assets.sh);
#   4. the crowd, still running when the last instance switched, ends with its invariants held:
#      exactly the stock sold, every accepted unit an order, nobody over the limit, nothing lost.
# Long (not in `make test`): it builds the release before in target/previous-release, cold the
# first time (its dependencies are taken from this checkout's build when the lock files match).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
prev=$(grep -v '^#' "$root/deploy/previous-release" | head -1 | tr -d '[:space:]')
tree="$root/target/previous-release"
work="$root/target/upgrade-check"
hosts="$root/scripts/hosts.sh"
PREV_IMAGE=seckill:previous-release
USERS=${UPGRADE_USERS:-16000} RATE=${UPGRADE_RATE:-250} STOCK=${UPGRADE_STOCK:-8000}
# Between two instances' switches, as an orchestrator's minReadySeconds spaces them.
STEP_SECS=${UPGRADE_STEP_SECS:-5}
# The site build takes wasm-opt from npm's binaryen (the Makefile's PATH), as `make build-release` does.
export PATH="$root/e2e/node_modules/.bin:$PATH"

fail() { echo "upgrade check: FAILED: $*" >&2; exit 1; }
step() { echo "upgrade check: $(date +%T) $*"; }

commit=$(git -C "$root" rev-parse --verify -q "$prev^{commit}") || fail "deploy/previous-release names $prev, which this clone does not have"
[ -x "$root/target/release/server" ] || fail "no release build of this release (make build-release)"
[ -x "$root/target/release/seckill-load" ] || fail "no load tool (make load-tool)"
if [ "$(cat "$tree/.commit" 2>/dev/null)" != "$commit" ]; then
  rm -rf "$tree"; mkdir -p "$tree"
  git -C "$root" archive "$commit" | tar -x -C "$tree"
  echo "$commit" >"$tree/.commit"
  # The same lock file: the dependencies this checkout built are the release before's too.
  if cmp -s "$root/Cargo.lock" "$tree/Cargo.lock"; then
    step "the release before's lock file is this one's: its build starts from this checkout's"
    mkdir -p "$tree/target"
    cp -r "$root/target/release" "$tree/target/release"
    [ ! -d "$root/target/front" ] || cp -r "$root/target/front" "$tree/target/front"
  fi
fi
step "building the release before, ${commit:0:12}"
(cd "$tree" && LEPTOS_OUTPUT_NAME=seckill node "$root/scripts/site.mjs" --release --dir="$tree" >"$tree.build.log" 2>&1 &&
  "$root/scripts/precompress.sh" target/site/pkg) ||
  { tail -n 20 "$tree.build.log"; fail "the release before does not build"; }

step "the release before's image, then this release's carrying its assets"
SECKILL_IMAGE=$PREV_IMAGE SECKILL_IMAGE_FROM=$tree "$root/scripts/image.sh" build
SECKILL_PREVIOUS_IMAGE=$PREV_IMAGE "$root/scripts/image.sh" build
new=$("$root/scripts/image.sh" name)

mkdir -p "$work"
crowd=""
cleanup() {
  [ -z "$crowd" ] || kill "$crowd" 2>/dev/null || true
  "$hosts" down >/dev/null 2>&1 || true
}
trap cleanup EXIT
# The operator's token, so that the check reads what each instance accepted.
export SECKILL_METRICS_TOKEN
SECKILL_METRICS_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
SECKILL_IMAGE=$PREV_IMAGE "$hosts" up
eval "$("$hosts" env)"
step "the hosts run the release before ($PREV_IMAGE)"

answered() { # host [result]: the buys it answered (with that result) since it started; 0 while it restarts
  local metrics
  metrics=$(curl -fsS -H "Authorization: Bearer $SECKILL_METRICS_TOKEN" "http://$("$hosts" addr "$1"):3000/metrics" 2>/dev/null) ||
    { echo 0; return; }
  awk -v want="${2:-}" '/^seckill_buy_requests_total\{/ && (want == "" || index($0, "result=\"" want "\"")) {n += $2}
    END {printf "%d\n", n}' <<<"$metrics"
}
"$root/target/release/seckill-load" crowd --base-url "$SECKILL_HOSTS_URL" --users "$USERS" --rate "$RATE" \
  --stock "$STOCK" --stock-shards 3 --concurrency 256 --retry-secs 20 >"$work/crowd.log" 2>&1 &
crowd=$!
deadline=$((SECONDS + 180))
until (( $(answered app1 accepted) + $(answered app2 accepted) + $(answered app3 accepted) > 0 )); do
  kill -0 "$crowd" 2>/dev/null || { cat "$work/crowd.log"; fail "the crowd ended before any buy was accepted"; }
  ((SECONDS < deadline)) || fail "no buy accepted within 180 s of the crowd's start"
  sleep 0.5
done
step "the crowd buys through the release before; the rollout starts"
# Step one of the rollout (docs/deploy.md "Upgrades"): this release's gates also write the
# per-reservation record the release before's polls and payments read, and read and write the
# per-key record of an Idempotency-Key's first answer its keyed retries read.
export SECKILL_GATE_TOKEN_RECORDS=true SECKILL_GATE_IDEMPOTENCY_STRINGS=true
"$hosts" edge-site "$new"
"$hosts" release 1 "$new"
sleep "$STEP_SECS"
step "app1 on this release, app2 and app3 on the release before"
assets=0
"$root/scripts/check-rollout-assets.sh" app2 app1 --old-keeps-404s || assets=$?
case $assets in
  0) ;;
  3) step "the two releases' pages name the same assets: nothing for this release to carry" ;;
  *) fail "the release before's pages lost their assets mid-rollout" ;;
esac
for n in 2 3; do
  sleep "$STEP_SECS"
  "$hosts" release "$n" "$new"
done
kill -0 "$crowd" 2>/dev/null ||
  { cat "$work/crowd.log"; fail "the crowd ended before the rollout did: it proves nothing (raise UPGRADE_USERS)"; }
step "every instance on this release, the crowd still buying"
if ! wait "$crowd"; then crowd=""; cat "$work/crowd.log"; fail "the crowd's invariants did not hold"; fi
crowd=""
cat "$work/crowd.log"
# Each instance of this release took its share after the switch: a crowd that one answered alone
# would not have crossed the rollout.
for n in 1 2 3; do
  a=$(answered "app$n")
  ((a > 0)) || fail "app$n answered no buy on this release"
  step "app$n answered $a buys on this release"
done
step "OK: a rollout from ${commit:0:12} to this release during a crowd, invariants held"
