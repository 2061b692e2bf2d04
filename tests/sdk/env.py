#!/usr/bin/env python3
"""env.py: the environment of the OpenAI Node SDK suite (tests/sdk/run.sh).

Starts, through tests/it/lib/harness.py, a real lighttpd + sluice-fcgi pool in front of
one stand-in upstream, with a tenant, a member key, an endpoint and a route `m`; prints
one JSON line {"base_url", "key", "fake_port", "gw_dir"} on stdout, then waits until its
stdin closes (or 600 s pass) and stops everything it started."""
import json
import os
import select
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "it", "lib"))
if os.environ.get("SLUICE_SRCDIR"):      # a copy run outside the source tree (make distcheck)
    sys.path.insert(0, os.path.join(os.environ["SLUICE_SRCDIR"], "tests", "it", "lib"))
from harness import OUTDIR, Fake, Gateway, add_endpoint, setup_tenant  # noqa: E402

MAX_LIFETIME_S = 600


def main():
    # A TERM or HUP still stops what we started (the finally below).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(1))
    os.makedirs(OUTDIR, exist_ok=True)
    fake = gw = None
    try:
        fake = Fake("sdk")
        gw = Gateway("sdk")
        key = setup_tenant(gw, "acme", "alice")
        add_endpoint(gw, "ep1", "acme", [fake])
        gw.ctl("route", "add", "m", "ep1", "--tenant", "acme")
        # A key with a daily limit of 1 call, for the SDK's view of sluice's own 429 (R-KEY-2).
        limited = gw.ctl("key", "add", "--user", "alice", "--daily", 1)["key"]
        gw.start()
        sys.stdout.write(json.dumps({"base_url": "http://127.0.0.1:%d/v1" % gw.port, "key": key,
                                     "limited_key": limited,
                                     "fake_port": fake.port, "gw_dir": gw.dir}) + "\n")
        sys.stdout.flush()
        # Wait for EOF on stdin: the runner closes it when the tests are done (or dies).
        deadline = time.time() + MAX_LIFETIME_S
        fd = sys.stdin.fileno()
        while time.time() < deadline:
            r, _, _ = select.select([fd], [], [], 1.0)
            if r and not os.read(fd, 4096):
                break
    finally:
        if gw:
            gw.stop()
        if fake:
            fake.stop()


if __name__ == "__main__":
    main()
