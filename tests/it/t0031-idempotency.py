#!/usr/bin/env python3
"""t0031-idempotency: Idempotency-Key across the pool and restarts (R-IDEM-1..3)."""
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, wait_for


class Ctx:
    pass


def setup():
    c = Ctx()
    c.fake = Fake("idem")
    c.gw = Gateway("t0031", procs=2, threads=32)
    c.gw.ctl("tenant", "add", "acme")
    c.gw.ctl("user", "add", "alice", "--tenant", "acme", "--role", "member")
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    k = c.gw.ctl("key", "add", "--user", "alice", "--daily", 1000)
    c.key, c.kid = k["key"], k["id"]
    c.gw.start()
    wait_for(lambda: c.gw.chat(c.key).status == 200, 3, what="key live")
    time.sleep(0.6)     # every responder's poll interval, not just the first one's
    return c


def teardown(c):
    if c:
        c.gw.stop()
        c.fake.stop()


def calls_today(c):
    return c.gw.sql("SELECT total(calls) FROM quota_counters WHERE key_id = ? AND period LIKE 'd:%'", c.kid)[0][0]


def settled_calls(c):
    """calls_today once the usage writer has written what came before (it flushes every
    usage.flush_ms, 200 ms): two reads 0.3 s apart that agree."""
    last = calls_today(c)
    for _ in range(20):
        time.sleep(0.3)
        now = calls_today(c)
        if now == last:
            return now
        last = now
    return last


def body(content, **extra):
    b = {"model": "m", "messages": [{"role": "user", "content": content}]}
    b.update(extra)
    return b


def test_20_concurrent_one_upstream_call_then_replays_R_IDEM_2(c):
    b = body("[[fake ttfb_ms=1200]] same question")
    before_calls, before_up = calls_today(c), c.fake.stats()["requests"]
    t_start = int(time.time() * 1000) - 5
    res = [None] * 20
    def one(i):
        res[i] = c.gw.request("POST", "/v1/chat/completions", b, key=c.key,
                              headers={"Idempotency-Key": '"order-42"', "X-Request-Id": "idem-burst"})
    ts = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    ok = [r for r in res if r.status == 200]
    busy = [r for r in res if r.status == 409]
    assert len(ok) == 1 and len(busy) == 19, [r.status for r in res]
    assert busy[0].json()["error"]["code"] == "IDEMPOTENCY_REQUEST_IN_PROGRESS"
    assert c.fake.stats()["requests"] - before_up == 1
    # Finished: replays are byte-identical, flagged, with no upstream call and no quota.
    for _ in range(3):
        r = c.gw.request("POST", "/v1/chat/completions", b, key=c.key,
                         headers={"Idempotency-Key": "order-42", "X-Request-Id": "idem-burst"})
        assert r.status == 200 and r.headers.get("x-idempotent-replay") == "true", r
        assert r.body == ok[0].body
    assert c.fake.stats()["requests"] - before_up == 1
    wait_for(lambda: calls_today(c) - before_calls == 1, 3, what="one call counted")
    time.sleep(0.5)
    assert calls_today(c) - before_calls == 1
    # One served event; the 409s are recorded as the refusals they are (status, no tokens,
    # R-USE-4) and the replays count nothing (R-IDEM-2).
    rows = c.gw.sql("SELECT status, prompt_tokens + completion_tokens FROM usage_events WHERE request_id = 'idem-burst'")
    assert sorted(s for s, _ in rows) == [200] + [409] * 19, rows
    assert all(t == 0 for s, t in rows if s == 409), rows


def test_body_mismatch_422_consumes_nothing_R_IDEM_2(c):
    c.gw.request("POST", "/v1/chat/completions", body("first"), key=c.key, headers={"Idempotency-Key": "k-mm"})
    before_calls, before_up = settled_calls(c), c.fake.stats()["requests"]
    r = c.gw.request("POST", "/v1/chat/completions", body("second"), key=c.key, headers={"Idempotency-Key": "k-mm"})
    assert r.status == 422 and r.json()["error"]["code"] == "IDEMPOTENCY_KEY_BODY_MISMATCH", r
    assert r.headers.get("x-should-retry") == "false"
    assert settled_calls(c) == before_calls and c.fake.stats()["requests"] == before_up


def test_invalid_key_header_R_IDEM_1(c):
    for bad in ['"unterminated', "a" * 129, '"in\\x"', "two words"]:
        r = c.gw.request("POST", "/v1/chat/completions", body("x"), key=c.key, headers={"Idempotency-Key": bad})
        assert r.status == 400, (bad, r)


def test_stream_replays_same_sse_bytes_R_IDEM_2(c):
    b = body("stream me", stream=True)
    st, h, chunks = c.gw.stream_raw(c.key, b, headers={"Idempotency-Key": "s-1"})
    first = b"".join(x for _, x in chunks)
    assert st == 200 and first.endswith(b"data: [DONE]\n\n")
    st, h, chunks = c.gw.stream_raw(c.key, b, headers={"Idempotency-Key": "s-1"})
    assert st == 200 and h.get("x-idempotent-replay") == "true" and h["content-type"].startswith("text/event-stream")
    assert b"".join(x for _, x in chunks) == first


def test_failure_is_not_kept_R_IDEM_2(c):
    b = body("[[fake status=500]] fails")
    r = c.gw.request("POST", "/v1/chat/completions", b, key=c.key, headers={"Idempotency-Key": "f-1"})
    assert r.status == 500
    assert c.gw.sql("SELECT count(*) FROM idempotency WHERE idem_key = 'f-1'")[0][0] == 0


def test_survives_restart_R_IDEM_3(c):
    b = body("durable")
    r1 = c.gw.request("POST", "/v1/chat/completions", b, key=c.key, headers={"Idempotency-Key": "restart-1"})
    assert r1.status == 200
    c.gw.stop()
    c.gw.start()
    before_up = c.fake.stats()["requests"]
    r2 = wait_for(lambda: (lambda r: r if r.status == 200 else None)(
        c.gw.request("POST", "/v1/chat/completions", b, key=c.key, headers={"Idempotency-Key": "restart-1"})), 5)
    assert r2.headers.get("x-idempotent-replay") == "true" and r2.body == r1.body
    assert c.fake.stats()["requests"] == before_up


def test_dead_owner_released_R_IDEM_3(c):
    b = body("[[fake ttfb_ms=2500]] owner dies")
    t = threading.Thread(target=lambda: c.gw.request("POST", "/v1/chat/completions", b, key=c.key,
                                                     headers={"Idempotency-Key": "dead-1"}, timeout=20))
    t.daemon = True
    t.start()
    wait_for(lambda: c.gw.sql("SELECT state FROM idempotency WHERE idem_key = 'dead-1'") == [("in_progress",)], 3)
    owner = c.gw.sql("SELECT owner_pid FROM idempotency WHERE idem_key = 'dead-1'")[0][0]
    os.kill(owner, signal.SIGKILL)
    # The next identical request is served (the record is taken over), not stuck at 409.
    b2 = dict(b)
    # lighttpd answers its own 500 (sluice's JSON body, gateway_unavailable) for a request it
    # handed to the killed responder's socket before it respawned it: try again.
    r = wait_for(lambda: (lambda r: r if r.status != 409 and not (r.status == 500 and b"gateway_unavailable" in r.body)
                          else None)(
        c.gw.request("POST", "/v1/chat/completions", b, key=c.key, headers={"Idempotency-Key": "dead-1"}, timeout=20)),
        10, interval=0.3, what="dead owner's record released")
    assert r.status == 200, r


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
