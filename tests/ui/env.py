#!/usr/bin/env python3
"""env.py: the environment of the /inference page suite (tests/ui/run.sh, R-ADM-3).

Starts, through tests/it/lib/harness.py, a real lighttpd + sluice-fcgi pool (which also
serves www/ and the admin CGI), sluice-healthd with short rounds (replica health and
alerts) and two stand-in upstreams, with an operator `oper` and a member `mia` (tenant
acme) who sign in with passwords; nothing else is configured for them, the page does the rest,
but for one semantic cache hit audit row (R-CACHE-4: the data plane writes them; its prompt is
markup, which the Models tab must show as text).
For the CORS tests (R-API-7, cors.mjs) a tenant corsco of its own, out of the page's way: a
member key, a key limited to 1 request per second, and route `cors-m` to a third stand-in;
`cors_allowed_origins` names one of two free ports on 127.0.0.1 (the test serves a page from
each). Prints one JSON line {"base_url", "username", "password", "member_username",
"member_password", "fake_url", "fake2_url", "gw_dir", "cors": {"key", "qps_key", "model",
"fake_url", "allowed_port", "refused_port"}} on stdout, then waits until its stdin closes (or
600 s pass) and stops everything it started."""
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "it", "lib"))
if os.environ.get("SLUICE_SRCDIR"):      # a copy run outside the source tree (make distcheck)
    sys.path.insert(0, os.path.join(os.environ["SLUICE_SRCDIR"], "tests", "it", "lib"))
from harness import CTL, OUTDIR, Fake, Gateway, Healthd, add_endpoint, free_port, setup_tenant  # noqa: E402

MAX_LIFETIME_S = 600


def add_user(gw, name, tenant, role, password):
    p = subprocess.run([CTL, "--db", gw.db, "--json", "user", "add", name, "--tenant", tenant, "--role", role,
                        "--password-stdin"], input=password + "\n", capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError("user add %s failed: %s" % (name, p.stderr))


def main():
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(1))
    os.makedirs(OUTDIR, exist_ok=True)
    fakes, gw, healthd = [], None, None
    try:
        fakes = [Fake("ui-a"), Fake("ui-b"), Fake("ui-cors")]
        gw = Gateway("ui", procs=2, threads=16)
        password = "ui-" + secrets.token_urlsafe(12)
        member_password = "ui-" + secrets.token_urlsafe(12)
        add_user(gw, "oper", "default", "operator", password)
        gw.ctl("tenant", "add", "acme")
        add_user(gw, "mia", "acme", "member", member_password)
        # R-API-7: CORS, in a tenant of its own so the page's views stay as the tests expect.
        cors_key = setup_tenant(gw, "corsco", "cora")
        cors_qps_key = gw.ctl("key", "add", "--user", "cora", "--qps", 1)["key"]
        add_endpoint(gw, "ep-cors", "corsco", [fakes[2]])
        gw.ctl("route", "add", "cors-m", "ep-cors", "--tenant", "corsco")
        allowed_port, refused_port = free_port(), free_port()
        while refused_port == allowed_port:
            refused_port = free_port()
        gw.ctl("config", "set", "cors_allowed_origins", "http://127.0.0.1:%d" % allowed_port)
        acme = gw.sql("SELECT id FROM tenants WHERE name = 'acme'")[0][0]
        gw.sql_write("INSERT INTO semantic_hits (ts_ms, request_id, tenant_id, model, similarity, entry_id, key_hash,"
                     " prompt, matched) VALUES (?, 'req_ui_semantic', ?, 'ui-sem', 0.9612, 1, ?, ?, ?)",
                     int(time.time() * 1000), acme, "0" * 64, "<img src=x onerror=alert(1)> capital of France?",
                     "what is the capital of France")
        gw.start()
        healthd = Healthd(gw, round_ms=300, timeout_ms=500)
        sys.stdout.write(json.dumps({
            "base_url": "http://127.0.0.1:%d" % gw.port, "username": "oper", "password": password,
            "member_username": "mia", "member_password": member_password,
            "fake_url": fakes[0].url, "fake2_url": fakes[1].url, "gw_dir": gw.dir,
            "cors": {"key": cors_key, "qps_key": cors_qps_key, "model": "cors-m", "fake_url": fakes[2].url,
                     "allowed_port": allowed_port, "refused_port": refused_port}}) + "\n")
        sys.stdout.flush()
        deadline = time.time() + MAX_LIFETIME_S
        fd = sys.stdin.fileno()
        while time.time() < deadline:
            r, _, _ = select.select([fd], [], [], 1.0)
            if r and not os.read(fd, 4096):
                break
    finally:
        if healthd:
            healthd.stop()
        if gw:
            gw.stop()
        for f in fakes:
            f.stop()


if __name__ == "__main__":
    main()
