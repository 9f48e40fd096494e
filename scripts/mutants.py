#!/usr/bin/env python3
"""`make mutants`: applies each deliberate breakage of mutants/mutations.toml to a copy of the
product (a git worktree of HEAD under target/mutants/, built in the repo's own target directory:
the dependencies are built already; only the workspace's crates are built again) and
runs the tests that guard it; every mutation must make them fail. First the same tests run on the
unbroken copy: they must pass there, or a failure would prove nothing.

  scripts/mutants.py            every mutation; the table is printed and written to target/mutants/report.md
  scripts/mutants.py --check    only that each `from` occurs exactly once in its file (make lint)
  scripts/mutants.py --only NAME[,NAME…]
"""
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

root = Path(__file__).resolve().parent.parent
mutations = tomllib.loads((root / "mutants/mutations.toml").read_text())["mutation"]


def check(tree: Path) -> list:
    problems = []
    names = set()
    for m in mutations:
        if m["name"] in names:
            problems.append(f"{m['name']}: named twice")
        names.add(m["name"])
        text = (tree / m["file"]).read_text()
        n = text.count(m["from"])
        if n != 1:
            problems.append(f"{m['name']}: `from` occurs {n} times in {m['file']} (must be once)")
        kind = m["tests"].split(" ", 1)[0]
        if kind not in ("api", "lib"):
            problems.append(f"{m['name']}: tests must start with api or lib")
    return problems


def command(tests: str) -> list:
    kind, filt = tests.split(" ", 1)
    target = ["--test", "api"] if kind == "api" else ["--lib"]
    return ["cargo", "test", "-q", "-p", "server", *target, "--", "--test-threads=4", filt]


def run(tree: Path, env: dict, tests: str, log: Path) -> tuple:
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.call(command(tests), cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT)
    text = log.read_text()
    ran = "running 0 tests" not in text and "test result" in text
    return code, ran, time.monotonic() - started


def record(report: list) -> None:
    """Puts the table of a whole run between the mutants markers of docs/tests.md."""
    docs = root / "docs/tests.md"
    text = docs.read_text()
    begin, end = "<!-- mutants:begin -->", "<!-- mutants:end -->"
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    body = f"Last run: {stamp} (`make mutants`, debug build).\n\n" + "\n".join(report)
    docs.write_text(f"{head}{begin}\n{body}\n{end}{tail}")


def main() -> int:
    if "--check" in sys.argv:
        problems = check(root)
        if problems:
            print("mutations out of date:\n  " + "\n  ".join(problems), file=sys.stderr)
            return 1
        print(f"mutants: {len(mutations)} mutations, each `from` found once")
        return 0
    only = None
    if "--only" in sys.argv:
        only = set(sys.argv[sys.argv.index("--only") + 1].split(","))
    chosen = [m for m in mutations if only is None or m["name"] in only]
    work = root / "target/mutants"
    tree = work / "tree"
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    subprocess.call(["git", "worktree", "remove", "--force", str(tree)], cwd=root, stderr=subprocess.DEVNULL)
    shutil.rmtree(tree, ignore_errors=True)
    subprocess.check_call(["git", "worktree", "add", "--detach", "-q", str(tree), "HEAD"], cwd=root)
    problems = check(tree)
    if problems:
        print("mutations out of date:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    env = dict(os.environ)
    # The statements of a mutated query are described against a database migrated from scratch
    # (the tests create their own databases next to it).
    psql = ["/usr/lib/postgresql/15/bin/psql", "-h", "127.0.0.1", "-p", "55432", "-U", "seckill",
            "-v", "ON_ERROR_STOP=1", "-q"]
    subprocess.check_call(psql + ["-d", "postgres", "-c", "DROP DATABASE IF EXISTS seckill_mutants WITH (FORCE)",
                                  "-c", "CREATE DATABASE seckill_mutants"])
    for migration in sorted((tree / "migrations").glob("*.sql")):
        subprocess.check_call(psql + ["-d", "seckill_mutants", "-f", str(migration)], stdout=subprocess.DEVNULL)
    env["DATABASE_URL"] = "postgres://seckill@127.0.0.1:55432/seckill_mutants"
    env["SQLX_OFFLINE"] = "false"
    env["CARGO_TARGET_DIR"] = str(root / "target")
    env["LEPTOS_OUTPUT_NAME"] = "seckill"

    # The guarding tests pass on the unbroken copy.
    for tests in sorted({m["tests"] for m in chosen}):
        code, ran, secs = run(tree, env, tests, logs / "baseline.log")
        if code != 0 or not ran:
            print(f"baseline: `{tests}` does not pass unbroken (see {logs / 'baseline.log'})", file=sys.stderr)
            return 1
        print(f"baseline passes: {tests} ({secs:.0f} s)", flush=True)

    rows = []
    for i, m in enumerate(chosen, 1):
        path = tree / m["file"]
        original = path.read_text()
        path.write_text(original.replace(m["from"], m["to"], 1))
        log = logs / f"{i:02}.log"
        try:
            code, ran, secs = run(tree, env, m["tests"], log)
        finally:
            path.write_text(original)
        verdict = "caught" if code != 0 else "SURVIVED"
        if code != 0 and "error[E" in log.read_text():
            verdict = "does not build"
        rows.append((m["name"], m["promise"], m["tests"], verdict, secs))
        print(f"{i:2}/{len(chosen)} {verdict:14} {m['name']} ({secs:.0f} s)", flush=True)

    report = ["| mutation | promise broken | guarding tests | result | time |", "|---|---|---|---|---|"]
    for name, promise, tests, verdict, secs in rows:
        report.append(f"| {name} | {promise} | `{tests}` | {verdict} | {secs:.0f} s |")
    caught = sum(1 for r in rows if r[3] == "caught")
    report.append("")
    report.append(f"{caught} of {len(rows)} mutations caught.")
    (work / "report.md").write_text("\n".join(report) + "\n")
    if only is None:
        record(report)
    print("\n".join(report))
    subprocess.call(["git", "worktree", "remove", "--force", str(tree)], cwd=root, stderr=subprocess.DEVNULL)
    return 0 if caught == len(rows) else 1


sys.exit(main())
