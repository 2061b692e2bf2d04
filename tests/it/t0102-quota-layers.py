#!/usr/bin/env python3
"""t0102-quota-layers: the tenant and user quota layers at admission (R-KEY-6): tenant
concurrency across the pool and monthly tokens, user requests per minute and daily tokens,
ANDed with the key's own limits. Each refuses at exactly its limit under concurrency, names
its layer and scope, gives back what earlier layers (and the key) took; the token layers
settle to the usage records and are rebuilt from them when the shared state is lost; a
model whose policy allows it gets a smaller max_tokens instead of a 429."""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, burst, run_tests, wait_for


class Ctx:
    pass


TENANTS = ("conc", "rpm", "give", "tok", "day", "shr", "bt", "bu")


def setup():
    c = Ctx()
    c.fake = Fake("layers")
    c.gw = Gateway("t0102", procs=2, threads=32)
    c.tenant, c.user = {}, {}
    for t in TENANTS:
        c.tenant[t] = c.gw.ctl("tenant", "add", t)["id"]
        add_endpoint(c.gw, "ep-" + t, t, [c.fake])
        c.gw.ctl("route", "add", "m", "ep-" + t, "--tenant", t)
        for u in ("a", "b"):
            c.user[t + u] = c.gw.ctl("user", "add", t + "-" + u, "--tenant", t, "--role", "member")["id"]
    # R-KEY-6 shrink: "shrinky" (the same backend model) may have its max_tokens shrunk.
    c.gw.ctl("route", "add", "shrinky", "ep-shr", "--tenant", "shr", "--target-model", "m")
    c.gw.ctl("policy", "set", "shrinky")
    write(c, "UPDATE model_policies SET shrink_max_tokens = 1 WHERE model = 'shrinky'")
    c.gw.start()
    return c


def teardown(c):
    if c:
        c.gw.stop()
        c.fake.stop()


def new_key(c, user, *limits):
    """A member key of user; live on every responder. The liveness probe is a models
    listing: one call, no tokens (the token layers start from nothing)."""
    k = c.gw.ctl("key", "add", "--user", user, *limits)
    wait_for(lambda: c.gw.request("GET", "/v1/models", key=k["key"]).status != 401, 3, what="key live")
    time.sleep(0.6)                 # every responder's poll (R-CFG-1)
    return k["key"]


def write(c, query, *params):
    """A committed write (the harness's sql() only reads)."""
    c.gw.sql_write(query, *params)


def set_quota(c, scope, target, **cols):
    """A quota layer row, straight into SQLite (sluicectl quota set is built elsewhere): the
    columns given, the others 0; an existing row is updated in place (same id, so the same
    shared counters). Responders pick it up within config.poll_ms."""
    col = {"tenant": "tenant_id", "user": "user_id"}[scope]
    vals = {k: cols.get(k, 0) for k in ("concurrency", "rpm", "daily_tokens", "monthly_tokens")}
    if c.gw.sql("SELECT id FROM quotas WHERE scope = ? AND %s = ?" % col, scope, target):
        write(c, "UPDATE quotas SET %s WHERE scope = ? AND %s = ?" % (", ".join("%s = ?" % k for k in vals), col),
                 *vals.values(), scope, target)
    else:
        write(c, "INSERT INTO quotas (scope, %s, %s) VALUES (?, ?, ?, ?, ?, ?)" % (col, ", ".join(vals)),
                 scope, target, *vals.values())
    time.sleep(0.7)


def check_429(r, code, scope, quota=False):
    """A layer's refusal, field by field (R-KEY-2 shape, R-KEY-6 scope)."""
    assert r.status == 429, r
    e = r.json()["error"]
    assert e["type"] == "rate_limit_error" and e["code"] == code and e["scope"] == scope, e
    for f in ("limit", "current", "remaining", "reset_at"):
        assert f in e, (f, e)
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", e["reset_at"]), e
    h = r.headers
    assert int(h["retry-after"]) >= 1 and int(h["x-ratelimit-limit"]) == e["limit"], h
    assert int(h["x-ratelimit-remaining"]) == e["remaining"], h
    if quota:
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$", h.get("x-quota-reset", "")), h
        assert h.get("x-should-retry") == "false", h
    return e


