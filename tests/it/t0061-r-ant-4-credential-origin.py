#!/usr/bin/env python3
"""t0061-r-ant-4-credential-origin: a tenant admin cannot collect an operator-set upstream
credential by adding a replica (or a wake URL) that points at its own listener (R-ANT-4,
R-ANT-5, R-SEC-9).

Rule: an endpoint's upstream credential set by the operator is sent only to URLs whose origin
an operator registered or approved. A non-operator adding a replica (or setting the wake URL)
at another origin on such an endpoint is refused with 403 and an audit record "refuse"; the
operator cannot set its credential while the endpoint has a URL that a tenant admin registered
and no operator approved (409) until it approves it (sluicectl replica set --approve, or PUT
.../replicas/{id} {"approved": true}). A credential the tenant set itself is its own business.

"evil" is the tenant admin's listener: it must never see the operator's credential, not through
the data plane, not through healthd's business probe and not through the endpoint test. What a
stand-in received is read from GET /_fake/stats ("requests", and "last" with its headers)."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, Healthd, http_request, run_tests, wait_for

SECRET = "sk-operator-t0061-%d-Vq3Lm9" % os.getpid()
TENANT_CRED = "sk-tenant-own-t0061-%d" % os.getpid()
PW = "t0061-pass-%d" % os.getpid()


class Ctx:
    pass


class Client:
    """A login session: cookie + CSRF token."""

    def __init__(self, gw, name):
        self.gw = gw
        r = gw.request("POST", "/api/v1/auth/login", {"username": name, "password": PW})
        assert r.status == 200, (name, r)
        self.cookie = r.headers["set-cookie"].split(";")[0]
        self.csrf = r.json()["csrf_token"]

    def call(self, method, path, body=None):
        h = {"Cookie": self.cookie}
        if method != "GET":
            h["X-CSRF-Token"] = self.csrf
        return http_request(self.gw.port, method, path, body, h)

    def get(self, path):
        return self.call("GET", path)

    def post(self, path, body=None):
        return self.call("POST", path, body if body is not None else {})

    def put(self, path, body):
        return self.call("PUT", path, body)

    def delete(self, path):
        return self.call("DELETE", path)


def expect(r, status, code=None):
    assert r.status == status, "expected %d%s, got %r" % (status, " " + code if code else "", r)
    if code:
        assert r.json()["error"]["code"] == code, r.json()
    return r.json()


def ctl_user(gw, name, tenant, role):
    p = subprocess.run(gw.ctl_argv() + ["--json", "user", "add", name, "--tenant", tenant, "--role", role,
                        "--password-stdin"], input=PW + "\n", capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr


def auth_seen(fake):
    """The credential headers of the last data request the stand-in received (None: none yet)."""
    last = fake.stats()["last"]
    if not last:
        return None
    h = last["headers"]
    return (h.get("authorization"), h.get("x-api-key"))


def assert_evil_clean(c, what):
    """evil never received the operator's credential (and, while it is no replica, nothing)."""
    st = c.evil.stats()
    assert SECRET not in json.dumps(st), "%s: the tenant admin's listener received the operator's credential: %r" \
        % (what, st["last"])
    return st


def setup():
    c = Ctx()
    c.real, c.real2, c.evil = Fake("t0061-real"), Fake("t0061-real2"), Fake("t0061-evil")
    c.gw = gw = Gateway("t0061", procs=1, threads=8,
                        conf={"admin": "session_ttl_s = 3600; max_body_bytes = 65536; login_max_failures = 50;"
                                       " login_window_s = 300; login_lockout_s = 60; endpoint_test_timeout_ms = 5000;"})
    gw.ctl("tenant", "add", "ta")
    ctl_user(gw, "root", "default", "operator")
    ctl_user(gw, "adm_a", "ta", "admin")
    gw.ctl("user", "add", "alice", "--tenant", "ta", "--role", "member")
    c.key = gw.ctl("key", "add", "--user", "alice")["key"]
    # The operator's endpoint in tenant ta, with the operator's credential and business probes.
    gw.ctl_secret(SECRET, "endpoint", "add", "ep-op", "--tenant", "ta", "--business-probe-rounds", "1")
    gw.ctl("replica", "add", "ep-op", c.real.url)
    gw.ctl("route", "add", "m", "ep-op", "--tenant", "ta", "--target-model", "real-m")
    c.ep = gw.sql("SELECT id FROM endpoints WHERE name = 'ep-op'")[0][0]
    c.real_id = gw.sql("SELECT id FROM replicas WHERE url = ?", c.real.url)[0][0]
    gw.start()
    c.root, c.adm = Client(gw, "root"), Client(gw, "adm_a")
    return c


def teardown(c):
    if c:
        c.gw.stop()
        for f in (c.real, c.real2, c.evil):
            f.stop()


