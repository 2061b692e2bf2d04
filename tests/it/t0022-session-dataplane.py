#!/usr/bin/env python3
"""t0022-session-dataplane: an admin login session is a data-plane credential too (R-AUTH-1)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, http_request, run_tests, wait_for


class Ctx:
    pass


def setup():
    c = Ctx()
    c.fake = Fake("sess")
    c.gw = Gateway("t0022", procs=2, threads=8)
    c.gw.ctl("tenant", "add", "acme")
    c.gw.ctl("tenant", "add", "other")
    p = subprocess.run(c.gw.ctl_argv() + ["--json", "user", "add", "bob", "--tenant", "acme", "--role", "member",
                        "--password-stdin"], input="bob-Secret-pw-9\n", capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    c.bob = json.loads(p.stdout)["id"]
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    add_endpoint(c.gw, "ep-o", "other", [c.fake])
    c.gw.ctl("route", "add", "o", "ep-o", "--tenant", "other")
    c.gw.start()
    r = http_request(c.gw.port, "POST", "/api/v1/auth/login", {"username": "bob", "password": "bob-Secret-pw-9"})
    assert r.status == 200, r
    c.token = r.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    c.csrf = r.json()["csrf_token"]
    return c


def teardown(c):
    if c:
        c.gw.stop()
        c.fake.stop()


def test_session_serves_the_users_tenant_R_AUTH_1(c):
    r = c.gw.chat(c.token, model="m", headers={"X-Request-Id": "sess-1"})
    assert r.status == 200, r
    assert "authorization" not in c.fake.stats()["last"]["headers"], "session forwarded upstream"
    row = wait_for(lambda: c.gw.usage_events("request_id = 'sess-1'"), 3)[0]
    assert row["user_id"] == c.bob and row["key_id"] == 0, row
    # Tenant scoping holds for sessions as for keys (R-AUTH-3).
    r = c.gw.chat(c.token, model="o")
    assert r.status == 404, r


def test_logout_ends_it_R_AUTH_1(c):
    r = http_request(c.gw.port, "POST", "/api/v1/auth/logout", None,
                     {"Cookie": "sluice_session=" + c.token, "X-CSRF-Token": c.csrf})
    assert r.status in (200, 204), r
    r = c.gw.chat(c.token, model="m")
    assert r.status == 401 and r.json()["error"]["code"] == "invalid_api_key", r
    r = c.gw.chat("ses-" + "A" * 43, model="m")
    assert r.status == 401, r


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
