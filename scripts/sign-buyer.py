#!/usr/bin/env python3
"""For the benchmarks: a shopper's session cookie and buy path, signed as the server signs them
(server/src/http/session.rs, server/src/buy/gate.rs).
Usage: sign-buyer.py SECRET USER_ID ACTIVITY_ID [WRK_SCRIPT]
prints "COOKIE PATH"; with WRK_SCRIPT, also writes there a wrk script that POSTs that buy."""
import base64, hashlib, hmac, secrets, sys, time

secret, user, act = sys.argv[1].encode(), sys.argv[2], sys.argv[3]
# session id, user, role, shop (none), sign-out-everywhere generation, expiry, account created
# (0: long ago), password last checked (now)
now = int(time.time())
payload = f"{secrets.randbits(128):032x}.{user}.shopper.0.0.{now + 3600}.0.{now}"
sig = hmac.new(secret, b"sid\0" + payload.encode(), hashlib.sha256).digest()
path = hmac.new(secret, f"path\0{user}\0{act}".encode(), hashlib.sha256).digest()[:18]
b64 = lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")
cookie = f"{payload}.{b64(sig)}"
if len(sys.argv) > 4:
    with open(sys.argv[4], "w") as wrk:
        wrk.write(
            'wrk.method = "POST"\n'
            f"wrk.body = '{{\"path\":\"{b64(path)}\"}}'\n"
            'wrk.headers["Content-Type"] = "application/json"\n'
            f'wrk.headers["Cookie"] = "sid={cookie}"\n'
            'wrk.headers["X-Forwarded-For"] = "10.200.0.1"\n'
        )
print(cookie, b64(path))
