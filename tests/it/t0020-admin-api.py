#!/usr/bin/env python3
"""t0020-admin-api: the management API under /api/v1/ per resource and role (R-ADM-1, R-ADM-2,
R-ADM-5, R-SEC-2, R-SEC-5, R-SEC-8, R-USE-6, R-ANT-5).

Each role does what it may and gets 403 for what it may not, including the escalations of
R-SEC-5; every check looks at the answer AND at the database (or the stand-in upstream)."""
import hashlib
import json
import os
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, http_request, run_tests

PW = {"root": "root-pass-1", "adm_a": "adm-a-pass", "mem_a": "mem-a-pass", "mem_a2": "mem-a2-pass",
      "adm_b": "adm-b-pass", "adm_def": "adm-def-pass"}
MAX_BODY = 65536


class Client:
    """One caller of the API: a login session (cookie + CSRF token) or a bearer key."""

    def __init__(self, gw, name=None, key=None):
        self.gw, self.name, self.key = gw, name, key
        self.cookie = self.csrf = None
        if name:
            r = gw.request("POST", "/api/v1/auth/login", {"username": name, "password": PW[name]})
            assert r.status == 200, (name, r)
            self.cookie = r.headers["set-cookie"].split(";")[0]
            self.csrf = r.json()["csrf_token"]
            self.user_id = r.json()["user"]["id"]

    def call(self, method, path, body=None, raw=None, headers=None):
        h = dict(headers or {})
        if self.cookie:
            h["Cookie"] = self.cookie
            if method != "GET":
                h["X-CSRF-Token"] = self.csrf
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        r = http_request(self.gw.port, method, path, raw if raw is not None else body, h)
        check_headers(r)
        return r

    def get(self, path):
        return self.call("GET", path)

    def post(self, path, body=None):
        return self.call("POST", path, body if body is not None else {})

    def put(self, path, body):
        return self.call("PUT", path, body)

    def delete(self, path):
        return self.call("DELETE", path)


def check_headers(r):
    """R-ADM-1 / R-SEC-7: every answer is JSON, never cached, never sniffed; errors have the
    data plane's shape."""
    assert r.headers.get("content-type") == "application/json", r.headers
    assert r.headers.get("cache-control") == "no-store", r.headers
    assert r.headers.get("x-content-type-options") == "nosniff", r.headers
    if r.status >= 400:
        e = r.json()["error"]
        assert set(e) == {"message", "type", "param", "code"}, e
        assert isinstance(e["message"], str) and isinstance(e["code"], str), e


def expect(r, status, code=None):
    assert r.status == status, "expected %d%s, got %r" % (status, " " + code if code else "", r)
    if code:
        assert r.json()["error"]["code"] == code, r.json()
    return r.json()


class Ctx:
    pass


