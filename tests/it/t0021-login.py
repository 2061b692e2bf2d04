#!/usr/bin/env python3
"""t0021-login: login, sessions, CSRF, logout, member keys on the API, and secrets that never
leak (R-ADM-2, R-AUTH-1, R-SEC-1, R-SEC-6, R-SEC-7).

Fixed interfaces: POST /api/v1/auth/login {"username","password"} -> 200, cookie sluice_session
and {"csrf_token"}; writes need X-CSRF-Token; POST /api/v1/auth/logout; GET /api/v1/auth/me;
a member key in Authorization: Bearer works without CSRF."""
import hashlib
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Gateway, http_request, run_tests

TTL = 600
PASSWORDS = {"oper": "oper-Secret-pw-1", "ann": "ann-Secret-pw-2", "bob": "bob-Secret-pw-3",
             "carl": "carl-Secret-pw-4"}


class Ctx:
    pass


def add_user(c, name, tenant, role):
    p = subprocess.run(c.gw.ctl_argv() + ["--json", "user", "add", name, "--tenant", tenant, "--role", role,
                        "--password-stdin"], input=PASSWORDS[name] + "\n", capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def setup():
    c = Ctx()
    c.gw = Gateway("t0021", procs=1, threads=4,
                   conf={"admin": "session_ttl_s = %d; max_body_bytes = 65536; login_max_failures = 3;"
                                  " login_window_s = 300; login_lockout_s = 30; endpoint_test_timeout_ms = 5000;" % TTL})
    c.gw.ctl("tenant", "add", "acme")
    c.users = {"oper": add_user(c, "oper", "default", "operator"), "ann": add_user(c, "ann", "acme", "admin"),
               "bob": add_user(c, "bob", "acme", "member"), "carl": add_user(c, "carl", "acme", "member")}
    c.secrets = set(PASSWORDS.values())   # R-SEC-1: must never appear where checked at the end
    c.bodies = []                          # every answer body except a new key's creation
    c.gw.start()
    return c


def teardown(c):
    if c:
        c.gw.stop()


def req(c, method, path, body=None, headers=None, keep=True):
    r = http_request(c.gw.port, method, path, body, headers)
    if keep:
        c.bodies.append(r.body)
    assert r.headers.get("cache-control") == "no-store" and r.headers.get("content-type") == "application/json"
    return r


def login(c, name, password=None):
    return req(c, "POST", "/api/v1/auth/login", {"username": name, "password": password or PASSWORDS[name]})


def session(c, name):
    r = login(c, name)
    assert r.status == 200, r
    token = r.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    c.secrets.add(token)
    return token, r.json()["csrf_token"]


def cookie_hdr(token, csrf=None):
    h = {"Cookie": "sluice_session=" + token}
    if csrf is not None:
        h["X-CSRF-Token"] = csrf
    return h


def test_login_cookie_flags_R_ADM_2(c):
    """200, cookie HttpOnly + SameSite=Strict + Path=/, CSRF token in the body, only a hash stored."""
    r = login(c, "ann")
    assert r.status == 200, r
    cookie = r.headers["set-cookie"]
    parts = [p.strip() for p in cookie.split(";")]
    name, token = parts[0].split("=", 1)
    c.secrets.add(token)
    assert name == "sluice_session" and token.startswith("ses-") and len(token) >= 40, cookie
    assert "HttpOnly" in parts and "SameSite=Strict" in parts and "Path=/" in parts, cookie
    assert "Max-Age=%d" % TTL in parts and "Secure" not in parts, cookie   # plain http here
    body = r.json()
    assert len(body["csrf_token"]) >= 32 and body["user"]["name"] == "ann" and body["user"]["role"] == "admin"
    assert token not in r.body.decode(), "the session token is only in the cookie"
    rows = c.gw.sql("SELECT token_hash, user_id, csrf_token, expires_at - created_at FROM sessions")
    mine = [x for x in rows if x[0] == hashlib.sha256(token.encode()).hexdigest()]
    assert mine and mine[0][1] == c.users["ann"]["id"] and mine[0][2] == body["csrf_token"], rows
    assert mine[0][3] == TTL, "session lifetime comes from admin.session_ttl_s"
    assert not any(token in str(x) for x in rows), "token stored in clear"
    me = req(c, "GET", "/api/v1/auth/me", headers=cookie_hdr(token))
    assert me.status == 200 and me.json()["user"]["name"] == "ann" and me.json()["auth"] == "session", me
    assert me.json()["csrf_token"] == body["csrf_token"], "the page gets its CSRF token back after a reload"
    assert c.gw.sql("SELECT password_hash FROM users WHERE name = 'ann'")[0][0].startswith("$y$")


def test_wrong_password_and_unknown_user_R_ADM_2(c):
    """Wrong password and unknown user get the same 401, and no cookie."""
    a = login(c, "bob", "not-the-password")
    b = login(c, "nobody-here", "whatever-pw")
    for r in (a, b):
        assert r.status == 401 and "set-cookie" not in r.headers, r
        assert r.json()["error"]["code"] == "invalid_credentials", r.json()
    assert a.json()["error"]["message"] == b.json()["error"]["message"]
    r = req(c, "POST", "/api/v1/auth/login", {"username": "bob"})
    assert r.status == 400 and r.json()["error"]["param"] == "password", r
    r = req(c, "POST", "/api/v1/auth/login", b'{"username": "bob", "password": 12345678}')
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_type", r
    assert login(c, "bob").status == 200     # the failures above did not lock bob (limit 3)


def test_login_failures_slowed_R_SEC_6(c):
    """After admin.login_max_failures wrong passwords the name waits (429, Retry-After), right password or not."""
    for i in range(3):
        assert login(c, "carl", "wrong-%d" % i).status == 401
    r = login(c, "carl")
    assert r.status == 429 and int(r.headers["retry-after"]) > 0, r
    assert r.json()["error"]["code"] == "too_many_login_failures" and "set-cookie" not in r.headers
    row = c.gw.sql("SELECT failures, locked_until > strftime('%s','now') FROM login_failures WHERE scope = 'u:carl'")
    assert row == [(3, 1)], row
    assert login(c, "bob").status == 200, "another name from the same address is not locked"
    # The lock ends: move it into the past as time would.
    c.gw.sql_write("UPDATE login_failures SET locked_until = 0, first_at = 0 WHERE scope = 'u:carl'")
    assert login(c, "carl").status == 200


def test_csrf_required_on_writes_R_ADM_2(c):
    """Cookie writes need X-CSRF-Token (constant-time compare); reads do not."""
    token, csrf = session(c, "oper")
    n = c.gw.sql("SELECT COUNT(*) FROM tenants")[0][0]
    r = req(c, "POST", "/api/v1/tenants", {"name": "no-csrf"}, cookie_hdr(token))
    assert r.status == 403 and r.json()["error"]["code"] == "csrf_token_missing", r
    r = req(c, "POST", "/api/v1/tenants", {"name": "bad-csrf"}, cookie_hdr(token, csrf[:-1] + ("A" if csrf[-1] != "A" else "B")))
    assert r.status == 403 and r.json()["error"]["code"] == "csrf_token_invalid", r
    r = req(c, "POST", "/api/v1/tenants", {"name": "short-csrf"}, cookie_hdr(token, "x"))
    assert r.status == 403, r
    _, other_csrf = session(c, "ann")
    r = req(c, "POST", "/api/v1/tenants", {"name": "other-csrf"}, cookie_hdr(token, other_csrf))
    assert r.status == 403, "another session's token is not this one's"
    assert c.gw.sql("SELECT COUNT(*) FROM tenants")[0][0] == n, "refused writes wrote nothing"
    r = req(c, "DELETE", "/api/v1/tenants/1", None, cookie_hdr(token))
    assert r.status == 403, r
    r = req(c, "GET", "/api/v1/tenants", None, cookie_hdr(token))
    assert r.status == 200, r
    r = req(c, "POST", "/api/v1/tenants", {"name": "with-csrf"}, cookie_hdr(token, csrf))
    assert r.status == 200 and c.gw.sql("SELECT COUNT(*) FROM tenants WHERE name = 'with-csrf'") == [(1,)], r


def test_expired_session_R_ADM_2(c):
    """A session past expires_at is refused (401 session_expired), everywhere."""
    token, csrf = session(c, "bob")
    assert req(c, "GET", "/api/v1/auth/me", headers=cookie_hdr(token)).status == 200
    c.gw.sql_write("UPDATE sessions SET expires_at = strftime('%s','now') - 1 WHERE token_hash = ?",
                   hashlib.sha256(token.encode()).hexdigest())
    for h in (cookie_hdr(token), {"Authorization": "Bearer " + token}):
        r = req(c, "GET", "/api/v1/auth/me", headers=h)
        assert r.status == 401 and r.json()["error"]["code"] == "session_expired", r


def test_logout_R_ADM_2(c):
    """Logout (a write: CSRF too) ends the session and clears the cookie."""
    token, csrf = session(c, "bob")
    r = req(c, "POST", "/api/v1/auth/logout", None, cookie_hdr(token))
    assert r.status == 403, "logout is a write"
    r = req(c, "POST", "/api/v1/auth/logout", None, cookie_hdr(token, csrf))
    assert r.status == 200 and r.json() == {"ok": True}, r
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("sluice_session=;") and "Max-Age=0" in cookie and "HttpOnly" in cookie, cookie
    assert c.gw.sql("SELECT COUNT(*) FROM sessions WHERE token_hash = ?",
                    hashlib.sha256(token.encode()).hexdigest()) == [(0,)]
    r = req(c, "GET", "/api/v1/auth/me", headers=cookie_hdr(token))
    assert r.status == 401 and r.json()["error"]["code"] == "not_authenticated", r
    audit = c.gw.sql("SELECT actor, action FROM audit_log WHERE object_type = 'session' ORDER BY id")
    assert ("bob", "login") in audit and ("bob", "logout") in audit, audit


def test_password_change_ends_sessions_R_ADM_2(c):
    """Changing a user's password (or role) ends that user's sessions."""
    token, _ = session(c, "carl")
    oper, oper_csrf = session(c, "oper")
    r = req(c, "PUT", "/api/v1/users/%d" % c.users["carl"]["id"], {"password": "carl-New-pw-5"},
            cookie_hdr(oper, oper_csrf))
    c.secrets.add("carl-New-pw-5")
    assert r.status == 200, r
    assert req(c, "GET", "/api/v1/auth/me", headers=cookie_hdr(token)).status == 401
    assert login(c, "carl").status == 401 and login(c, "carl", "carl-New-pw-5").status == 200


def test_member_key_on_api_R_AUTH_1(c):
    """A member key in Authorization: Bearer works on the API without CSRF; others do not."""
    oper, oper_csrf = session(c, "oper")
    r = http_request(c.gw.port, "POST", "/api/v1/tenant/api-keys", {"user": "bob", "name": "api"},
                     cookie_hdr(oper, oper_csrf))          # the creation answer is the one allowed place
    assert r.status == 200, r
    key = r.json()["key"]
    c.secrets.add(key)
    bearer = {"Authorization": "Bearer " + key}
    me = req(c, "GET", "/api/v1/auth/me", headers=bearer)
    assert me.status == 200 and me.json()["auth"] == "key" and me.json()["user"]["name"] == "bob", me
    assert "csrf_token" not in me.json()
    r = http_request(c.gw.port, "POST", "/api/v1/tenant/api-keys", {"name": "made-by-key"}, bearer)
    assert r.status == 200 and r.json()["user"] == "bob", r                  # no CSRF needed
    c.secrets.add(r.json()["key"])
    actor = c.gw.sql("SELECT actor FROM audit_log WHERE object_type = 'key' ORDER BY id DESC LIMIT 1")[0][0]
    assert actor == "bob (key %d)" % me.json()["key_id"], actor
    # Revoked key, endpoint key, junk: 401.
    kid = me.json()["key_id"]
    assert req(c, "DELETE", "/api/v1/tenant/api-keys/%d" % kid, None, bearer).status == 200
    r = req(c, "GET", "/api/v1/auth/me", headers=bearer)
    assert r.status == 401 and r.json()["error"]["code"] == "invalid_api_key", r
    ep = c.gw.ctl("endpoint", "add", "ep-login", "--tenant", "acme")
    c.secrets.add(ep["key"])
    r = req(c, "GET", "/api/v1/auth/me", headers={"Authorization": "Bearer " + ep["key"]})
    assert r.status == 401 and "member key" in r.json()["error"]["message"], r
    r = req(c, "GET", "/api/v1/auth/me", headers={"Authorization": "Bearer sk-tenant-" + "x" * 40})
    assert r.status == 401, r
    # A session token as a bearer credential (how the data plane takes it, R-AUTH-1): no CSRF.
    tok, _ = session(c, "ann")
    r = req(c, "POST", "/api/v1/tenant/api-keys", {"user": "bob", "name": "by-bearer-session"},
            {"Authorization": "Bearer " + tok}, keep=False)
    assert r.status == 200, r
    c.secrets.add(r.json()["key"])


def test_unauthenticated_R_SEC_8(c):
    """No credential: 401 on every resource, login needs none."""
    for method, path in (("GET", "/api/v1/tenants"), ("GET", "/api/v1/auth/me"), ("POST", "/api/v1/tenants"),
                         ("POST", "/api/v1/auth/logout"), ("GET", "/api/v1/tenant/usage")):
        r = req(c, method, path, {} if method == "POST" else None)
        assert r.status == 401 and r.json()["error"]["code"] == "not_authenticated", (path, r)


def test_no_secret_anywhere_R_SEC_1(c):
    """Passwords, session tokens and keys appear in no answer (but a new key's), log line or audit record."""
    blobs = [b.decode(errors="replace") for b in c.bodies]
    for name in os.listdir(c.gw.dir):
        if name.endswith(".log") or name.endswith(".out"):
            with open(os.path.join(c.gw.dir, name), errors="replace") as f:
                blobs.append(f.read())
    blobs += [json.dumps(row) for row in c.gw.sql("SELECT * FROM audit_log")]
    blobs += [json.dumps(row) for row in c.gw.sql("SELECT token_hash, csrf_token FROM sessions")]
    leaks = [(s, i) for s in c.secrets for i, b in enumerate(blobs) if s in b]
    assert not leaks, "secrets found: %r" % [(s[:12], i) for s, i in leaks]
    assert len(c.secrets) >= 8 and len(c.bodies) > 20, (len(c.secrets), len(c.bodies))


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
