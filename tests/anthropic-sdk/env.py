#!/usr/bin/env python3
"""env.py: the environment of the Anthropic TypeScript SDK suite (tests/anthropic-sdk/run.sh).

Starts, through tests/it/lib/harness.py, a real lighttpd + sluice-fcgi pool in front of two
stand-in upstreams: one in its Anthropic Messages mode behind the endpoint ep-ant
(`--protocol anthropic`, upstream credential ANT_SECRET, route `claude` -> target model
`claude-real`), one speaking OpenAI behind the endpoint ep-oa (route `gpt` -> target model
`gpt-real`). Tenant acme has a member alice with a key, a key limited to 1 request per
second, and an endpoint key of ep-oa; tenant globex has a route `claude-g` to its own
endpoint ep-g (the same Anthropic stand-in). Prints one JSON line {"base_url", "key",
"qps_key", "ep_oa_key", "ant_port", "oa_port", "ant_secret", "db", "gw_dir"} on stdout,
then waits until its stdin closes (or 600 s pass) and stops everything it started."""
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
ANT_SECRET = "sk-ant-asdk-upstream-cred-%d" % os.getpid()


def anthropic_endpoint(gw, name, tenant, fake):
    # R-ANT-4: the upstream credential goes in on stdin; the stand-in insists on x-api-key.
    p = subprocess.run([CTL, "--db", gw.db, "--json", "endpoint", "add", name, "--tenant", tenant,
                        "--protocol", "anthropic", "--upstream-auth-stdin"], input=ANT_SECRET + "\n",
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError("endpoint add %s: %s %s" % (name, p.stdout, p.stderr))
    gw.ctl("replica", "add", name, fake.url)


def main():
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(1))
    os.makedirs(OUTDIR, exist_ok=True)
    ant = oa = gw = None
    try:
        ant = Fake("asdk-ant")
        oa = Fake("asdk-oa")
        gw = Gateway("asdk")
        key = setup_tenant(gw, "acme", "alice")
        qps_key = gw.ctl("key", "add", "--user", "alice", "--qps", 1)["key"]
        anthropic_endpoint(gw, "ep-ant", "acme", ant)
        gw.ctl("route", "add", "claude", "ep-ant", "--tenant", "acme", "--target-model", "claude-real")
        ep_oa = add_endpoint(gw, "ep-oa", "acme", [oa])
        gw.ctl("route", "add", "gpt", "ep-oa", "--tenant", "acme", "--target-model", "gpt-real")
        gw.ctl("tenant", "add", "globex")
        anthropic_endpoint(gw, "ep-g", "globex", ant)
        gw.ctl("route", "add", "claude-g", "ep-g", "--tenant", "globex", "--target-model", "claude-real")
        gw.start()
        sys.stdout.write(json.dumps({
            "base_url": "http://127.0.0.1:%d" % gw.port, "key": key, "qps_key": qps_key,
            "ep_oa_key": ep_oa.get("key"), "ant_port": ant.port, "oa_port": oa.port,
            "ant_secret": ANT_SECRET, "db": gw.db, "gw_dir": gw.dir}) + "\n")
        sys.stdout.flush()
        deadline = time.time() + MAX_LIFETIME_S
        fd = sys.stdin.fileno()
        while time.time() < deadline:
            r, _, _ = select.select([fd], [], [], 1.0)
            if r and not os.read(fd, 4096):
                break
    finally:
        if gw:
            gw.stop()
        for f in (ant, oa):
            if f:
                f.stop()


if __name__ == "__main__":
    main()
