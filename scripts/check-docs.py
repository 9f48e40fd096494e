#!/usr/bin/env python3
"""`make test`'s check of the docs: every relative link of every tracked Markdown file points at a
file of the repo (and, with `#anchor`, at one of its headings, slugged as GitHub does), and no
tracked file names a Markdown file of the project that is not in the repo. Exits non-zero with
the list of what is broken."""
import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
tracked_set = set(tracked)
markdown = [p for p in tracked if p.endswith(".md") and not p.startswith("e2e/node_modules/")]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*|_(?=\w)|(?<=\w)_", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text, flags=re.UNICODE)
    return text.replace(" ", "-")


def anchors(path: Path) -> set:
    seen, found, fenced = {}, set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


problems = []
link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
for name in markdown:
    path = root / name
    text = re.sub(r"(?s)```.*?```", "", path.read_text(encoding="utf-8"))
    for target in link.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("<"):
            continue  # http(s), mailto: outside the repo
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{name}: link to {target}: no such file")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{name}: link to {target}: no heading #{anchor} in {dest.relative_to(root)}")

# Project documents that are not in the repo must not be named (a public clone lacks them).
known = {Path(p).name for p in markdown}
mention = re.compile(r"(?<![\w-])([A-Z][A-Z_]+\.md)\b")
for name in tracked:
    if name.startswith("e2e/node_modules/") or not (root / name).is_file():
        continue
    try:
        text = (root / name).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        continue
    for doc in sorted(set(mention.findall(text))):
        if doc not in known:
            problems.append(f"{name}: names {doc}, which is not in the repo")

# Nor a path of the repo that does not exist (a file moved or removed and a mention left behind):
# every `server/…`, `app/…`, `scripts/…` (and the other top folders) a tracked file names must be
# tracked, or a folder of tracked files. What the build and the tests write is not tracked.
generated = ("e2e/node_modules", "e2e/playwright-report", "e2e/test-results", "scripts/storefront-bench/node_modules")
folders = {"/".join(p.split("/")[:i]) for p in tracked for i in range(1, p.count("/") + 1)}
repo_path = re.compile(r"(?<![\w./-])((?:server|app|loadtest|scripts|e2e|docs|migrations|style|\.ci)/[\w./-]*\w)(?![\w{*])")
feature_flag = re.compile(r"(?:--features[ =]|-F ?)$")
for name in tracked:
    if name.startswith(generated) or name.startswith(".sqlx/") or not (root / name).is_file():
        continue
    try:
        text = (root / name).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        continue
    # A crate's feature handed to cargo (`--features app/ssr`) is not a path.
    paths = {m.group(1) for m in repo_path.finditer(text) if not feature_flag.search(text, max(0, m.start() - 12), m.start())}
    for found in sorted(paths):
        if found.startswith(generated) or found in tracked_set or found in folders:
            continue
        if found.startswith("scripts/s") and found == "scripts/s":
            continue  # "scripts/s", a rate
        problems.append(f"{name}: names {found}, which is not in the repo")

# A test a document names (`path/to/file.rs::function`) is a function of that file, and a mutation
# the promises table of docs/reliability.md names is one of mutants/mutations.toml, and each of
# those is named there: a claim names its proof, and the proof cannot be renamed or removed under
# it.
named_test = re.compile(r"`((?:server|app|loadtest)/[\w./-]+\.rs)::(\w+)`")
for name in markdown:
    text = (root / name).read_text(encoding="utf-8")
    for file, function in sorted(set(named_test.findall(text))):
        path = root / file
        if not path.is_file() or not re.search(rf"\bfn {function}\b", path.read_text(encoding="utf-8")):
            problems.append(f"{name}: names the test {file}::{function}, which does not exist")
mutation_names = set(re.findall(r'(?m)^name = "([^"]+)"', (root / "mutants/mutations.toml").read_text()))
table = (root / "docs/reliability.md").read_text(encoding="utf-8")
section = table.split("## Promises and their tests", 1)[-1].split("\n## ", 1)[0]
claimed = set()
for row in section.splitlines():
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    if len(cells) != 3 or cells[0] in ("promise", "---"):
        continue
    for mutation in filter(None, (m.strip() for m in cells[2].split(","))):
        if mutation not in mutation_names:
            problems.append(f"docs/reliability.md: the mutation '{mutation}' is not in mutants/mutations.toml")
        claimed.add(mutation)
# And the other way: every mutation guards a promise the table states.
for mutation in sorted(mutation_names - claimed):
    problems.append(f"docs/reliability.md: no promise names the mutation '{mutation}'")

if problems:
    print("docs check failed:\n  " + "\n  ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"docs check: {len(markdown)} Markdown files, every relative link and anchor resolves; every path a tracked file names is in the repo")
