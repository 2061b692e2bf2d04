#!/usr/bin/env python3
"""t0131-rules-api: content rules through /api/v1/rules (R-GUARD-3, R-ADM-1/2, R-ADM-5).

GET /api/v1/rules (?tenant=), POST /api/v1/rules, GET and DELETE /api/v1/rules/{id}:
the operator manages every rule; a tenant admin creates and deletes its own tenant's and
reads them and the global ones (global read-only); a member gets 403. A pattern that does
not compile is a 400 naming `pattern`, one that backtracks without bound is refused; a
rule made through the API takes effect on the data plane and is gone once deleted; every
change is audited as content_rule."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (ApiSession, Fake, Gateway, add_endpoint, add_user_with_password, audit, expect, run_tests,
                     setup_with, stop_all, wait_for)

PW = {"root": "root-pass-1", "adm_a": "adm-a-pass", "mem_a": "mem-a-pass", "adm_b": "adm-b-pass"}


def build(c):
    c.fake = Fake("t0131")
    gw = c.gw = Gateway("t0131", procs=1, threads=4)
    gw.ctl("tenant", "add", "ta")
    gw.ctl("tenant", "add", "tb")
    for name, tenant, role in (("root", "default", "operator"), ("adm_a", "ta", "admin"),
                               ("mem_a", "ta", "member"), ("adm_b", "tb", "admin")):
        add_user_with_password(gw, name, tenant, role, PW[name])
    c.key_a = gw.ctl("key", "add", "--user", "mem_a")["key"]
    gw.ctl("user", "add", "mem_b", "--tenant", "tb")
    c.key_b = gw.ctl("key", "add", "--user", "mem_b")["key"]
    for t in ("ta", "tb"):
        add_endpoint(gw, "ep-" + t, t, [c.fake])
        gw.ctl("route", "add", "m", "ep-" + t, "--tenant", t)
    gw.ctl("rule", "add", "global-one", "--keyword", "forbidden", "--action", "block")
    gw.ctl("rule", "add", "tb-own", "--keyword", "bravo", "--action", "flag", "--tenant", "tb")
    c.tid = {t["name"]: t["id"] for t in gw.ctl("list", "tenants")["tenants"]}
    gw.start()
    c.root, c.adm_a, c.mem_a, c.adm_b = (ApiSession(gw, n, PW[n]) for n in ("root", "adm_a", "mem_a", "adm_b"))
    wait_for(lambda: chat(c, c.key_a, "hello").status == 200, 5, what="key live")
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


def chat(c, key, content):
    b = {"model": "m", "messages": [{"role": "user", "content": content}]}
    return c.gw.request("POST", "/v1/chat/completions", b, key=key)


def names(r):
    return [x["name"] for x in expect(r, 200)["data"]]


def rule_id(c, name):
    return c.gw.sql("SELECT id FROM content_rules WHERE name = ?", name)[0][0]


def test_operator_lists_all_and_filters_by_tenant(c):
    assert names(c.root.get("/api/v1/rules")) == ["global-one", "tb-own"]
    assert names(c.root.get("/api/v1/rules?tenant=ta")) == ["global-one"]
    assert names(c.root.get("/api/v1/rules?tenant_id=%d" % c.tid["tb"])) == ["global-one", "tb-own"]
    expect(c.root.get("/api/v1/rules?tenant=nobody"), 404, param="tenant")
    one = expect(c.root.get("/api/v1/rules/%d" % rule_id(c, "tb-own")), 200)
    assert (one["name"], one["tenant"], one["tenant_id"], one["kind"], one["pattern"], one["action"],
            one["scope"]) == ("tb-own", "tb", c.tid["tb"], "keyword", "bravo", "flag", "input"), one
    expect(c.root.get("/api/v1/rules/999999"), 404, code="not_found")


def test_admin_sees_own_and_global_only(c):
    assert names(c.adm_a.get("/api/v1/rules")) == ["global-one"]
    assert names(c.adm_b.get("/api/v1/rules")) == ["global-one", "tb-own"]
    expect(c.adm_a.get("/api/v1/rules?tenant=tb"), 403, code="permission_denied")
    expect(c.adm_a.get("/api/v1/rules/%d" % rule_id(c, "tb-own")), 403, code="permission_denied")
    g = expect(c.adm_a.get("/api/v1/rules/%d" % rule_id(c, "global-one")), 200)
    assert g["name"] == "global-one" and g["tenant"] is None, g


def test_admin_creates_and_deletes_own_not_global_nor_foreign(c):
    before = c.gw.sql("SELECT count(*) FROM content_rules")[0][0]
    expect(c.adm_a.post("/api/v1/rules", {"name": "a-global", "keyword": "x", "action": "flag"}), 403,
           code="permission_denied")
    expect(c.adm_a.post("/api/v1/rules", {"name": "a-in-b", "keyword": "x", "action": "flag", "tenant": "tb"}),
           403, code="permission_denied")
    expect(c.adm_a.post("/api/v1/rules", {"name": "a-in-b2", "keyword": "x", "action": "flag",
                                          "tenant_id": c.tid["tb"]}), 403, code="permission_denied")
    expect(c.adm_a.delete("/api/v1/rules/%d" % rule_id(c, "global-one")), 403, code="permission_denied")
    expect(c.adm_a.delete("/api/v1/rules/%d" % rule_id(c, "tb-own")), 403, code="permission_denied")
    assert c.gw.sql("SELECT count(*) FROM content_rules")[0][0] == before
    made = expect(c.adm_a.post("/api/v1/rules", {"name": "a-own", "pattern": r"alpha\d+", "action": "block",
                                                 "tenant": "ta", "scope": "input"}), 200)
    assert (made["tenant"], made["kind"], made["action"], made["scope"]) == ("ta", "pattern", "block", "input"), made
    assert names(c.adm_a.get("/api/v1/rules")) == ["global-one", "a-own"]
    gone = expect(c.adm_a.delete("/api/v1/rules/%d" % made["id"]), 200)
    assert gone["name"] == "a-own", gone
    expect(c.adm_a.get("/api/v1/rules/%d" % made["id"]), 404)
    rows = audit(c.gw, "content_rule", "object_id = %d" % made["id"])
    assert [r[1] for r in rows] == ["create", "delete"], rows
    assert rows[0][0] != "sluicectl" and json.loads(rows[0][5])["name"] == "a-own", rows


def test_member_gets_403_everywhere(c):
    rid = rule_id(c, "global-one")
    for r in (c.mem_a.get("/api/v1/rules"), c.mem_a.get("/api/v1/rules/%d" % rid),
              c.mem_a.get("/api/v1/rules/999999"),
              c.mem_a.post("/api/v1/rules", {"name": "m-own", "keyword": "x", "action": "flag", "tenant": "ta"}),
              c.mem_a.delete("/api/v1/rules/%d" % rid)):
        expect(r, 403, code="permission_denied")
    assert c.gw.sql("SELECT count(*) FROM content_rules WHERE name = 'm-own'")[0][0] == 0


def test_bad_input_in_the_api_error_shape(c):
    cases = [
        ({"name": "bad-re", "pattern": "(unclosed", "action": "block"}, "pattern", "offset"),
        ({"name": "slow-re", "pattern": "^(a+)+$", "action": "block"}, "pattern", "catastrophic"),
        ({"name": "slow-re2", "pattern": "(x+x+)+y", "action": "flag"}, "pattern", ""),
        ({"name": "both", "pattern": "x", "keyword": "x", "action": "block"}, "pattern", "exactly one"),
        ({"name": "neither", "action": "block"}, "pattern", "exactly one"),
        ({"name": "no-action", "pattern": "x"}, "action", "required"),
        ({"name": "bad-action", "pattern": "x", "action": "drop"}, "action", ""),
        ({"name": "bad-scope", "pattern": "x", "action": "flag", "scope": "both"}, "scope", ""),
        ({"name": "global-one", "pattern": "x", "action": "flag"}, "name", "exists"),
        ({"pattern": "x", "action": "flag"}, "name", "required"),
        ({"name": "t-both", "pattern": "x", "action": "flag", "tenant": "ta", "tenant_id": c.tid["ta"]}, "tenant",
         "not both"),
        ({"name": "odd", "pattern": "x", "action": "flag", "colour": "red"}, None, "does not take"),
        ({"name": "num", "pattern": 5, "action": "flag"}, "pattern", ""),
    ]
    before = c.gw.sql("SELECT count(*) FROM content_rules")[0][0]
    for body, param, words in cases:
        r = c.root.post("/api/v1/rules", body)
        assert r.status in (400, 409), (body, r)
        e = r.json()["error"]
        assert e["param"] == param and words in e["message"] and e["type"], (body, e)
    expect(c.root.post("/api/v1/rules", {"name": "ghost", "pattern": "x", "action": "flag", "tenant": "nobody"}),
           404, param="tenant")
    expect(c.root.post("/api/v1/rules", {"name": "ghost2", "pattern": "x", "action": "flag", "tenant_id": 424242}),
           404, param="tenant_id")
    assert c.gw.sql("SELECT count(*) FROM content_rules")[0][0] == before
    expect(c.root.call("PUT", "/api/v1/rules/1", {"name": "x"}), 405)


def test_create_takes_effect_then_delete_is_gone_R_GUARD_3(c):
    assert chat(c, c.key_a, "the word charlie").status == 200
    made = expect(c.root.post("/api/v1/rules", {"name": "api-block", "keyword": "charlie", "action": "block",
                                                "tenant_id": c.tid["ta"]}), 200)
    r = wait_for(lambda: (lambda x: x if x.status == 400 else None)(chat(c, c.key_a, "the word charlie")), 5,
                 what="rule live")
    e = r.json()["error"]
    assert e["code"] == "content_policy_violation" and "'api-block'" in e["message"], e
    assert chat(c, c.key_b, "the word charlie").status == 200, "another tenant's request is not screened"
    flag = expect(c.root.post("/api/v1/rules", {"name": "api-flag", "pattern": "delta+", "action": "flag"}), 200)
    r = wait_for(lambda: (lambda x: x if x.headers.get("x-content-flag") else None)(chat(c, c.key_b, "deltaaa")),
                 5, what="flag rule live")
    assert r.status == 200 and r.headers["x-content-flag"] == "api-flag", r.headers
    expect(c.root.delete("/api/v1/rules/%d" % made["id"]), 200)
    expect(c.root.delete("/api/v1/rules/%d" % flag["id"]), 200)
    # both deletes loaded by every responder (each load may come between the two)
    wait_for(lambda: all(chat(c, c.key_a, "the word charlie").status == 200 for _ in range(4)), 5, what="rule gone")
    wait_for(lambda: all((lambda x: x.status == 200 and x.headers.get("x-content-flag") is None)(
        chat(c, c.key_b, "deltaaa")) for _ in range(4)), 5, what="flag rule gone")
    expect(c.root.delete("/api/v1/rules/%d" % made["id"]), 404)
    acts = [r[1] for r in audit(c.gw, "content_rule")
            if json.loads(r[5] or r[4]).get("name") in ("api-block", "api-flag")]
    assert sorted(acts) == ["create", "create", "delete", "delete"], acts


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
