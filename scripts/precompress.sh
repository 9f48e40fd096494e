#!/usr/bin/env bash
# Writes brotli and gzip copies next to each built asset, which the server sends to clients that
# accept them (tower-http ServeDir, precompressed_br/precompressed_gzip).
set -euo pipefail
dir=${1:-target/site/pkg}
for f in "$dir"/*.js "$dir"/*.wasm "$dir"/*.css; do
  [ -f "$f" ] || continue
  gzip -9 -k -f "$f"
  brotli -f -k "$f"
done