def test_admin_adding_its_listener_is_refused_R_SEC_9(c):
    """403, nothing stored, and the audit log says who tried what and why."""
    # The attempts first: on a build without the rule they succeed and the next tests show the leak.
    answers = [c.adm.post("/api/v1/endpoints/%d/replicas" % c.ep, body) for body in (
        {"url": c.evil.url}, {"url": c.evil.url + "/v1", "state": "disabled"},
        {"url": c.evil.url.replace("127.0.0.1", "localhost"), "state": "sleeping", "engine": "vllm"})]
    for r in answers:
        err = expect(r, 403, "permission_denied")
        assert "operator" in err["error"]["message"] and SECRET not in json.dumps(err), err
    e = expect(c.adm.get("/api/v1/endpoints/%d" % c.ep), 200)
    assert e["upstream_auth_set"] is True and e["upstream_auth_by"] == "operator", e
    assert c.gw.sql("SELECT url FROM replicas WHERE endpoint_id = ?", c.ep) == [(c.real.url,)]
    rows = c.gw.sql("SELECT actor, after FROM audit_log WHERE action = 'refuse' AND object_type = 'replica'")
    assert len(rows) == 3 and all(a == "adm_a" for a, _ in rows), rows
    after = json.loads(rows[0][1])
    assert after["url"] == c.evil.url and after["endpoint_id"] == c.ep and "operator" in after["reason"], after
    assert SECRET not in json.dumps(rows)
    # The wake URL is a URL the credential goes to as well (R-WAKE-1).
    expect(c.adm.put("/api/v1/endpoints/%d" % c.ep, {"wake_url": c.evil.url + "/wake_up"}), 403, "permission_denied")
    assert c.gw.sql("SELECT wake_url FROM endpoints WHERE id = ?", c.ep) == [(None,)]
    assert c.gw.sql("SELECT COUNT(*) FROM audit_log WHERE action = 'refuse' AND object_type = 'endpoint'") == [(1,)]
    assert_evil_clean(c, "refusal")


def test_same_origin_replica_is_approved(c):
    """Another path on an origin the operator registered reaches the same server: allowed."""
    url = "HTTP://127.0.0.1:%d/alt" % c.real.port          # scheme case and path do not matter
    r = expect(c.adm.post("/api/v1/endpoints/%d/replicas" % c.ep, {"url": url, "state": "disabled"}), 200)
    assert r["approved"] is True, r
    expect(c.adm.delete("/api/v1/endpoints/%d/replicas/%d" % (c.ep, r["id"])), 200)
    # Only the operator approves; the flag cannot be set by the tenant admin.
    expect(c.adm.put("/api/v1/endpoints/%d/replicas/%d" % (c.ep, c.real_id), {"approved": True}), 403)


def test_data_plane_never_sends_it_to_the_listener_R_ANT_4(c):
    time.sleep(1.5)                        # whatever the API stored has reached every responder (R-CFG-1)
    c.real.reset()
    for i in range(6):
        r = c.gw.chat(c.key, model="m", content="dp %d" % i)
        assert r.status == 200, r
    assert auth_seen(c.real) == ("Bearer " + SECRET, None), c.real.stats()["last"]
    st = assert_evil_clean(c, "data plane")
    assert st["requests"] == 0, st


def test_healthd_business_probe_never_sends_it_to_the_listener_R_ANT_4(c):
    c.real.reset()
    hd = Healthd(c.gw)
    try:
        wait_for(lambda: c.real.stats()["requests"] >= 2, 10, what="business probes at the operator's replica")
        last = c.real.stats()["last"]
        assert json.loads(last["body"])["max_tokens"] == 1 and auth_seen(c.real) == ("Bearer " + SECRET, None), last
        time.sleep(0.7)                    # a couple more rounds
    finally:
        hd.stop()
    st = assert_evil_clean(c, "healthd")
    assert st["requests"] == 0, st


def test_endpoint_test_never_sends_it_to_the_listener_R_ANT_5(c):
    """With the operator's replica disabled, the test has nowhere to go; it never picks the listener."""
    expect(c.adm.put("/api/v1/endpoints/%d/replicas/%d" % (c.ep, c.real_id), {"state": "disabled"}), 200)
    try:
        t = expect(c.adm.post("/api/v1/endpoints/%d/test" % c.ep), 200)
        assert t["ok"] is False and t["replica"] is None, t
        assert_evil_clean(c, "endpoint test")
    finally:
        expect(c.adm.put("/api/v1/endpoints/%d/replicas/%d" % (c.ep, c.real_id), {"state": "running"}), 200)
    c.real.reset()
    t = expect(c.adm.post("/api/v1/endpoints/%d/test" % c.ep), 200)
    assert t["ok"] is True and t["replica_id"] == c.real_id and SECRET not in json.dumps(t), t
    assert auth_seen(c.real) == ("Bearer " + SECRET, None)
    assert c.evil.stats()["requests"] == 0


