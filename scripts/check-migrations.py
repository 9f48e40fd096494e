#!/usr/bin/env python3
"""Migrations that never break the release still serving (`make lint`; docs/deploy.md "Upgrades").

During a rolling upgrade the previous release serves on the schema the next release's
migrations made. So migrations only expand (new tables, new columns with defaults or nullable,
new indexes), and contract a release later. The stated rule, checked against the SQL:

  A migration may DROP or RENAME a table or a column, or change a column's TYPE, only when no
  query of the release before it names that table or column. The release before a migration is
  the tree of the commit before the one that added the migration (HEAD for a migration not yet
  committed); its queries are the SQL in server/src, app/src, loadtest/src and .sqlx.

  A migration, once released, never changes: migrations/CHECKSUMS records each one's SHA-384 (the
  checksum sqlx keeps in _sqlx_migrations, and refuses to start on a database where an applied
  migration's differs). A new migration is recorded with `--record`.

So a column leaves in two releases: the first stops reading it, the second's migration drops it.

`--self-test` runs the rule on migrations that break it and fails unless each is refused.
"""
import hashlib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READERS = ["server/src", "app/src", "loadtest/src", ".sqlx"]

CONTRACTS = [
    (re.compile(r"\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?([\w\s,\"]+?)(?:\s+CASCADE|\s+RESTRICT)?\s*;", re.I), "table"),
    (re.compile(r"\bALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?\"?(\w+)\"?\s+RENAME\s+TO\b", re.I), "table"),
    (re.compile(r"\bDROP\s+COLUMN\s+(?:IF\s+EXISTS\s+)?\"?(\w+)\"?", re.I), "column"),
    (re.compile(r"\bRENAME\s+(?:COLUMN\s+)?\"?(\w+)\"?\s+TO\b", re.I), "column"),
    (re.compile(r"\bALTER\s+(?:COLUMN\s+)?\"?(\w+)\"?\s+(?:SET\s+DATA\s+)?TYPE\b", re.I), "column"),
]


def git(*args, check=True):
    out = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        print(f"migrations: cannot check: git {' '.join(args)}: {out.stderr.strip()}", file=sys.stderr)
        sys.exit(2)
    return out.stdout


def strip_comments(sql):
    sql = re.sub(r"/\*.*?\*/", " ", sql, flags=re.S)
    return re.sub(r"--[^\n]*", " ", sql)


def contracted(sql):
    """(kind, name) of every table or column the SQL drops, renames or retypes."""
    sql = strip_comments(sql)
    found = []
    for pattern, kind in CONTRACTS:
        for m in pattern.finditer(sql):
            for name in re.split(r"[\s,]+", m.group(1).replace('"', "")):
                if name and name.upper() not in ("IF", "EXISTS", "CASCADE", "RESTRICT"):
                    found.append((kind, name.lower()))
    # A rename of a column reads like a rename of a table when COLUMN is left out: `ALTER TABLE t
    # RENAME TO u` is matched as both; the table's own name is then checked as a column too,
    # which only makes the check stricter.
    return found


def readers_of(name, commit):
    """Files of the release at `commit` whose text names `name` as a word."""
    args = ["grep", "-l", "-w", "-i", "-e", name]
    if commit:
        args.append(commit)
    args += ["--", *READERS]
    out = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)
    return [line.split(":", 1)[-1] for line in out.stdout.splitlines()]


def previous_release(path):
    """The commit before the one that added `path`; HEAD when it is not committed yet."""
    added = git("log", "--diff-filter=A", "--format=%H", "--", path).split()
    if not added:
        return "HEAD", None
    parent = git("rev-parse", "--verify", "-q", f"{added[-1]}^", check=False).strip()
    return (parent or None), added[-1]


