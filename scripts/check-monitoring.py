#!/usr/bin/env python3
"""The shape's Prometheus, checked on its own data (docs/operations.md "Monitoring").

  scripts/check-monitoring.py targets PROMETHEUS_URL [SECS]
      every target Prometheus scrapes is up (polled until SECS, 60 by default)
  scripts/check-monitoring.py dashboards PROMETHEUS_URL EXPOSITION DASHBOARD.json...
      each panel's query parses and is answered by Prometheus; every metric it names is in the
      captured exposition of an instance (seckill_*, process_*), among the recording rules of
      deploy/monitoring/alerts.yml (seckill:*), or among the series Prometheus holds (the
      exporters'); prints each panel's answer
  scripts/check-monitoring.py rules
      every alert of deploy/monitoring/alerts.yml has a severity that Alertmanager's
      configuration routes to the receiver of that name (amtool), a summary, a description, a
      runbook section of docs/operations.md, and a test of alerts-test.yml where it fires and
      one where it stays silent
  scripts/check-monitoring.py --self-test
"""
import json
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import yaml

# PromQL's functions, aggregations and keywords: never metric names.
WORDS = {
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "group",
    "count_values", "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
    "unless", "offset", "bool", "inf", "nan", "atan2",
}
# The dashboards' variables, as Prometheus must see them for the check.
VARIABLES = {"$activity": ".*", "${activity}": ".*", "$instance": ".*", "${instance}": ".*",
             "$__rate_interval": "1m", "${__rate_interval}": "1m", "$__interval": "30s"}


