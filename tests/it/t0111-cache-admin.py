#!/usr/bin/env python3
"""t0111-cache-admin: the management side of issue 15, the exact answer cache — a model
policy's cache mode, TTL and default_greedy (R-CACHE-1/2), a route's own cache mode and TTL
or the policy's (NULL), and the cache's housekeeping (stats, clear; R-CACHE-3) — through
sluicectl and /api/v1/, per role (R-ADM-2), with the audit rows (R-ADM-5) and the values in
the database, where the data plane reads them."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import ApiSession, Gateway, add_user_with_password, audit, ctl_fail, expect, run_tests, setup_with, stop_all

PW = {"root": "root-pass-1", "adm_a": "adm-a-pass", "mem_a": "mem-a-pass", "adm_b": "adm-b-pass"}
TTL_MAX = 31536000


def Client(gw, name):
    return ApiSession(gw, name, PW[name])


def put_entries(c, rows):
    """Stored answers as the data plane writes them: (key, tenant, model, bytes, hits, expired)."""
    now = int(time.time() * 1000)
    for key, tenant, model, size, hits, expired in rows:
        c.gw.sql_write("INSERT INTO cache_entries (key_hash, tenant_id, model, routed_model, endpoint_id, stream,"
                       " content_type, body, bytes, created_ms, expires_ms, hits)"
                       " VALUES (?, ?, ?, ?, ?, 0, 'application/json', ?, ?, ?, ?, ?)",
                       key, c.tid[tenant], model, model, c.eid["ep-" + tenant[1]], b"x" * size, size, now - 1000,
                       now - 10 if expired else now + 3600000, hits)


def entries(gw):
    return sorted(r[0] for r in gw.sql("SELECT key_hash FROM cache_entries"))


def build(c):
    gw = c.gw = Gateway("t0111", procs=1, threads=4)
    gw.ctl("tenant", "add", "ta")
    gw.ctl("tenant", "add", "tb")
    for name, tenant, role in (("root", "default", "operator"), ("adm_a", "ta", "admin"),
                               ("mem_a", "ta", "member"), ("adm_b", "tb", "admin")):
        add_user_with_password(gw, name, tenant, role, PW[name])
    for name, tenant in (("ep-a", "ta"), ("ep-b", "tb")):
        gw.ctl("endpoint", "add", name, "--tenant", tenant)
    c.tid = {t["name"]: t["id"] for t in gw.ctl("list", "tenants")["tenants"]}
    c.eid = {e["name"]: e["id"] for e in gw.ctl("list", "endpoints")["endpoints"]}
    gw.start()
    c.root, c.adm_a, c.mem_a, c.adm_b = (Client(gw, n) for n in ("root", "adm_a", "mem_a", "adm_b"))
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw")


# ---- sluicectl: policies and routes --------------------------------------------------------

def test_cli_policy_cache_flags_R_CACHE_2(c):
    """policy set --cache exact|semantic|off --cache-ttl-s N --default-greedy on|off; defaults off/3600/off."""
    gw = c.gw
    p = gw.ctl("policy", "set", "m-plain", "--max-output", 10)
    assert (p["cache"], p["cache_ttl_s"], p["default_greedy"]) == ("off", 3600, False), p
    p = gw.ctl("policy", "set", "m-c", "--cache", "exact", "--cache-ttl-s", 120, "--default-greedy", "on")
    assert (p["cache"], p["cache_ttl_s"], p["default_greedy"]) == ("exact", 120, True), p
    assert gw.sql("SELECT cache, cache_ttl_s, default_greedy FROM model_policies WHERE model = 'm-c'") == [("exact", 120, 1)]
    p = gw.ctl("policy", "set", "m-c", "--cache", "semantic")
    assert (p["cache"], p["cache_ttl_s"], p["default_greedy"]) == ("semantic", 120, True), p   # the rest kept
    p = gw.ctl("policy", "set", "m-c", "--cache", "off", "--cache-ttl-s", TTL_MAX, "--default-greedy", "off")
    assert (p["cache"], p["cache_ttl_s"], p["default_greedy"]) == ("off", TTL_MAX, False), p
    for flag, bad, param in (("--cache", "bogus", "cache"), ("--cache", "inherit", "cache"),
                             ("--cache-ttl-s", 0, "cache_ttl_s"), ("--cache-ttl-s", TTL_MAX + 1, "cache_ttl_s"),
                             ("--cache-ttl-s", -5, "cache_ttl_s"), ("--cache-ttl-s", "soon", "cache-ttl-s"),
                             ("--default-greedy", "maybe", "default-greedy")):
        rc, e, err = ctl_fail(gw, "policy", "set", "m-c", flag, bad)
        assert rc == 1 and e["param"] == param and e["code"] == "invalid_value", (flag, bad, e)
        assert "sluicectl:" in err, err
    rc, e, _ = ctl_fail(gw, "policy", "set", "m-c", "--cache-ttl-s", 0)
    assert "between 1 and 31536000" in e["message"], e
    rc, e, _ = ctl_fail(gw, "policy", "set", "m-c", "--cache", "bogus")
    assert "off, exact, semantic" in e["message"], e
    assert gw.sql("SELECT cache, cache_ttl_s, default_greedy FROM model_policies WHERE model = 'm-c'") == [("off", TTL_MAX, 0)]
    rows = audit(gw, "model_policy", "action = 'update'")
    before, after = json.loads(rows[-1][4]), json.loads(rows[-1][5])
    assert rows[-1][0] == "sluicectl" and before["cache"] == "semantic" and after["cache"] == "off", rows[-1]
    assert (before["default_greedy"], after["default_greedy"]) == (True, False), rows[-1]
    listed = {p["model"]: p for p in gw.ctl("list", "policies")["policies"]}
    assert listed["m-c"]["cache_ttl_s"] == TTL_MAX and listed["m-plain"]["cache"] == "off", listed
    assert gw.ctl("show", "policy", "m-c")["default_greedy"] is False


def test_cli_route_cache_flags_R_CACHE_2(c):
    """route add|set --cache off|exact|semantic|inherit --cache-ttl-s N|inherit; inherit is NULL."""
    gw = c.gw
    r = gw.ctl("route", "add", "m-r", "ep-a")
    assert (r["cache"], r["cache_ttl_s"]) == (None, None), r
    assert gw.sql("SELECT cache, cache_ttl_s FROM routes WHERE id = ?", r["id"]) == [(None, None)]
    r2 = gw.ctl("route", "add", "m-r2", "ep-a", "--cache", "exact", "--cache-ttl-s", 30)
    assert (r2["cache"], r2["cache_ttl_s"]) == ("exact", 30), r2
    r = gw.ctl("route", "set", r["id"], "--cache", "semantic", "--cache-ttl-s", 900)
    assert (r["cache"], r["cache_ttl_s"]) == ("semantic", 900), r
    r = gw.ctl("route", "set", r["id"], "--cache", "off")
    assert (r["cache"], r["cache_ttl_s"]) == ("off", 900), r
    r = gw.ctl("route", "set", r["id"], "--cache", "inherit", "--cache-ttl-s", "inherit")
    assert (r["cache"], r["cache_ttl_s"]) == (None, None), r
    assert gw.sql("SELECT cache, cache_ttl_s FROM routes WHERE id = ?", r["id"]) == [(None, None)]
    r2 = gw.ctl("route", "set", r2["id"], "--cache-ttl-s", "inherit")
    assert (r2["cache"], r2["cache_ttl_s"]) == ("exact", None), r2
    assert gw.sql("SELECT cache, cache_ttl_s FROM routes WHERE id = ?", r2["id"]) == [("exact", None)]
    for flag, bad, param in (("--cache", "bogus", "cache"), ("--cache", "", "cache"),
                             ("--cache-ttl-s", 0, "cache_ttl_s"), ("--cache-ttl-s", TTL_MAX + 1, "cache_ttl_s"),
                             ("--cache-ttl-s", -1, "cache_ttl_s"), ("--cache-ttl-s", "never", "cache-ttl-s")):
        rc, e, _ = ctl_fail(gw, "route", "set", r2["id"], flag, bad)
        assert rc == 1 and e["param"] == param, (flag, bad, e)
        rc, e, _ = ctl_fail(gw, "route", "add", "m-bad", "ep-a", flag, bad)
        assert rc == 1 and e["param"] == param, (flag, bad, e)
    assert not gw.sql("SELECT id FROM routes WHERE model = 'm-bad'")
    assert gw.sql("SELECT cache, cache_ttl_s FROM routes WHERE id = ?", r2["id"]) == [("exact", None)]
    rows = audit(gw, "route", "object_id = %d" % r["id"], "action = 'update'")
    assert rows[-1][0] == "sluicectl" and json.loads(rows[-1][4])["cache"] == "off", rows[-1]
    assert json.loads(rows[-1][5])["cache"] is None and json.loads(rows[-1][5])["cache_ttl_s"] is None, rows[-1]
    assert rows[-1][3] == c.tid["ta"], rows[-1]
    shown = {x["id"]: x for x in gw.ctl("list", "routes", "--tenant", "ta")["routes"]}
    assert shown[r2["id"]]["cache"] == "exact" and shown[r["id"]]["cache"] is None, shown
    gw.ctl("route", "rm", r["id"])
    gw.ctl("route", "rm", r2["id"])


# ---- the API: policies and routes -----------------------------------------------------------

def test_api_policy_cache_fields_R_CACHE_2(c):
    """The policy object's cache, cache_ttl_s and default_greedy: GET shows, POST/PUT set; operator only."""
    rp = "/api/v1/models/routing-policies"
    p = expect(c.root.post(rp, {"model": "api-m", "cache": "exact", "cache_ttl_s": 600, "default_greedy": True}), 200)
    assert (p["cache"], p["cache_ttl_s"], p["default_greedy"]) == ("exact", 600, True), p
    assert c.gw.sql("SELECT cache, cache_ttl_s, default_greedy FROM model_policies WHERE model = 'api-m'") == [("exact", 600, 1)]
    p = expect(c.root.put(rp + "/api-m", {"cache_ttl_s": 7200}), 200)
    assert (p["cache"], p["cache_ttl_s"], p["default_greedy"]) == ("exact", 7200, True), p
    p = expect(c.root.put(rp + "?name=api-m", {"cache": "semantic", "default_greedy": False}), 200)
    assert (p["cache"], p["cache_ttl_s"], p["default_greedy"]) == ("semantic", 7200, False), p
    got = expect(c.mem_a.get(rp + "/api-m"), 200)                 # everyone reads policies
    assert (got["cache"], got["cache_ttl_s"], got["default_greedy"]) == ("semantic", 7200, False), got
    listed = {x["model"]: x for x in expect(c.adm_a.get(rp), 200)["data"]}
    assert listed["api-m"]["cache"] == "semantic", listed
    for body, code, param in (({"cache": "bogus"}, "invalid_value", "cache"),
                              ({"cache": "inherit"}, "invalid_value", "cache"),
                              ({"cache": 1}, "invalid_type", "cache"),
                              ({"cache_ttl_s": 0}, "invalid_value", "cache_ttl_s"),
                              ({"cache_ttl_s": TTL_MAX + 1}, "invalid_value", "cache_ttl_s"),
                              ({"cache_ttl_s": "60"}, "invalid_type", "cache_ttl_s"),
                              ({"cache_ttl_s": 1.5}, "invalid_type", "cache_ttl_s"),
                              ({"default_greedy": "yes"}, "invalid_type", "default_greedy")):
        expect(c.root.put(rp + "/api-m", body), 400, code, param)
    assert c.gw.sql("SELECT cache, cache_ttl_s, default_greedy FROM model_policies WHERE model = 'api-m'") == [("semantic", 7200, 0)]
    # R-ADM-2: policies are the operator's.
    for who in (c.adm_a, c.mem_a):
        expect(who.put(rp + "/api-m", {"cache": "off"}), 403, "permission_denied")
    rows = audit(c.gw, "model_policy", "action = 'update'")
    assert rows[-1][0] == "root" and json.loads(rows[-1][5])["cache"] == "semantic", rows[-1]
    expect(c.root.delete(rp + "/api-m"), 200)


