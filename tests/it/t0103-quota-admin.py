#!/usr/bin/env python3
"""t0103-quota-admin: the management side of issue 14 — endpoint caps and queue bounds
(R-PRIO-1), key priorities and tenant weights (R-PRIO-2), shrink_max_tokens and the quota
layers (R-KEY-6) — through sluicectl and /api/v1/, per role (R-ADM-2, R-SEC-5), with the
audit rows (R-ADM-5) and the values in the database, where the data plane reads them."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import ApiSession, Gateway, add_user_with_password, audit, ctl_fail, expect, run_tests, setup_with, stop_all

PW = {"root": "root-pass-1", "adm_a": "adm-a-pass", "mem_a": "mem-a-pass", "adm_b": "adm-b-pass"}


def Client(gw, name):
    return ApiSession(gw, name, PW[name])


def build(c):
    gw = c.gw = Gateway("t0103", procs=1, threads=4)
    gw.ctl("tenant", "add", "ta")
    gw.ctl("tenant", "add", "tb")
    for name, tenant, role in (("root", "default", "operator"), ("adm_a", "ta", "admin"),
                               ("mem_a", "ta", "member"), ("adm_b", "tb", "admin")):
        add_user_with_password(gw, name, tenant, role, PW[name])
    gw.ctl("user", "add", "mem_a2", "--tenant", "ta")
    gw.ctl("user", "add", "mem_b", "--tenant", "tb")
    for name, tenant in (("ep-a", "ta"), ("ep-b", "tb")):
        gw.ctl("endpoint", "add", name, "--tenant", tenant)
    c.tid = {t["name"]: t["id"] for t in gw.ctl("list", "tenants")["tenants"]}
    c.uid = {u["name"]: u["id"] for u in gw.ctl("list", "users")["users"]}
    c.eid = {e["name"]: e["id"] for e in gw.ctl("list", "endpoints")["endpoints"]}
    gw.start()
    c.root, c.adm_a, c.mem_a, c.adm_b = (Client(gw, n) for n in ("root", "adm_a", "mem_a", "adm_b"))
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw")


# ---- sluicectl ---------------------------------------------------------------------------

def test_cli_endpoint_queue_flags_R_PRIO_1(c):
    """endpoint add|set --max-concurrency --queue-max --queue-timeout-ms; defaults 0/100/10000."""
    gw = c.gw
    ep = gw.ctl("endpoint", "add", "ep-q", "--tenant", "ta", "--max-concurrency", 8, "--queue-max", 20,
                "--queue-timeout-ms", 2500)
    assert (ep["max_concurrency"], ep["queue_max"], ep["queue_timeout_ms"]) == (8, 20, 2500), ep
    plain = next(e for e in gw.ctl("list", "endpoints")["endpoints"] if e["name"] == "ep-a")
    assert (plain["max_concurrency"], plain["queue_max"], plain["queue_timeout_ms"]) == (0, 100, 10000), plain
    ep = gw.ctl("endpoint", "set", "ep-q", "--queue-max", 0)
    assert (ep["max_concurrency"], ep["queue_max"], ep["queue_timeout_ms"]) == (8, 0, 2500), ep
    gw.ctl("endpoint", "set", "ep-q", "--max-concurrency", 3, "--queue-timeout-ms", 0)
    assert gw.sql("SELECT max_concurrency, queue_max, queue_timeout_ms FROM endpoints WHERE name = 'ep-q'") == [(3, 0, 0)]
    for flag, bad in (("--max-concurrency", -1), ("--queue-max", -5), ("--queue-timeout-ms", 3600001),
                      ("--queue-max", "lots")):
        rc, e, _ = ctl_fail(gw, "endpoint", "set", "ep-q", flag, bad)
        assert rc == 1 and e["param"] in (flag[2:].replace("-", "_"), flag[2:]), (flag, e)
    assert gw.sql("SELECT max_concurrency, queue_max, queue_timeout_ms FROM endpoints WHERE name = 'ep-q'") == [(3, 0, 0)]
    rows = audit(gw, "endpoint", "object_id = %d" % ep["id"], "action = 'update'")
    assert rows and rows[-1][0] == "sluicectl", rows
    assert json.loads(rows[-1][5])["max_concurrency"] == 3 and json.loads(rows[-1][4])["max_concurrency"] == 8
    gw.ctl("endpoint", "rm", "ep-q")


def test_cli_key_priority_flags_R_PRIO_2(c):
    """key add|set --priority N --max-priority N|none; default 5 and null."""
    gw = c.gw
    k = gw.ctl("key", "add", "--user", "mem_a2")
    assert (k["priority"], k["max_priority"]) == (5, None), k
    k = gw.ctl("key", "add", "--user", "mem_a2", "--priority", 3, "--max-priority", 1)
    assert (k["priority"], k["max_priority"]) == (3, 1), k
    k2 = gw.ctl("key", "set", k["id"], "--priority", 7)
    assert (k2["priority"], k2["max_priority"]) == (7, 1), k2
    k2 = gw.ctl("key", "set", k["id"], "--max-priority", "none")
    assert (k2["priority"], k2["max_priority"]) == (7, None), k2
    gw.ctl("key", "set", k["id"], "--max-priority", 0)
    assert gw.sql("SELECT priority, max_priority FROM api_keys WHERE id = ?", k["id"]) == [(7, 0)]
    for flag, bad in (("--priority", 10), ("--priority", -1), ("--max-priority", 10), ("--max-priority", -1)):
        rc, e, _ = ctl_fail(gw, "key", "set", k["id"], flag, bad)
        assert rc == 1 and e["param"] == flag[2:].replace("-", "_"), (flag, e)
    rc, e, _ = ctl_fail(gw, "key", "add", "--user", "mem_a2", "--priority", 12)
    assert e["param"] == "priority", e
    assert gw.sql("SELECT priority, max_priority FROM api_keys WHERE id = ?", k["id"]) == [(7, 0)]
    after = json.loads(audit(gw, "key", "object_id = %d" % k["id"])[-1][5])
    assert (after["priority"], after["max_priority"]) == (7, 0), after


def test_cli_tenant_set_weight_R_PRIO_2(c):
    """tenant set NAME --weight N (1..1000, default 1)."""
    gw = c.gw
    assert next(t for t in gw.ctl("list", "tenants")["tenants"] if t["name"] == "tb")["weight"] == 1
    t = gw.ctl("tenant", "set", "tb", "--weight", 40)
    assert t["weight"] == 40 and t["name"] == "tb", t
    assert gw.sql("SELECT weight FROM tenants WHERE name = 'tb'") == [(40,)]
    for bad in (0, 1001, -3):
        rc, e, _ = ctl_fail(gw, "tenant", "set", "tb", "--weight", bad)
        assert e["param"] == "weight" and "1 and 1000" in e["message"], e
    rc, e, _ = ctl_fail(gw, "tenant", "set", "nosuch", "--weight", 2)
    assert e["code"] == "not_found", e
    rows = audit(gw, "tenant", "action = 'update'")
    assert rows[-1][0] == "sluicectl" and json.loads(rows[-1][4])["weight"] == 1 and json.loads(rows[-1][5])["weight"] == 40
    gw.ctl("tenant", "set", "tb", "--weight", 1)


def test_cli_policy_shrink_max_tokens_R_KEY_6(c):
    gw = c.gw
    p = gw.ctl("policy", "set", "m-shrink", "--shrink-max-tokens", "on")
    assert p["shrink_max_tokens"] is True, p
    assert gw.sql("SELECT shrink_max_tokens FROM model_policies WHERE model = 'm-shrink'") == [(1,)]
    p = gw.ctl("policy", "set", "m-shrink", "--shrink-max-tokens", "off", "--max-output", 100)
    assert p["shrink_max_tokens"] is False and p["max_output"] == 100, p
    assert gw.sql("SELECT shrink_max_tokens FROM model_policies WHERE model = 'm-shrink'") == [(0,)]
    rc, e, _ = ctl_fail(gw, "policy", "set", "m-shrink", "--shrink-max-tokens", "maybe")
    assert e["param"] == "shrink-max-tokens", e
    assert gw.ctl("list", "policies")["policies"][0]["shrink_max_tokens"] is False


def test_cli_quota_set_every_scope_R_KEY_6(c):
    """quota set per scope with the limits it takes; only given flags change; 0 = no limit."""
    gw = c.gw
    q = gw.ctl("quota", "set", "--tenant", "ta", "--monthly-tokens", 1000000, "--concurrency", 20)
    assert (q["scope"], q["tenant"], q["monthly_tokens"], q["concurrency"], q["rpm"]) == ("tenant", "ta", 1000000, 20, 0), q
    again = gw.ctl("quota", "set", "--tenant", "ta", "--concurrency", 25)
    assert again["id"] == q["id"] and (again["monthly_tokens"], again["concurrency"]) == (1000000, 25), again
    u = gw.ctl("quota", "set", "--user", "mem_a2", "--rpm", 60, "--daily-tokens", 50000)
    assert (u["scope"], u["user"], u["tenant"], u["rpm"], u["daily_tokens"]) == ("user", "mem_a2", "ta", 60, 50000), u
    e = gw.ctl("quota", "set", "--endpoint", "ep-b", "--concurrency", 4)
    assert (e["scope"], e["endpoint"], e["tenant"], e["concurrency"]) == ("endpoint", "ep-b", "tb", 4), e
    m = gw.ctl("quota", "set", "--model", "org/m-1", "--concurrency", 2, "--queue-max", 7)
    assert (m["scope"], m["model"], m["tenant"], m["concurrency"], m["queue_max"]) == ("model", "org/m-1", None, 2, 7), m
    m = gw.ctl("quota", "set", "--model", "org/m-1", "--queue-max", "none")
    assert (m["concurrency"], m["queue_max"]) == (2, None), m
    gw.ctl("quota", "set", "--model", "org/m-1", "--queue-max", 9)
    gw.ctl("quota", "set", "--user", "mem_a2", "--rpm", 0)          # 0 = no limit
    # What the data plane reads.
    rows = gw.sql("SELECT scope, tenant_id, user_id, endpoint_id, model, concurrency, rpm, daily_tokens,"
                  " monthly_tokens, queue_max FROM quotas ORDER BY id")
    assert rows == [("tenant", c.tid["ta"], None, None, None, 25, 0, 0, 1000000, None),
                    ("user", None, c.uid["mem_a2"], None, None, 0, 0, 50000, 0, None),
                    ("endpoint", None, None, c.eid["ep-b"], None, 4, 0, 0, 0, None),
                    ("model", None, None, None, "org/m-1", 2, 0, 0, 0, 9)], rows
    acts = [(r[0], r[1], r[3]) for r in audit(gw, "quota")]
    assert acts == [("sluicectl", "create", c.tid["ta"]), ("sluicectl", "update", c.tid["ta"]),
                    ("sluicectl", "create", c.tid["ta"]), ("sluicectl", "create", c.tid["tb"]),
                    ("sluicectl", "create", None), ("sluicectl", "update", None), ("sluicectl", "update", None),
                    ("sluicectl", "update", c.tid["ta"])], acts


def test_cli_quota_refusals_R_KEY_6(c):
    """A flag the scope does not take is refused by name; exactly one target; no negatives."""
    gw = c.gw
    before = gw.sql("SELECT * FROM quotas ORDER BY id")
    for args, flag in ((("--tenant", "ta", "--rpm", 5), "--rpm"), (("--tenant", "ta", "--daily-tokens", 5), "--daily-tokens"),
                       (("--user", "mem_a2", "--concurrency", 1), "--concurrency"),
                       (("--user", "mem_a2", "--monthly-tokens", 1), "--monthly-tokens"),
                       (("--endpoint", "ep-a", "--rpm", 1), "--rpm"), (("--endpoint", "ep-a", "--queue-max", 1), "--queue-max"),
                       (("--model", "m", "--daily-tokens", 1), "--daily-tokens"), (("--tenant", "ta", "--queue-max", 0), "--queue-max")):
        rc, e, stderr = ctl_fail(gw, "quota", "set", *args)
        assert rc == 1 and e["code"] == "invalid_value" and e["param"] == flag[2:].replace("-", "_"), (args, e)
        assert e["message"].startswith(flag + " does not apply to a " + args[0][2:] + " quota"), e
        assert flag in stderr, stderr
    rc, e, _ = ctl_fail(gw, "quota", "set", "--tenant", "ta", "--user", "mem_a2", "--rpm", 1)
    assert "exactly one" in e["message"], e
    rc, e, _ = ctl_fail(gw, "quota", "set", "--rpm", 1)
    assert "--tenant" in e["message"], e
    rc, e, _ = ctl_fail(gw, "quota", "set", "--tenant", "ta", "--concurrency", -1)
    assert e["param"] == "concurrency", e
    rc, e, _ = ctl_fail(gw, "quota", "set", "--tenant", "ta", "--concurrency", 1000001)
    assert e["param"] == "concurrency", e
    rc, e, _ = ctl_fail(gw, "quota", "set", "--user", "nobody", "--rpm", 1)
    assert e["code"] == "not_found", e
    rc, e, _ = ctl_fail(gw, "quota", "rm", "--endpoint", "ep-a")
    assert e["code"] == "not_found", e
    assert gw.sql("SELECT * FROM quotas ORDER BY id") == before


def test_cli_list_and_rm_quotas(c):
    """list quotas (JSON, text, filters, paging) and quota rm."""
    gw = c.gw
    res = gw.ctl("list", "quotas")
    assert res["total"] == 4 and [q["scope"] for q in res["quotas"]] == ["tenant", "user", "endpoint", "model"], res
    assert [q["tenant"] for q in gw.ctl("list", "quotas", "--tenant", "ta")["quotas"]] == ["ta", "ta"]
    assert [q["scope"] for q in gw.ctl("list", "quotas", "--scope", "model")["quotas"]] == ["model"]
    assert [q["user"] for q in gw.ctl("list", "quotas", "--user", "mem_a2")["quotas"]] == ["mem_a2"]
    assert [q["model"] for q in gw.ctl("list", "quotas", "--model", "org/m-1")["quotas"]] == ["org/m-1"]
    page = gw.ctl("list", "quotas", "--limit", 1, "--offset", 1)
    assert page["total"] == 4 and [q["scope"] for q in page["quotas"]] == ["user"], page
    text = subprocess.run(gw.ctl_argv() + ["list", "quotas"], capture_output=True, text=True, timeout=30)
    assert text.returncode == 0 and "org/m-1" in text.stdout and "monthly_tokens" in text.stdout, text.stdout
    rc, e, _ = ctl_fail(gw, "list", "quotas", "--scope", "galaxy")
    assert e["param"] == "scope", e
    gone = gw.ctl("quota", "rm", "--model", "org/m-1")
    assert gone["deleted"] is True and gone["model"] == "org/m-1", gone
    assert gw.sql("SELECT COUNT(*) FROM quotas WHERE scope = 'model'") == [(0,)]
    row = audit(gw, "quota", "action = 'delete'")[-1]
    assert row[0] == "sluicectl" and row[2] == gone["id"] and json.loads(row[4])["queue_max"] == 9 and row[5] is None, row
    gw.ctl("quota", "rm", "--endpoint", "ep-b")
    gw.ctl("quota", "rm", "--user", "mem_a2")
    gw.ctl("quota", "rm", "--tenant", "ta")
    assert gw.sql("SELECT COUNT(*) FROM quotas") == [(0,)]


# ---- the API: the new fields -----------------------------------------------------------------

def test_api_endpoint_queue_fields_R_PRIO_1(c):
    e = expect(c.adm_a.post("/api/v1/endpoints", {"name": "ep-api", "max_concurrency": 6, "queue_max": 12,
                                                 "queue_timeout_ms": 1500}), 200)
    assert (e["max_concurrency"], e["queue_max"], e["queue_timeout_ms"], e["tenant"]) == (6, 12, 1500, "ta"), e
    got = expect(c.adm_a.get("/api/v1/endpoints/%d" % e["id"]), 200)
    assert (got["max_concurrency"], got["queue_max"], got["queue_timeout_ms"]) == (6, 12, 1500), got
    got = expect(c.adm_a.patch("/api/v1/endpoints/%d" % e["id"], {"queue_max": 0, "max_concurrency": 2}), 200)
    assert (got["max_concurrency"], got["queue_max"], got["queue_timeout_ms"]) == (2, 0, 1500), got
    for body, param in (({"max_concurrency": -1}, "max_concurrency"), ({"queue_max": 1000001}, "queue_max"),
                        ({"queue_timeout_ms": -2}, "queue_timeout_ms"), ({"queue_max": "9"}, "queue_max")):
        expect(c.root.patch("/api/v1/endpoints/%d" % e["id"], body), 400, param=param)
    assert c.gw.sql("SELECT max_concurrency, queue_max, queue_timeout_ms FROM endpoints WHERE id = ?", e["id"]) == [(2, 0, 1500)]
    listed = next(x for x in expect(c.root.get("/api/v1/endpoints"), 200)["data"] if x["name"] == "ep-b")
    assert (listed["max_concurrency"], listed["queue_max"], listed["queue_timeout_ms"]) == (0, 100, 10000), listed
    rows = audit(c.gw, "endpoint", "object_id = %d" % e["id"], "action = 'update'")
    assert rows[-1][0] == "adm_a" and json.loads(rows[-1][5])["queue_max"] == 0, rows
    expect(c.adm_a.delete("/api/v1/endpoints/%d" % e["id"]), 200)


def test_api_key_priority_fields_R_PRIO_2(c):
    k = expect(c.root.post("/api/v1/tenant/api-keys", {"user": "mem_a2", "priority": 2, "max_priority": 0}), 200)
    assert (k["priority"], k["max_priority"]) == (2, 0), k
    plain = expect(c.root.post("/api/v1/tenant/api-keys", {"user": "mem_a2"}), 200)
    assert (plain["priority"], plain["max_priority"]) == (5, None), plain
    got = expect(c.root.patch("/api/v1/tenant/api-keys/%d" % k["id"], {"max_priority": None}), 200)
    assert (got["priority"], got["max_priority"]) == (2, None), got
    # Only the operator gives a tier better than 5 (it outranks every tenant on a shared endpoint);
    # an admin may move a key within what it has, or lower it.
    expect(c.adm_a.patch("/api/v1/tenant/api-keys/%d" % k["id"], {"priority": 0, "max_priority": 0}), 403,
           "permission_denied")
    expect(c.adm_a.patch("/api/v1/tenant/api-keys/%d" % k["id"], {"priority": 1}), 403, "permission_denied")
    got = expect(c.adm_a.patch("/api/v1/tenant/api-keys/%d" % k["id"], {"priority": 3}), 200)
    assert (got["priority"], got["max_priority"]) == (3, None), got
    for body, param in (({"priority": 10}, "priority"), ({"priority": -1}, "priority"), ({"max_priority": 11}, "max_priority"),
                        ({"max_priority": -1}, "max_priority"), ({"priority": "high"}, "priority")):
        expect(c.root.patch("/api/v1/tenant/api-keys/%d" % k["id"], body), 400, param=param)
    assert c.gw.sql("SELECT priority, max_priority FROM api_keys WHERE id = ?", k["id"]) == [(3, None)]
    # R-SEC-5: a member does not raise its own key's priority; lowering it is fine.
    own = expect(c.mem_a.post("/api/v1/tenant/api-keys", {"name": "mine"}), 200)
    assert own["priority"] == 5
    expect(c.mem_a.patch("/api/v1/tenant/api-keys/%d" % own["id"], {"priority": 1}), 403, "permission_denied")
    expect(c.mem_a.patch("/api/v1/tenant/api-keys/%d" % own["id"], {"max_priority": 0}), 403, "permission_denied")
    expect(c.mem_a.post("/api/v1/tenant/api-keys", {"priority": 0}), 403, "permission_denied")
    got = expect(c.mem_a.patch("/api/v1/tenant/api-keys/%d" % own["id"], {"priority": 8}), 200)
    assert got["priority"] == 8 and c.gw.sql("SELECT priority FROM api_keys WHERE id = ?", own["id"]) == [(8,)]
    after = json.loads(audit(c.gw, "key", "object_id = %d" % own["id"])[-1][5])
    assert after["priority"] == 8, after


def test_api_tenant_weight_R_PRIO_2(c):
    t = expect(c.root.patch("/api/v1/tenants/%d" % c.tid["ta"], {"weight": 3}), 200)
    assert t["weight"] == 3 and t["name"] == "ta", t
    assert expect(c.adm_a.get("/api/v1/tenants/%d" % c.tid["ta"]), 200)["weight"] == 3
    expect(c.adm_a.patch("/api/v1/tenants/%d" % c.tid["ta"], {"weight": 500}), 403, "permission_denied")
    expect(c.root.patch("/api/v1/tenants/%d" % c.tid["ta"], {"weight": 0}), 400, param="weight")
    expect(c.root.patch("/api/v1/tenants/%d" % c.tid["ta"], {"weight": 1001}), 400, param="weight")
    expect(c.root.patch("/api/v1/tenants/%d" % c.tid["ta"], {"name": "x"}), 400, "unknown_field")
    assert c.gw.sql("SELECT weight FROM tenants WHERE id = ?", c.tid["ta"]) == [(3,)]
    row = audit(c.gw, "tenant", "action = 'update'")[-1]
    assert row[0] == "root" and json.loads(row[5])["weight"] == 3, row
    expect(c.root.patch("/api/v1/tenants/%d" % c.tid["ta"], {"weight": 1}), 200)


def test_api_policy_shrink_max_tokens_R_KEY_6(c):
    p = expect(c.root.post("/api/v1/models/routing-policies", {"model": "m-api", "shrink_max_tokens": True}), 200)
    assert p["shrink_max_tokens"] is True, p
    assert c.gw.sql("SELECT shrink_max_tokens FROM model_policies WHERE model = 'm-api'") == [(1,)]
    expect(c.root.call("PUT", "/api/v1/models/routing-policies/m-api", {"shrink_max_tokens": 1}), 400, param="shrink_max_tokens")
    p = expect(c.root.call("PUT", "/api/v1/models/routing-policies/m-api", {"shrink_max_tokens": False}), 200)
    assert p["shrink_max_tokens"] is False
    assert expect(c.mem_a.get("/api/v1/models/routing-policies/m-api"), 200)["shrink_max_tokens"] is False
    expect(c.adm_a.call("PUT", "/api/v1/models/routing-policies/m-api", {"shrink_max_tokens": True}), 403)


# ---- the API: quota layers -------------------------------------------------------------------

def test_api_quotas_operator_crud_R_KEY_6(c):
    gw = c.gw
    t = expect(c.root.post("/api/v1/quotas", {"scope": "tenant", "tenant": "tb", "monthly_tokens": 900, "concurrency": 5}), 200)
    assert (t["scope"], t["tenant"], t["tenant_id"], t["monthly_tokens"], t["concurrency"]) == ("tenant", "tb", c.tid["tb"], 900, 5), t
    same = expect(c.root.post("/api/v1/quotas", {"scope": "tenant", "tenant": "tb", "concurrency": 6}), 200)
    assert same["id"] == t["id"] and (same["monthly_tokens"], same["concurrency"]) == (900, 6), same
    u = expect(c.root.post("/api/v1/quotas", {"scope": "user", "user": "mem_b", "rpm": 30, "daily_tokens": 1000}), 200)
    e = expect(c.root.post("/api/v1/quotas", {"scope": "endpoint", "endpoint": "ep-b", "concurrency": 3}), 200)
    m = expect(c.root.post("/api/v1/quotas", {"scope": "model", "model": "big", "concurrency": 1, "queue_max": 4}), 200)
    assert (u["user"], u["tenant"], e["endpoint"], e["tenant"], m["model"], m["queue_max"]) == ("mem_b", "tb", "ep-b", "tb", "big", 4)
    data = expect(c.root.get("/api/v1/quotas"), 200)
    assert data["total"] == 4 and [q["id"] for q in data["data"]] == [t["id"], u["id"], e["id"], m["id"]], data
    assert [q["id"] for q in expect(c.root.get("/api/v1/quotas?scope=user"), 200)["data"]] == [u["id"]]
    assert [q["id"] for q in expect(c.root.get("/api/v1/quotas?tenant=tb"), 200)["data"]] == [t["id"], u["id"], e["id"]]
    assert [q["id"] for q in expect(c.root.get("/api/v1/quotas?endpoint_id=%d" % c.eid["ep-b"]), 200)["data"]] == [e["id"]]
    page = expect(c.root.get("/api/v1/quotas?limit=2&offset=2"), 200)
    assert (page["total"], page["limit"], [q["id"] for q in page["data"]]) == (4, 2, [e["id"], m["id"]]), page
    assert expect(c.root.get("/api/v1/quotas/%d" % m["id"]), 200)["queue_max"] == 4
    got = expect(c.root.patch("/api/v1/quotas/%d" % m["id"], {"queue_max": None, "concurrency": 2}), 200)
    assert (got["queue_max"], got["concurrency"]) == (None, 2), got
    got = expect(c.root.patch("/api/v1/quotas/%d" % u["id"], {"rpm": 0}), 200)
    assert (got["rpm"], got["daily_tokens"]) == (0, 1000), got
    assert gw.sql("SELECT concurrency, queue_max FROM quotas WHERE id = ?", m["id"]) == [(2, None)]
    assert gw.sql("SELECT rpm, daily_tokens FROM quotas WHERE id = ?", u["id"]) == [(0, 1000)]
    gone = expect(c.root.delete("/api/v1/quotas/%d" % m["id"]), 200)
    assert gone["deleted"] is True
    expect(c.root.get("/api/v1/quotas/%d" % m["id"]), 404, "not_found")
    expect(c.root.delete("/api/v1/quotas/%d" % m["id"]), 404, "not_found")
    assert gw.sql("SELECT COUNT(*) FROM quotas WHERE id = ?", m["id"]) == [(0,)]
    acts = [(r[0], r[1], r[2]) for r in audit(gw, "quota", "actor = 'root'")]
    assert acts == [("root", "create", t["id"]), ("root", "update", t["id"]), ("root", "create", u["id"]),
                    ("root", "create", e["id"]), ("root", "create", m["id"]), ("root", "update", m["id"]),
                    ("root", "update", u["id"]), ("root", "delete", m["id"])], acts
    c.tb_quotas = (t["id"], u["id"], e["id"])


def test_api_quotas_validation_R_KEY_6(c):
    before = c.gw.sql("SELECT * FROM quotas ORDER BY id")
    q = c.root.post
    expect(q("/api/v1/quotas", {"scope": "tenant", "tenant": "ta", "rpm": 5}), 400, "invalid_value", "rpm")
    r = q("/api/v1/quotas", {"scope": "tenant", "tenant": "ta", "rpm": 0}).json()["error"]
    assert r["param"] == "rpm" and "does not apply to a tenant quota" in r["message"], r
    expect(q("/api/v1/quotas", {"scope": "user", "user": "mem_a2", "concurrency": 1}), 400, param="concurrency")
    expect(q("/api/v1/quotas", {"scope": "endpoint", "endpoint": "ep-a", "monthly_tokens": 1}), 400, param="monthly_tokens")
    expect(q("/api/v1/quotas", {"scope": "model", "model": "m", "daily_tokens": 1}), 400, param="daily_tokens")
    expect(q("/api/v1/quotas", {"scope": "user", "user": "mem_a2", "queue_max": 3}), 400, param="queue_max")
    expect(q("/api/v1/quotas", {"scope": "galaxy", "tenant": "ta"}), 400, "invalid_value", "scope")
    expect(q("/api/v1/quotas", {"tenant": "ta", "concurrency": 1}), 400, "missing_field", "scope")
    expect(q("/api/v1/quotas", {"scope": "user", "rpm": 1}), 400, "missing_field", "user")
    expect(q("/api/v1/quotas", {"scope": "user", "user": "mem_a2", "tenant": "ta", "rpm": 1}), 400, param="tenant")
    expect(q("/api/v1/quotas", {"scope": "user", "user": "nobody", "rpm": 1}), 404, "not_found")
    expect(q("/api/v1/quotas", {"scope": "tenant", "tenant": "ta", "concurrency": -1}), 400, param="concurrency")
    expect(q("/api/v1/quotas", {"scope": "model", "model": "m", "queue_max": -1}), 400, param="queue_max")
    expect(q("/api/v1/quotas", {"scope": "tenant", "tenant": "ta", "concurrency": "3"}), 400, "invalid_type")
    expect(q("/api/v1/quotas", {"scope": "tenant", "tenant": "ta", "weight": 3}), 400, "unknown_field")
    t_id = c.tb_quotas[0]
    expect(c.root.patch("/api/v1/quotas/%d" % t_id, {"rpm": 5}), 400, param="rpm")
    expect(c.root.patch("/api/v1/quotas/%d" % t_id, {"scope": "user"}), 400, "unknown_field")
    expect(c.root.patch("/api/v1/quotas/999999", {"concurrency": 1}), 404, "not_found")
    assert c.gw.sql("SELECT * FROM quotas ORDER BY id") == before


def test_api_quotas_tenant_admin_R_ADM_2(c):
    """A tenant admin: its own tenant's user and endpoint layers only."""
    gw = c.gw
    u = expect(c.adm_a.post("/api/v1/quotas", {"scope": "user", "user": "mem_a2", "rpm": 10}), 200)
    e = expect(c.adm_a.post("/api/v1/quotas", {"scope": "endpoint", "endpoint": "ep-a", "concurrency": 2}), 200)
    assert (u["tenant"], e["tenant"]) == ("ta", "ta")
    expect(c.adm_a.post("/api/v1/quotas", {"scope": "tenant", "tenant": "ta", "concurrency": 50}), 403, "permission_denied")
    expect(c.adm_a.post("/api/v1/quotas", {"scope": "model", "model": "big", "concurrency": 50}), 403, "permission_denied")
    expect(c.adm_a.post("/api/v1/quotas", {"scope": "user", "user": "mem_b", "rpm": 1}), 403, "permission_denied")
    expect(c.adm_a.post("/api/v1/quotas", {"scope": "endpoint", "endpoint": "ep-b", "concurrency": 1}), 403, "permission_denied")
    expect(c.adm_a.post("/api/v1/quotas", {"scope": "user", "user": "root", "rpm": 1}), 403, "permission_denied")
    # The operator's tenant layer of ta: out of the admin's sight.
    ta = expect(c.root.post("/api/v1/quotas", {"scope": "tenant", "tenant": "ta", "concurrency": 9}), 200)
    listed = expect(c.adm_a.get("/api/v1/quotas"), 200)
    assert [q["id"] for q in listed["data"]] == [u["id"], e["id"]] and listed["total"] == 2, listed
    expect(c.adm_a.get("/api/v1/quotas?tenant=tb"), 403, "permission_denied")
    assert expect(c.adm_a.get("/api/v1/quotas?scope=tenant"), 200)["data"] == []
    expect(c.adm_a.get("/api/v1/quotas/%d" % ta["id"]), 403, "permission_denied")
    expect(c.adm_a.patch("/api/v1/quotas/%d" % ta["id"], {"concurrency": 100}), 403, "permission_denied")
    expect(c.adm_a.delete("/api/v1/quotas/%d" % ta["id"]), 403, "permission_denied")
    for qid in c.tb_quotas:
        expect(c.adm_a.get("/api/v1/quotas/%d" % qid), 403, "permission_denied")
        expect(c.adm_a.patch("/api/v1/quotas/%d" % qid, {"concurrency": 1} if qid != c.tb_quotas[1] else {"rpm": 1}),
               403, "permission_denied")
        expect(c.adm_a.delete("/api/v1/quotas/%d" % qid), 403, "permission_denied")
    assert [q["id"] for q in expect(c.adm_b.get("/api/v1/quotas"), 200)["data"]] == list(c.tb_quotas[1:])
    got = expect(c.adm_a.patch("/api/v1/quotas/%d" % u["id"], {"daily_tokens": 500}), 200)
    assert (got["rpm"], got["daily_tokens"]) == (10, 500), got
    expect(c.adm_a.delete("/api/v1/quotas/%d" % e["id"]), 200)
    # R-SEC-5: its own user's layer may go down, never up or away.
    own = expect(c.root.post("/api/v1/quotas", {"scope": "user", "user": "adm_a", "rpm": 100}), 200)
    expect(c.adm_a.patch("/api/v1/quotas/%d" % own["id"], {"rpm": 200}), 403, "permission_denied")
    expect(c.adm_a.patch("/api/v1/quotas/%d" % own["id"], {"rpm": 0}), 403, "permission_denied")
    expect(c.adm_a.post("/api/v1/quotas", {"scope": "user", "user": "adm_a", "rpm": 500}), 403, "permission_denied")
    expect(c.adm_a.delete("/api/v1/quotas/%d" % own["id"]), 403, "permission_denied")
    assert expect(c.adm_a.patch("/api/v1/quotas/%d" % own["id"], {"rpm": 50}), 200)["rpm"] == 50
    assert gw.sql("SELECT rpm FROM quotas WHERE id = ?", own["id"]) == [(50,)]
    assert gw.sql("SELECT concurrency FROM quotas WHERE id = ?", ta["id"]) == [(9,)]
    rows = audit(gw, "quota", "actor = 'adm_a'")
    assert [(r[1], r[2], r[3]) for r in rows] == [("create", u["id"], c.tid["ta"]), ("create", e["id"], c.tid["ta"]),
                                                   ("update", u["id"], c.tid["ta"]), ("delete", e["id"], c.tid["ta"]),
                                                   ("update", own["id"], c.tid["ta"])], rows
    # The admin reads its tenant's quota changes in the audit log.
    seen = expect(c.adm_a.get("/api/v1/audit-log?object_type=quota"), 200)["data"]
    assert {r["object_id"] for r in seen} >= {u["id"], e["id"]} and all(r["tenant_id"] == c.tid["ta"] for r in seen), seen