def body_len(content="hello", model="m", **extra):
    b = {"model": model, "messages": [{"role": "user", "content": content}]}
    b.update(extra)
    return len(json.dumps(b).encode())


# ---- tenant concurrency ----

def test_tenant_concurrency_is_exact_across_the_pool_and_shared_by_its_keys_R_KEY_6(c):
    """Limit 3, 12 slow requests at once over 2 responders and two keys of two users of the
    tenant: exactly 3 are served, 9 are refused TENANT_CONCURRENCY_EXCEEDED per_tenant;
    afterwards all 3 places are free again."""
    keys = [new_key(c, "conc-a"), new_key(c, "conc-b")]
    set_quota(c, "tenant", c.tenant["conc"], concurrency=3)
    slow = {"X-Fake-Behavior": "ttfb_ms=1500"}
    rs = burst(lambda i: c.gw.chat(keys[i % 2], headers=slow), 12)
    codes = sorted(getattr(r, "status", r) for r in rs)
    assert codes == [200] * 3 + [429] * 9, codes
    for r in rs:
        if r.status == 429:
            e = check_429(r, "TENANT_CONCURRENCY_EXCEEDED", "per_tenant")
            assert e["limit"] == 3 and e["current"] == 3 and e["remaining"] == 0, e
            assert "tenant" in e["message"], e
            assert r.headers["retry-after"] == "1", r.headers
    # Nothing leaked: three at once fit again, a fourth does not.
    rs = burst(lambda i: c.gw.chat(keys[i % 2], headers=slow), 3)
    assert [r.status for r in rs] == [200] * 3, rs
    # Another tenant is not limited by it.
    other = new_key(c, "rpm-b")
    rs = burst(lambda i: c.gw.chat(other, headers={"X-Fake-Behavior": "ttfb_ms=500"}), 5)
    assert [r.status for r in rs] == [200] * 5, rs


# ---- user requests per minute ----

def test_user_rpm_is_exact_under_concurrency_R_KEY_6(c):
    """rpm 5, 9 requests at once (two keys of the user): exactly 5 pass, 4 are refused
    USER_RPM_EXCEEDED per_user, Retry-After until the oldest leaves the minute."""
    keys = [new_key(c, "rpm-a"), new_key(c, "rpm-a")]
    set_quota(c, "user", c.user["rpma"], rpm=5)
    rs = burst(lambda i: c.gw.chat(keys[i % 2]), 9)
    codes = sorted(getattr(r, "status", r) for r in rs)
    assert codes == [200] * 5 + [429] * 4, codes
    for r in rs:
        if r.status == 429:
            e = check_429(r, "USER_RPM_EXCEEDED", "per_user")
            assert e["limit"] == 5 and e["current"] == 5, e
            assert 50 <= int(r.headers["retry-after"]) <= 60, r.headers
    # The other user of the tenant has a minute of its own.
    other = new_key(c, "rpm-b")
    assert all(c.gw.chat(other).status == 200 for _ in range(6))
    r = c.gw.chat(keys[0])
    check_429(r, "USER_RPM_EXCEEDED", "per_user")
    set_quota(c, "user", c.user["rpma"], rpm=0)


# ---- give-back ----