def metric_names(expr):
    """The metric names a PromQL expression reads."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings out (label values, regexes)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers out
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        word = match.group(0)
        rest = text[match.end():].lstrip()
        if rest.startswith("("):  # a function or aggregation
            continue
        if word.lower() in WORDS or re.fullmatch(r"\d+[smhdwy]", word):
            continue
        before = text[:match.start()]
        if re.search(r"[0-9.]$", before):  # a number's exponent or suffix
            continue
        names.add(word)
    return names


def substitute(expr):
    for var, value in VARIABLES.items():
        expr = expr.replace(var, value)
    return expr


def get(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def query(base, expr):
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        return get(url)
    except urllib.error.HTTPError as e:
        return json.load(e)


def targets(base, secs):
    deadline = time.monotonic() + secs
    while True:
        active = get(f"{base}/api/v1/targets")["data"]["activeTargets"]
        down = [t for t in active if t["health"] != "up"]
        if active and not down:
            jobs = {}
            for t in active:
                jobs[t["labels"]["job"]] = jobs.get(t["labels"]["job"], 0) + 1
            print(f"prometheus targets: all {len(active)} up ({', '.join(f'{j} {n}' for j, n in sorted(jobs.items()))})")
            return 0
        if time.monotonic() > deadline:
            for t in down:
                print(f"target down: {t['labels']['job']} {t['scrapeUrl']}: {t['lastError'] or t['health']}", file=sys.stderr)
            return 1
        time.sleep(0.5)


def exposition_names(path):
    names = set()
    for line in open(path, encoding="utf-8"):
        if line.startswith("#") or not line.strip():
            continue
        name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
        names.add(name)
        names.add(re.sub(r"_(bucket|sum|count|total|created|info)$", "", name))
    return names


def recorded(rules="deploy/monitoring/alerts.yml"):
    out = set()
    for group in yaml.safe_load(open(rules, encoding="utf-8"))["groups"]:
        out |= {r["record"] for r in group["rules"] if "record" in r}
    return out


def panels(dashboard):
    for panel in dashboard.get("panels", []):
        yield from panels(panel)  # rows hold panels
        for target in panel.get("targets", []):
            if "expr" in target:
                yield panel.get("title", "?"), target["expr"]


def dashboards(base, exposition, files):
    ours, records = exposition_names(exposition), recorded()
    held = set(get(f"{base}/api/v1/label/__name__/values")["data"])
    failed = 0
    for path in files:
        board = json.load(open(path, encoding="utf-8"))
        count = 0
        for title, expr in panels(board):
            count += 1
            answer = query(base, substitute(expr))
            if answer.get("status") != "success":
                print(f"{path}: {title}: {expr}: {answer.get('error')}", file=sys.stderr)
                failed += 1
                continue
            for name in sorted(metric_names(expr)):
                if name.startswith(("seckill_", "process_")):
                    known = name in ours
                elif name.startswith("seckill:"):
                    known = name in records
                else:
                    known = name in held
                if not known:
                    print(f"{path}: {title}: {name} is in no exposition, rule or series", file=sys.stderr)
                    failed += 1
            result = answer["data"]["result"]
            shown = ", ".join(
                f"{','.join(f'{k}={v}' for k, v in r['metric'].items() if k != '__name__') or '·'}: {float(r['value'][1]):.4g}"
                for r in result[:4]
            )
            print(f"  {board['title']} / {title}: {len(result)} series{': ' + shown if shown else ''}")
        if count == 0:
            print(f"{path}: no panel with a query", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def slug(heading):
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def rules(directory="deploy/monitoring", docs="docs/operations.md"):
    anchors = {slug(line.lstrip("#")) for line in open(docs, encoding="utf-8") if line.startswith("#")}
    tests = yaml.safe_load(open(f"{directory}/alerts-test.yml", encoding="utf-8"))["tests"]
    firing, silent = set(), set()
    for test in tests:
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    failed, alerts = [], []
    for group in yaml.safe_load(open(f"{directory}/alerts.yml", encoding="utf-8"))["groups"]:
        alerts += [r for r in group["rules"] if "alert" in r]
    for alert in alerts:
        name, notes = alert["alert"], alert.get("annotations", {})
        severity = alert.get("labels", {}).get("severity")
        if severity not in ("page", "ticket"):
            failed.append(f"{name}: severity {severity!r} is neither page nor ticket")
        else:
            routed = subprocess.run(
                ["amtool", "config", "routes", "test", f"--config.file={directory}/alertmanager.yml",
                 f"--verify.receivers={severity}", f"severity={severity}", f"alertname={name}"],
                capture_output=True, text=True)
            if routed.returncode != 0:
                failed.append(f"{name}: Alertmanager does not route it to {severity}: {routed.stdout.strip()}")
        for need in ("summary", "description", "runbook_url"):
            if not notes.get(need):
                failed.append(f"{name}: no {need}")
        url = notes.get("runbook_url", "")
        page, _, anchor = url.partition("#")
        if page != docs or anchor not in anchors:
            failed.append(f"{name}: runbook {url!r} is no section of {docs}")
        if name not in firing:
            failed.append(f"{name}: no test where it fires")
        if name not in silent:
            failed.append(f"{name}: no test where it stays silent")
    for problem in failed:
        print(problem, file=sys.stderr)
    if not failed:
        print(f"alert rules: {len(alerts)} alerts, each routed by its severity, with a runbook, firing and silent in tests")
    return 1 if failed else 0


def self_test():
    cases = {
        'sum by (activity) (rate(seckill_buy_requests_total{result="accepted"}[1m]))': {"seckill_buy_requests_total"},
        "histogram_quantile(0.99, sum by (le, route) (rate(seckill_http_request_duration_seconds_bucket[5m])))": {"seckill_http_request_duration_seconds_bucket"},
        "seckill_db_pool_connections - seckill_db_pool_idle_connections": {"seckill_db_pool_connections", "seckill_db_pool_idle_connections"},
        "max(seckill:http_errors:ratio_rate5m) > 1e-3 or vector(0)": {"seckill:http_errors:ratio_rate5m"},
        'rate(process_cpu_seconds_total{job="seckill"}[$__rate_interval])': {"process_cpu_seconds_total"},
    }
    failed = 0
    for expr, want in cases.items():
        got = metric_names(substitute(expr))
        if got != want:
            print(f"self-test: {expr}: {got} != {want}", file=sys.stderr)
            failed += 1
    print(f"check-monitoring self-test: {len(cases) - failed}/{len(cases)}")
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if argv[1:] == ["rules"]:
        return rules()
    if len(argv) >= 3 and argv[1] == "targets":
        return targets(argv[2].rstrip("/"), float(argv[3]) if len(argv) > 3 else 60)
    if len(argv) >= 5 and argv[1] == "dashboards":
        return dashboards(argv[2].rstrip("/"), argv[3], argv[4:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
