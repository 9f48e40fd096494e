#!/usr/bin/env bash
# `make test-stress`: the suites that run in `make test`, again and again under load, to find the
# tests that pass by chance. Each round runs, on the release build: the API suite on one Redis,
# the API suite on the Redis Cluster, the e2e suite on one server and the e2e journeys through
# nginx on the cluster shape — each with two busy loops at the lowest priority beside it, a margin
# over `make test`, where these suites run once the lane behind (the lint and the tests' build)
# is done. Every failing test is
# recorded with its round; the summary (target/test-stress.md) counts the flakes: tests that failed
# in some round. Exits non-zero when any test failed.
#
#   scripts/test-stress.sh [ROUNDS]   (default 3; STRESS_SUITES="api api-cluster e2e e2e-cluster")
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=${1:-3}
suites=${STRESS_SUITES:-api api-cluster e2e e2e-cluster}
out=target/test-stress
rm -rf "$out" && mkdir -p "$out"

busy=()
lane_busy() {
  for _ in 1 2; do
    nice -n 19 bash -c 'while :; do :; done' &
    busy+=($!)
  done
}
lane_idle() {
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done
  busy=()
}
trap lane_idle EXIT

# The failing tests of one run's log: cargo's `name ... FAILED` lines, Playwright's `✘ … title`.
failures_of() {
  { grep -E '^test .* \.\.\. FAILED$' "$1" | sed -E 's/^test (.*) \.\.\. FAILED$/\1/' || true
    grep -E '^\s+[0-9]+\) \[' "$1" | sed -E 's/^\s+[0-9]+\) //' || true
  } | sort -u
}

run_suite() {
  local suite=$1 log=$2
  case $suite in
    api) make --no-print-directory clean-test-dbs >/dev/null
         cargo test --release $RUST_SUITES --test api -- --test-threads=4 ;;
    # As in make test, the cluster's run follows the single one without dropping its databases
    # (dropping 160 of them takes minutes).
    api-cluster) scripts/services.sh redis-cluster >/dev/null
         REDIS_CLUSTER_URLS=$TEST_CLUSTER_URLS cargo test --release $RUST_SUITES --test api -- --test-threads=4 ;;
    e2e) make --no-print-directory test-e2e ;;
    e2e-cluster) make --no-print-directory test-e2e-cluster E2E_CLUSTER_GREP="$CLUSTER_JOURNEYS" ;;
  esac >"$log" 2>&1
}

summary=$out/summary.tsv
: >"$summary"
for round in $(seq 1 "$rounds"); do
  for suite in $suites; do
    log=$out/$round-$suite.log
    start=$SECONDS
    lane_busy
    if run_suite "$suite" "$log"; then result=passed; else result=FAILED; fi
    lane_idle
    failed=$(failures_of "$log")
    if [ "$result" = FAILED ] && [ -z "$failed" ]; then failed="(the suite itself: $log)"; fi
    echo "round $round, $suite: $result in $((SECONDS - start)) s${failed:+; failed: $(echo "$failed" | paste -sd';' -)}"
    if [ -n "$failed" ]; then
      while IFS= read -r t; do printf '%s\t%s\t%s\n' "$round" "$suite" "$t" >>"$summary"; done <<<"$failed"
    fi
  done
done

flakes=$(cut -f2,3 "$summary" | sort -u | wc -l)
{
  echo "# make test-stress: $rounds rounds of $suites, the other lane busy"
  echo
  echo "flakes: $flakes"
  if [ "$flakes" -gt 0 ]; then
    echo
    echo "| suite | test | rounds failed |"
    echo "|---|---|---|"
    cut -f2,3 "$summary" | sort | uniq -c | while read -r n rest; do
      printf '| %s | %s |\n' "$(echo "$rest" | sed 's/\t/ | /')" "$n"
    done
  fi
} >target/test-stress.md
cat target/test-stress.md
[ "$flakes" -eq 0 ]
