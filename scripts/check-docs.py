#!/usr/bin/env python3
"""`make test`'s check of the docs: every relative link of every tracked Markdown file points at a
file of the repo (and, with `#anchor`, at one of its headings, slugged as GitHub does), and no
tracked file names a Markdown file of the project that is not in the repo. A section a tracked
file names as `docs/X.md "Heading"` exists. docs/deploy.md, read against the code: every section
it names (`("Heading")`), `make` target, setting, `server` command and repo path exists. Exits
non-zero with the list of what is broken; `--self-test` plants one of each in a copy of
docs/deploy.md and must see each caught."""
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


def headings(path: Path) -> set:
    text = re.sub(r"(?s)```.*?```", "", path.read_text(encoding="utf-8"))
    return {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}


def makefile_targets() -> set:
    text = (root / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"(?m)^([a-z][\w-]*):", text))


def settings_names() -> set:
    doc = (root / "docs/configuration.md").read_text(encoding="utf-8")
    table = doc.split("<!-- settings:begin -->")[1].split("<!-- settings:end -->")[0]
    return set(re.findall(r"(?m)^\| `([A-Z0-9_]+)` \|", table))


def server_commands() -> set:
    main = (root / "server/src/main.rs").read_text(encoding="utf-8")
    body = main.split("enum Command {")[1].split("\n}\n")[0]
    variants = re.findall(r"(?m)^    ([A-Z][A-Za-z]+)\b", body)
    return {re.sub(r"(?<!^)([A-Z])", r"-\1", v).lower() for v in variants}


# Names a deploy page may use that are no setting of the server: Kubernetes's own variables
# (base/secrets.yaml), RUST_LOG, the shell's.
NOT_SETTINGS = {"REDIS_PASSWORD", "AMQP_USER", "AMQP_PASSWORD", "RUST_LOG", "SECKILL_IMAGE"}


def deploy_problems(name: str, text: str) -> list:
    """docs/deploy.md read against the code."""
    found = []
    own = {line.lstrip("#").strip() for line in re.sub(r"(?s)```.*?```", "", text).splitlines() if line.startswith("#")}
    for section in sorted(set(re.findall(r'\((?:see )?"([A-Z][^"\n]{2,60})"\)', text))):
        if not any(h.startswith(section) for h in own):
            found.append(f'{name}: names the section "{section}", which it does not have')
    targets = makefile_targets()
    for target in sorted(set(re.findall(r"`make ([a-z][\w-]*)", text)) | set(re.findall(r"\bmake ([a-z][\w-]*)`", text))):
        if target not in targets:
            found.append(f"{name}: names `make {target}`, which the Makefile does not have")
    known = settings_names()
    for setting in sorted(set(re.findall(r"\b((?:SECKILL|DATABASE|REDIS|AMQP|LEPTOS)_[A-Z0-9_]*[A-Z0-9])\b", text))):
        if setting not in known and setting not in NOT_SETTINGS:
            found.append(f"{name}: names {setting}, which is not a setting the server reads (docs/configuration.md)")
    verbs = server_commands()
    # In code: `server migrate`, `/opt/seckill/server worker`, a block's `podman run … seckill:0.1.0 reconcile`.
    blocks = re.findall(r"(?s)```.*?```", text)
    code = " ".join(re.findall(r"`[^`]+`", re.sub(r"(?s)```.*?```", "", text))) + "\n" + "\n".join(blocks)
    commands = set(re.findall(r"(?:^|[`\s/])server ([a-z][a-z-]+)", code, re.M)) | set(re.findall(r"seckill:[\w.<>-]+ ([a-z][a-z-]+)", code))
    for verb in sorted(commands):
        if verb not in verbs:
            found.append(f"{name}: names the command `server {verb}`, which the server does not have")
    for path in sorted(set(re.findall(r"(?<![\w./-])(deploy/[\w./-]*\w)(?![\w{*-])", text))):
        if not (root / path).exists():
            found.append(f"{name}: names {path}, which is not in the repo")
    return found


if "--self-test" in sys.argv:
    page = (root / "docs/deploy.md").read_text(encoding="utf-8")
    assert not deploy_problems("docs/deploy.md", page), deploy_problems("docs/deploy.md", page)
    plants = [
        ('("From one box to the cluster")', "section"),
        ("`make deploy-everything`", "make"),
        ("`SECKILL_DRAIN_SECONDS=30`", "setting"),
        ("`server migrate-all`", "command"),
        ("`deploy/kubernetes/base/secret.yaml`", "deploy/"),
    ]
    missed = [what for plant, what in plants if not deploy_problems("docs/deploy.md", page + "\n" + plant + "\n")]
    for plant, what in plants:
        print(f"  {'MISSED' if what in missed else 'caught'}: a {what} that does not exist: {plant}")
    if missed:
        print("docs check: the self-test MISSED a planted mistake", file=sys.stderr)
        sys.exit(1)
    print(f"docs check: self-test: {len(plants)} of {len(plants)} planted mistakes caught")
    sys.exit(0)

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
repo_path = re.compile(r"(?<![\w./-])((?:server|app|loadtest|scripts|e2e|docs|migrations|style|deploy|\.ci)/[\w./-]*\w)(?![\w{*-])")
feature_flag = re.compile(r"(?:--features[ =]|-F ?)$")
for name in tracked:
    if name.startswith(generated) or name.startswith(".sqlx/") or not (root / name).is_file():
        continue
    if name == "scripts/check-docs.py":
        continue  # its own patterns and planted mistakes
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

# A section of docs/deploy.md named as `docs/deploy.md "Heading"`, anywhere: a heading starts so.
section_ref = re.compile(r'\b(docs/deploy\.md) "([^"\n]+)"')
for name in tracked:
    if name.startswith(generated) or not (root / name).is_file() or name == "scripts/check-docs.py":
        continue
    try:
        text = (root / name).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        continue
    for doc, heading in sorted(set(section_ref.findall(text))):
        if (root / doc).is_file() and not any(h.startswith(heading) for h in headings(root / doc)):
            problems.append(f'{name}: names {doc} "{heading}", a section it does not have')
problems += deploy_problems("docs/deploy.md", (root / "docs/deploy.md").read_text(encoding="utf-8"))

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
