#!/usr/bin/env python3
"""Every program the Makefile and the shell scripts call comes from somewhere a bare Debian 12 has.

The commands are read off the Makefile's recipes, scripts/*.sh and .ci/run: the first word of each
simple command (after `;`, `&&`, `||`, `|`, `(`, `$(`, `then`, `do`, `!`, variable assignments,
`exec`, `nice -n N`, `env -u NAME`), heredoc bodies skipped. scripts/programs.txt says where each
one comes from:

  base            in a bare Debian 12 (debootstrap's minbase: scripts/debian12-base.txt lists its
                  programs, read off such a root)
  prerequisite    what the README asks for: the Rust toolchain (rustup, cargo), Node.js and npm
  apt PACKAGE     a Debian package that a make step installs: PACKAGE must be named in the
                  Makefile or the script's own `apt-get install` (checked here)
  npm             e2e/node_modules/.bin, from `make packages` (the e2e package.json names it)
  venv            the project's virtual environment, from `make py-tools` (PY_TOOLS names it)
  cargo CRATE     `cargo install CRATE` in a make step (checked here)
  built           built by the project (target/…, scripts/…)

The check fails on a program called with no line there, a line whose source does not install it,
and a `base` program that a bare Debian 12 lacks. `--self-test` shows it catching each.
"""
import json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEYWORDS = {"if", "then", "else", "elif", "fi", "for", "in", "do", "done", "while", "until", "case",
            "esac", "function", "select", "time", "{", "}", "[[", "]]", "!", "coproc"}
BUILTINS = {"cd", "echo", "printf", "export", "set", "unset", "local", "return", "exit", "trap",
            "wait", "eval", "source", ".", "read", "shift", "test", "[", "true", "false", ":",
            "break", "continue", "command", "declare", "readonly", "type", "kill", "pwd",
            "pushd", "popd", "let", "jobs", "fg", "bg", "disown", "ulimit", "umask", "hash",
            "getopts", "mapfile", "builtin", "caller", "shopt", "alias", "times", "disown"}
SPLIT = re.compile(r"\$\(|&&|\|\||[;|(`&]|\bthen\b|\bdo\b|\belse\b")


def strip_quoted(text):
    """The text with quoted strings blanked (their words are no commands, over several lines
    too), comments cut, and each command substitution inside double quotes kept as a command."""
    out, quote, i = [], None, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
                out.append(c)
            elif quote == '"' and text.startswith("$(", i) and not text.startswith("$((", i):
                depth, j = 1, i + 2
                while j < len(text) and depth:
                    depth += {"(": 1, ")": -1}.get(text[j], 0)
                    j += 1
                out.append(";" + strip_quoted(text[i + 2:j - 1]) + ";")
                i = j
                continue
            else:
                out.append("\n" if c == "\n" else " ")
        elif c in "'\"":
            quote = c
            out.append(c)
        elif c == "#" and (i == 0 or text[i - 1] in " \t;\n"):
            j = text.find("\n", i)
            i = len(text) if j < 0 else j
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def make_variables(text):
    """The Makefile's simple variables (`NAME := value`), to read `$(NAME)` as the shell sees it."""
    return dict(re.findall(r"(?m)^(?:export )?([A-Z_]+) [:?]?= (.*)$", text))


def shell_text(path):
    """The shell a file runs: a script's text, or the Makefile's recipes with its variables
    expanded; heredoc bodies left out."""
    text = path.read_text()
    if path.name == "Makefile":
        variables = make_variables(text)
        raw = [l[1:] if l.startswith("\t") else "" for l in text.split("\n")]
        variables = {k: ("value" if "$(shell" in v else v) for k, v in variables.items()}
        variables.update(MAKE="make", CURDIR=".")
        expand = lambda m: variables.get(m.group(1), "")
        for _ in range(3):
            raw = [re.sub(r"(?<!\$)\$\(([A-Z0-9_]+)\)", expand, l) for l in raw]
        raw = [re.sub(r"(?<!\$)\$\((?:if|or|shell|and) [^)]*\)", "", l).replace("$$", "$") for l in raw]
    else:
        raw = text.split("\n")
    out, until = [], None
    for line in raw:
        if until is not None:
            if line.strip() == until:
                until = None
            out.append("")
            continue
        m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if m:
            until = m.group(1)
        out.append(line)
    return "\n".join(out)