def test_api_route_cache_fields_R_CACHE_2(c):
    """The route object's cache and cache_ttl_s (null: inherit); a tenant admin sets its tenant's."""
    r = expect(c.adm_a.post("/api/v1/model-routes", {"model": "api-r", "endpoint": "ep-a", "cache": "exact",
                                                      "cache_ttl_s": 45}), 200)
    assert (r["cache"], r["cache_ttl_s"]) == ("exact", 45), r
    path = "/api/v1/model-routes/%d" % r["id"]
    assert c.gw.sql("SELECT cache, cache_ttl_s FROM routes WHERE id = ?", r["id"]) == [("exact", 45)]
    got = expect(c.mem_a.get(path), 200)
    assert (got["cache"], got["cache_ttl_s"]) == ("exact", 45), got
    r = expect(c.adm_a.patch(path, {"cache": "off"}), 200)
    assert (r["cache"], r["cache_ttl_s"]) == ("off", 45), r
    r = expect(c.adm_a.patch(path, {"cache": None, "cache_ttl_s": None}), 200)
    assert (r["cache"], r["cache_ttl_s"]) == (None, None), r
    assert c.gw.sql("SELECT cache, cache_ttl_s FROM routes WHERE id = ?", r["id"]) == [(None, None)]
    r = expect(c.root.put(path, {"cache": "semantic", "cache_ttl_s": TTL_MAX}), 200)
    assert (r["cache"], r["cache_ttl_s"]) == ("semantic", TTL_MAX), r
    for body, code, param in (({"cache": "bogus"}, "invalid_value", "cache"),
                              ({"cache": "inherit"}, "invalid_value", "cache"),
                              ({"cache": ""}, "invalid_value", "cache"),
                              ({"cache": True}, "invalid_type", "cache"),
                              ({"cache_ttl_s": 0}, "invalid_value", "cache_ttl_s"),
                              ({"cache_ttl_s": -1}, "invalid_value", "cache_ttl_s"),
                              ({"cache_ttl_s": TTL_MAX + 1}, "invalid_value", "cache_ttl_s"),
                              ({"cache_ttl_s": "1h"}, "invalid_type", "cache_ttl_s")):
        expect(c.adm_a.patch(path, body), 400, code, param)
        b = dict(body, model="api-bad", endpoint="ep-a")
        expect(c.adm_a.post("/api/v1/model-routes", b), 400, code, param)
    assert not c.gw.sql("SELECT id FROM routes WHERE model = 'api-bad'")
    assert c.gw.sql("SELECT cache, cache_ttl_s FROM routes WHERE id = ?", r["id"]) == [("semantic", TTL_MAX)]
    # R-ADM-2: members do not change routes; another tenant's admin does not reach this one.
    expect(c.mem_a.patch(path, {"cache": "off"}), 403, "permission_denied")
    expect(c.adm_b.patch(path, {"cache": "off"}), 403, "permission_denied")
    assert c.gw.sql("SELECT cache FROM routes WHERE id = ?", r["id"]) == [("semantic",)]
    rows = audit(c.gw, "route", "object_id = %d" % r["id"], "action = 'update'", "actor <> 'sluicectl'")
    assert [x[0] for x in rows] == ["adm_a", "adm_a", "root"], rows
    assert json.loads(rows[1][5])["cache"] is None and rows[1][3] == c.tid["ta"], rows[1]
    expect(c.adm_a.delete(path), 200)


