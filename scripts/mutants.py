#!/usr/bin/env python3
"""`make mutants`: applies each deliberate breakage of mutants/mutations.toml to a copy of the
product (a git worktree of HEAD under target/mutants/, built in the repo's own target directory:
the dependencies are built already; only the workspace's crates are built again) and runs the
tests that guard it; every mutation must make them fail on an assertion. First the same tests run
twice on the unbroken copy: they must pass both times, or a failure would prove nothing.

A mutation is *caught* when one of its guarding tests failed on an assertion (`assert!`,
`assert_eq!`, a `panic!` of the test's own, a proptest case): a panic in set-up (an `unwrap`, an
`expect`), a build error or its timeout is not a catch. The record, docs/mutants.md, keeps for
each mutation a hash of its target text (the lines `from` spans, two lines either side, and
`to`), the test that caught it and the assertion that failed. `make lint` (`--check`) fails when
a mutation has no row there or its target text no longer hashes to the recorded one: change a
guarded line and its mutation runs again (`make mutants ONLY=name`).

  scripts/mutants.py                       every mutation; rewrites docs/mutants.md
  scripts/mutants.py --only NAME[,NAME…]   those; replaces their rows in docs/mutants.md
  scripts/mutants.py --check               the record is current (make lint)
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

root = Path(__file__).resolve().parent.parent
mutations = tomllib.loads((root / "mutants/mutations.toml").read_text())["mutation"]
record_path = root / "docs/mutants.md"
# A mutation's tests, build included, past this are stopped: a timeout is not a catch.
DEFAULT_TIMEOUT = 900
CONTEXT = 2


def target_hash(tree: Path, m: dict) -> str:
    """The lines `from` spans in its file, CONTEXT lines either side, the file's name and `to`."""
    text = (tree / m["file"]).read_text()
    at = text.index(m["from"])
    lines = text.splitlines(keepends=True)
    first = text.count("\n", 0, at)
    last = text.count("\n", 0, at + len(m["from"]))
    region = "".join(lines[max(0, first - CONTEXT): last + CONTEXT + 1])
    digest = hashlib.sha256()
    for part in (m["file"], region, m["to"], m["tests"]):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def read_record() -> dict:
    """name -> row (a dict of the table's columns) of docs/mutants.md."""
    rows = {}
    if not record_path.exists():
        return rows
    for line in record_path.read_text().splitlines():
        if not line.startswith("| ") or line.startswith("| mutation |"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) != 7:
            continue
        name, file, digest, tests, result, caught_by, seconds = cells
        rows[name] = {"file": file.strip("`"), "hash": digest.strip("`"), "tests": tests.strip("`"),
                      "result": result, "caught_by": caught_by, "secs": seconds}
    return rows


def check(tree: Path, with_record: bool) -> list:
    """What is wrong with the list (and with the record, `with_record`)."""
    problems = []
    names = set()
    record = read_record() if with_record else {}
    for m in mutations:
        if m["name"] in names:
            problems.append(f"{m['name']}: named twice")
        names.add(m["name"])
        if "|" in m["name"] or "," in m["name"]:
            problems.append(f"{m['name']}: a name cannot hold `|` or `,`")
        text = (tree / m["file"]).read_text()
        n = text.count(m["from"])
        if n != 1:
            problems.append(f"{m['name']}: `from` occurs {n} times in {m['file']} (must be once)")
            continue
        kind = m["tests"].split(" ", 1)[0]
        if kind not in ("api", "lib"):
            problems.append(f"{m['name']}: tests must start with api or lib")
        if not with_record:
            continue
        row = record.get(m["name"])
        if row is None:
            problems.append(f"{m['name']}: no result in docs/mutants.md yet (make mutants ONLY='{m['name']}')")
        elif row["hash"] != target_hash(tree, m):
            problems.append(f"{m['name']}: its target text changed since its recorded run "
                            f"(make mutants ONLY='{m['name']}')")
        elif row["result"] != "caught" and not m.get("explained"):
            problems.append(f"{m['name']}: recorded {row['result']}, and the mutation has no `explained`")
    if with_record:
        for name in record:
            if name not in names:
                problems.append(f"{name}: in docs/mutants.md but not in mutants/mutations.toml")
    return problems


