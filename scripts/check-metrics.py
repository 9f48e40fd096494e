#!/usr/bin/env python3
"""A process's /metrics held to the rules (docs/operations.md "Metrics"): strict OpenMetrics
(prometheus_client's parser), Prometheus's naming guide (one prefix, snake case, base units,
`_total` on counters, the unit at the end), labels from a bounded set whose values hold no ids
but a sale's, a cap on series, and the families an operator reads present.

  scripts/check-metrics.py EXPOSITION [--pipeline]   check a captured exposition (the file)
  scripts/check-metrics.py --self-test               each rule refuses a broken exposition

`--pipeline`: the process runs the workers, so their families must be there too.
"""
import re
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

NAME = re.compile(r"^(seckill|process)_[a-z][a-z0-9_]*[a-z0-9]$")
# Units that are not base units, anywhere in a name.
NOT_BASE = re.compile(r"_(milliseconds|millis|ms|microseconds|us|nanoseconds|ns|minutes|hours|kilobytes|kb|megabytes|mb|percent)(_|$)")
LABELS = {"activity", "result", "answered", "reason", "worker", "dependency", "method", "route", "status", "version", "revision"}
METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
MAX_SERIES = 2000
# What an operator reads in seconds: requests, pools, process, runtime, and the build.
REQUIRED = [
    "seckill_http_request_duration_seconds", "seckill_http_requests_in_flight",
    "seckill_db_pool_connections", "seckill_db_pool_idle_connections", "seckill_db_pool_max_connections",
    "seckill_redis_command_duration_seconds", "seckill_redis_command_errors", "seckill_redis_reconnects",
    "seckill_runtime_workers", "seckill_runtime_alive_tasks", "seckill_runtime_global_queue_depth",
    "process_cpu_seconds", "process_resident_memory_bytes", "process_open_fds", "process_max_fds",
    "process_start_time_seconds", "seckill_build", "seckill_buy_requests", "seckill_gate_seconds",
    "seckill_dependency_up",
]
# The workers' (relay, persisters, reconciler, the sales' gauges).
PIPELINE = [
    "seckill_rabbitmq_publish_confirm_seconds", "seckill_journal_lag", "seckill_persisted_orders",
    "seckill_dead_lettered_reservations", "seckill_stock_drift", "seckill_sale_units_left",
    "seckill_sale_line_length", "seckill_sale_journal_age_seconds", "seckill_sale_persister_lag_seconds",
    "seckill_redis_aof_growth_bytes", "seckill_redis_aof_rounds_failed",
]


def problems(text, pipeline=False):
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser's refusal, whatever its kind
        return [f"not strict OpenMetrics: {e}"]
    found, series = [], 0
    names = {f.name for f in families}
    for family in families:
        name, kind = family.name, family.type
        if not NAME.match(name):
            found.append(f"{name}: not prefixed seckill_ or process_, or not snake case")
        if NOT_BASE.search(name):
            found.append(f"{name}: not in base units (seconds, bytes)")
        for unit in ("seconds", "bytes"):
            if f"_{unit}_" in f"{name}_" and not name.endswith(f"_{unit}"):
                found.append(f"{name}: the unit {unit} not at the end")
        if family.unit and not name.endswith(f"_{family.unit}"):
            found.append(f"{name}: unit {family.unit} not its suffix")
        if kind == "counter" and any(not s.name.endswith(("_total", "_created")) for s in family.samples):
            found.append(f"{name}: a counter sample without _total")
        if kind != "counter" and name.endswith("_total"):
            found.append(f"{name}: _total on a {kind}")
        if not family.documentation:
            found.append(f"{name}: no help text")
        for sample in family.samples:
            series += 1
            for label, value in sample.labels.items():
                if label in ("le", "quantile"):
                    continue
                if label not in LABELS:
                    found.append(f"{name}: label {label} is not one of the bounded set")
                elif label == "route" and (re.search(r"\d", value) or not (value.startswith("/") or value == "unmatched")):
                    found.append(f"{name}: route {value!r} is not a template")
                elif label == "method" and value not in METHODS:
                    found.append(f"{name}: method {value!r}")
                elif label == "activity" and not value.isdigit():
                    found.append(f"{name}: activity {value!r}")
    if series > MAX_SERIES:
        found.append(f"{series} series, over the cap of {MAX_SERIES}")
    for need in REQUIRED + (PIPELINE if pipeline else []):
        if need not in names:
            found.append(f"{need}: missing")
    return found


def self_test():
    good = (
        "# TYPE seckill_x_seconds histogram\n# UNIT seckill_x_seconds seconds\n# HELP seckill_x_seconds X.\n"
        'seckill_x_seconds_bucket{route="/api/activities/{id}",le="1.0"} 1\n'
        'seckill_x_seconds_bucket{route="/api/activities/{id}",le="+Inf"} 1\n'
        'seckill_x_seconds_sum{route="/api/activities/{id}"} 0.5\nseckill_x_seconds_count{route="/api/activities/{id}"} 1\n'
    )
    def expo(body):
        return body + "# EOF\n"
    cases = {
        "not OpenMetrics (no EOF)": good,
        "a name without the prefix": "# TYPE shop_things gauge\n# HELP shop_things T.\nshop_things 1\n",
        "milliseconds": "# TYPE seckill_wait_milliseconds gauge\n# HELP seckill_wait_milliseconds W.\nseckill_wait_milliseconds 1\n",
        "the unit inside": "# TYPE seckill_wait_seconds_max gauge\n# HELP seckill_wait_seconds_max W.\nseckill_wait_seconds_max 1\n",
        "a label not bounded": "# TYPE seckill_buys gauge\n# HELP seckill_buys B.\nseckill_buys{user_id=\"42\"} 1\n",
        "a path as the route": good.replace("/api/activities/{id}", "/api/activities/42"),
        "an odd method": "# TYPE seckill_r gauge\n# HELP seckill_r R.\nseckill_r{method=\"BREW\"} 1\n",
        "no help": "# TYPE seckill_g gauge\nseckill_g 1\n",
        "too many series": "# TYPE seckill_sale gauge\n# HELP seckill_sale S.\n" + "".join(f'seckill_sale{{activity="{i}"}} 1\n' for i in range(MAX_SERIES + 1)),
    }
    failed = 0
    for what, body in cases.items():
        text = body if what.startswith("not OpenMetrics") else expo(body)
        found = [p for p in problems(text) if not p.endswith(": missing")]
        if not found:
            print(f"self-test: {what}: not refused", file=sys.stderr)
            failed += 1
    if [p for p in problems(expo(good)) if not p.endswith(": missing")]:
        print(f"self-test: a good exposition refused: {problems(expo(good))}", file=sys.stderr)
        failed += 1
    print(f"check-metrics self-test: {len(cases) + 1 - failed}/{len(cases) + 1}")
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    text = open(argv[1], encoding="utf-8").read()
    found = problems(text, pipeline="--pipeline" in argv[2:])
    for p in found:
        print(f"{argv[1]}: {p}", file=sys.stderr)
    if found:
        return 1
    families = list(text_string_to_metric_families(text))
    print(f"{argv[1]}: {len(families)} families, {sum(len(f.samples) for f in families)} series, every rule kept")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
