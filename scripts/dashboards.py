#!/usr/bin/env python3
"""The Grafana dashboards, as code: this file writes deploy/monitoring/dashboards/*.json (Grafana's
dashboard JSON, schema 39), which Grafana provisions from deploy/monitoring/grafana/. Edit here,
then run it; `make lint` fails when the JSON is not what this file writes (`--check`), and
`make test` asks the cluster's own Prometheus every panel's query after a crowd
(scripts/check-monitoring.py dashboards).

  scripts/dashboards.py            write the JSON
  scripts/dashboards.py --check    the JSON is current
"""
import json
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parent.parent / "deploy/monitoring/dashboards"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
BUY = 'route="/api/activities/{id}/buy"'
SALE = 'activity=~"$activity"'


def panel(title, exprs, unit="short", legend="{{instance}}", description="", kind="timeseries"):
    """A panel of one or more queries; `exprs` is one PromQL string, or (legend, expr) pairs."""
    if isinstance(exprs, str):
        exprs = [(legend, exprs)]
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
            for i, (legend, expr) in enumerate(exprs)
        ],
    }


def dashboard(uid, title, description, panels, variables=()):
    for i, p in enumerate(panels):  # two panels a row, each 12 wide and 8 high
        p["id"] = i + 1
        p["gridPos"] = {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)}
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["seckill"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "refresh": "5s",
        "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"},
            *variables,
        ]},
        "annotations": {"list": []},
        "panels": panels,
    }


def sale():
    activity = {
        "name": "activity", "label": "Sale", "type": "query", "datasource": DATASOURCE,
        "query": "label_values(seckill_sale_units_left, activity)", "refresh": 2,
        "includeAll": True, "multi": True, "allValue": ".*",
    }
    return dashboard("seckill-sale", "Seckill: the sale", "One sale at a glance: units, buys, the line, and whether acknowledged buys reach PostgreSQL.", [
        panel("Units left", f"max by (activity) (seckill_sale_units_left{{{SALE}}})", legend="sale {{activity}}"),
        panel("Buy answers a second, by result", "sum by (result) (rate(seckill_buy_requests_total[1m]))", unit="reqps", legend="{{result}}"),
        panel("Buy latency", [
            ("p50", f"histogram_quantile(0.5, sum by (le) (rate(seckill_http_request_duration_seconds_bucket{{{BUY}}}[1m])))"),
            ("p99", f"histogram_quantile(0.99, sum by (le) (rate(seckill_http_request_duration_seconds_bucket{{{BUY}}}[1m])))"),
        ], unit="s"),
        panel("Waiting room: shoppers in line", f"max by (activity) (seckill_sale_line_length{{{SALE}}})", legend="sale {{activity}}"),
        panel("Journal age (reservations not yet in RabbitMQ)", f"max by (activity) (seckill_sale_journal_age_seconds{{{SALE}}})", unit="s", legend="sale {{activity}}",
              description="Alert SeckillJournalStuck above 30 s for a minute."),
        panel("Persister lag (acknowledged buys not yet orders)", f"max by (activity) (seckill_sale_persister_lag_seconds{{{SALE}}})", unit="s", legend="sale {{activity}}",
              description="Alert SeckillBuysNotPersisting above 60 s for a minute."),
        panel("Orders written a second", "sum(rate(seckill_persisted_orders_total[1m]))", unit="ops", legend="orders"),
        panel("Dead-lettered reservations (10 min)", "sum(increase(seckill_dead_lettered_reservations_total[10m]))", legend="dead letters"),
        panel("Stock drift (Redis against the database)", f"max by (activity) (abs(seckill_stock_drift{{{SALE}}}))", legend="sale {{activity}}"),
        panel("SLO: error and slow-buy ratios (5 min)", [
            ("5xx ratio", "seckill:http_errors:ratio_rate5m"),
            ("buys over 256 ms", "seckill:buy_slow:ratio_rate5m"),
        ], unit="percentunit"),
    ], [activity])