def command(tests: str) -> list:
    kind, filt = tests.split(" ", 1)
    target = ["--test", "api"] if kind == "api" else ["--lib"]
    return ["cargo", "test", "-q", "-p", "server", *target, "--", "--test-threads=4", *filt.split(" ")]


def run(tree: Path, env: dict, tests: str, log: Path, timeout: int) -> tuple:
    """(exit code or None on timeout, whether tests ran, seconds)."""
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(command(tests), cwd=tree, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            code = None
    text = log.read_text(errors="replace")
    ran = "running 0 tests" not in text and "test result" in text
    return code, ran, time.monotonic() - started


SECTION = re.compile(r"^---- (\S+) stdout ----$", re.M)
PANIC = re.compile(r"^thread '[^']+'(?: \(\d+\))? panicked at ([^:\n]+):(\d+):\d+:\n(.*)$", re.M)


def failures(tree: Path, text: str) -> list:
    """(test, "file:line", message, is an assertion) for each failed test: the first panic of
    its output."""
    found = []
    parts = SECTION.split(text)
    for test, output in zip(parts[1::2], parts[2::2]):
        panic = PANIC.search(output)
        if panic is None:
            continue
        file, line, message = panic.groups()
        source = tree / file
        assertion = False
        if source.is_file() and not file.startswith("/"):
            lines = source.read_text().splitlines()
            statement = lines[int(line) - 1] if int(line) <= len(lines) else ""
            assertion = bool(re.search(r"\b(assert\w*!|panic!|unreachable!)", statement))
        if message.startswith("Test failed:") or "on an `Err` value: Fail(Reason(" in message:
            # proptest: a case that failed its `prop_assert!`s, reported by the `proptest!`
            # macro or by a `TestRunner::run(…)` the test unwraps.
            assertion = True
        found.append((test, f"{file}:{line}", message.strip(), assertion))
    return found


def escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_record(rows: dict) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        "# Mutations: the record",
        "",
        "Written by `make mutants` (`scripts/mutants.py`); do not edit by hand. Each row is one",
        "deliberate breakage of `mutants/mutations.toml`, run against the tests it names (debug",
        "build): *caught* means one of those tests failed on an assertion, and the last column names",
        "the test and the assertion. The hash covers the mutation's target text (the lines it",
        "replaces, two lines either side, and its replacement): `make lint` fails when it no longer",
        "matches the code, so a changed line is run again (`make mutants ONLY='name'`). docs/tests.md",
        "\"Mutations\" says how to add one.",
        "",
        f"Last written: {stamp}.",
        "",
        "| mutation | file | target hash | guarding tests | result | caught by: test, assertion | time |",
        "|---|---|---|---|---|---|---|",
    ]
    order = [m["name"] for m in mutations]
    for name in order:
        if name not in rows:
            continue
        r = rows[name]
        lines.append(f"| {name} | `{r['file']}` | `{r['hash']}` | `{r['tests']}` | {r['result']} | "
                     f"{escape(r['caught_by'])} | {r['secs']} |")
    caught = sum(1 for n in order if rows.get(n, {}).get("result") == "caught")
    explained = [m for m in mutations if m.get("explained") and rows.get(m["name"], {}).get("result") != "caught"]
    lines += ["", f"{caught} of {len(order)} mutations caught."]
    if explained:
        lines += ["", "Not caught, and why:", ""]
        lines += [f"- **{m['name']}**: {m['explained']}" for m in explained]
    record_path.write_text("\n".join(lines) + "\n")


