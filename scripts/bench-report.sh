#!/usr/bin/env bash
# The public report's generation time for a sale of 100,000 orders (issue "Storefront II"): a
# database of its own gets a sale, 100,000 shoppers with one order each, their attempts by second
# and outcome, and a kept waiting room; then a server on it answers `GET /api/activities/{id}/report`
# ten times, uncached, and the times are printed (the first, then the median of the rest).
# Usage: scripts/bench-report.sh [orders] (the services of scripts/services.sh must be up).
set -euo pipefail
cd "$(dirname "$0")/.."
ORDERS=${1:-100000}
DB=seckill_report_bench
PORT=${SECKILL_BENCH_REPORT_PORT:-3999}
PSQL="/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p 55432 -U seckill -v ON_ERROR_STOP=1 -q"
PROFILE=${SECKILL_BENCH_PROFILE:-release}
BIN=target/$PROFILE/server
[ -x "$BIN" ] || { echo "build $BIN first (cargo leptos build${PROFILE/debug/} )" >&2; exit 1; }

export DATABASE_URL=postgres://seckill@127.0.0.1:55432/$DB SECKILL_ADDR=127.0.0.1:$PORT \
  SECKILL_SECRET=bench-report-secret-bench-report-secret SECKILL_REDIS_PREFIX="bench-report:$(date +%s%N):" \
  LEPTOS_SITE_ROOT=target/site RUST_LOG=warn
$PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
"$BIN" migrate > /dev/null
$PSQL -d $DB <<SQL
INSERT INTO shops (name) VALUES ('Bench shop');
INSERT INTO users (username, password_hash, role, shop_id) VALUES ('bench_merchant', 'x', 'merchant', 1);
INSERT INTO activities (merchant_id, shop_id, title, description, price_cents, seckill_price_cents,
                        starts_at, ends_at, total_stock, sold, per_user_limit, captcha_required,
                        payment_window_secs, waiting_room, bot_check)
VALUES (1, 1, 'Bench sale', 'A sale of $ORDERS orders.', 1000, 100, now() - interval '1 hour',
        now() - interval '1 minute', $ORDERS, $ORDERS, 1, false, 600, true, 'none');
INSERT INTO users (username, password_hash, role)
SELECT 'bench_shopper_' || g, 'x', 'shopper' FROM generate_series(1, $ORDERS) g;
-- One order each, reserved over the sale's first two minutes; a fifth paid.
INSERT INTO orders (token, activity_id, user_id, quantity, unit_price_cents, status, reserved_at, pay_by, paid_at)
SELECT gen_random_uuid(), 1, g + 1, 1, 100, CASE WHEN g % 5 = 0 THEN 'paid' ELSE 'confirmed' END,
       now() - interval '1 hour' + (g * interval '1.2 millisecond'), now() + interval '10 minutes',
       CASE WHEN g % 5 = 0 THEN now() END
FROM generate_series(1, $ORDERS) g;
-- Attempts: the orders, and four refusals for each, over the same two minutes.
INSERT INTO sale_attempts (activity_id, second, outcome, n)
SELECT 1, date_trunc('second', now() - interval '1 hour') + s * interval '1 second', o, $ORDERS / 120
FROM generate_series(0, 119) s, unnest(ARRAY['accepted','sold_out','limit_reached','captcha_invalid','rate_limited']) o;
INSERT INTO sale_lines (activity_id, joined, admitted, lapsed, wait_bounds_ms, wait_counts)
VALUES (1, $ORDERS * 4, $ORDERS, 0, ARRAY[1000, 10000, 60000], ARRAY[$ORDERS / 2, $ORDERS / 4, $ORDERS / 4]);
ANALYZE;
SQL

"$BIN" serve > target/bench-report-server.log 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$PORT/readyz" > /dev/null && break; sleep 0.1; done
times=()
for i in $(seq 1 10); do
  t=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "http://127.0.0.1:$PORT/api/activities/1/report")
  [ "${t%% *}" = 200 ] || { echo "report answered ${t%% *}" >&2; exit 1; }
  times+=("${t#* }")
done
first=${times[0]}
median=$(printf '%s\n' "${times[@]:1}" | sort -n | sed -n 5p)
echo "report of a sale of $ORDERS orders ($PROFILE build): first ${first} s, median of the next 9 ${median} s"