def setup():
    c = Ctx()
    c.fake = Fake("admin-api")
    gw = c.gw = Gateway("t0020", procs=1, threads=4,
                        conf={"admin": "session_ttl_s = 3600; max_body_bytes = %d; login_max_failures = 50;"
                                       " login_window_s = 300; login_lockout_s = 60; endpoint_test_timeout_ms = 5000;"
                                       % MAX_BODY})
    gw.ctl("tenant", "add", "ta")
    gw.ctl("tenant", "add", "tb")
    for name, tenant, role in (("root", "default", "operator"), ("adm_a", "ta", "admin"),
                               ("mem_a", "ta", "member"), ("mem_a2", "ta", "member"),
                               ("adm_b", "tb", "admin"), ("adm_def", "default", "admin")):
        p = subprocess.run(gw.ctl_argv() + ["--json", "user", "add", name, "--tenant", tenant, "--role", role,
                            "--password-stdin"], input=PW[name] + "\n", capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
    c.ids = {t["name"]: t["id"] for t in gw.ctl("list", "tenants")["tenants"]}
    for name, tenant in (("ep-def", "default"), ("ep-a", "ta"), ("ep-b", "tb")):
        gw.ctl("endpoint", "add", name, "--tenant", tenant)
        gw.ctl("replica", "add", name, c.fake.url)
    c.ep = {e["name"]: e["id"] for e in gw.ctl("list", "endpoints")["endpoints"]}
    gw.ctl("route", "add", "platform-m", "ep-def", "--tenant", "default")
    gw.start()
    c.root, c.adm_a, c.mem_a = Client(gw, "root"), Client(gw, "adm_a"), Client(gw, "mem_a")
    c.mem_a2, c.adm_b, c.adm_def = Client(gw, "mem_a2"), Client(gw, "adm_b"), Client(gw, "adm_def")
    return c


def teardown(c):
    if c:
        c.gw.stop()
        c.fake.stop()


def db_write(c, sql, *params, many=None):
    if many is not None:
        c.gw.sql_write_many(sql, many)
    else:
        c.gw.sql_write(sql, *params)


def audit_rows(c, where="1=1", *params):
    return c.gw.sql("SELECT actor, action, object_type, object_id, before, after, tenant_id FROM audit_log WHERE "
                    + where + " ORDER BY id", *params)


# ---- tenants ---------------------------------------------------------------------------

def test_tenants_per_role_R_ADM_1(c):
    """Operator manages tenants; an admin sees only its own; nobody else creates one."""
    got = expect(c.root.post("/api/v1/tenants", {"name": "tc"}), 200)
    assert c.gw.sql("SELECT id FROM tenants WHERE name = 'tc'") == [(got["id"],)]
    names = [t["name"] for t in expect(c.root.get("/api/v1/tenants"), 200)["data"]]
    assert {"default", "ta", "tb", "tc"} <= set(names), names
    lst = expect(c.adm_a.get("/api/v1/tenants"), 200)
    assert [t["name"] for t in lst["data"]] == ["ta"] and lst["total"] == 1, lst
    expect(c.adm_a.get("/api/v1/tenants/%d" % c.ids["ta"]), 200)
    expect(c.adm_a.get("/api/v1/tenants/%d" % c.ids["tb"]), 403, "permission_denied")
    expect(c.adm_a.post("/api/v1/tenants", {"name": "evil"}), 403, "permission_denied")
    expect(c.mem_a.post("/api/v1/tenants", {"name": "evil"}), 403, "permission_denied")
    expect(c.adm_a.delete("/api/v1/tenants/%d" % c.ids["ta"]), 403)
    assert c.gw.sql("SELECT COUNT(*) FROM tenants WHERE name = 'evil'") == [(0,)]
    expect(c.root.delete("/api/v1/tenants/%d" % got["id"]), 200)
    assert c.gw.sql("SELECT COUNT(*) FROM tenants WHERE name = 'tc'") == [(0,)]
    expect(c.root.post("/api/v1/tenants", {"name": "ta"}), 409, "conflict")


# ---- users -----------------------------------------------------------------------------

def test_users_per_role_and_own_role_R_SEC_5(c):
    """Admins manage their tenant's users; a member may change only its own password, never its role."""
    u = expect(c.adm_a.post("/api/v1/users", {"name": "mem_a3", "role": "member", "password": "mem-a3-pass"}), 200)
    assert u["tenant"] == "ta" and u["role"] == "member" and "mem-a3-pass" not in json.dumps(u), u
    h = c.gw.sql("SELECT password_hash FROM users WHERE name = 'mem_a3'")[0][0]
    assert h.startswith("$y$") and "mem-a3-pass" not in h, h          # R-ADM-2: slow hash
    expect(c.adm_a.post("/api/v1/users", {"name": "x1", "tenant": "tb"}), 403, "permission_denied")
    expect(c.adm_a.post("/api/v1/users", {"name": "x2", "role": "operator", "tenant": "ta"}), 403)
    expect(c.mem_a.post("/api/v1/users", {"name": "x3"}), 403)
    assert c.gw.sql("SELECT COUNT(*) FROM users WHERE name IN ('x1','x2','x3')") == [(0,)]
    # Listing: member sees itself, admin its tenant.
    assert [x["name"] for x in expect(c.mem_a.get("/api/v1/users"), 200)["data"]] == ["mem_a"]
    names = {x["name"] for x in expect(c.adm_a.get("/api/v1/users"), 200)["data"]}
    assert names == {"adm_a", "mem_a", "mem_a2", "mem_a3"}, names
    expect(c.mem_a.get("/api/v1/users/%d" % c.mem_a2.user_id), 403)
    expect(c.adm_a.get("/api/v1/users/%d" % c.adm_b.user_id), 403)
    # R-SEC-5: a member changing its own role.
    expect(c.mem_a.put("/api/v1/users/%d" % c.mem_a.user_id, {"role": "admin"}), 403, "permission_denied")
    expect(c.mem_a.put("/api/v1/users/%d" % c.mem_a.user_id, {"key_ceiling": {"qps_limit": 0}}), 403)
    assert c.gw.sql("SELECT role FROM users WHERE id = ?", c.mem_a.user_id) == [("member",)]
    expect(c.adm_a.put("/api/v1/users/%d" % c.adm_a.user_id, {"role": "member"}), 403)
    # A default-tenant admin may not touch the operator (higher role).
    root_id = c.root.user_id
    expect(c.adm_def.put("/api/v1/users/%d" % root_id, {"password": "hijacked-pw"}), 403)
    expect(c.adm_def.delete("/api/v1/users/%d" % root_id), 403)
    # Own password: allowed.
    expect(c.mem_a2.put("/api/v1/users/%d" % c.mem_a2.user_id, {"password": "mem-a2-pass-new"}), 200)
    PW["mem_a2"] = "mem-a2-pass-new"
    c.mem_a2 = Client(c.gw, "mem_a2")
    # Admin promotes and removes a member of its tenant.
    expect(c.adm_a.put("/api/v1/users/%d" % u["id"], {"role": "admin"}), 200)
    assert c.gw.sql("SELECT role FROM users WHERE id = ?", u["id"]) == [("admin",)]
    expect(c.adm_a.delete("/api/v1/users/%d" % u["id"]), 200)
    assert c.gw.sql("SELECT COUNT(*) FROM users WHERE id = ?", u["id"]) == [(0,)]


# ---- endpoints and replicas ------------------------------------------------------------------

def test_endpoints_per_role_R_SEC_5(c):
    """Admins manage their tenant's endpoints; another tenant's endpoint by id is 403."""
    e = expect(c.adm_a.post("/api/v1/endpoints", {"name": "ep-a2", "algorithm": "least_connections",
                                                  "upstream_auth": "upstream-secret-1", "affinity": True}), 200)
    assert e["tenant"] == "ta" and e["key"].startswith("sk-") and e["upstream_auth_set"] is True, e
    assert "upstream-secret-1" not in json.dumps(e)
    row = c.gw.sql("SELECT key_hash, affinity FROM endpoints WHERE id = ?", e["id"])[0]
    assert row == (hashlib.sha256(e["key"].encode()).hexdigest(), 1), row
    assert c.gw.upstream_auth(e["id"]) == "upstream-secret-1"   # stored sealed (R-SEC-9)
    got = expect(c.adm_a.get("/api/v1/endpoints/%d" % e["id"]), 200)
    assert "key" not in got and "upstream_auth" not in got and got["key_prefix"] == e["key"][:12], got
    expect(c.adm_a.get("/api/v1/endpoints/%d" % c.ep["ep-b"]), 403, "permission_denied")
    expect(c.adm_a.put("/api/v1/endpoints/%d" % c.ep["ep-b"], {"algorithm": "random"}), 403)
    expect(c.adm_a.delete("/api/v1/endpoints/%d" % c.ep["ep-def"]), 403)
    expect(c.adm_a.post("/api/v1/endpoints", {"name": "ep-x", "tenant": "tb"}), 403)
    expect(c.mem_a.get("/api/v1/endpoints/%d" % c.ep["ep-a"]), 403)
    expect(c.mem_a.get("/api/v1/endpoints"), 403)
    assert [x["name"] for x in expect(c.adm_a.get("/api/v1/endpoints"), 200)["data"]] == ["ep-a", "ep-a2"]
    assert expect(c.root.get("/api/v1/endpoints"), 200)["total"] >= 4
    assert c.gw.sql("SELECT algorithm FROM endpoints WHERE name = 'ep-b'") == [("round_robin",)]
    # Replicas (R-SEC-3 URL rules come from ops).
    r = expect(c.adm_a.post("/api/v1/endpoints/%d/replicas" % e["id"], {"url": c.fake.url, "weight": 3}), 200)
    assert r["weight"] == 3 and r["endpoint_id"] == e["id"]
    expect(c.adm_a.post("/api/v1/endpoints/%d/replicas" % e["id"], {"url": "http://u:p@10.0.0.1/"}), 400,
           "invalid_value")
    expect(c.adm_a.post("/api/v1/endpoints/%d/replicas" % c.ep["ep-b"], {"url": "http://10.0.0.9"}), 403)
    expect(c.adm_a.put("/api/v1/endpoints/%d/replicas/%d" % (e["id"], r["id"]), {"state": "disabled"}), 200)
    assert c.gw.sql("SELECT state FROM replicas WHERE id = ?", r["id"]) == [("disabled",)]
    # A replica id under another endpoint's path is not found there.
    expect(c.adm_a.get("/api/v1/endpoints/%d/replicas/%d" % (c.ep["ep-a"], r["id"])), 404)
    assert expect(c.adm_a.get("/api/v1/endpoints/%d/replicas" % e["id"]), 200)["total"] == 1
    expect(c.adm_a.delete("/api/v1/endpoints/%d/replicas/%d" % (e["id"], r["id"])), 200)
    # Key rotation: a new key once, the old hash gone.
    old = c.gw.sql("SELECT key_hash FROM endpoints WHERE id = ?", e["id"])[0][0]
    k = expect(c.adm_a.post("/api/v1/endpoints/%d/rotate-key" % e["id"]), 200)
    new = c.gw.sql("SELECT key_hash FROM endpoints WHERE id = ?", e["id"])[0][0]
    assert new != old and new == hashlib.sha256(k["key"].encode()).hexdigest()
    expect(c.adm_b.post("/api/v1/endpoints/%d/rotate-key" % e["id"]), 403)
    assert c.gw.sql("SELECT key_hash FROM endpoints WHERE id = ?", e["id"])[0][0] == new
    expect(c.adm_a.delete("/api/v1/endpoints/%d" % e["id"]), 200)


def test_endpoint_test_R_ANT_5(c):
    """POST /endpoints/{id}/test: one max_tokens=1 request to a healthy replica; always 200, verdict in ok."""
    e = expect(c.adm_a.post("/api/v1/endpoints", {"name": "ep-t", "upstream_auth": "up-cred-77"}), 200)
    expect(c.adm_a.post("/api/v1/endpoints/%d/replicas" % e["id"], {"url": c.fake.url}), 200)
    expect(c.root.post("/api/v1/model-routes", {"model": "m-test", "endpoint_id": e["id"],
                                                "target_model": "real-m"}), 200)
    c.fake.reset()
    t = expect(c.adm_a.post("/api/v1/endpoints/%d/test" % e["id"]), 200)
    assert t["ok"] is True and t["status"] == 200 and t["latency_ms"] >= 0 and t["model"] == "real-m", t
    last = c.fake.stats()["last"]
    body = json.loads(last["body"])
    assert last["path"] == "/v1/chat/completions" and body["max_tokens"] == 1 and body["model"] == "real-m", last
    assert last["headers"].get("authorization") == "Bearer up-cred-77", last["headers"]
    assert "up-cred-77" not in json.dumps(t)
    # A failing upstream: still 200, ok false, no upstream text echoed.
    c.fake.behavior("status=500")
    t = expect(c.adm_a.post("/api/v1/endpoints/%d/test" % e["id"]), 200)
    c.fake.behavior("")
    assert t["ok"] is False and t["status"] == 500 and "500" in t["error"], t
    expect(c.mem_a.post("/api/v1/endpoints/%d/test" % e["id"]), 403)
    # No healthy replica.
    db_write(c, "UPDATE replicas SET healthy = 0 WHERE endpoint_id = ?", e["id"])
    t = expect(c.adm_a.post("/api/v1/endpoints/%d/test" % e["id"]), 200)
    assert t["ok"] is False and t["replica"] is None and "healthy" in t["error"], t


# ---- routes --------------------------------------------------------------------------------------

def test_routes_escalations_R_ADM_2(c):
    """Non-operators: no foreign endpoint, no negative priority, no name of a `default` route."""
    ep_a, ep_b = c.ep["ep-a"], c.ep["ep-b"]
    r = expect(c.adm_a.post("/api/v1/model-routes", {"model": "chat-a", "endpoint_id": ep_a, "weight": 80}), 200)
    assert r["tenant"] == "ta" and r["weight"] == 80
    assert c.gw.sql("SELECT tenant_id, endpoint_id, weight FROM routes WHERE id = ?", r["id"]) == \
        [(c.ids["ta"], ep_a, 80)]
    n = c.gw.sql("SELECT COUNT(*) FROM routes")[0][0]
    expect(c.adm_a.post("/api/v1/model-routes", {"model": "steal", "endpoint_id": ep_b}), 403, "permission_denied")
    expect(c.adm_a.post("/api/v1/model-routes", {"model": "steal", "endpoint": "ep-def"}), 403)
    expect(c.adm_a.post("/api/v1/model-routes", {"model": "first", "endpoint_id": ep_a, "priority": -1}), 403)
    expect(c.adm_a.post("/api/v1/model-routes", {"model": "platform-m", "endpoint_id": ep_a}), 403,
           "permission_denied")
    expect(c.adm_a.post("/api/v1/model-routes", {"model": "x", "endpoint_id": ep_b, "tenant": "tb"}), 403)
    expect(c.mem_a.post("/api/v1/model-routes", {"model": "m-mem", "endpoint_id": ep_a}), 403)
    assert c.gw.sql("SELECT COUNT(*) FROM routes")[0][0] == n
    # Changing an own route the same ways.
    expect(c.adm_a.put("/api/v1/model-routes/%d" % r["id"], {"priority": -3}), 403)
    expect(c.adm_a.put("/api/v1/model-routes/%d" % r["id"], {"endpoint_id": ep_b}), 403)
    expect(c.adm_a.put("/api/v1/model-routes/%d" % r["id"], {"priority": 2, "target_model": "qwen"}), 200)
    assert c.gw.sql("SELECT priority, target_model, endpoint_id FROM routes WHERE id = ?", r["id"]) == \
        [(2, "qwen", ep_a)]
    expect(c.adm_b.put("/api/v1/model-routes/%d" % r["id"], {"weight": 1}), 403)
    expect(c.adm_b.get("/api/v1/model-routes/%d" % r["id"]), 403)
    # The operator may use negative priorities; a tenant name like a default route is a conflict even for it.
    expect(c.root.put("/api/v1/model-routes/%d" % r["id"], {"priority": -1}), 200)
    expect(c.root.post("/api/v1/model-routes", {"model": "platform-m", "endpoint_id": ep_a, "tenant": "ta"}), 409)
    # Members read their tenant's routes only.
    models = {x["model"] for x in expect(c.mem_a.get("/api/v1/model-routes"), 200)["data"]}
    assert "chat-a" in models and "platform-m" not in models, models
    expect(c.mem_a.get("/api/v1/model-routes?tenant=tb"), 403)
    expect(c.mem_a.delete("/api/v1/model-routes/%d" % r["id"]), 403)
    expect(c.adm_a.delete("/api/v1/model-routes/%d" % r["id"]), 200)
    assert c.gw.sql("SELECT COUNT(*) FROM routes WHERE id = ?", r["id"]) == [(0,)]


# ---- member keys ----------------------------------------------------------------------------------

def test_keys_limits_escalation_R_SEC_5(c):
    """A key never has more than its maker; nobody raises its own limits."""
    expect(c.root.put("/api/v1/users/%d" % c.adm_a.user_id, {"key_ceiling": {"qps_limit": 10, "daily_limit": 1000}}),
           200)
    adm = Client(c.gw, "adm_a")     # the ceiling is read per request; a new session is not needed, but fine
    mem_id = c.mem_a.user_id
    expect(adm.post("/api/v1/tenant/api-keys", {"user_id": mem_id, "qps_limit": 20, "daily_limit": 10}), 403,
           "permission_denied")
    expect(adm.post("/api/v1/tenant/api-keys", {"user_id": mem_id, "qps_limit": 5}), 403)   # daily unlimited
    n = c.gw.sql("SELECT COUNT(*) FROM api_keys")[0][0]
    k = expect(adm.post("/api/v1/tenant/api-keys", {"user_id": mem_id, "name": "k1", "qps_limit": 5,
                                                    "daily_limit": 100}), 200)
    assert k["key"].startswith("sk-tenant-") and k["user"] == "mem_a" and k["qps_limit"] == 5, k
    assert c.gw.sql("SELECT COUNT(*) FROM api_keys")[0][0] == n + 1
    assert c.gw.sql("SELECT key_hash FROM api_keys WHERE id = ?", k["id"]) == \
        [(hashlib.sha256(k["key"].encode()).hexdigest(),)]
    listed = expect(adm.get("/api/v1/tenant/api-keys"), 200)
    assert all("key" not in x for x in listed["data"]) and k["key"] not in json.dumps(listed)
    # Raising one's own key: the operator gave adm_a a key with qps 5.
    own = c.gw.ctl("key", "add", "--user", "adm_a", "--qps-limit", "5", "--daily-limit", "100")
    expect(adm.put("/api/v1/tenant/api-keys/%d" % own["id"], {"qps_limit": 6}), 403)
    expect(adm.put("/api/v1/tenant/api-keys/%d" % own["id"], {"qps_limit": 0}), 403)
    expect(adm.put("/api/v1/tenant/api-keys/%d" % own["id"], {"qps_limit": 4}), 200)
    assert c.gw.sql("SELECT qps_limit FROM api_keys WHERE id = ?", own["id"]) == [(4,)]
    # A member's key used as the credential bounds the keys it makes (R-SEC-5).
    via_key = Client(c.gw, key=k["key"])
    expect(via_key.post("/api/v1/tenant/api-keys", {"daily_limit": 50}), 403)          # qps unlimited
    ok = expect(via_key.post("/api/v1/tenant/api-keys", {"qps_limit": 5, "daily_limit": 50}), 200)
    assert ok["user_id"] == mem_id
    expect(via_key.post("/api/v1/tenant/api-keys", {"user_id": c.mem_a2.user_id, "qps_limit": 1,
                                                    "daily_limit": 1}), 403)
    # Members see and revoke their own keys only.
    mine = expect(c.mem_a.get("/api/v1/tenant/api-keys"), 200)["data"]
    assert {x["user_id"] for x in mine} == {mem_id}, mine
    expect(c.mem_a2.get("/api/v1/tenant/api-keys/%d" % ok["id"]), 403)
    expect(c.mem_a2.delete("/api/v1/tenant/api-keys/%d" % ok["id"]), 403)
    expect(c.mem_a.get("/api/v1/tenant/api-keys?user_id=%d" % c.mem_a2.user_id), 403)
    expect(c.adm_b.get("/api/v1/tenant/api-keys/%d" % ok["id"]), 403)
    assert expect(c.mem_a.delete("/api/v1/tenant/api-keys/%d" % ok["id"]), 200)["revoked"] is True
    assert c.gw.sql("SELECT revoked_at IS NOT NULL FROM api_keys WHERE id = ?", ok["id"]) == [(1,)]
    # An admin may not make keys for the operator, even in its own tenant (higher role).
    expect(c.adm_def.post("/api/v1/tenant/api-keys", {"user_id": c.root.user_id}), 403)
    # Ceilings hold for the operator too: no key above its owner's ceiling (400, a rule, not a right).
    expect(c.root.post("/api/v1/tenant/api-keys", {"user_id": c.adm_a.user_id, "qps_limit": 11,
                                                   "daily_limit": 5}), 400, "invalid_value")


def test_key_routing_policy_R_AUTO_1(c):
    """Per-key auto routing policy: own keys only; null returns to the global setting."""
    k = expect(c.mem_a.post("/api/v1/tenant/api-keys", {"name": "pol"}), 200)
    path = "/api/v1/tenant/api-keys/%d/routing-policy" % k["id"]
    p = expect(c.mem_a.get(path), 200)
    assert p["auto_routing_enabled"] is None and p["auto_routing_strategy"] is None, p
    p = expect(c.mem_a.put(path, {"auto_routing_enabled": True, "auto_routing_strategy": "cost"}), 200)
    assert p["auto_routing_enabled"] is True and p["auto_routing_strategy"] == "cost", p
    assert c.gw.sql("SELECT auto_routing_enabled, auto_routing_strategy FROM key_routing_policies"
                    " WHERE key_id = ?", k["id"]) == [(1, "cost")]
    expect(c.mem_a.put(path, {"auto_routing_strategy": "cheapest"}), 400, "invalid_value")
    expect(c.mem_a.put(path, {"auto_routing_enabled": "yes"}), 400, "invalid_type")
    expect(c.mem_a2.put(path, {"auto_routing_enabled": False}), 403)
    expect(c.adm_b.get(path), 403)
    p = expect(c.mem_a.put(path, {"auto_routing_enabled": None}), 200)
    assert p["auto_routing_enabled"] is None and p["auto_routing_strategy"] == "cost", p


# ---- model policies, settings, nodes ----------------------------------------------------------------

def test_model_policies_R_ADM_1(c):
    """Policies per model name; names with '/' through ?name=; the operator writes, all read."""
    name = "org/Qwen2.5-7B-Instruct"
    q = "/api/v1/models/routing-policies?name=org%2FQwen2.5-7B-Instruct"
    p = expect(c.root.put(q, {"purpose": "chat", "quality_score": 71.5, "price_input_per_1k": 0.002,
                              "supports_tools": True, "max_context": 32768}), 200)
    assert p["model"] == name and p["purpose"] == "chat" and p["quality_score"] == 71.5, p
    assert p["price_input_per_1k"] == 0.002 and p["max_context"] == 32768 and p["supports_tools"] is True, p
    assert c.gw.sql("SELECT purpose, max_context FROM model_policies WHERE model = ?", name) == [("chat", 32768)]
    assert expect(c.mem_a.get(q), 200)["model"] == name
    expect(c.adm_a.put(q, {"purpose": "embedding"}), 403)
    expect(c.root.put(q, {"purpose": "poetry"}), 400, "invalid_value")
    expect(c.root.put(q, {"max_context": -5}), 400)
    expect(c.root.post("/api/v1/models/routing-policies", {"model": "simple", "routing_enabled": False}), 200)
    got = expect(c.adm_a.get("/api/v1/models/routing-policies/simple"), 200)
    assert got["routing_enabled"] is False
    lst = expect(c.mem_a.get("/api/v1/models/routing-policies"), 200)
    assert {x["model"] for x in lst["data"]} == {name, "simple"} and lst["total"] == 2, lst
    p = expect(c.root.put(q, {"purpose": None, "max_context": None}), 200)
    assert p["purpose"] is None and p["max_context"] is None and p["quality_score"] == 71.5, p
    expect(c.adm_a.delete(q), 403)
    expect(c.root.delete(q), 200)
    expect(c.root.get(q), 404, "not_found")


def test_settings_R_ADM_1(c):
    """inference-config: the operator writes, admins read, members neither; values typed and checked."""
    cfg = expect(c.adm_a.get("/api/v1/system/inference-config"), 200)
    assert cfg["auto_routing_enabled"] is False and cfg["auto_routing_strategy"] == "balanced", cfg
    expect(c.mem_a.get("/api/v1/system/inference-config"), 403)
    expect(c.adm_a.put("/api/v1/system/inference-config", {"auto_routing_enabled": True}), 403)
    cfg = expect(c.root.put("/api/v1/system/inference-config",
                            {"auto_routing_enabled": True, "gpu_temperature_threshold": 80}), 200)
    assert cfg["auto_routing_enabled"] is True and cfg["gpu_temperature_threshold"] == 80
    stored = dict(c.gw.sql("SELECT key, value FROM settings"))
    assert stored["auto_routing_enabled"] == "true" and stored["gpu_temperature_threshold"] == "80", stored
    expect(c.root.put("/api/v1/system/inference-config", {"no_such_setting": 1}), 400)
    expect(c.root.put("/api/v1/system/inference-config", {"gpu_temperature_threshold": "hot"}), 400)
    expect(c.root.put("/api/v1/system/inference-config", {"gpu_temperature_threshold": 999}), 400)
    cfg = expect(c.root.put("/api/v1/system/inference-config", {"auto_routing_enabled": None}), 200)
    assert cfg["auto_routing_enabled"] is False
    assert c.gw.sql("SELECT COUNT(*) FROM settings WHERE key = 'auto_routing_enabled'") == [(0,)]


def ctl_fails(c, *args):
    """sluicectl ARGS must fail; returns (stderr, the JSON error)."""
    p = subprocess.run(c.gw.ctl_argv() + ["--json"] + list(args), capture_output=True, text=True,
                       timeout=30)
    assert p.returncode != 0, ("sluicectl %s succeeded" % " ".join(args), p.stdout)
    return p.stderr, json.loads(p.stdout)["error"]


def test_settings_one_schema_cli_and_api(c):
    """`sluicectl settings set`, `config get|set` and inference-config check values against one
    schema (lib/settings.c) and agree on what is stored."""
    stored = lambda k: c.gw.sql("SELECT value FROM settings WHERE key = ?", k)
    before = stored("gpu_temperature_threshold")
    audits = c.gw.sql("SELECT COUNT(*) FROM audit_log")
    err_text, err = ctl_fails(c, "settings", "set", "gpu_temperature_threshold", "hot")
    assert "gpu_temperature_threshold must be a number from 0 to 150 with at most 1 decimal" in err_text, err_text
    assert err["param"] == "value" and err["code"] == "invalid_value" and "hot" not in err["message"], err
    for bad in ("150.5", "85.55", "-1", ""):
        ctl_fails(c, "settings", "set", "gpu_temperature_threshold", bad)
    err_text, err = ctl_fails(c, "settings", "set", "auto_routing_strategy", "cheap")
    assert "one of: balanced, cost, latency, semantic" in err_text and err["param"] == "value", err
    err_text, err = ctl_fails(c, "settings", "set", "auto_routing_enabled", "maybe")
    assert "true or false" in err_text, err_text
    err_text, err = ctl_fails(c, "settings", "set", "no_such_setting", "1")
    assert "unknown setting" in err_text and "gpu_temperature_threshold" in err_text and err["param"] == "key", err
    assert stored("gpu_temperature_threshold") == before and stored("no_such_setting") == []
    assert c.gw.sql("SELECT COUNT(*) FROM audit_log") == audits           # nothing stored, nothing audited

    # A value set with `settings set` is what `config get` and the API show.
    for text, want in (("82.5", 82.5), ("81", 81), ("80.0", 80)):
        row = c.gw.ctl("settings", "set", "gpu_temperature_threshold", text)
        assert row == {"key": "gpu_temperature_threshold", "value": str(want)}, row
        got = c.gw.ctl("config", "get")["gpu_temperature_threshold"]
        assert got == want and type(got) is type(want), (text, got)
        assert expect(c.adm_a.get("/api/v1/system/inference-config"), 200)["gpu_temperature_threshold"] == want
    c.gw.ctl("settings", "set", "auto_routing_enabled", "on")
    assert stored("auto_routing_enabled") == [("true",)]
    assert c.gw.ctl("config", "get")["auto_routing_enabled"] is True
    c.gw.ctl("settings", "set", "internal_fields", "secret_a, secret_b")
    assert c.gw.ctl("config", "get")["internal_fields"] == "secret_a, secret_b"

    # config set and the API take a JSON number with one decimal and return it; ints still work.
    assert c.gw.ctl("config", "set", "gpu_temperature_threshold", "72.5")["gpu_temperature_threshold"] == 72.5
    assert stored("gpu_temperature_threshold") == [("72.5",)]
    cfg = expect(c.root.put("/api/v1/system/inference-config", {"gpu_temperature_threshold": 71.5}), 200)
    assert cfg["gpu_temperature_threshold"] == 71.5 and stored("gpu_temperature_threshold") == [("71.5",)]
    assert c.gw.ctl("settings", "get", "gpu_temperature_threshold")["value"] == "71.5"
    expect(c.root.put("/api/v1/system/inference-config", {"gpu_temperature_threshold": 71.55}), 400)
    expect(c.root.put("/api/v1/system/inference-config", {"usage_retention_days": 30.5}), 400)
    ctl_fails(c, "config", "set", "usage_retention_days", "30.5")
    cfg = expect(c.root.put("/api/v1/system/inference-config", {"gpu_temperature_threshold": 84}), 200)
    assert cfg["gpu_temperature_threshold"] == 84 and type(cfg["gpu_temperature_threshold"]) is int
    assert stored("gpu_temperature_threshold") == [("84",)]

    # A row stored around sluicectl that no longer parses reads as the default.
    db_write(c, "UPDATE settings SET value = 'hot' WHERE key = 'gpu_temperature_threshold'")
    assert c.gw.ctl("config", "get")["gpu_temperature_threshold"] == 85
    # R-USE-7: `usage prune` without --days keeps usage_retention_days of events.
    assert c.gw.ctl("usage", "prune")["days"] == 90
    c.gw.ctl("settings", "set", "usage_retention_days", "30")
    assert c.gw.ctl("usage", "prune")["days"] == 30 and c.gw.ctl("usage", "prune", "--days", "7")["days"] == 7
    for k in ("gpu_temperature_threshold", "auto_routing_enabled", "internal_fields", "usage_retention_days"):
        c.gw.ctl("settings", "rm", k)


def test_nodes_R_HC_7(c):
    """Nodes: the operator manages them and may push temperatures; admins read."""
    n = expect(c.root.post("/api/v1/nodes", {"name": "gpu-1", "metrics_url": "http://10.1.1.1:9400/metrics"}), 200)
    assert n["status"] == "online"
    expect(c.adm_a.post("/api/v1/nodes", {"name": "gpu-x"}), 403)
    expect(c.mem_a.get("/api/v1/nodes"), 403)
    assert [x["name"] for x in expect(c.adm_a.get("/api/v1/nodes"), 200)["data"]] == ["gpu-1"]
    expect(c.root.put("/api/v1/nodes/%d" % n["id"], {"status": "borrowed"}), 200)
    t = expect(c.root.post("/api/v1/nodes/%d/temperature" % n["id"], {"gpu_temperature": 71.5}), 200)
    assert t["gpu_temperature"] == 71.5
    assert c.gw.sql("SELECT status, gpu_temperature FROM nodes WHERE id = ?", n["id"]) == [("borrowed", 71.5)]
    expect(c.root.post("/api/v1/nodes/%d/temperature" % n["id"], {"gpu_temperature": 900}), 400)
    expect(c.root.put("/api/v1/nodes/%d" % n["id"], {"metrics_url": "file:///etc/passwd"}), 400)
    expect(c.root.delete("/api/v1/nodes/%d" % n["id"]), 200)


# ---- usage, audit, alerts ---------------------------------------------------------------------------

def test_usage_scoping_R_USE_6(c):
    """Members see their own usage, admins their tenant's, the operator everything."""
    ta, tb, ma, ma2 = c.ids["ta"], c.ids["tb"], c.mem_a.user_id, c.mem_a2.user_id
    rows = [("2026-01-10", ta, ma, 1, "m1", 3, 0, 30, 10), ("2026-01-11", ta, ma, 1, "m2", 2, 1, 20, 5),
            ("2026-01-10", ta, ma2, 2, "m1", 4, 0, 40, 8), ("2026-01-10", tb, c.adm_b.user_id, 3, "m1", 7, 0, 70, 1),
            ("2026-01-12", ta, 0, 0, "m1", 1, 0, 5, 5)]
    db_write(c, "INSERT INTO usage_daily VALUES (?,?,?,?,?,?,?,?,?)", many=rows)
    q = "/api/v1/tenant/usage?from=2026-01-01&to=2026-01-31"
    mine = expect(c.mem_a.get(q + "&group_by=model"), 200)
    assert {r["model"]: r["requests"] for r in mine["data"]} == {"m1": 3, "m2": 2}, mine
    assert mine["totals"]["requests"] == 5 and mine["totals"]["prompt_tokens"] == 50, mine
    expect(c.mem_a.get(q + "&user_id=%d" % ma2), 403, "permission_denied")
    tenant = expect(c.adm_a.get(q + "&group_by=user"), 200)
    assert {r["user_id"]: r["requests"] for r in tenant["data"]} == {ma: 5, ma2: 4, 0: 1}, tenant
    assert expect(c.adm_a.get(q + "&user_id=%d" % ma2), 200)["totals"]["requests"] == 4
    expect(c.adm_a.get(q + "&tenant_id=%d" % tb), 403)
    everything = expect(c.root.get(q + "&group_by=day"), 200)
    assert {r["day"]: r["requests"] for r in everything["data"]} == \
        {"2026-01-10": 14, "2026-01-11": 2, "2026-01-12": 1}, everything
    assert expect(c.root.get(q + "&tenant=tb"), 200)["totals"]["requests"] == 7
    page = expect(c.root.get(q + "&group_by=day&limit=2&offset=1"), 200)
    assert [r["day"] for r in page["data"]] == ["2026-01-11", "2026-01-12"] and page["total"] == 3, page
    assert page["totals"]["requests"] == 17
    assert expect(c.adm_a.get(q + "&group_by=key"), 200)["total"] == 3
    expect(c.root.get("/api/v1/tenant/usage?from=2026-02-30"), 400, "invalid_value")
    expect(c.root.get("/api/v1/tenant/usage?group_by=planet"), 400)
    expect(c.root.get("/api/v1/tenant/usage?from=2026-02-01&to=2026-01-01"), 400)


def test_audit_log_R_ADM_5(c):
    """Every change is in the audit log: who, what, before, after; admins see their tenant's only."""
    last = c.gw.sql("SELECT COALESCE(MAX(id), 0) FROM audit_log")[0][0]
    r = expect(c.adm_a.post("/api/v1/model-routes", {"model": "audited", "endpoint_id": c.ep["ep-a"]}), 200)
    expect(c.adm_a.put("/api/v1/model-routes/%d" % r["id"], {"weight": 7}), 200)
    rows = audit_rows(c, "object_type = 'route' AND object_id = ? AND id > ?", r["id"], last)
    assert [(x[0], x[1]) for x in rows] == [("adm_a", "create"), ("adm_a", "update")], rows
    before, after = json.loads(rows[1][4]), json.loads(rows[1][5])
    assert before["weight"] == 1 and after["weight"] == 7 and rows[1][6] == c.ids["ta"], rows[1]
    log = expect(c.adm_a.get("/api/v1/audit-log?object_type=route"), 200)
    assert log["data"][0]["object_id"] == r["id"] and log["data"][0]["after"]["weight"] == 7, log["data"][0]
    assert all(x["tenant_id"] == c.ids["ta"] for x in expect(c.adm_a.get("/api/v1/audit-log?limit=1000"), 200)["data"])
    expect(c.adm_a.get("/api/v1/audit-log?tenant_id=%d" % c.ids["tb"]), 403)
    expect(c.mem_a.get("/api/v1/audit-log"), 403)
    assert expect(c.root.get("/api/v1/audit-log"), 200)["total"] >= len(rows)
    # sluicectl writes the same records (same library).
    c.gw.ctl("route", "set", r["id"], "--weight", 9)
    assert audit_rows(c, "object_type = 'route' AND object_id = ?", r["id"])[-1][:2] == ("sluicectl", "update")


def test_alerts_R_HC_2(c):
    """Alerts: admins see and resolve their tenant's; the resolution is audited."""
    db_write(c, "INSERT INTO alerts (type, severity, tenant_id, endpoint_id, replica_id, message)"
                " VALUES ('ENDPOINT_UNHEALTHY', 'ERROR', ?, ?, ?, 'replica down')",
             many=[(c.ids["ta"], c.ep["ep-a"], 1), (c.ids["tb"], c.ep["ep-b"], 2)])
    mine = expect(c.adm_a.get("/api/v1/alerts?status=ACTIVE"), 200)["data"]
    assert len(mine) == 1 and mine[0]["tenant_id"] == c.ids["ta"], mine
    other = expect(c.root.get("/api/v1/alerts?tenant_id=%d" % c.ids["tb"]), 200)["data"][0]
    expect(c.adm_a.post("/api/v1/alerts/%d/resolve" % other["id"]), 403)
    expect(c.mem_a.get("/api/v1/alerts"), 403)
    done = expect(c.adm_a.post("/api/v1/alerts/%d/resolve" % mine[0]["id"]), 200)
    assert done["status"] == "RECOVERED" and done["resolved_at"], done
    assert audit_rows(c, "object_type = 'alert'")[-1][:2] == ("adm_a", "resolve")


# ---- input handling -------------------------------------------------------------------------------

META = ["x'; DROP TABLE users; --", 'q"uote', "back\\slash", "50% off_", "/* c */ OR 1=1", "ünï 漢字 🚀"]


def test_sql_metacharacters_verbatim_R_SEC_2(c):
    """SQL metacharacters in every string field are stored and returned byte for byte."""
    for i, s in enumerate(META):
        t = expect(c.root.post("/api/v1/tenants", {"name": "t-" + s}), 200)
        assert t["name"] == "t-" + s and c.gw.sql("SELECT name FROM tenants WHERE id = ?", t["id"]) == [("t-" + s,)]
        pw = "pw-" + s
        u = expect(c.root.post("/api/v1/users", {"name": "u-" + s, "tenant_id": t["id"], "role": "admin",
                                                 "password": pw}), 200)
        assert u["name"] == "u-" + s
        r = c.gw.request("POST", "/api/v1/auth/login", {"username": "u-" + s, "password": pw})
        assert r.status == 200, (s, r)                   # the password went through verbatim
        e = expect(c.root.post("/api/v1/endpoints", {"name": "e-" + s.replace("/", "|"), "tenant_id": t["id"],
                                                     "upstream_auth": "cred-" + s}), 200)
        assert c.gw.sql("SELECT name FROM endpoints WHERE id = ?", e["id"]) == [("e-" + s.replace("/", "|"),)]
        assert c.gw.upstream_auth(e["id"]) == "cred-" + s, s   # sealed, and opens verbatim (R-SEC-9)
        rt = expect(c.root.post("/api/v1/model-routes", {"model": "m-" + s, "endpoint_id": e["id"],
                                                         "target_model": "tm-" + s}), 200)
        assert (rt["model"], rt["target_model"]) == ("m-" + s, "tm-" + s)
        assert c.gw.sql("SELECT model, target_model FROM routes WHERE id = ?", rt["id"]) == [("m-" + s, "tm-" + s)]
        k = expect(c.root.post("/api/v1/tenant/api-keys", {"user_id": u["id"], "name": "k-" + s}), 200)
        assert expect(c.root.get("/api/v1/tenant/api-keys/%d" % k["id"]), 200)["name"] == "k-" + s
        p = expect(c.root.post("/api/v1/models/routing-policies", {"model": "p-" + s, "description": "d-" + s}), 200)
        assert (p["model"], p["description"]) == ("p-" + s, "d-" + s)
        n = expect(c.root.post("/api/v1/nodes", {"name": "n-" + s}), 200)
        assert c.gw.sql("SELECT name FROM nodes WHERE id = ?", n["id"]) == [("n-" + s,)]
        got = expect(c.root.get("/api/v1/model-routes?model=" + urllib.parse.quote("m-" + s)), 200)
        assert [x["id"] for x in got["data"]] == [rt["id"]], (s, got)
    cfg = expect(c.root.put("/api/v1/system/inference-config", {"internal_fields": META[0]}), 200)
    assert cfg["internal_fields"] == META[0]
    assert c.gw.sql("SELECT value FROM settings WHERE key = 'internal_fields'") == [(META[0],)]
    assert c.gw.sql("SELECT COUNT(*) FROM users")[0][0] >= 6        # nothing dropped


def test_bad_bodies_400_413_R_SEC_2(c):
    """Malformed, mistyped, unknown and oversized bodies are refused before anything is written."""
    n = c.gw.sql("SELECT COUNT(*) FROM tenants")[0][0]
    p = "/api/v1/tenants"
    expect(c.root.call("POST", p, raw=b'{"name": "x"'), 400, "invalid_json")
    expect(c.root.call("POST", p, raw=b'["name"]'), 400, "invalid_json")
    expect(c.root.call("POST", p, raw=b'{"name": "x"} trailing'), 400, "invalid_json")
    expect(c.root.call("POST", p, raw=b'\xff\xfe'), 400, "invalid_json")
    expect(c.root.post(p, {"name": 5}), 400, "invalid_type")
    assert c.root.post(p, {"name": 5}).json()["error"]["param"] == "name"
    expect(c.root.post(p, {"name": "ok", "admin": True}), 400, "unknown_field")
    expect(c.root.post(p, {}), 400, "missing_field")
    expect(c.root.post(p, {"name": ""}), 400, "invalid_value")
    expect(c.root.post(p, {"name": "x" * 129}), 400, "invalid_value")
    expect(c.root.post(p, {"name": "a\u0000b"}), 400, "invalid_value")
    expect(c.root.post(p, {"name": "line\nbreak"}), 400, "invalid_value")
    expect(c.root.post("/api/v1/model-routes", {"model": "m", "endpoint_id": c.ep["ep-a"], "weight": 2 ** 70}), 400)
    expect(c.root.post("/api/v1/model-routes", {"model": "m", "endpoint_id": c.ep["ep-a"], "weight": -1}), 400)
    expect(c.root.post("/api/v1/model-routes", {"model": "m", "endpoint_id": c.ep["ep-a"], "weight": 1.5}), 400,
           "invalid_type")
    r = c.root.call("POST", p, raw=json.dumps({"name": "big", "pad": "x" * (MAX_BODY + 10)}).encode())
    expect(r, 413, "request_too_large")
    assert c.gw.sql("SELECT COUNT(*) FROM tenants")[0][0] == n


def test_pagination_every_listing(c):
    """Every listing is paginated: {"data","total","limit","offset"}."""
    before = expect(c.root.get("/api/v1/nodes"), 200)["total"]
    for i in range(7):
        expect(c.root.post("/api/v1/nodes", {"name": "page-%d" % i}), 200)
    seen = []
    for off in (before, before + 3, before + 6):
        pg = expect(c.root.get("/api/v1/nodes?limit=3&offset=%d" % off), 200)
        assert pg["total"] == before + 7 and pg["limit"] == 3 and pg["offset"] == off, pg
        seen += [x["name"] for x in pg["data"]]
    assert seen == ["page-%d" % i for i in range(7)], seen
    assert expect(c.root.get("/api/v1/nodes?limit=3&offset=%d" % (before + 7)), 200)["data"] == []
    for path in ("/api/v1/tenants", "/api/v1/users", "/api/v1/endpoints", "/api/v1/model-routes",
                 "/api/v1/tenant/api-keys", "/api/v1/models/routing-policies", "/api/v1/nodes",
                 "/api/v1/audit-log", "/api/v1/alerts", "/api/v1/tenant/usage",
                 "/api/v1/endpoints/%d/replicas" % c.ep["ep-a"]):
        pg = expect(c.root.get(path + "?limit=1"), 200)
        assert set(pg) >= {"data", "total", "limit", "offset"} and len(pg["data"]) <= 1, (path, pg)
    expect(c.root.get("/api/v1/nodes?limit=0"), 400)
    expect(c.root.get("/api/v1/nodes?limit=5000"), 400)
    expect(c.root.get("/api/v1/nodes?offset=-1"), 400)
    expect(c.root.get("/api/v1/nodes?limit=abc"), 400)


def test_paths_methods_and_no_credentials_R_SEC_8(c):
    """The CGI routes on REQUEST_URI/REQUEST_METHOD itself: odd paths never reach a resource unauthenticated."""
    r = c.root.call("PUT", "/api/v1/tenants", {})
    expect(r, 405, "method_not_allowed")
    assert "GET" in r.headers["allow"] and "POST" in r.headers["allow"], r.headers
    for path in ("/api/v1/tenants/abc", "/api/v1/tenants/0", "/api/v1/tenants/", "/api/v1/tenant",
                 "/api/v1/tenants/1/x", "/api/v1/tenants/01"):
        expect(c.root.get(path), 404, "not_found")
    anon = Client(c.gw)
    for path in ("/api/v1/tenants", "/api/v1/auth/me", "/api/v1/users/1", "/api/v1/auth/login/../../tenants",
                 "/api/v1/./tenants", "/api/v1/tenants?x=/api/v1/auth/login", "/api/v1/tenants%3Fa"):
        r = anon.get(path)
        assert r.status in (401, 404), (path, r)
        assert b'"data"' not in r.body, (path, r)
    r = anon.call("GET", "/api/v1/tenants", headers={"Authorization": "Bearer garbage"})
    expect(r, 401, "invalid_api_key")
    # The pass-through stays with the data plane (an API session is not a key there).
    r = http_request(c.gw.port, "GET", "/api/v1/proxy/ep-a/v1/models", headers={"Cookie": c.root.cookie})
    assert r.status == 401 and r.json()["error"]["code"] == "invalid_api_key", r


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