# ---- the cache's housekeeping ----------------------------------------------------------------

def test_cli_cache_stats_and_clear_R_CACHE_3(c):
    """cache stats [--model] [--tenant]: entries, bytes, hits per model; cache clear deletes and counts."""
    gw = c.gw
    put_entries(c, [("k1", "ta", "m1", 100, 3, False), ("k2", "ta", "m1", 50, 0, True),
                    ("k3", "ta", "m2", 10, 1, False), ("k4", "tb", "m1", 7, 5, False)])
    s = gw.ctl("cache", "stats")
    assert (s["entries"], s["bytes"], s["hits"], s["expired"]) == (4, 167, 9, 1), s
    by = {m["model"]: m for m in s["models"]}
    assert (by["m1"]["entries"], by["m1"]["bytes"], by["m1"]["hits"], by["m1"]["expired"]) == (3, 157, 8, 1), by
    assert (by["m2"]["entries"], by["m2"]["bytes"], by["m2"]["hits"]) == (1, 10, 1), by
    s = gw.ctl("cache", "stats", "--tenant", "tb")
    assert [(m["model"], m["entries"], m["bytes"], m["hits"]) for m in s["models"]] == [("m1", 1, 7, 5)], s
    s = gw.ctl("cache", "stats", "--model", "m2")
    assert (s["entries"], [m["model"] for m in s["models"]]) == (1, ["m2"]), s
    p = subprocess.run(gw.ctl_argv() + ["cache", "stats"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "m1" in p.stdout and "entries" in p.stdout, p.stdout
    rc, e, _ = ctl_fail(gw, "cache", "stats", "--tenant", "nosuch")
    assert e["code"] == "not_found", e
    rc, e, _ = ctl_fail(gw, "cache", "clear", "--tenant", "nosuch")
    assert e["code"] == "not_found", e
    rc, e, _ = ctl_fail(gw, "cache", "clear", "--bogus", "x")
    assert rc == 2, rc

    r = gw.ctl("cache", "clear", "--model", "m1", "--tenant", "ta")
    assert (r["deleted"], r["model"], r["tenant"], r["tenant_id"]) == (2, "m1", "ta", c.tid["ta"]), r
    assert entries(gw) == ["k3", "k4"]
    p = subprocess.run(gw.ctl_argv() + ["cache", "clear", "--model", "nothing-here"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and "deleted" in p.stdout and "0" in p.stdout, p.stdout   # prints how many
    r = gw.ctl("cache", "clear")
    assert (r["deleted"], r["model"], r["tenant"], r["tenant_id"]) == (2, None, None, None), r
    assert entries(gw) == []
    assert gw.ctl("cache", "stats") == {"models": [], "entries": 0, "bytes": 0, "hits": 0, "expired": 0,
                                       "semantic_entries": 0}
    rows = audit(gw, "cache", "action = 'clear'")
    assert [(x[0], x[3]) for x in rows[-3:]] == [("sluicectl", c.tid["ta"]), ("sluicectl", None), ("sluicectl", None)], rows
    after = json.loads(rows[-3][5])
    assert (after["deleted"], after["model"], after["tenant"]) == (2, "m1", "ta") and rows[-3][4] is None, rows[-3]
    assert json.loads(rows[-1][5])["deleted"] == 2


def test_api_cache_operator_R_CACHE_3(c):
    """GET /api/v1/cache: the counts; DELETE /api/v1/cache?model=&tenant=: the operator clears any tenant's."""
    put_entries(c, [("o1", "ta", "m1", 10, 1, False), ("o2", "tb", "m1", 20, 2, False),
                    ("o3", "tb", "m2", 30, 0, False)])
    s = expect(c.root.get("/api/v1/cache"), 200)
    assert (s["entries"], s["bytes"], s["hits"]) == (3, 60, 3), s
    s = expect(c.root.get("/api/v1/cache?tenant=tb&model=m1"), 200)
    assert [(m["model"], m["entries"], m["bytes"]) for m in s["models"]] == [("m1", 1, 20)], s
    s = expect(c.root.get("/api/v1/cache?tenant_id=%d" % c.tid["ta"]), 200)
    assert s["entries"] == 1, s
    expect(c.root.get("/api/v1/cache?tenant=nosuch"), 404, "not_found")
    expect(c.root.get("/api/v1/cache?tenant_id=zero"), 400, "invalid_value", "tenant_id")
    expect(c.root.call("DELETE", "/api/v1/cache", {"model": "m1"}), 400, "unknown_field")   # filters: the query
    expect(c.root.call("POST", "/api/v1/cache", {}), 405)
    r = expect(c.root.delete("/api/v1/cache?model=m1&tenant=tb"), 200)
    assert (r["deleted"], r["model"], r["tenant"], r["tenant_id"]) == (1, "m1", "tb", c.tid["tb"]), r
    assert entries(c.gw) == ["o1", "o3"]
    r = expect(c.root.delete("/api/v1/cache"), 200)
    assert r["deleted"] == 2 and entries(c.gw) == [], r
    rows = audit(c.gw, "cache", "action = 'clear'")
    assert [(x[0], x[3]) for x in rows[-2:]] == [("root", c.tid["tb"]), ("root", None)], rows


def test_api_cache_tenant_admin_and_member_R_ADM_2(c):
    """A tenant admin sees and clears only its own tenant's entries; members get 403."""
    put_entries(c, [("a1", "ta", "m1", 10, 1, False), ("a2", "ta", "m2", 10, 4, False),
                    ("b1", "tb", "m1", 99, 7, False)])
    s = expect(c.adm_a.get("/api/v1/cache"), 200)                  # narrowed to ta
    assert (s["entries"], s["bytes"], s["hits"]) == (2, 20, 5), s
    assert sorted(m["model"] for m in s["models"]) == ["m1", "m2"], s
    s = expect(c.adm_b.get("/api/v1/cache?model=m1"), 200)
    assert (s["entries"], s["bytes"]) == (1, 99), s
    expect(c.adm_a.get("/api/v1/cache?tenant=tb"), 403, "permission_denied")
    expect(c.adm_a.get("/api/v1/cache?tenant_id=%d" % c.tid["tb"]), 403, "permission_denied")
    expect(c.mem_a.get("/api/v1/cache"), 403, "permission_denied")
    # Clearing: never another tenant's, by name or id; members nothing.
    expect(c.adm_a.delete("/api/v1/cache?tenant=tb"), 403, "permission_denied")
    expect(c.adm_a.delete("/api/v1/cache?tenant_id=%d&model=m1" % c.tid["tb"]), 403, "permission_denied")
    expect(c.mem_a.delete("/api/v1/cache"), 403, "permission_denied")
    expect(c.mem_a.delete("/api/v1/cache?tenant=ta"), 403, "permission_denied")
    assert entries(c.gw) == ["a1", "a2", "b1"]
    r = expect(c.adm_a.delete("/api/v1/cache?model=m1"), 200)     # its own tenant's m1 only
    assert (r["deleted"], r["model"], r["tenant"], r["tenant_id"]) == (1, "m1", "ta", c.tid["ta"]), r
    assert entries(c.gw) == ["a2", "b1"]
    r = expect(c.adm_a.delete("/api/v1/cache?tenant=ta"), 200)
    assert r["deleted"] == 1 and entries(c.gw) == ["b1"], r
    r = expect(c.adm_a.delete("/api/v1/cache"), 200)
    assert r["deleted"] == 0 and entries(c.gw) == ["b1"], r
    rows = audit(c.gw, "cache", "actor = 'adm_a'")
    assert [(x[1], x[3]) for x in rows] == [("clear", c.tid["ta"])] * 3, rows
    # The admin reads its tenant's audit rows, the clears among them.
    log = expect(c.adm_a.get("/api/v1/audit-log?object_type=cache"), 200)["data"]
    assert [x["actor"] for x in log if x["actor"] == "adm_a"] == ["adm_a"] * 3, log
    assert all(x["tenant_id"] == c.tid["ta"] for x in log), log
    assert not audit(c.gw, "cache", "actor = 'mem_a'")
    expect(c.root.delete("/api/v1/cache"), 200)


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
