#!/usr/bin/env python3
"""t0060-r-sec-5-ceilings: a tenant admin cannot escape its own key ceiling through the users it
creates or changes (R-SEC-5, R-SEC-10, R-KEY-1).

Rule: a user's key ceiling is never above its creator's (or changer's) in any of the six limits:
members a non-operator leaves out are inherited from (or tightened to) the caller's own ceiling,
a member given above it is refused (403), on creation, on a ceiling edit and on a role change.
The operator (API or sluicectl) may create users without a ceiling. A key never allows more than
its user's ceiling (0 = unlimited is above any number), so the user cannot mint more either.
Each check looks at the answer and at the database."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Gateway, http_request, run_tests

LIMITS = ("qps_limit", "concurrency_limit", "daily_limit", "monthly_quota", "tpm_limit", "monthly_token_quota")
FLAGS = ("--qps", "--concurrency", "--daily", "--monthly", "--tpm", "--monthly-tokens")
# adm_a's ceiling, set by the operator: every member limited, each a different number.
CEIL = dict(zip(LIMITS, (10, 4, 1000, 20000, 50000, 900000)))
UNLIMITED = dict.fromkeys(LIMITS, 0)
PW = "t0060-pass-%d" % os.getpid()


class Ctx:
    pass


class Client:
    """A login session (cookie + CSRF token) or a bearer member key."""

    def __init__(self, gw, name=None, key=None):
        self.gw, self.key, self.cookie, self.csrf = gw, key, None, None
        if name:
            r = gw.request("POST", "/api/v1/auth/login", {"username": name, "password": PW})
            assert r.status == 200, (name, r)
            self.cookie = r.headers["set-cookie"].split(";")[0]
            self.csrf = r.json()["csrf_token"]
            self.user_id = r.json()["user"]["id"]

    def call(self, method, path, body=None):
        h = {}
        if self.cookie:
            h["Cookie"] = self.cookie
            if method != "GET":
                h["X-CSRF-Token"] = self.csrf
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        return http_request(self.gw.port, method, path, body, h)

    def post(self, path, body):
        return self.call("POST", path, body)

    def put(self, path, body):
        return self.call("PUT", path, body)


def expect(r, status, code=None):
    assert r.status == status, "expected %d%s, got %r" % (status, " " + code if code else "", r)
    if code:
        assert r.json()["error"]["code"] == code, r.json()
    return r.json()


def ctl_user(c, name, tenant, role, *extra):
    """sluicectl user add with the common password on stdin (the operator acting)."""
    p = subprocess.run(c.gw.ctl_argv() + ["--json", "user", "add", name, "--tenant", tenant, "--role", role,
                        "--password-stdin"] + list(extra), input=PW + "\n", capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def stored_ceiling(c, name):
    """The user's ceiling as stored (a user without a key_ceilings row has none: all 0)."""
    row = c.gw.sql("SELECT " + ", ".join("COALESCE(k.%s, 0)" % n for n in LIMITS) +
                   " FROM users u LEFT JOIN key_ceilings k ON k.user_id = u.id WHERE u.name = ?", name)
    assert len(row) == 1, (name, row)
    return dict(zip(LIMITS, row[0]))


def setup():
    c = Ctx()
    c.gw = Gateway("t0060", procs=1, threads=4)
    c.gw.ctl("tenant", "add", "ta")
    ctl_user(c, "root", "default", "operator")
    ctl_user(c, "adm_a", "ta", "admin")
    args = []
    for f, n in zip(FLAGS, LIMITS):
        args += [f, CEIL[n]]
    c.gw.ctl("user", "ceiling", "adm_a", *args)
    assert stored_ceiling(c, "adm_a") == CEIL
    c.gw.start()
    c.root, c.adm = Client(c.gw, "root"), Client(c.gw, "adm_a")
    return c


def teardown(c):
    if c:
        c.gw.stop()


