#!/usr/bin/env bash
# `make cargo-mutants`: cargo-mutants over the Rust of the buy path and the pipeline, each group of
# functions with the tests that guard it (docs/tests.md "cargo-mutants"). The mutants are built in a
# worktree of HEAD (in place, sharing the repo's target directory, so only the server crate is
# built again for each) against the services of `make services`. The worktree's path is the one
# `make mutants` uses: the workspace crates built at that path by one serve the other.
#
#   scripts/cargo-mutants.sh            every group
#   scripts/cargo-mutants.sh NAME...    only those groups
#
# Mutants that cannot compile (a `Result` built from nothing, say) are left out by EXCLUDE rather
# than built to fail. Results: target/cargo-mutants/GROUP/mutants.out/ (caught.txt, missed.txt, ...);
# a summary in target/cargo-mutants/summary.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/target/cargo-mutants
tree=$root/target/mutants/tree
EXCLUDE='with (Api|Redis)?Result::(new|from_iter|from)\(|with Hmac::|with Ok\(Default::default\(\)\)|with Ok\(\(Default::default\(\)'

# name; files (comma-separated); --re of the functions examined (empty: all); test targets; test filters
SETS=(
  "sold-out flag;server/src/buy/soldout.rs;;--lib --test api;soldout seckill::adding_stock_to_a_sold_out_activity_makes_it_sellable_on_every_instance seckill::a_fresh_idempotency_key_on_every_request_is_no_way_around_the_sold_out_answer seckill::two_thousand_buyers_for_a_hundred_units_get_exactly_a_hundred_orders"
  "buy link;server/src/buy/gate.rs;BuyPaths;--lib --test api;gate seckill::a_path_of_another_user_or_activity_is_a_bad_path seckill::buying_needs_a_session_and_valid_input"
  "journal decoding;server/src/pipeline/journal.rs;(replace|in) (field|decode|encode|Reservation::from_entry|due)\b;--lib --test api;journal seckill::a_reservation_delivered_twice_makes_one_order seckill::a_poison_reservation seckill::two_thousand_buyers_for_a_hundred_units_get_exactly_a_hundred_orders"
  "persister's failures;server/src/pipeline/persister.rs;(replace|in) (classify|backoff|dead_letter_unreadable)\b;--lib --test api;persister seckill::a_poison_reservation seckill::a_reservation_delivered_twice_makes_one_order"
)

if ! command -v cargo-mutants >/dev/null; then
  echo "cargo-mutants is not installed (make cargo-mutants installs it)" >&2
  exit 1
fi
git -C "$root" worktree remove --force "$tree" 2>/dev/null || true
rm -rf "$tree"
mkdir -p "$out"
git -C "$root" worktree add --detach -q "$tree" HEAD
trap 'git -C "$root" worktree remove --force "$tree" 2>/dev/null || true' EXIT
export CARGO_TARGET_DIR=$root/target LEPTOS_OUTPUT_NAME=seckill SQLX_OFFLINE=true

summary=("| group | examined | caught | missed | unviable | timeouts |" "|---|---:|---:|---:|---:|---:|")
status=0
for group in "${SETS[@]}"; do
  IFS=';' read -r name files re targets filters <<<"$group"
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qxF "$name"; then continue; fi
  dir=$out/${name//[^a-z]/-}
  rm -rf "$dir"
  args=(--in-place --no-shuffle -p server -E "$EXCLUDE" -o "$dir")
  for f in ${files//,/ }; do args+=(-f "$f"); done
  [ -n "$re" ] && args+=(-F "$re")
  echo "== $name: $(cd "$tree" && cargo mutants --list "${args[@]}" | wc -l) mutants"
  # shellcheck disable=SC2086 # the targets and filters are words
  (cd "$tree" && cargo mutants "${args[@]}" -- $targets -- --test-threads=4 $filters) || status=1
  count() { [ -f "$dir/mutants.out/$1.txt" ] && wc -l <"$dir/mutants.out/$1.txt" || echo 0; }
  examined=$(($(count caught) + $(count missed) + $(count unviable) + $(count timeout)))
  summary+=("| $name | $examined | $(count caught) | $(count missed) | $(count unviable) | $(count timeout) |")
  if [ -s "$dir/mutants.out/missed.txt" ]; then
    echo "missed in $name:"
    sed 's/^/  /' "$dir/mutants.out/missed.txt"
  fi
done
printf '%s\n' "${summary[@]}" | tee "$out/summary.md"
exit $status
