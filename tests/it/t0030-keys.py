#!/usr/bin/env python3
"""t0030-keys: member-key limits exact across the whole responder pool (R-KEY-0..5, R-SEC-6)."""
import json
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import harness
from harness import Fake, Gateway, add_endpoint, run_tests, wait_for


class Ctx:
    pass


def setup():
    c = Ctx()
    c.fake = Fake("keys")
    c.gw = Gateway("t0030", procs=2, threads=32)
    c.gw.ctl("tenant", "add", "acme")
    c.gw.ctl("user", "add", "alice", "--tenant", "acme", "--role", "member")
    add_endpoint(c.gw, "ep", "acme", [c.fake], algorithm="least_connections")
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.gw.start()
    return c


def teardown(c):
    if c:
        c.gw.stop()
        c.fake.stop()


def new_key(c, *limits):
    k = c.gw.ctl("key", "add", "--user", "alice", *limits)
    listed = [x for x in c.gw.ctl("list", "keys")["keys"] if x["id"] == k["id"]][0]
    # The key must be usable (config applied) before a test relies on it.
    wait_for(lambda: c.gw.chat(k["key"], headers={"X-Fake-Behavior": "chunks=1"}).status != 401, 3, what="key live")
    # One responder has the new snapshot; give every other one its poll interval too (R-CFG-1).
    time.sleep(0.6)
    return k["key"], k["id"], listed


def burst(fn, n):
    out = [None] * n
    def one(i):
        try:
            out[i] = fn(i)
        except Exception as e:
            out[i] = e
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return out