def test_a_later_layer_refusing_gives_back_the_earlier_ones_R_KEY_6(c):
    """tenant concurrency 1, user rpm 2, the key's own concurrency 1 and daily 4 (the probe
    was its first call). Refusals by the user's minute must not keep the tenant's place,
    the key's place or the key's calls: once the minute is lifted, the next request fits
    (exactly the key's fourth call) and the one after is the key's DAILY_LIMIT_EXCEEDED."""
    key = new_key(c, "give-a", "--concurrency", 1, "--daily", 4)
    set_quota(c, "tenant", c.tenant["give"], concurrency=1)
    set_quota(c, "user", c.user["givea"], rpm=2)
    assert [c.gw.chat(key).status for _ in range(2)] == [200, 200]
    for _ in range(3):
        check_429(c.gw.chat(key), "USER_RPM_EXCEEDED", "per_user")
    set_quota(c, "user", c.user["givea"], rpm=0)                # the minute lifted
    r = c.gw.chat(key)
    assert r.status == 200, r                                   # tenant place, key place, 4th call
    r = c.gw.chat(key)
    assert r.status == 429 and r.json()["error"]["code"] == "DAILY_LIMIT_EXCEEDED", r
    assert r.json()["error"]["current"] == 4, r.json()
    # The durable counter agrees: the refused calls were taken back there too.
    kid = c.gw.sql("SELECT id FROM api_keys WHERE user_id = ? ORDER BY id DESC LIMIT 1", c.user["givea"])[0][0]
    wait_for(lambda: c.gw.sql("SELECT calls FROM quota_counters WHERE key_id = ? AND period LIKE 'd:%'", kid)
             == [(4,)], 3, what="4 calls in SQLite")
    # A tenant token refusal gives back the tenant's place taken before it (the same
    # row, so the same counters).
    set_quota(c, "tenant", c.tenant["give"], concurrency=1, monthly_tokens=10)
    other = new_key(c, "give-b")
    for _ in range(3):
        check_429(c.gw.chat(other, max_tokens=50), "TENANT_MONTHLY_TOKEN_QUOTA_EXCEEDED", "per_tenant", quota=True)
    set_quota(c, "tenant", c.tenant["give"], concurrency=1)
    assert c.gw.chat(other).status == 200
    # A user token refusal gives back the user's minute and the tenant's place.
    set_quota(c, "user", c.user["giveb"], rpm=1, daily_tokens=10)
    for _ in range(3):
        check_429(c.gw.chat(other, max_tokens=50), "USER_DAILY_TOKEN_LIMIT_EXCEEDED", "per_user", quota=True)
    set_quota(c, "user", c.user["giveb"], rpm=1)
    assert c.gw.chat(other).status == 200                       # the minute's one request, the place
    check_429(c.gw.chat(other), "USER_RPM_EXCEEDED", "per_user")


# ---- token layers ----

REAL = {"X-Fake-Behavior": "chunks=2;prompt_tokens=3"}      # 5 tokens charged per request