def fleet():
    return dashboard("seckill-fleet", "Seckill: the fleet", "Every process and engine: requests (RED), pools, runtime, engines.", [
        panel("Requests a second, by route", "sum by (route) (rate(seckill_http_request_duration_seconds_count[1m]))", unit="reqps", legend="{{route}}"),
        panel("5xx ratio, by route", '(sum by (route) (rate(seckill_http_request_duration_seconds_count{status=~"5.."}[1m])) or 0 * sum by (route) (rate(seckill_http_request_duration_seconds_count[1m]))) / sum by (route) (rate(seckill_http_request_duration_seconds_count[1m]))', unit="percentunit", legend="{{route}}"),
        panel("p99 latency, by route", "histogram_quantile(0.99, sum by (le, route) (rate(seckill_http_request_duration_seconds_bucket[1m])))", unit="s", legend="{{route}}"),
        panel("Requests in flight", "sum by (instance) (seckill_http_requests_in_flight)"),
        panel("PostgreSQL pool in use, of its most", [
            ("{{instance}} in use", "seckill_db_pool_connections - seckill_db_pool_idle_connections"),
            ("{{instance}} most", "seckill_db_pool_max_connections"),
        ]),
        panel("Redis command p99, by instance", "histogram_quantile(0.99, sum by (le, instance) (rate(seckill_redis_command_duration_seconds_bucket[1m])))", unit="s"),
        panel("Redis command errors and reconnects a second", [
            ("{{instance}} errors", "sum by (instance) (rate(seckill_redis_command_errors_total[1m]))"),
            ("{{instance}} reconnects", "sum by (instance) (rate(seckill_redis_reconnects_total[1m]))"),
        ], unit="ops"),
        panel("RabbitMQ publish-confirm p99", "histogram_quantile(0.99, sum by (le) (rate(seckill_rabbitmq_publish_confirm_seconds_bucket[1m])))", unit="s", legend="confirm p99"),
        panel("CPU, by process", 'rate(process_cpu_seconds_total{job="seckill"}[1m])', unit="percentunit"),
        panel("Resident memory, by process", 'process_resident_memory_bytes{job="seckill"}', unit="bytes"),
        panel("File descriptors used, of the most", 'process_open_fds{job="seckill"} / process_max_fds{job="seckill"}', unit="percentunit"),
        panel("Async runtime: tasks alive and queued", [
            ("{{instance}} alive", "seckill_runtime_alive_tasks"),
            ("{{instance}} queued", "seckill_runtime_global_queue_depth"),
        ]),
        panel("Scrape targets up", "sum by (job) (up)", legend="{{job}}"),
        panel("Engines answering their exporter", [
            ("postgres", "min(pg_up)"),
            ("redis {{instance}}", "redis_up"),
        ]),
        panel("Redis memory used", "redis_memory_used_bytes", unit="bytes"),
        panel("RabbitMQ messages ready and unacknowledged", [
            ("{{instance}} ready", "sum by (instance) (rabbitmq_queue_messages_ready)"),
            ("{{instance}} unacked", "sum by (instance) (rabbitmq_queue_messages_unacked)"),
        ]),
        panel("PostgreSQL backends", "sum(pg_stat_database_numbackends)", legend="backends"),
        panel("Node load and CPU", [
            ("load 1 min", "node_load1"),
            ("busy CPU", 'sum(rate(node_cpu_seconds_total{mode!="idle"}[1m]))'),
        ]),
        panel("Worker restarts (15 min)", "sum by (instance, worker) (increase(seckill_worker_restarts_total[15m]))", legend="{{instance}} {{worker}}"),
        panel("Releases running", "count by (version, revision) (seckill_build_info)", legend="{{version}} {{revision}}"),
    ])


def rendered():
    return {f"{board['uid'].removeprefix('seckill-')}.json": json.dumps(board, indent=2) + "\n" for board in (sale(), fleet())}


def main(argv):
    boards = rendered()
    if argv[1:] == ["--check"]:
        stale = [name for name, text in boards.items() if not (OUT / name).exists() or (OUT / name).read_text() != text]
        for name in stale:
            print(f"deploy/monitoring/dashboards/{name} is not what scripts/dashboards.py writes: run it", file=sys.stderr)
        return 1 if stale else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in boards.items():
        (OUT / name).write_text(text)
    print(f"dashboards: {', '.join(sorted(boards))} written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
