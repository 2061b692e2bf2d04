#!/usr/bin/env python3
"""t0130-content-rules: content rules on the request's text (R-GUARD-3).

Rules are rows of content_rules (written here with SQL until the CLI lands): a
global block rule stops every tenant's request with 400 content_policy_violation
naming the rule and the upstream is not called; a tenant's rule stops only that
tenant; a keyword matches whole words caselessly."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_with, stop_all, wait_for


def rule(gw, name, pattern, tenant=None, kind="pattern", action="block", scope="input"):
    tid = gw.sql("SELECT id FROM tenants WHERE name = ?", tenant)[0][0] if tenant else None
    gw.sql_write("INSERT INTO content_rules (name, tenant_id, kind, pattern, action, scope) VALUES (?, ?, ?, ?, ?, ?)",
                 name, tid, kind, pattern, action, scope)


def build(c):
    c.fake = Fake("rules")
    c.gw = Gateway("t0130", procs=2, threads=8)
    c.gw.ctl("tenant", "add", "acme")
    c.gw.ctl("tenant", "add", "beta")
    c.gw.ctl("user", "add", "op", "--tenant", "default", "--role", "operator")
    c.key = c.gw.ctl("key", "add", "--user", "op")["key"]
    add_endpoint(c.gw, "ep", "default", [c.fake])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "default")
    rule(c.gw, "no-secrets", r"password\s*[:=]")
    rule(c.gw, "acme-word", "Zebra", tenant="acme", kind="keyword")
    rule(c.gw, "mention-pii", r"\bSSN\b", action="flag")
    c.gw.start()
    wait_for(lambda: post(c, "hello").status == 200, 5, what="key live")
    time.sleep(0.8)
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


def post(c, content, tenant="acme"):
    b = {"model": "m", "messages": [{"role": "user", "content": content}]}
    return c.gw.request("POST", "/v1/chat/completions", b, key=c.key, headers={"X-Sluice-Tenant": tenant})


def upstream(c):
    return c.fake.stats()["requests"]


def test_block_global_names_rule_upstream_not_called_R_GUARD_3(c):
    for tenant in ("acme", "beta"):
        up = upstream(c)
        r = post(c, "my password: hunter2", tenant=tenant)
        assert r.status == 400, (r, r.body)
        err = r.json()["error"]
        assert err["code"] == "content_policy_violation" and "'no-secrets'" in err["message"], err
        assert upstream(c) == up, "a blocked request reached the upstream"


def test_block_per_tenant_keyword_R_GUARD_3(c):
    r = post(c, "a zebra crossing", tenant="acme")
    assert r.status == 400 and "'acme-word'" in r.json()["error"]["message"], (r, r.body)
    r = post(c, "a zebra crossing", tenant="beta")
    assert r.status == 200, (r, r.body)
    r = post(c, "zebras everywhere", tenant="acme")      # whole word only
    assert r.status == 200, (r, r.body)


def test_flag_served_with_header_R_GUARD_3(c):
    up = upstream(c)
    r = post(c, "is my SSN safe?", tenant="beta")
    assert r.status == 200, (r, r.body)
    assert r.headers.get("x-content-flag") == "mention-pii", r.headers
    assert upstream(c) == up + 1
    r = post(c, "plain question", tenant="beta")
    assert r.status == 200 and r.headers.get("x-content-flag") is None, r.headers


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
