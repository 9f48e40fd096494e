#!/usr/bin/env bash
# The size a shopper downloads: the release wasm (after wasm-opt) of the newest build in the site
# folder, raw, gzip -9 and brotli -q 11, checked against the budget. Run right after
# `node scripts/site.mjs --release` (make wasm-budget). Prints one line per figure.
set -euo pipefail
dir=${1:-target/site/pkg}
# Budgets, in bytes: what a phone on a busy network should have to fetch at most.
RAW_BUDGET=${WASM_RAW_BUDGET:-1800000}
BR_BUDGET=${WASM_BR_BUDGET:-450000}
wasm=$(ls -t "$dir"/*.wasm 2>/dev/null | head -1)
[ -n "$wasm" ] || { echo "no wasm in $dir" >&2; exit 1; }
raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
br=$(brotli -q 11 -c "$wasm" | wc -c)
echo "release wasm $(basename "$wasm"): raw $raw B, gzip $gz B, brotli $br B (budget: raw $RAW_BUDGET, brotli $BR_BUDGET)"
if [ "$raw" -gt "$RAW_BUDGET" ] || [ "$br" -gt "$BR_BUDGET" ]; then
  echo "the release wasm is over its budget" >&2
  exit 1
fi