def test_api_quotas_member_refused_R_ADM_2(c):
    before = c.gw.sql("SELECT * FROM quotas ORDER BY id")
    expect(c.mem_a.get("/api/v1/quotas"), 403, "permission_denied")
    any_id = before[0][0]
    expect(c.mem_a.get("/api/v1/quotas/%d" % any_id), 403, "permission_denied")
    expect(c.mem_a.post("/api/v1/quotas", {"scope": "user", "user": "mem_a", "rpm": 1000}), 403, "permission_denied")
    expect(c.mem_a.patch("/api/v1/quotas/%d" % any_id, {"concurrency": 0}), 403, "permission_denied")
    expect(c.mem_a.delete("/api/v1/quotas/%d" % any_id), 403, "permission_denied")
    assert c.gw.sql("SELECT * FROM quotas ORDER BY id") == before


def test_api_quota_goes_with_its_target(c):
    """A layer is removed with the user or endpoint it limits (ON DELETE CASCADE)."""
    gw = c.gw
    gw.ctl("user", "add", "tmp_u", "--tenant", "tb")
    q = expect(c.root.post("/api/v1/quotas", {"scope": "user", "user": "tmp_u", "rpm": 3}), 200)
    gw.ctl("user", "rm", "tmp_u")
    expect(c.root.get("/api/v1/quotas/%d" % q["id"]), 404)
    assert gw.sql("SELECT COUNT(*) FROM quotas WHERE id = ?", q["id"]) == [(0,)]


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
