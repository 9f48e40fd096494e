#!/usr/bin/env bash
# The front door as a client sees it through nginx (`make test` runs it on the cluster shape):
# /metrics is not passed through, and a burst of sign-ins from one address meets nginx's
# per-address limit (429) before the instances, and a client that is not a trusted proxy cannot
# choose its address with X-Forwarded-For. Exits non-zero when one does not hold.
set -euo pipefail
BASE=${1:?usage: $0 BASE_URL}
code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/metrics")
[ "$code" = 404 ] || { echo "front door: /metrics through nginx answered $code, not 404" >&2; exit 1; }
# 60 sign-ins at once from one client address (nginx believes the loopback hop's
# X-Forwarded-For): past the burst of 20, nginx answers 429 itself.
codes=$(seq 60 | xargs -P 60 -I{} curl -s -o /dev/null -w '%{http_code} %{content_type}\n' \
  -H 'content-type: application/json' -H 'x-forwarded-for: 198.51.100.250' \
  -d '{"username":"front_door_probe","password":"not-the-password"}' "$BASE/api/auth/login")
# nginx's own refusal is its HTML page; the instances answer JSON.
limited=$(grep -c '^429 text/html' <<<"$codes" || true)
errors=$(grep -c '^5' <<<"$codes" || true)
echo "front door: /metrics 404; 60 sign-ins at once from one address: $limited refused by nginx (429), $errors 5xx"
[ "$limited" -ge 20 ] || { echo "front door: nginx's limit_req did not hold ($limited of 60 refused)" >&2; exit 1; }
[ "$errors" = 0 ] || { echo "front door: 5xx answers" >&2; exit 1; }

# From 127.0.0.2, which is no trusted proxy (nginx trusts SECKILL_NGINX_REAL_IP_FROM, 127.0.0.1 by
# default): seven wrong sign-ins for one username, each claiming another address. nginx keeps
# 127.0.0.2 as the client, so the instances see one address and lock it after five failures (their
# JSON 429); had nginx believed the header, each would be a first failure (401).
user="spoof_probe_$(date +%s%N | tail -c 9)"
last=""
for i in 1 2 3 4 5 6 7; do
  last=$(curl -s -o /dev/null --interface 127.0.0.2 -w '%{http_code} %{content_type}' \
    -H 'content-type: application/json' -H "x-forwarded-for: 192.0.2.$i" \
    -d "{\"username\":\"$user\",\"password\":\"not-the-password\"}" "$BASE/api/auth/login")
done
echo "front door: seven wrong sign-ins from an untrusted hop claiming seven addresses: the last answered $last"
[[ "$last" == "429 application/json"* ]] || { echo "front door: X-Forwarded-For from an untrusted hop was believed ($last)" >&2; exit 1; }

# A waiting room's board is the same document for every waiter: nginx keeps it for the second the
# instances allow (s-maxage), so a crowd polling it reaches the instances about once a second.
sale=$(curl -s "$BASE/api/activities" | grep -o '"id":[0-9]*' | head -1 | cut -d: -f2)
[ -n "$sale" ] || { echo "front door: no sale to read the board of" >&2; exit 1; }
statuses=$(for _ in $(seq 20); do
  curl -s -o /dev/null -D - "$BASE/api/activities/$sale/line" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-cache-status"{print $2}'
done)
hits=$(grep -c -E '^(HIT|UPDATING|STALE)$' <<<"$statuses" || true)
echo "front door: 20 reads of a sale's board in a row: $hits answered by nginx's cache"
[ "$hits" -ge 15 ] || { echo "front door: the board is not cached ($(tr '\n' ' ' <<<"$statuses"))" >&2; exit 1; }

# nginx lets its idle connections to the instances go before the instances would close them
# (SECKILL_HEADER_READ_TIMEOUT_SECS, 10 s): a request sent on a connection an instance is closing
# fails and marks that instance down (max_fails), and after a crowd every pooled connection goes
# idle at once — all three instances down together, 502 for everyone. The crowd before this
# script filled the pool; from the last request on, every one of nginx's connections to an
# instance must be gone well before 10 s.
port=${BASE##*:}
port=${port%%/*}
upstream() { ss -Htnp state established | grep '"nginx"' | awk -v p=":$port" '$3 !~ p"$"' | wc -l; }
curl -s -o /dev/null "$BASE/api/activities"
start=$(date +%s%N)
held=$(upstream)
while [ "$(upstream)" -gt 0 ]; do
  if [ $(( ($(date +%s%N) - start) / 1000000 )) -gt 9000 ]; then
    echo "front door: nginx still holds $(upstream) idle connections to the instances 9 s after the last request (they close theirs at 10 s)" >&2
    exit 1
  fi
  sleep 0.2
done
echo "front door: nginx let its $held pooled connections to the instances go $(( ($(date +%s%N) - start) / 1000000 )) ms after the last request (the instances wait 10 s)"
