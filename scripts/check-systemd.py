#!/usr/bin/env python3
"""The systemd units of deploy/systemd checked (`make lint`):

1. `systemd-analyze verify` accepts each one with nothing to say (an unknown key is only a
   warning to systemd, an error here), the server at /opt/seckill/server as docs/deploy.md
   unpacks it: a mount namespace of this check's own puts a copy there, nothing else is touched;
2. every variable a unit sets is a setting the server reads (docs/configuration.md's table);
3. the shape of a deployed machine: SECKILL_DEPLOYED on, the user `seckill`, the instance
   listening where nginx on another machine reaches it (SECKILL_ADDR not on the loopback), the
   worker's metrics likewise (SECKILL_WORKER_ADDR), both waiting for their release's migrations
   (`migrate --wait`) before they start.

`--self-test` breaks copies of the units in each of those ways and fails unless each is caught.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNITS = os.path.join(ROOT, "deploy", "systemd")
NOT_SETTINGS = {"RUST_LOG"}


def settings():
    doc = open(os.path.join(ROOT, "docs", "configuration.md")).read()
    table = doc.split("<!-- settings:begin -->")[1].split("<!-- settings:end -->")[0]
    return set(re.findall(r"^\| `([A-Z0-9_]+)` \|", table, re.M))


def environment(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("Environment="):
            for pair in line[len("Environment="):].split():
                name, _, value = pair.partition("=")
                out[name] = value
    return out


def check_shape(name, text, known):
    errors = []
    env = environment(text)
    for var in env:
        if var not in known and var not in NOT_SETTINGS:
            errors.append(f"{name}: {var} is not a setting the server reads (docs/configuration.md)")
    if env.get("SECKILL_DEPLOYED") != "1":
        errors.append(f"{name}: SECKILL_DEPLOYED=1 is not set")
    if not re.search(r"^User=seckill$", text, re.M):
        errors.append(f"{name}: does not run as the user seckill")
    verb = re.search(r"^ExecStart=/opt/seckill/server (\S+)", text, re.M)
    verb = verb.group(1) if verb else None
    listen = {"serve": "SECKILL_ADDR", "worker": "SECKILL_WORKER_ADDR"}.get(verb)
    if listen and env.get(listen, "127.0.0.1").split(":")[0] in ("127.0.0.1", "localhost", "[::1]"):
        errors.append(f"{name}: {listen} is not set off the loopback: nginx or Prometheus on another machine cannot reach it")
    if verb in ("serve", "worker") and not re.search(r"^ExecStartPre=/opt/seckill/server migrate --wait\b", text, re.M):
        errors.append(f"{name}: does not wait for its release's migrations (ExecStartPre=… migrate --wait)")
    return errors


def verify(paths, server):
    """systemd-analyze verify in a mount namespace where /opt/seckill/server exists."""
    if not shutil.which("systemd-analyze") or not shutil.which("unshare"):
        print("systemd: cannot check: systemd-analyze and unshare are needed (apt-get install systemd util-linux)",
              file=sys.stderr)
        sys.exit(2)
    script = ('mount -t tmpfs seckill-check /opt && mkdir -p /opt/seckill/site && '
              'cp "$0" /opt/seckill/server && exec systemd-analyze verify "$@"')
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, server, *paths],
                         capture_output=True, text=True)
    said = [l for l in (out.stdout + out.stderr).splitlines() if l.strip()]
    if out.returncode != 0 and not said:
        said = [f"systemd-analyze verify exited {out.returncode}"]
    return said


def check(folder, known, server):
    errors = []
    paths = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".service"))
    for path in paths:
        errors += check_shape(os.path.basename(path), open(path).read(), known)
    errors += verify(paths, server)
    return errors, len(paths)


def self_test(known, server):
    cases = [
        ("an unknown key", "seckill-serve.service", lambda t: t.replace("KillSignal=", "KilSignal=")),
        ("a command that is not there", "seckill-worker.service",
         lambda t: t.replace("ExecStart=/opt/seckill/server worker", "ExecStart=/opt/seckill/bin/server worker")),
        ("an instance on the loopback", "seckill-serve.service",
         lambda t: t.replace("Environment=SECKILL_ADDR=0.0.0.0:3000\n", "")),
        ("a worker whose metrics are on the loopback", "seckill-worker.service",
         lambda t: t.replace("SECKILL_WORKER_ADDR=0.0.0.0:3001", "SECKILL_WORKER_ADDR=127.0.0.1:3001")),
        ("a setting the server does not read", "seckill-serve.service",
         lambda t: t.replace("SECKILL_NO_WORKERS=1", "SECKILL_NO_WORKER=1")),
        ("no user of its own", "seckill-worker.service", lambda t: t.replace("User=seckill\n", "")),
        ("no wait for the migrations", "seckill-serve.service",
         lambda t: re.sub(r"^ExecStartPre=.*\n", "", t, flags=re.M)),
    ]
    errors, _ = check(UNITS, known, server)
    if errors:
        print(f"systemd: the units themselves must pass first: {errors[0]}", file=sys.stderr)
        sys.exit(1)
    missed = 0
    for what, unit, edit in cases:
        with tempfile.TemporaryDirectory() as tmp:
            for f in os.listdir(UNITS):
                shutil.copy(os.path.join(UNITS, f), tmp)
            path = os.path.join(tmp, unit)
            text = open(path).read()
            broken = edit(text)
            assert broken != text, what
            open(path, "w").write(broken)
            errors, _ = check(tmp, known, server)
        print(f"  {'caught' if errors else 'MISSED'}: {what}" + (f" ({errors[0][:100]})" if errors else ""))
        missed += not errors
    if missed:
        print("systemd: the self-test MISSED a breakage", file=sys.stderr)
        sys.exit(1)
    print(f"systemd: self-test: {len(cases)} of {len(cases)} breakages caught")


def main():
    server = os.path.join(ROOT, "target", "release", "server")
    if not os.path.exists(server):
        server = shutil.which("true")
    known = settings()
    if "--self-test" in sys.argv:
        self_test(known, server)
        return
    errors, count = check(UNITS, known, server)
    for e in errors:
        print(f"systemd: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"systemd: {count} units verified by systemd-analyze, every setting one the server reads")


if __name__ == "__main__":
    main()
