#!/usr/bin/env python3
"""env.py: the environment of the OpenAI Node SDK suite (tests/sdk/run.sh).

Starts, through tests/it/lib/harness.py, a real lighttpd + sluice-fcgi pool in front of
one stand-in upstream, with a tenant, a member key, an endpoint and a route `m`, plus a
second stand-in in its Anthropic Messages mode behind an endpoint `--protocol anthropic`
(upstream credential ANT_SECRET) with the route `claude` -> target model `claude-sdk-real`,
and for the Responses API (R-API-8) an endpoint ep-resp with two stand-ins round robin behind
the route `r`; a second tenant globex has a member key. Prints one JSON line {"base_url",
"key", "limited_key", "other_key", "fake_port", "ant_fake_port", "ant_secret",
"resp_fake_ports", "db", "gw_dir"} on stdout, then waits until its stdin closes (or 600 s
pass) and stops everything it started."""
import json
import os
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "it", "lib"))
if os.environ.get("SLUICE_SRCDIR"):      # a copy run outside the source tree (make distcheck)
    sys.path.insert(0, os.path.join(os.environ["SLUICE_SRCDIR"], "tests", "it", "lib"))
from harness import CTL, OUTDIR, Fake, Gateway, add_endpoint, setup_tenant  # noqa: E402

MAX_LIFETIME_S = 600
ANT_SECRET = "sk-ant-sdk-upstream-cred-%d" % os.getpid()


def main():
    # A TERM or HUP still stops what we started (the finally below).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(1))
    os.makedirs(OUTDIR, exist_ok=True)
    fake = ant = gw = None
    resp = []
    try:
        fake = Fake("sdk")
        ant = Fake("sdk-ant")
        resp = [Fake("sdk-r1"), Fake("sdk-r2")]
        gw = Gateway("sdk")
        key = setup_tenant(gw, "acme", "alice")
        add_endpoint(gw, "ep1", "acme", [fake])
        gw.ctl("route", "add", "m", "ep1", "--tenant", "acme")
        # A key with a daily limit of 1 call, for the SDK's view of sluice's own 429 (R-KEY-2).
        limited = gw.ctl("key", "add", "--user", "alice", "--daily", 1)["key"]
        # R-ANT-1: an Anthropic Messages upstream; its credential goes in on stdin (R-ANT-4).
        p = subprocess.run([CTL, "--db", gw.db, "--json", "endpoint", "add", "ep-ant", "--tenant", "acme",
                            "--protocol", "anthropic", "--upstream-auth-stdin"], input=ANT_SECRET + "\n",
                           capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise RuntimeError("endpoint add ep-ant: %s %s" % (p.stdout, p.stderr))
        gw.ctl("replica", "add", "ep-ant", ant.url)
        gw.ctl("route", "add", "claude", "ep-ant", "--tenant", "acme", "--target-model", "claude-sdk-real")
        # R-API-8: a response id belongs to the replica that made it; round robin would
        # send every other follow-up to the replica that does not know it.
        add_endpoint(gw, "ep-resp", "acme", resp, algorithm="round_robin")
        gw.ctl("route", "add", "r", "ep-resp", "--tenant", "acme")
        other = setup_tenant(gw, "globex", "gina")
        gw.start()
        sys.stdout.write(json.dumps({"base_url": "http://127.0.0.1:%d/v1" % gw.port, "key": key,
                                     "limited_key": limited, "other_key": other,
                                     "resp_fake_ports": [f.port for f in resp], "db": gw.db,
                                     "fake_port": fake.port, "ant_fake_port": ant.port,
                                     "ant_secret": ANT_SECRET, "gw_dir": gw.dir}) + "\n")
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
        if ant:
            ant.stop()
        for f in resp:
            f.stop()


if __name__ == "__main__":
    main()