def fill(c, key, limit, used0=0, **extra):
    """Sequential requests that each reserve want = prompt estimate + max_tokens and settle
    to 5: exactly those with used + want <= limit are admitted. Returns (admitted, 429)."""
    want = body_len(max_tokens=4, **extra) // 4 + 1 + 4
    expect = max(0, (limit - used0 - want) // 5 + 1)
    ok = 0
    while True:
        r = c.gw.chat(key, max_tokens=4, headers=REAL, **extra)
        if r.status != 200:
            break
        ok += 1
        assert ok <= expect, (ok, expect)
    assert ok == expect, (ok, expect, r)
    return ok, r


def test_tenant_monthly_tokens_refuse_at_the_limit_and_settle_R_KEY_6(c):
    """monthly_tokens 200 shared by the tenant's users: settled to the 5 tokens each request
    was charged (not the ~30 reserved), refused TENANT_MONTHLY_TOKEN_QUOTA_EXCEEDED when the
    next reservation no longer fits; the tenant's other user is refused as well."""
    keys = [new_key(c, "tok-a"), new_key(c, "tok-b")]
    set_quota(c, "tenant", c.tenant["tok"], monthly_tokens=200)
    ok, r = fill(c, keys[0], 200)
    e = check_429(r, "TENANT_MONTHLY_TOKEN_QUOTA_EXCEEDED", "per_tenant", quota=True)
    assert e["limit"] == 200 and e["current"] == 5 * ok and e["remaining"] == 200 - 5 * ok, e
    assert "monthly" in e["message"], e
    check_429(c.gw.chat(keys[1], max_tokens=4), "TENANT_MONTHLY_TOKEN_QUOTA_EXCEEDED", "per_tenant", quota=True)
    # A call that spends no tokens still passes.
    assert c.gw.request("GET", "/v1/models", key=keys[1]).status == 200
    c.tok_used = 5 * ok


def test_token_layers_are_exact_under_concurrency_R_KEY_6(c):
    """Reservations are taken whole under the layer's lock: of 10 slow requests at once,
    exactly as many as fit in the period are admitted (tenant month, then user day)."""
    want = body_len(max_tokens=4) // 4 + 1 + 4
    slow = {"X-Fake-Behavior": "ttfb_ms=1000;chunks=2;prompt_tokens=3"}
    for scope, tenant, user, code, sc in (("tenant", "bt", "bt-a", "TENANT_MONTHLY_TOKEN_QUOTA_EXCEEDED", "per_tenant"),
                                          ("user", "bu", "bu-a", "USER_DAILY_TOKEN_LIMIT_EXCEEDED", "per_user")):
        keys = [new_key(c, user), new_key(c, user)]
        target = c.tenant[tenant] if scope == "tenant" else c.user[user.replace("-", "")]
        set_quota(c, scope, target, **{"monthly_tokens" if scope == "tenant" else "daily_tokens": 3 * want + 2})
        rs = burst(lambda i: c.gw.chat(keys[i % 2], max_tokens=4, headers=slow), 10)
        codes = sorted(getattr(r, "status", r) for r in rs)
        assert codes == [200] * 3 + [429] * 7, (scope, codes)
        for r in rs:
            if r.status == 429:
                check_429(r, code, sc, quota=True)
        # Settled to 5 each: 15 used, room again for (3w + 2 - 15 - w) / 5 + 1 more.
        fill(c, keys[0], 3 * want + 2, 15)


def test_user_daily_tokens_refuse_at_the_limit_R_KEY_6(c):
    keys = [new_key(c, "day-a"), new_key(c, "day-b")]
    set_quota(c, "user", c.user["daya"], daily_tokens=150)
    ok, r = fill(c, keys[0], 150)
    e = check_429(r, "USER_DAILY_TOKEN_LIMIT_EXCEEDED", "per_user", quota=True)
    assert e["limit"] == 150 and e["current"] == 5 * ok, e
    assert "daily" in e["message"], e
    assert c.gw.chat(keys[1], max_tokens=4).status == 200           # the other user has its own day
    c.day_used = 5 * ok
    c.day_keys = keys


def test_token_layers_are_rebuilt_from_the_usage_records_R_KEY_6(c):
    """The shared state file lost with every responder: the tenant's month and the user's
    day are rebuilt from usage_events (what they charged), so the limits still hold."""
    tok = new_key(c, "tok-a")
    wait_for(lambda: c.gw.sql("SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM usage_events"
                              " WHERE tenant_id = ?", c.tenant["tok"]) == [(c.tok_used,)], 3, what="events written")
    wait_for(lambda: c.gw.sql("SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM usage_events"
                              " WHERE user_id = ?", c.user["daya"]) == [(c.day_used,)], 3, what="events written")
    c.gw.stop()
    os.unlink(os.path.join(c.gw.dir, "sluice.state"))
    c.gw.start()
    e = check_429(c.gw.chat(tok, max_tokens=4), "TENANT_MONTHLY_TOKEN_QUOTA_EXCEEDED", "per_tenant", quota=True)
    assert e["current"] == c.tok_used, (e, c.tok_used)
    e = check_429(c.gw.chat(c.day_keys[0], max_tokens=4), "USER_DAILY_TOKEN_LIMIT_EXCEEDED", "per_user", quota=True)
    assert e["current"] == c.day_used, (e, c.day_used)
    # Raised limits take the rebuilt counts as they are.
    set_quota(c, "user", c.user["daya"], daily_tokens=c.day_used + 100)
    fill(c, c.day_keys[0], c.day_used + 100, c.day_used)


# ---- shrink ----

def logged(c, rid):
    def find():
        try:
            with open(os.path.join(c.gw.dir, "access.log")) as f:
                for line in f:
                    if '"%s"' % rid in line:
                        return json.loads(line)
        except OSError:
            return None
    return wait_for(find, 3, what="access log line %s" % rid)


def test_shrink_max_tokens_instead_of_refusing_R_KEY_6(c):
    """user daily_tokens 300: a request for max_tokens 1000 of "shrinky" (policy
    shrink_max_tokens) is admitted with max_tokens = what is left minus the prompt estimate,
    which is what the upstream received; it says so (X-Degradation-Level, X-Max-Tokens-Shrunk,
    the access log). The same request of "m" (no such policy) is a 429."""
    key = new_key(c, "shr-a")
    set_quota(c, "user", c.user["shra"], daily_tokens=300)
    pe = body_len(model="shrinky", max_tokens=1000) // 4 + 1
    r = c.gw.chat(key, model="shrinky", max_tokens=1000, headers={"X-Request-Id": "shrink-1",
                                                                  "X-Fake-Behavior": "chunks=2;prompt_tokens=3"})
    assert r.status == 200, r
    sent = json.loads(c.fake.stats()["last"]["body"])
    assert sent["max_tokens"] == 300 - pe, (sent, pe)
    assert r.headers.get("x-degradation-level") == "3", r.headers
    assert r.headers.get("x-max-tokens-shrunk") == str(300 - pe), r.headers
    line = logged(c, "shrink-1")
    assert line.get("degraded") == "max_tokens" and line.get("max_tokens") == 300 - pe, line
    # Settled to 5: 295 left. Without the policy: refused.
    r = c.gw.chat(key, max_tokens=1000)
    e = check_429(r, "USER_DAILY_TOKEN_LIMIT_EXCEEDED", "per_user", quota=True)
    assert e["current"] == 5, e
    # An Anthropic caller (max_tokens required) is shrunk the same way, translated upstream.
    body = {"model": "shrinky", "max_tokens": 2000, "messages": [{"role": "user", "content": "hello"}]}
    pe = len(json.dumps(body).encode()) // 4 + 1
    r = c.gw.request("POST", "/v1/messages", body, key=key, headers={"anthropic-version": "2023-06-01",
                                                                    "X-Fake-Behavior": "chunks=2;prompt_tokens=3"})
    assert r.status == 200, r
    sent = json.loads(c.fake.stats()["last"]["body"])
    assert sent["max_tokens"] == 295 - pe, (sent, pe)
    assert r.headers.get("x-degradation-level") == "3", r.headers
    # The floor: more than 16 tokens must be left after the prompt, or it is refused even
    # with the policy.
    used = check_429(c.gw.chat(key, max_tokens=1000), "USER_DAILY_TOKEN_LIMIT_EXCEEDED", "per_user")["current"]
    pe = body_len(model="shrinky", max_tokens=1000) // 4 + 1
    set_quota(c, "user", c.user["shra"], daily_tokens=used + pe + 16)
    r = c.gw.chat(key, model="shrinky", max_tokens=1000)
    check_429(r, "USER_DAILY_TOKEN_LIMIT_EXCEEDED", "per_user", quota=True)
    set_quota(c, "user", c.user["shra"], daily_tokens=used + pe + 17)
    r = c.gw.chat(key, model="shrinky", max_tokens=1000)
    assert r.status == 200 and r.headers.get("x-max-tokens-shrunk") == "17", r.headers
    assert json.loads(c.fake.stats()["last"]["body"])["max_tokens"] == 17
    # A request that fits is not shrunk.
    set_quota(c, "user", c.user["shra"], daily_tokens=100000)
    r = c.gw.chat(key, model="shrinky", max_tokens=7)
    assert r.status == 200 and "x-degradation-level" not in r.headers, r.headers
    assert json.loads(c.fake.stats()["last"]["body"])["max_tokens"] == 7


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