def check_file(path, sql, previous, errors):
    for kind, name in contracted(sql):
        if previous is None:
            continue  # the first commit has no release before it
        readers = readers_of(name, previous)
        if readers:
            errors.append(
                f"{path}: drops, renames or retypes the {kind} {name}, which the release before it still reads "
                f"({', '.join(readers[:3])}); stop reading it in one release, contract it in the next"
            )


def main():
    if git("rev-parse", "--is-shallow-repository").strip() == "true":
        print("migrations: cannot check: a shallow clone has no release before each migration (git fetch --unshallow)",
              file=sys.stderr)
        sys.exit(2)
    if "--self-test" in sys.argv:
        return self_test()
    if "--record" in sys.argv:
        return record()
    sums = os.path.join(ROOT, "migrations", "CHECKSUMS")
    recorded = dict(line.split()[::-1] for line in open(sums) if line.strip()) if os.path.exists(sums) else {}
    errors = []
    files = sorted(f for f in os.listdir(os.path.join(ROOT, "migrations")) if f.endswith(".sql"))
    for name in files:
        path = f"migrations/{name}"
        sql = open(os.path.join(ROOT, path)).read()
        previous, _ = previous_release(path)
        digest = hashlib.sha384(sql.encode()).hexdigest()
        if name not in recorded:
            errors.append(f"{path}: not in migrations/CHECKSUMS (scripts/check-migrations.py --record adds it)")
        elif recorded[name] != digest:
            errors.append(f"{path}: changed since it was recorded; a released migration never changes: add a new one")
        check_file(path, sql, previous, errors)
    for e in errors:
        print(f"migrations: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"migrations: {len(files)} expand-only against the release before each, each as recorded in migrations/CHECKSUMS")


def record():
    """Adds the migrations not yet recorded to migrations/CHECKSUMS (never rewrites a recorded one)."""
    sums = os.path.join(ROOT, "migrations", "CHECKSUMS")
    lines = [line for line in open(sums)] if os.path.exists(sums) else []
    recorded = {line.split()[1] for line in lines if line.strip()}
    for name in sorted(f for f in os.listdir(os.path.join(ROOT, "migrations")) if f.endswith(".sql")):
        if name not in recorded:
            digest = hashlib.sha384(open(os.path.join(ROOT, "migrations", name), "rb").read()).hexdigest()
            lines.append(f"{digest}  {name}\n")
            print(f"migrations: recorded {name}")
    open(sums, "w").writelines(lines)


def self_test():
    """Contractions of what the current code reads must be refused; of what it does not, allowed."""
    refused = [
        "ALTER TABLE orders DROP COLUMN status;",
        "ALTER TABLE orders RENAME COLUMN status TO state;",
        "ALTER TABLE activities RENAME TO sales;",
        "DROP TABLE IF EXISTS reminders CASCADE;",
        "ALTER TABLE orders ALTER COLUMN quantity TYPE bigint;",
    ]
    allowed = [
        "ALTER TABLE orders ADD COLUMN note text;",
        "ALTER TABLE orders DROP CONSTRAINT orders_quantity_check;",
        "-- ALTER TABLE orders DROP COLUMN status;\nCREATE INDEX orders_by_note ON orders (user_id);",
        "ALTER TABLE orders DROP COLUMN never_read_by_anyone_xyz;",
    ]
    ok = True
    for sql in refused:
        errors = []
        check_file("self-test.sql", sql, "HEAD", errors)
        print(f"  {'refused' if errors else 'MISSED'}: {sql.strip()}")
        ok &= bool(errors)
    for sql in allowed:
        errors = []
        check_file("self-test.sql", sql, "HEAD", errors)
        print(f"  {'allowed' if not errors else 'WRONGLY REFUSED'}: {sql.strip().splitlines()[-1]}")
        ok &= not errors
    if not ok:
        print("migrations: the self-test failed", file=sys.stderr)
        sys.exit(1)
    print(f"migrations: self-test: {len(refused)} contractions refused, {len(allowed)} expansions allowed")


if __name__ == "__main__":
    main()
