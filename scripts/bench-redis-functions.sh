#!/usr/bin/env bash
# EVALSHA against FCALL: the same check-and-decrement as a cached script and as a Redis Function,
# each 300,000 calls from 50 clients of redis-benchmark, three rounds in turn on the one Redis of
# `make run` (docs/benchmarks.md "Scripts or Functions"). Prints one line per round.
set -euo pipefail
PORT=${REDIS_PORT:-56379}
R=(redis-cli -p "$PORT")
KEY="bench:functions:{stock}"
BODY="local n = tonumber(redis.call('GET', KEYS[1]) or '0') if n > 0 then return redis.call('DECR', KEYS[1]) end return -1"
SHA=$("${R[@]}" SCRIPT LOAD "$BODY")
"${R[@]}" FUNCTION LOAD REPLACE "#!lua name=seckill_bench
redis.register_function('decr_if', function(KEYS, ARGV) $BODY end)" >/dev/null
rps() { redis-benchmark -p "$PORT" -n 300000 -c 50 -q "$@" | tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -1; }
for round in 1 2 3; do
  "${R[@]}" SET "$KEY" 100000000 >/dev/null
  evalsha=$(rps EVALSHA "$SHA" 1 "$KEY")
  "${R[@]}" SET "$KEY" 100000000 >/dev/null
  fcall=$(rps FCALL decr_if 1 "$KEY")
  echo "round $round: EVALSHA $evalsha calls/s, FCALL $fcall calls/s"
done
"${R[@]}" DEL "$KEY" >/dev/null
"${R[@]}" FUNCTION DELETE seckill_bench >/dev/null
