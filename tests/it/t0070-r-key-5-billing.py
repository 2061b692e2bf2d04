#!/usr/bin/env python3
"""t0070-r-key-5-billing: correct to the token (R-KEY-5, R-USE-1, R-SEC-5): max_tokens is
range-checked before any arithmetic, a request larger than the whole TPM bucket is refused for
good, monthly token reservations are settled before the next request, usage is always asked
of the upstream, an upstream without usage is billed from what was relayed, and a login
session is limited by its user's key ceiling."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, http_request, run_tests, sqlite_only, wait_for

BIG = 9223372036854775000        # near INT64_MAX


class Ctx:
    pass


def setup():
    c = Ctx()
    c.fake = Fake("bill")
    c.gw = Gateway("t0070", procs=2, threads=16,
                   conf={"limits": "max_body_bytes = 65536; max_response_bytes = 67108864; max_sse_event_bytes = 4194304;"})
    c.gw.ctl("tenant", "add", "acme")
    c.gw.ctl("user", "add", "alice", "--tenant", "acme", "--role", "member")
    p = subprocess.run(c.gw.ctl_argv() + ["--json", "user", "add", "bob", "--tenant", "acme", "--role", "member",
                        "--password-stdin"], input="bob-Secret-pw-9\n", capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    c.bob = json.loads(p.stdout)["id"]
    c.gw.ctl("user", "ceiling", "bob", "--daily", 3)
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.gw.ctl("route", "add", "capped", "ep", "--tenant", "acme", "--target-model", "m")
    c.gw.ctl("policy", "set", "capped", "--max-output", 100)
    c.gw.start()
    return c


def teardown(c):
    if c:
        c.gw.stop()
        c.fake.stop()


def new_key(c, *limits):
    k = c.gw.ctl("key", "add", "--user", "alice", *limits)
    wait_for(lambda: c.gw.chat(k["key"], max_tokens=1, headers={"X-Fake-Behavior": "chunks=1"}).status != 401, 3,
             what="key live")
    time.sleep(0.6)                 # every responder's poll (R-CFG-1)
    return k["key"], k["id"]


def counters(c, kid):
    return c.gw.sql("SELECT period, calls, tokens, typeof(calls), typeof(tokens) FROM quota_counters"
                    " WHERE key_id = ?", kid)


def test_huge_max_tokens_is_refused_before_arithmetic_R_KEY_5(c):
    """Item 3: max_tokens near INT64_MAX used to overflow the reservation, admit past the
    limits and store a REAL in the quota counter; now it is a 400 with param, and nothing is
    counted."""
    key, kid = new_key(c, "--tpm", 5000, "--monthly-tokens", 100000)
    before = counters(c, kid)
    for field in ("max_tokens", "max_completion_tokens"):
        r = c.gw.chat(key, **{field: BIG})
        assert r.status == 400, r
        e = r.json()["error"]
        assert e["code"] == "invalid_value" and e["param"] == field, e
    r = c.gw.chat(key, max_tokens=1000001)                    # limits.max_tokens_cap
    assert r.status == 400 and r.json()["error"]["param"] == "max_tokens", r
    assert c.gw.chat(key, max_tokens=1000).status == 200
    time.sleep(0.5)
    after = counters(c, kid)
    assert all(row[3] == "integer" and row[4] == "integer" for row in after), after
    month = [row for row in after if row[0].startswith("m:")][0]
    assert 0 < month[2] < 2000, (before, after)               # only the real request, settled
    # The schema itself refuses a non-integer counter (SQLite's columns take any type unless a
    # CHECK says otherwise; PostgreSQL's bigint cannot hold one, it rounds an assigned 1.5).
    if sqlite_only("quota_counters' CHECK on typeof(tokens)"):
        try:
            c.gw.sql("UPDATE quota_counters SET tokens = 1.5 WHERE key_id = ?", kid)
            raised = False
        except Exception:
            raised = True
        assert raised, "quota_counters accepted a REAL"


def test_model_max_output_bounds_max_tokens_R_KEY_5(c):
    key, _ = new_key(c)
    assert c.gw.chat(key, model="capped", max_tokens=100).status == 200
    r = c.gw.chat(key, model="capped", max_tokens=101)
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_value", r
    assert "100" in r.json()["error"]["message"], r


def test_numbers_out_of_range_R_API_3(c):
    key, _ = new_key(c)
    for extra, param in (({"temperature": 5}, "temperature"), ({"top_p": 1.5}, "top_p"), ({"n": 0}, "n"),
                         ({"temperature": -0.1}, "temperature")):
        r = c.gw.chat(key, **extra)
        assert r.status == 400 and r.json()["error"]["param"] == param, (extra, r)
    assert c.gw.chat(key, temperature=2, top_p=1, n=1).status == 200


def test_request_larger_than_the_tpm_bucket_never_fits_R_KEY_5(c):
    """Item 7: more than the whole bucket: 429 TPM_EXCEEDED with x-should-retry false."""
    key, _ = new_key(c, "--tpm", 200)
    r = c.gw.chat(key, max_tokens=500)
    assert r.status == 429, r
    e = r.json()["error"]
    assert e["code"] == "TPM_EXCEEDED" and "never" in e["message"], e
    assert r.headers.get("x-should-retry") == "false", r.headers
    assert c.gw.chat(key, max_tokens=50).status == 200


def test_only_max_tokens_can_never_fit_R_KEY_5(c):
    """A large prompt without max_tokens is estimated from its bytes: it waits for the bucket
    like any request (429 that may be retried), it is not refused for good."""
    key, _ = new_key(c, "--tpm", 2000)
    r = c.gw.chat(key, content="x" * 20000)
    assert r.status in (200, 429), r
    if r.status == 429:
        assert r.headers.get("x-should-retry") != "false" and "never" not in r.json()["error"]["message"], r
    r = c.gw.chat(key, max_tokens=375, n=8)                   # 3000 tokens of answers (n <= limits.max_n): never
    assert r.status == 429 and r.headers.get("x-should-retry") == "false", r


def test_pass_through_bodies_that_cannot_be_counted_are_refused_R_KEY_0(c):
    """An inference pass-through sluice cannot read (an encoded surrogate, a BOM) escaped the
    token count; now it is a 400 and never reaches the upstream."""
    key, _ = new_key(c, "--tpm", 5000)
    n = c.fake.stats()["requests"]
    for raw in (b'{"model":"m","max_tokens":100000,"messages":[{"role":"user","content":"\xed\xa0\x80"}]}',
                b'\xef\xbb\xbf{"model":"m","max_tokens":100000,"messages":[{"role":"user","content":"x"}]}'):
        r = c.gw.request("POST", "/api/v1/proxy/ep/v1/chat/completions", raw, key=key)
        assert r.status == 400 and r.json()["error"]["code"] == "invalid_json", r
    assert c.fake.stats()["requests"] == n
    r = c.gw.request("POST", "/api/v1/proxy/ep/v1/chat/completions",
                     {"model": "m", "max_tokens": 100000, "messages": [{"role": "user", "content": "x"}]}, key=key)
    assert r.status == 429 and r.headers.get("x-should-retry") == "false", r


def test_monthly_tokens_settle_before_the_next_request_R_KEY_5(c):
    """Item 6: a quota of 100 tokens and requests of ~4 real tokens each, one after another:
    each reservation is settled when its request ends, so ~20 fit, not 4."""
    key, kid = new_key(c, "--monthly-tokens", 100)
    time.sleep(0.3)
    used0 = [row for row in counters(c, kid) if row[0].startswith("m:")][0][2]
    ok = 0
    for _ in range(40):
        r = c.gw.chat(key, max_tokens=2, content="a", headers={"X-Fake-Behavior": "chunks=2;prompt_tokens=2"})
        if r.status != 200:
            assert r.status == 429 and r.json()["error"]["code"] == "MONTHLY_TOKEN_QUOTA_EXCEEDED", r
            break
        ok += 1
    assert ok >= (100 - used0) // 4 - 2, (ok, used0)


def test_usage_is_always_asked_of_the_upstream_R_USE_1(c):
    """Item 5: stream_options without include_usage used to opt out of billing."""
    key, _ = new_key(c)
    for so in ({}, {"include_usage": False}):
        rid = "so-%d" % len(so)
        st, _, chunks = c.gw.stream_raw(key, {"model": "m", "stream": True, "stream_options": so,
                                              "messages": [{"role": "user", "content": "count me"}]},
                                        headers={"X-Request-Id": rid, "X-Fake-Behavior": "chunks=50"})
        body = b"".join(x for _, x in chunks).decode()
        assert st == 200 and body.endswith("data: [DONE]\n\n"), body[-200:]
        assert '"usage"' not in body, "the client did not ask for usage: " + body[-300:]
        sent = json.loads(c.fake.stats()["last"]["body"])
        assert sent["stream_options"]["include_usage"] is True, sent
        row = wait_for(lambda: c.gw.usage_events("request_id = ?", rid), 3)[0]
        assert row["completion_tokens"] == 50 and row["prompt_tokens"] == 2, row
        assert row["usage_estimated"] == 0, row


def test_no_usage_from_the_upstream_is_estimated_R_USE_1(c):
    key, _ = new_key(c)
    st, _, chunks = c.gw.stream_raw(key, {"model": "m", "stream": True,
                                          "messages": [{"role": "user", "content": "old server"}]},
                                    headers={"X-Request-Id": "nousage-s", "X-Fake-Behavior": "chunks=12;no_usage=1"})
    assert st == 200
    row = wait_for(lambda: c.gw.usage_events("request_id = 'nousage-s'"), 3)[0]
    assert row["completion_tokens"] == 12 and row["usage_estimated"] == 1 and row["prompt_tokens"] > 0, row
    r = c.gw.chat(key, headers={"X-Request-Id": "nousage-b", "X-Fake-Behavior": "chunks=12;no_usage=1"})
    assert r.status == 200 and "usage" not in r.json(), r
    row = wait_for(lambda: c.gw.usage_events("request_id = 'nousage-b'"), 3)[0]
    assert row["completion_tokens"] > 0 and row["usage_estimated"] == 1, row


def test_refusals_have_usage_rows_R_USE_4(c):
    """Item 10: a 413 and the idempotency 409/422 refusals are recorded with their status."""
    key, kid = new_key(c)
    r = c.gw.request("POST", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user",
                     "content": "x" * 70000}]}, key=key, headers={"X-Request-Id": "big-1"})
    assert r.status == 413, r
    row = wait_for(lambda: c.gw.usage_events("request_id = 'big-1'"), 3)[0]
    assert row["status"] == 413 and row["key_id"] == kid and row["error_code"] == "request_too_large", row
    h = {"Idempotency-Key": "bill-idem-1"}
    assert c.gw.chat(key, content="one", headers=dict(h, **{"X-Request-Id": "idem-a"})).status == 200
    r = c.gw.chat(key, content="two", headers=dict(h, **{"X-Request-Id": "idem-b"}))
    assert r.status == 422, r
    row = wait_for(lambda: c.gw.usage_events("request_id = 'idem-b'"), 3)[0]
    assert row["status"] == 422 and row["error_code"] == "IDEMPOTENCY_KEY_BODY_MISMATCH", row
    assert row["prompt_tokens"] == 0 and row["completion_tokens"] == 0, row


def test_quotas_survive_every_responder_dying_and_a_lost_state_file_R_KEY_4(c):
    """Item 9: call quotas are counted in the shared state (no SQLite write per request), never
    reset by a crash of every process, and reloaded from SQLite when the state file is gone."""
    import signal
    key, kid = new_key(c, "--daily", 4)           # the liveness probe is call 1
    for _ in range(3):
        assert c.gw.chat(key).status == 200
    assert c.gw.chat(key).status == 429
    daily = lambda: c.gw.sql("SELECT calls FROM quota_counters WHERE key_id = ? AND period LIKE 'd:%'", kid)[0][0]
    wait_for(lambda: daily() == 4, 3, what="SQLite holds the 4 calls within a flush interval")
    for pid in c.gw.responder_pids():
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: len(c.gw.responder_pids()) >= 2, 10, what="responders respawned")
    r = wait_for(lambda: (lambda r: r if r.status != 500 else None)(c.gw.chat(key)), 10, what="served again")
    assert r.status == 429 and r.json()["error"]["code"] == "DAILY_LIMIT_EXCEEDED", r
    c.gw.stop()
    os.unlink(os.path.join(c.gw.dir, "sluice.state"))
    c.gw.start()
    r = c.gw.chat(key)
    assert r.status == 429 and r.json()["error"]["code"] == "DAILY_LIMIT_EXCEEDED", r


def test_a_session_is_limited_by_its_users_ceiling_R_SEC_5(c):
    """Item 2: bob's ceiling allows 3 calls a day; his login session gets no more."""
    r = http_request(c.gw.port, "POST", "/api/v1/auth/login", {"username": "bob", "password": "bob-Secret-pw-9"})
    assert r.status == 200, r
    token = r.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    codes = [c.gw.chat(token).status for _ in range(5)]
    assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429], codes
    r = c.gw.chat(token)
    assert r.json()["error"]["code"] == "DAILY_LIMIT_EXCEEDED", r


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