def test_a_url_outside_the_rule_is_left_out_by_healthd_and_the_test(c):
    """Belt and braces: even a replica written into the database behind the API's back (a
    tenant-registered, unapproved URL beside the operator's credential) gets nothing from
    healthd and the endpoint test, which leave it out. (The data plane relies on the API
    never storing such a row: it sends the credential to every replica, with no per-request
    check.)"""
    db = c.gw.sql
    c.gw.sql_write("INSERT INTO replicas (endpoint_id, url, approved, weight) VALUES (?, ?, 0, 0)", c.ep, c.evil.url)
    try:
        hd = Healthd(c.gw)
        try:
            c.real.reset()
            wait_for(lambda: c.real.stats()["requests"] >= 2, 10, what="business probes")
        finally:
            hd.stop()
        expect(c.adm.put("/api/v1/endpoints/%d/replicas/%d" % (c.ep, c.real_id), {"state": "disabled"}), 200)
        t = expect(c.adm.post("/api/v1/endpoints/%d/test" % c.ep), 200)
        assert t["replica"] != c.evil.url, t
        expect(c.adm.put("/api/v1/endpoints/%d/replicas/%d" % (c.ep, c.real_id), {"state": "running"}), 200)
        st = assert_evil_clean(c, "unapproved row")
        assert st["requests"] == 0, st
    finally:
        c.gw.sql_write("DELETE FROM replicas WHERE endpoint_id = ? AND url = ?", c.ep, c.evil.url)
    assert db("SELECT COUNT(*) FROM replicas WHERE endpoint_id = ?", c.ep) == [(1,)]


def test_operator_credential_needs_approved_urls_R_SEC_9(c):
    """A tenant endpoint with a replica its admin registered: the operator's credential waits for approval."""
    e = expect(c.adm.post("/api/v1/endpoints", {"name": "ep-t"}), 200)
    r = expect(c.adm.post("/api/v1/endpoints/%d/replicas" % e["id"], {"url": c.real2.url}), 200)
    assert r["approved"] is False, r                         # no credential yet: registering is fine
    w = expect(c.adm.put("/api/v1/endpoints/%d" % e["id"], {"wake_url": c.real2.url + "/wake_up"}), 200)
    assert w["wake_url_approved"] is False, w
    p = c.gw.ctl_secret(SECRET, "endpoint", "set", "ep-t", check=False)
    assert p.returncode != 0 and "approve" in p.stdout + p.stderr, (p.stdout, p.stderr)
    err = expect(c.root.put("/api/v1/endpoints/%d" % e["id"], {"upstream_auth": SECRET}), 409, "conflict")
    assert SECRET not in json.dumps(err)
    assert c.gw.sql("SELECT upstream_auth FROM endpoints WHERE id = ?", e["id"]) == [(None,)]
    # The operator approves the replica (CLI) and sets the wake URL again (API): now it may.
    got = c.gw.ctl("replica", "set", "ep-t", c.real2.url, "--approve")
    assert got["approved"] is True, got
    err = expect(c.root.put("/api/v1/endpoints/%d" % e["id"], {"upstream_auth": SECRET}), 409, "conflict")
    got = expect(c.root.put("/api/v1/endpoints/%d" % e["id"], {"upstream_auth": SECRET,
                                                                "wake_url": c.real2.url + "/wake_up"}), 200)
    assert got["upstream_auth_by"] == "operator" and got["wake_url_approved"] is True, got
    expect(c.adm.post("/api/v1/endpoints/%d/replicas" % e["id"], {"url": c.evil.url}), 403, "permission_denied")
    # The API's approval works the same way.
    c.gw.ctl("endpoint", "set", "ep-t", "--clear-upstream-auth")
    r3 = expect(c.adm.post("/api/v1/endpoints/%d/replicas" % e["id"], {"url": c.real.url}), 200)
    assert r3["approved"] is False, r3
    got = expect(c.root.put("/api/v1/endpoints/%d/replicas/%d" % (e["id"], r3["id"]), {"approved": True}), 200)
    assert got["approved"] is True, got
    assert_evil_clean(c, "approval")
    expect(c.root.delete("/api/v1/endpoints/%d" % e["id"]), 200)


def test_a_credential_the_tenant_sets_is_its_own(c):
    """Replacing the operator's credential with its own lets the admin add any replica; the
    listener then sees the tenant's credential, never the operator's."""
    got = expect(c.adm.put("/api/v1/endpoints/%d" % c.ep, {"upstream_auth": TENANT_CRED}), 200)
    assert got["upstream_auth_by"] == "tenant", got
    r = expect(c.adm.post("/api/v1/endpoints/%d/replicas" % c.ep, {"url": c.evil.url}), 200)
    assert r["approved"] is False, r
    time.sleep(1.5)
    for i in range(6):
        assert c.gw.chat(c.key, model="m", content="own %d" % i).status == 200
    assert auth_seen(c.evil) == ("Bearer " + TENANT_CRED, None)
    assert_evil_clean(c, "tenant credential")
    # The operator cannot put its credential back while the listener is there.
    p = c.gw.ctl_secret(SECRET, "endpoint", "set", "ep-op", check=False)
    assert p.returncode != 0, p.stdout
    assert c.gw.upstream_auth(c.ep) == TENANT_CRED
    expect(c.adm.delete("/api/v1/endpoints/%d/replicas/%d" % (c.ep, r["id"])), 200)
    c.gw.ctl_secret(SECRET, "endpoint", "set", "ep-op")
    assert c.gw.upstream_auth(c.ep) == SECRET
    assert c.gw.sql("SELECT upstream_auth_by FROM endpoints WHERE id = ?", c.ep) == [("operator",)]


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