def check_429(r, code, quota=False):
    """Every 429 field by field against SPEC §12 (R-KEY-2)."""
    assert r.status == 429, r
    e = r.json()["error"]
    for f in ("message", "type", "code", "limit", "current", "remaining", "scope", "reset_at"):
        assert f in e, (f, e)
    assert e["type"] == "rate_limit_error" and e["code"] == code and e["scope"] == "per_api_key", e
    assert isinstance(e["limit"], int) and isinstance(e["current"], int) and e["remaining"] >= 0, e
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", e["reset_at"]), e
    h = r.headers
    for name in ("retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
        assert name in h, (name, h)
    assert int(h["retry-after"]) >= 1 and int(h["x-ratelimit-limit"]) == e["limit"], h
    if quota:
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$", h.get("x-quota-reset", "")), h
        assert h.get("x-should-retry") == "false", h
    return e


def test_limits_listed_and_unlimited_key_untouched_R_KEY_1(c):
    key, kid, listed = new_key(c, "--qps", 7, "--concurrency", 3, "--daily", 100, "--monthly", 1000,
                               "--tpm", 5000, "--monthly-tokens", 90000)
    assert (listed["qps_limit"], listed["concurrency_limit"], listed["daily_limit"], listed["monthly_quota"],
            listed["tpm_limit"], listed["monthly_token_quota"]) == (7, 3, 100, 1000, 5000, 90000), listed
    key0, kid0, _ = new_key(c)
    for _ in range(30):
        assert c.gw.chat(key0).status == 200
    # R-KEY-1: no limits, no quota rows.
    assert c.gw.sql("SELECT count(*) FROM quota_counters WHERE key_id = ?", kid0)[0][0] == 0


def test_concurrency_3_across_the_pool_R_KEY_3(c):
    key, kid, _ = new_key(c, "--concurrency", 3)
    c.fake.reset()
    res = burst(lambda i: c.gw.chat(key, headers={"X-Fake-Behavior": "ttfb_ms=600"}, content="c%d" % i), 50)
    ok = [r for r in res if getattr(r, "status", 0) == 200]
    refused = [r for r in res if getattr(r, "status", 0) == 429]
    assert len(ok) + len(refused) == 50, res
    st = c.fake.stats()
    assert st["max_inflight"] <= 3, st
    assert len(ok) >= 3, len(ok)
    check_429(refused[0], "CONCURRENCY_EXCEEDED")
    print("   %d admitted, %d refused, stand-in max in flight %d" % (len(ok), len(refused), st["max_inflight"]))


def test_qps_10_in_any_one_second_window_R_KEY_3(c):
    key, kid, _ = new_key(c, "--qps", 10)
    t_end = time.time() + 2.5
    def worker(i):
        codes = []
        while time.time() < t_end:
            r = c.gw.chat(key, headers={"X-Request-Id": "qps-%d-%d" % (i, len(codes))})
            codes.append(r.status)
            if r.status == 429:
                check_429(r, "QPS_EXCEEDED")
        return codes
    res = burst(worker, 6)
    admitted = sum(x.count(200) for x in res)
    time.sleep(0.6)
    ts = [row[0] for row in c.gw.sql("SELECT ts_ms FROM usage_events WHERE key_id = ? AND status = 200 ORDER BY ts_ms", kid)]
    assert len(ts) == admitted + 1, (len(ts), admitted)   # + the liveness probe of new_key
    worst = max(sum(1 for t in ts if s <= t < s + 1000) for s in ts)
    assert worst <= 10, "an 1-second window admitted %d" % worst
    assert admitted >= 20, admitted
    print("   %d admitted in 2.5 s, busiest one-second window %d" % (admitted, worst))


def test_daily_limit_exact_under_200_concurrent_R_KEY_4(c):
    key, kid, _ = new_key(c, "--daily", 25)
    res = burst(lambda i: c.gw.chat(key, content="d%d" % i), 200)
    ok = [r for r in res if getattr(r, "status", 0) == 200]
    refused = [r for r in res if getattr(r, "status", 0) == 429]
    # The liveness probe of new_key was call 1 of 25.
    assert len(ok) == 24 and len(refused) == 176, (len(ok), len(refused))
    e = check_429(refused[0], "DAILY_LIMIT_EXCEEDED", quota=True)
    assert e["limit"] == 25 and e["current"] == 25 and e["remaining"] == 0, e
    # Durable within the usage writer's flush interval, and exact there too.
    total = lambda: c.gw.sql("SELECT sum(calls) FROM quota_counters WHERE key_id = ? AND period LIKE 'd:%'", kid)[0][0]
    wait_for(lambda: total() == 25, 3, what="25 calls in SQLite")
    time.sleep(0.5)
    assert total() == 25, total()


def test_every_entry_point_counts_R_KEY_0(c):
    key, kid, _ = new_key(c, "--daily", 3)   # the liveness probe of new_key is call 1
    assert c.gw.request("GET", "/api/v1/proxy/ep/echo", key=key).status == 200
    assert c.gw.request("GET", "/v1/models", key=key).status == 200
    assert c.gw.request("POST", "/v1/embeddings", {"model": "m", "input": "x"}, key=key).status == 429
    assert c.gw.request("GET", "/api/v1/proxy/ep/echo", key=key).status == 429


def test_tpm_pre_deduction_and_settlement_R_KEY_5(c):
    key, kid, _ = new_key(c, "--tpm", 200)
    # Each request reserves its prompt estimate + max_tokens 80; the stand-in then uses 3.
    res = burst(lambda i: c.gw.chat(key, headers={"X-Fake-Behavior": "ttfb_ms=700"}, max_tokens=80), 6)
    ok = [r for r in res if r.status == 200]
    refused = [r for r in res if r.status == 429]
    assert 1 <= len(ok) <= 2 and refused, [r.status for r in res]
    check_429(refused[0], "TPM_EXCEEDED")
    # Settlement gave the unused reservation back: sequential requests pass again at once.
    for _ in range(5):
        r = c.gw.chat(key, max_tokens=80)
        assert r.status == 200, r
    # Streaming requests settle from the usage chunk as well.
    st, _, chunks = c.gw.stream_raw(key, {"model": "m", "stream": True, "max_tokens": 80,
                                          "messages": [{"role": "user", "content": "s"}]})
    assert st == 200
    assert c.gw.chat(key, max_tokens=80).status == 200


def test_monthly_tokens_settled_to_actual_R_KEY_5(c):
    key, kid, _ = new_key(c, "--monthly-tokens", 60)
    # The probe of new_key reserved up to the whole quota (no max_tokens: 1024);
    # its settlement is written by the usage writer within a flush interval.
    time.sleep(0.6)
    ok = 0
    for i in range(30):
        r = c.gw.chat(key, max_tokens=5, content="one two")
        if r.status == 429:
            check_429(r, "MONTHLY_TOKEN_QUOTA_EXCEEDED", quota=True)
            break
        ok += 1
    assert 3 <= ok < 30, ok
    def settled():
        used = c.gw.sql("SELECT total(prompt_tokens + completion_tokens) FROM usage_events WHERE key_id = ? AND status = 200", kid)[0][0]
        row = c.gw.sql("SELECT tokens FROM quota_counters WHERE key_id = ? AND period LIKE 'm:%'", kid)
        return row and row[0][0] == int(used) and used
    wait_for(settled, 3, what="monthly tokens equal to the real usage")


def test_client_leaving_mid_stream_is_charged_R_KEY_5(c):
    """What was produced before the client left is charged, not refunded (R-KEY-5, R-SSE-3)."""
    import http.client
    key, kid, _ = new_key(c, "--monthly-tokens", 1000000)
    time.sleep(0.6)                     # the liveness probe's settlement
    tokens = lambda: c.gw.sql("SELECT tokens FROM quota_counters WHERE key_id = ? AND period LIKE 'm:%'", kid)[0][0]
    before = tokens()
    conn = http.client.HTTPConnection("127.0.0.1", c.gw.port, timeout=10)
    conn.request("POST", "/v1/chat/completions",
                 body=json.dumps({"model": "m", "stream": True, "max_tokens": 500,
                                  "messages": [{"role": "user", "content": "long answer"}]}),
                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json",
                          "X-Request-Id": "leave-1", "X-Fake-Behavior": "chunks=60;gap_ms=40"})
    resp = conn.getresponse()
    got = b""
    while got.count(b"data: ") < 10:
        got += resp.read1(4096)
    conn.close()
    row = wait_for(lambda: c.gw.usage_events("request_id = 'leave-1'"), 8, what="disconnect row")[0]
    assert row["status"] == 499 and row["completion_tokens"] >= 9, row
    charged = row["prompt_tokens"] + row["completion_tokens"]
    wait_for(lambda: tokens() - before == charged, 3, what="monthly tokens charged %d" % charged)