def test_created_user_without_ceiling_inherits_the_creators(c):
    """The issue's escape: a user made without key_ceiling got 0 (unlimited) and minted unlimited keys."""
    u = expect(c.adm.post("/api/v1/users", {"name": "u_plain", "role": "member", "password": PW}), 200)
    assert u["key_ceiling"] == CEIL, u
    assert stored_ceiling(c, "u_plain") == CEIL
    # The creation's audit record carries the inherited ceiling (R-ADM-5).
    after = json.loads(c.gw.sql("SELECT after FROM audit_log WHERE action = 'create' AND object_type = 'user'"
                                " AND object_id = ?", u["id"])[0][0])
    assert after["key_ceiling"] == CEIL, after
    # The new user cannot mint a key with more than that: not unlimited, not above in any member.
    me = Client(c.gw, "u_plain")
    n = c.gw.sql("SELECT COUNT(*) FROM api_keys")[0][0]
    expect(me.post("/api/v1/tenant/api-keys", {"name": "unlimited"}), 403, "permission_denied")
    for name in LIMITS:
        over = dict(CEIL)
        over[name] = CEIL[name] + 1
        expect(me.post("/api/v1/tenant/api-keys", over), 403, "permission_denied")
        over[name] = 0
        expect(me.post("/api/v1/tenant/api-keys", over), 403, "permission_denied")
    assert c.gw.sql("SELECT COUNT(*) FROM api_keys")[0][0] == n
    k = expect(me.post("/api/v1/tenant/api-keys", dict(CEIL, name="at-ceiling")), 200)
    assert {x: k[x] for x in LIMITS} == CEIL, k
    # The admin cannot mint an unlimited key for it either (the owner's ceiling and the admin's).
    expect(c.adm.post("/api/v1/tenant/api-keys", {"user_id": u["id"]}), 403)
    # Nor can the operator: a key never exceeds its owner's ceiling (400, a rule, not a right).
    expect(c.root.post("/api/v1/tenant/api-keys", {"user_id": u["id"]}), 400, "invalid_value")
    p = subprocess.run(c.gw.ctl_argv() + ["--json", "key", "add", "--user", "u_plain"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "ceiling" in (p.stdout + p.stderr), (p.stdout, p.stderr)
    assert c.gw.sql("SELECT COUNT(*) FROM api_keys")[0][0] == n + 1


def test_partial_ceiling_inherits_the_rest(c):
    """Members left out of key_ceiling are the creator's; given ones must be within it."""
    u = expect(c.adm.post("/api/v1/users", {"name": "u_part", "key_ceiling": {"qps_limit": 5, "daily_limit": 100}}),
               200)
    want = dict(CEIL, qps_limit=5, daily_limit=100)
    assert u["key_ceiling"] == want and stored_ceiling(c, "u_part") == want, u
    for bad in ({"qps_limit": 11}, {"tpm_limit": 0}, {"monthly_token_quota": 900001, "qps_limit": 1}):
        expect(c.adm.post("/api/v1/users", {"name": "u_bad", "key_ceiling": bad}), 403, "permission_denied")
    assert c.gw.sql("SELECT COUNT(*) FROM users WHERE name = 'u_bad'") == [(0,)]
    # An empty key_ceiling object is the same as none: everything inherited.
    u = expect(c.adm.post("/api/v1/users", {"name": "u_empty", "key_ceiling": {}}), 200)
    assert u["key_ceiling"] == CEIL and stored_ceiling(c, "u_empty") == CEIL, u


def test_ceiling_edit_tightens_members_left_out(c):
    """An admin editing one member of an unlimited (operator-made) user's ceiling brings every member under its own."""
    free = ctl_user(c, "u_free", "ta", "member")
    assert free["key_ceiling"] == UNLIMITED and stored_ceiling(c, "u_free") == UNLIMITED, free
    r = expect(c.adm.put("/api/v1/users/%d" % free["id"], {"key_ceiling": {"qps_limit": 3}}), 200)
    want = dict(CEIL, qps_limit=3)
    assert r["key_ceiling"] == want and stored_ceiling(c, "u_free") == want, r
    expect(c.adm.put("/api/v1/users/%d" % free["id"], {"key_ceiling": {"daily_limit": 0}}), 403, "permission_denied")
    expect(c.adm.put("/api/v1/users/%d" % free["id"], {"key_ceiling": {"tpm_limit": 50001}}), 403)
    assert stored_ceiling(c, "u_free") == want
    # Lowering within the ceiling is fine and keeps the rest.
    r = expect(c.adm.put("/api/v1/users/%d" % free["id"], {"key_ceiling": {"tpm_limit": 7}}), 200)
    assert stored_ceiling(c, "u_free") == dict(want, tpm_limit=7), r


def test_role_change_brings_the_user_under_the_changers_ceiling(c):
    """An admin promoting an unlimited member does not hand out an unlimited admin."""
    ctl_user(c, "u_role", "ta", "member")
    uid = c.gw.sql("SELECT id FROM users WHERE name = 'u_role'")[0][0]
    assert stored_ceiling(c, "u_role") == UNLIMITED
    r = expect(c.adm.put("/api/v1/users/%d" % uid, {"role": "admin"}), 200)
    assert r["role"] == "admin" and r["key_ceiling"] == CEIL and stored_ceiling(c, "u_role") == CEIL, r
    # The new admin's own creations and keys are bounded in turn.
    promoted = Client(c.gw, "u_role")
    u = expect(promoted.post("/api/v1/users", {"name": "u_grand"}), 200)
    assert u["key_ceiling"] == CEIL and stored_ceiling(c, "u_grand") == CEIL, u
    expect(promoted.post("/api/v1/tenant/api-keys", {"name": "mine"}), 403, "permission_denied")
    # A role change by the operator leaves the ceiling as it is.
    ctl_user(c, "u_role2", "ta", "member")
    uid2 = c.gw.sql("SELECT id FROM users WHERE name = 'u_role2'")[0][0]
    r = expect(c.root.put("/api/v1/users/%d" % uid2, {"role": "admin"}), 200)
    assert r["key_ceiling"] == UNLIMITED and stored_ceiling(c, "u_role2") == UNLIMITED, r


def test_a_key_as_credential_bounds_the_users_it_creates(c):
    """Acting with a member key, the caller's ceiling is its user's tightened by the key."""
    klim = dict(zip(LIMITS, (2, 1, 10, 100, 1000, 5000)))
    args = []
    for f, n in zip(FLAGS, LIMITS):
        args += [f, klim[n]]
    k = c.gw.ctl("key", "add", "--user", "adm_a", *args)
    via = Client(c.gw, key=k["key"])
    u = expect(via.post("/api/v1/users", {"name": "u_viakey"}), 200)
    assert u["key_ceiling"] == klim and stored_ceiling(c, "u_viakey") == klim, u
    expect(via.post("/api/v1/users", {"name": "u_viakey2", "key_ceiling": {"qps_limit": 3}}), 403)


def test_the_operator_may_create_unlimited_users(c):
    """Only the operator hands out no ceiling: through the API and sluicectl (also with the new flags)."""
    ta = c.gw.sql("SELECT id FROM tenants WHERE name = 'ta'")[0][0]
    u = expect(c.root.post("/api/v1/users", {"name": "u_root", "tenant_id": ta}), 200)
    assert u["key_ceiling"] == UNLIMITED and stored_ceiling(c, "u_root") == UNLIMITED, u
    u = expect(c.root.post("/api/v1/users", {"name": "u_root2", "tenant_id": ta,
                                             "key_ceiling": {"qps_limit": 500}}), 200)
    assert stored_ceiling(c, "u_root2") == dict(UNLIMITED, qps_limit=500), u
    u = c.gw.ctl("user", "add", "u_cli", "--tenant", "ta", "--qps", 7, "--tpm-limit", 70)
    assert u["key_ceiling"] == dict(UNLIMITED, qps_limit=7, tpm_limit=70), u
    assert stored_ceiling(c, "u_cli") == dict(UNLIMITED, qps_limit=7, tpm_limit=70)


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