def commands(path):
    """(program, line number) of each simple command's first word."""
    found = []
    functions = set(re.findall(r"(?m)^\s*(?:function\s+)?([\w-]+)\s*\(\)", path.read_text()))
    text = strip_quoted(shell_text(path))
    # Arithmetic, array values and line continuations are no commands.
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    text = re.sub(r"\$?\(\((?:[^()]|\([^()]*\))*\)\)", blank, text)
    text = re.sub(r"\b\w+=\([^)]*\)", blank, text)
    text = re.sub(r"\$\{[^}]*\}", blank, text)
    lines, merged, i = text.split("\n"), [], 0
    while i < len(lines):
        start, line = i + 1, lines[i]
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i]
        merged.append((start, line))
        i += 1
    for n, line in merged:
        for seg in SPLIT.split(line):
            words = seg.split()
            while words:
                w = words[0]
                if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", w) or w in ("exec", "time", "!", "{", "then", "do", "else", "sudo"):
                    words = words[1:]
                elif w == "nice" and len(words) > 2 and words[1] == "-n":
                    words = words[3:]
                elif w == "env":
                    words = words[1:]
                    while words and (words[0].startswith("-") or "=" in words[0]):
                        words = words[2:] if words[0] == "-u" else words[1:]
                else:
                    break
            if not words:
                continue
            w = words[0].strip("\"'")
            if (not w or w in KEYWORDS or w in BUILTINS or w in functions or w[0].isdigit()
                    or w.startswith(("$", "-", "<", ">", ")", "@", "%", "\\", "./"))
                    or not re.fullmatch(r"[A-Za-z0-9_./+-]+", w)):
                continue
            found.append((w, n))
    return found


def sources():
    table = {}
    for line in (ROOT / "scripts/programs.txt").read_text().split("\n"):
        line = line.split("#", 1)[0].strip()
        if line:
            name, *source = line.split()
            table[name] = source
    return table


def check(root_files, table, base, installed_text, npm_bins, venv_tools):
    errors, seen = [], set()
    for f in root_files:
        for prog, n in commands(f):
            name = prog if "/" not in prog or prog.startswith("/") else None
            if name is None:
                continue  # the project's own (scripts/…, target/…)
            seen.add(name)
            if name not in table:
                errors.append(f"{f.relative_to(ROOT)}:{n}: {name} is called, and scripts/programs.txt does not say where it comes from")
    for name, source in table.items():
        kind = source[0] if source else ""
        bare = name.rsplit("/", 1)[-1]
        if kind == "base" and bare not in base:
            errors.append(f"scripts/programs.txt: {name} is said to be in a bare Debian 12, which lacks it")
        elif kind == "apt" and not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(source[1]), installed_text):
            errors.append(f"scripts/programs.txt: {name} comes from the Debian package {source[1]}, which no make step installs")
        elif kind == "npm" and bare not in npm_bins:
            errors.append(f"scripts/programs.txt: {name} is said to come from npm, and e2e/package.json brings no such program")
        elif kind == "venv" and source[1] not in venv_tools:
            errors.append(f"scripts/programs.txt: {name} is said to come from the virtual environment, and PY_TOOLS lacks {source[1]}")
        elif kind == "cargo" and f"cargo install {source[1]}" not in installed_text:
            errors.append(f"scripts/programs.txt: {name} comes from the crate {source[1]}, which no make step installs")
        elif kind not in ("base", "apt", "npm", "venv", "cargo", "prerequisite", "built"):
            errors.append(f"scripts/programs.txt: {name} has no known source ({' '.join(source)!r})")
    return errors, seen


def inputs():
    files = [ROOT / "Makefile", ROOT / ".ci/run"] + sorted((ROOT / "scripts").glob("*.sh"))
    base = {l.strip() for l in (ROOT / "scripts/debian12-base.txt").read_text().split("\n")
            if l.strip() and not l.startswith("#")}
    # What the make steps install: their `apt-get install` lines, the *_PACKAGES lists and
    # `cargo install` lines (a package named in a message installs nothing).
    installed = "\n".join(l for f in files for l in f.read_text().split("\n")
                          if re.search(r"apt-get install|^[A-Z_]*PACKAGES :=|cargo install", l))
    npm = set()
    lock = json.loads((ROOT / "e2e/package-lock.json").read_text())
    for pkg in lock.get("packages", {}).values():
        b = pkg.get("bin")
        npm.update([b] if isinstance(b, str) else (b or {}).keys())
    venv = re.search(r"(?m)^PY_TOOLS := (.*)$", (ROOT / "Makefile").read_text()).group(1)
    venv_tools = {t.split("==")[0].split("$")[0] for t in venv.split()}
    return files, base, installed, npm, venv_tools


def self_test():
    files, base, installed, npm, venv_tools = inputs()
    table = sources()
    cases = {
        "a program nobody says where it comes from": (dict((k, v) for k, v in table.items() if k != "redis-cli"), base),
        "a base program that is not in the base": ({**table, "curl": ["base"]}, base),
        "a package no step installs": ({**table, "wrk": ["apt", "wrk-never-installed"]}, base),
        "an npm program e2e does not bring": ({**table, "wasm-opt": ["npm"], "esbuild": ["npm"]}, base),
        "a crate no step installs": ({**table, "wasm-bindgen": ["cargo", "wasm-bindgen-never"]}, base),
    }
    for what, (t, b) in cases.items():
        errors, _ = check(files, t, b, installed, npm, venv_tools)
        assert errors, f"not caught: {what}"
    assert ("nice", 1) not in commands(ROOT / "Makefile"), "nice -n N is not the command"
    print(f"programs check: self-test caught all {len(cases)} kinds")



def main():
    if "--self-test" in sys.argv:
        return self_test()
    files, base, installed, npm, venv_tools = inputs()
    errors, seen = check(files, sources(), base, installed, npm, venv_tools)
    unused = sorted(set(sources()) - seen)
    if unused:
        errors.append(f"scripts/programs.txt lists programs nothing calls: {', '.join(unused)}")
    if errors:
        print("programs check failed:\n  " + "\n  ".join(errors), file=sys.stderr)
        sys.exit(1)
    print(f"programs: {len(seen)} programs called, each from a bare Debian 12 or a make step")


if __name__ == "__main__":
    main()