def main() -> int:
    if "--check" in sys.argv:
        problems = check(root, with_record=True)
        if problems:
            print("mutations out of date:\n  " + "\n  ".join(problems), file=sys.stderr)
            return 1
        print(f"mutants: {len(mutations)} mutations, each `from` found once and each recorded "
              f"against its current target text")
        return 0
    only = None
    if "--only" in sys.argv:
        only = set(n.strip() for n in sys.argv[sys.argv.index("--only") + 1].split(",") if n.strip())
        unknown = only - {m["name"] for m in mutations}
        if unknown:
            print(f"no such mutation: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
    chosen = [m for m in mutations if only is None or m["name"] in only]
    work = root / "target/mutants"
    tree = work / "tree"
    logs = work / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True, exist_ok=True)
    subprocess.call(["git", "worktree", "remove", "--force", str(tree)], cwd=root, stderr=subprocess.DEVNULL)
    shutil.rmtree(tree, ignore_errors=True)
    subprocess.check_call(["git", "worktree", "add", "--detach", "-q", str(tree), "HEAD"], cwd=root)
    # The worktree is HEAD: uncommitted changes to the list are run as they are in the work tree.
    shutil.copy(root / "mutants/mutations.toml", tree / "mutants/mutations.toml")
    # The site the repository built (`make build-release`), where the tests that start the
    # server binary look for it (beside the crates: target/site).
    (tree / "target").mkdir(exist_ok=True)
    (tree / "target/site").symlink_to(root / "target/site")
    problems = check(tree, with_record=False)
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

    # The guarding tests pass on the unbroken copy, twice (a flaky one would "catch" anything):
    # all the filters of a test binary in one run, each of its tests once.
    for kind in sorted({m["tests"].split(" ", 1)[0] for m in chosen}):
        filters = sorted({m["tests"].split(" ", 1)[1] for m in chosen if m["tests"].startswith(kind + " ")})
        tests = kind + " " + " ".join(filters)
        for attempt in (1, 2):
            log = logs / f"baseline-{kind}-{attempt}.log"
            code, ran, secs = run(tree, env, tests, log, DEFAULT_TIMEOUT * 2)
            if code != 0 or not ran:
                print(f"baseline: `{tests}` does not pass unbroken (run {attempt}; see {log})", file=sys.stderr)
                return 1
        print(f"baseline passes twice: {kind}, {len(filters)} filters (last {secs:.0f} s)", flush=True)

    # A whole run starts a new record; each result is written as it comes, so a run cut short
    # keeps what it found.
    rows = read_record() if only is not None else {}
    for i, m in enumerate(chosen, 1):
        path = tree / m["file"]
        original = path.read_text()
        digest = target_hash(tree, m)
        path.write_text(original.replace(m["from"], m["to"], 1))
        log = logs / f"{i:02}.log"
        timeout = int(m.get("timeout", DEFAULT_TIMEOUT))
        try:
            code, ran, secs = run(tree, env, m["tests"], log, timeout)
        finally:
            path.write_text(original)
        text = log.read_text(errors="replace")
        failed = failures(tree, text)
        assertion = next((f for f in failed if f[3]), None)
        if code is None:
            verdict, by = "timed out", f"stopped after {timeout} s"
        elif code == 0:
            verdict, by = "SURVIVED", ""
        elif "error[E" in text or "could not compile" in text:
            verdict, by = "does not build", ""
        elif assertion:
            test, where, message, _ = assertion
            verdict, by = "caught", f"`{test}`: `{where}` {message.splitlines()[0][:140]}"
        elif failed:
            test, where, message, _ = failed[0]
            verdict, by = "set-up panic", f"`{test}`: `{where}` {message.splitlines()[0][:140]}"
        else:
            verdict, by = "failed without a test failing", ""
        rows[m["name"]] = {"file": m["file"], "hash": digest, "tests": m["tests"], "result": verdict,
                           "caught_by": by, "secs": f"{secs:.0f} s"}
        print(f"{i:2}/{len(chosen)} {verdict:14} {m['name']} ({secs:.0f} s) {by}", flush=True)
        write_record(rows)

    write_record(rows)
    subprocess.call(["git", "worktree", "remove", "--force", str(tree)], cwd=root, stderr=subprocess.DEVNULL)
    ran = [rows[m["name"]] for m in chosen]
    caught = sum(1 for r in ran if r["result"] == "caught")
    print(f"{caught} of {len(ran)} mutations caught; docs/mutants.md written")
    return 0 if caught == len(ran) else 1


sys.exit(main())
