#!/usr/bin/env python3
"""`make house-figures`: the figures a reader of the code base watches, printed so that a change
can say them before and after: the longest functions and the largest files of the Rust crates,
the server crate's plain `pub` items, string matches on wire states and codes, lock calls in the
buy path's files and `.expect("… lock …")`s.

Functions are measured on the text with comments, strings and char literals blanked, from the
`fn` line to its closing brace. A measure, not a parser: a macro that writes `fn` is not seen.
"""
import re, sys
from pathlib import Path
root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
dirs = ["server/src", "app/src", "loadtest/src", "frontend/src"]
files = [p for d in dirs for p in (root / d).rglob("*.rs")]

def strip(text):
    """The text with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i); j = n if j < 0 else j
            i = j; continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2); j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j)); i = j; continue
        m = re.match(r'b?r(#*)"', text[i:i + 40])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0))); j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j)); i = j; continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append('""' + "\n" * text.count("\n", i, j)); i = j; continue
        if c == "'":
            m = re.match(r"'(?:\\(?:x..|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", text[i:i + 12])
            if m:
                out.append("' '"); i += len(m.group(0)); continue
        out.append(c); i += 1
    return "".join(out)

FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")
funcs = []
for f in files:
    raw = f.read_text()
    lines = strip(raw).split("\n")
    i = 0
    while i < len(lines):
        m = FN.match(lines[i])
        if m:
            depth, started, j = 0, False, i
            while j < len(lines):
                for ch in lines[j]:
                    if ch == "{": depth += 1; started = True
                    elif ch == "}": depth -= 1
                if started and depth == 0: break
                if not started and lines[j].rstrip().endswith(";"): break
                j += 1
            if started:
                funcs.append((j - i + 1, f"{f.relative_to(root)}:{i+1} {m.group(1)}"))
        i += 1
funcs.sort(reverse=True)
print("## longest functions")
for n, where in funcs[:10]: print(f"{n:5} {where}")
print(f"functions over 60 lines: {sum(1 for n,_ in funcs if n > 60)}")
print("## largest files")
sizes = sorted(((len(f.read_text().splitlines()), str(f.relative_to(root))) for f in files), reverse=True)
for n, f in sizes[:10]: print(f"{n:5} {f}")
pub = 0
for f in (root / "server/src").rglob("*.rs"):
    pub += len(re.findall(r"(?m)^\s*pub\s+(?:async\s+)?(?:fn|struct|enum|mod|const|static|type|trait|use)\b", strip(f.read_text())))
print(f"## pub items of the server crate (plain `pub`): {pub}")
# Of those, the ones another crate can name: in a module that is `pub` from lib.rs down.
src = root / "server/src"
def exported(f):
    parts = list(f.relative_to(src).with_suffix("").parts)
    if parts[-1] == "mod": parts = parts[:-1]
    if parts in ([], ["lib"], ["main"]): return parts != ["main"]
    for depth in range(len(parts)):
        parent = src.joinpath(*parts[:depth])
        decl = parent / "mod.rs" if depth else src / "lib.rs"
        if not re.search(r"(?m)^pub mod %s;" % parts[depth], decl.read_text()): return False
    return True
reach = sum(len(re.findall(r"(?m)^\s*pub\s+(?:async\s+)?(?:fn|struct|enum|mod|const|static|type|trait|use)\b", strip(f.read_text())))
            for f in src.rglob("*.rs") if exported(f))
mods = [f for f in src.rglob("*.rs") if f.name not in ("lib.rs", "main.rs")]
print(f"## of them, in modules other crates can reach: {reach}; modules reachable: {sum(map(exported, mods))} of {len(mods)}")
states = ["pending","queued","confirmed","paid","cancelled","failed","waiting","admitted","lapsed","sold_out",
          "limit_reached","not_warm","paused","borrow","ok","blocked","rate_limited","captcha_invalid",
          "open","numbered","closed","expired","invalid_input","not_admitted"]
alt = "|".join(states)
pat = re.compile(r'(?:==\s*"(?:%s)"|"(?:%s)"\s*(?:=>|\|)|Some\("(?:%s)"\))' % (alt, alt, alt))
n = 0
for f in files:
    n += len(pat.findall(f.read_text()))
print(f"## string matches on wire states (== \"x\", \"x\" =>, Some(\"x\")): {n}")
lock = re.compile(r"\.(lock|read|write)\(\)")
print("## lock calls in the buy path's files")
for rel in ["server/src/buy/gate.rs","server/src/buy/batch.rs","server/src/buy/activities.rs","server/src/buy/soldout.rs",
            "server/src/buy/blocks.rs","server/src/buy/attempts.rs","server/src/buy/doors.rs","server/src/http/buy.rs",
            "server/src/infra/replication.rs","server/src/http/session.rs","server/src/domain/sessions.rs"]:
    p = root / rel
    if p.exists(): print(f"{len(lock.findall(p.read_text())):4} {rel}")
exp = sum(len(re.findall(r'\.expect\("[^"]*lock', f.read_text())) for f in files)
print(f"## .expect(\"… lock\"): {exp}")