def test_paired_refund_R_KEY_5(c):
    """A TPM refusal after the daily count rolls the daily count back."""
    key, kid, _ = new_key(c, "--daily", 100, "--tpm", 150)
    before = c.gw.sql("SELECT calls FROM quota_counters WHERE key_id = ? AND period LIKE 'd:%'", kid)[0][0]
    res = burst(lambda i: c.gw.chat(key, headers={"X-Fake-Behavior": "ttfb_ms=600"}, max_tokens=100), 5)
    ok = sum(1 for r in res if r.status == 200)
    refused = sum(1 for r in res if r.status == 429)
    assert refused >= 3, [r.status for r in res]
    # The counters live in the shared state; SQLite has them within a flush interval.
    daily = lambda: c.gw.sql("SELECT calls FROM quota_counters WHERE key_id = ? AND period LIKE 'd:%'", kid)[0][0]
    wait_for(lambda: daily() - before == ok, 3, what="daily calls %d + %d" % (before, ok))
    time.sleep(0.5)
    assert daily() - before == ok, (before, daily(), ok)


def test_kill9_returns_slots_R_KEY_3(c):
    # The state file's slots come back when the dead rows are reaped (about a second); a
    # Redis state's when their lease, no longer renewed, runs out (state_lease_seconds).
    bound = 8
    if harness.on_redis():
        c.gw.ctl("settings", "set", "state_lease_seconds", "3")
        time.sleep(0.8)
        bound = 3 + 5               # the lease, and the pool started again
    key, kid, _ = new_key(c, "--concurrency", 2)
    res = []
    ts = [threading.Thread(target=lambda: res.append(c.gw.chat(key, headers={"X-Fake-Behavior": "ttfb_ms=8000"}).status
                                                      if True else None)) for _ in range(2)]
    for t in ts:
        t.daemon = True
        t.start()
    time.sleep(0.5)
    wait_for(lambda: c.gw.chat(key).status == 429, 6, interval=0.2, what="both slots taken")
    for pid in c.gw.responder_pids():
        os.kill(pid, signal.SIGKILL)
    t0 = time.time()
    wait_for(lambda: c.gw.chat(key).status == 200, bound, interval=0.2, what="slots back after kill -9")
    print("   slots back %.1f s after kill -9" % (time.time() - t0))
    if harness.on_redis():
        c.gw.ctl("settings", "set", "state_lease_seconds", "10")


def test_db_unwritable_fails_open_R_KEY_4(c):
    """Item 9: a locked database never stalls a metered request (quotas are counted in the
    shared state; SQLite gets them from the usage writer once it answers again)."""
    key, kid, _ = new_key(c, "--daily", 1000)
    time.sleep(0.5)
    daily = lambda: c.gw.sql("SELECT calls FROM quota_counters WHERE key_id = ? AND period LIKE 'd:%'", kid)[0][0]
    before = daily()
    with c.gw.write_lock(exclusive=True):   # nobody else can write now
        for i in range(5):
            r = c.gw.chat(key, content="while locked %d" % i)
            assert r.status == 200, r
            assert r.elapsed < 0.5, "a metered request waited %.2f s on the locked database" % r.elapsed
    # Reconciled: the calls made while the database was locked are in SQLite now.
    wait_for(lambda: daily() - before == 5, 5, what="the locked-time calls written back")


def test_auth_failures_slowed_R_SEC_6():
    gw = Gateway("t0030b", procs=1, threads=4,
                 conf={"auth": "key_cache_ms = 30000; fail_limit = 5; fail_window_ms = 60000;"})
    gw.start()
    try:
        codes = [gw.request("GET", "/v1/models", key="sk-tenant-nope%d" % i).status for i in range(8)]
        assert codes[:5] == [401] * 5 and codes[5:] == [429] * 3, codes
        r = gw.request("GET", "/v1/models", key="sk-tenant-nope")
        assert r.status == 429 and int(r.headers["retry-after"]) >= 1, r
        assert r.json()["error"]["code"] == "too_many_auth_failures"
    finally:
        gw.stop()


if __name__ == "__main__":
    ns = dict(globals())
    standalone = ns.pop("test_auth_failures_slowed_R_SEC_6")
    def test_zz_auth_failures_slowed_R_SEC_6(c):
        standalone()
    ns["test_zz_auth_failures_slowed_R_SEC_6"] = test_zz_auth_failures_slowed_R_SEC_6
    run_tests(ns, setup, teardown)
