#!/usr/bin/env python3
"""t0004-failover: retry once before the first byte, bans, circuits, never-retried
failures and per-endpoint timeouts (R-HC-5, R-HC-8, R-RT-7, R-SSE-4, R-USE-4).

Every test owns its endpoint, model and stand-in upstreams, because the passive state
(bans, circuits, round-robin counters) is per replica and shared by every responder.
The passive protection runs with small values so the file stays short:
ban_ms 2000, circuit_failures 3, circuit_open_ms 3000, half_open_trials 2."""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, free_port, http_request, run_tests, setup_tenant, wait_for

BAN_S = 2.0
OPEN_S = 3.0
HALF_OPEN_TRIALS = 2
PASSIVE = "ban_ms = %d; circuit_failures = 3; circuit_open_ms = %d; half_open_trials = %d;" % (
    BAN_S * 1000, OPEN_S * 1000, HALF_OPEN_TRIALS)
ERROR_KEYS = {"message", "type", "param", "code"}


class Ctx:
    pass


# endpoint name -> (model, [fake names or "dead"], endpoint options)
ENDPOINTS = {
    "ep-retry": ("m-retry", ["retry-a", "retry-b"], {}),
    "ep-ban": ("m-ban", ["ban-a", "ban-b"], {}),
    "ep-circuit": ("m-circuit", ["circ-a", "circ-b"], {}),
    "ep-die": ("m-die", ["die-a", "die-b"], {}),
    "ep-4xx": ("m-4xx", ["c4xx-a", "c4xx-b"], {}),
    "ep-conn": ("m-conn", ["dead", "conn-b"], {"connect_timeout_ms": 300}),
    "ep-single": ("m-single", ["single"], {}),
    "ep-pass": ("m-pass", ["pass"], {}),
    "ep-three": ("m-three", ["three-a", "three-b", "three-c"], {}),
    "ep-fbt": ("m-fbt", ["fbt-a", "fbt-b"], {}),
    "ep-idle": ("m-idle", ["idle"], {}),
    "ep-dead": ("m-dead", ["dead"], {}),
}


class DeadReplica:
    """A replica URL with nothing listening (connection refused)."""

    def __init__(self):
        self.url = "http://127.0.0.1:%d" % free_port()


def setup():
    c = Ctx()
    c.fakes = {}
    c.gw = Gateway("t0004", keepalive_ms=1000, conf={"passive": PASSIVE})
    c.key = setup_tenant(c.gw, "acme", "alice")
    c.dead = DeadReplica()
    for ep, (model, names, opts) in ENDPOINTS.items():
        reps = []
        for n in names:
            if n == "dead":
                reps.append(c.dead)
                continue
            if n not in c.fakes:
                c.fakes[n] = Fake(n)
            reps.append(c.fakes[n])
        add_endpoint(c.gw, ep, "acme", reps, **opts)
        c.gw.ctl("route", "add", model, ep, "--tenant", "acme")
    # R-RT-7: the timeouts are per endpoint and changed with `endpoint set`.
    c.gw.ctl("endpoint", "set", "ep-fbt", "--first-byte-timeout-ms", 500)
    c.gw.ctl("endpoint", "set", "ep-idle", "--idle-timeout-ms", 500)
    c.gw.ctl("endpoint", "set", "ep-dead", "--connect-timeout-ms", 300)
    c.replica_ids = {}
    for rep in c.gw.ctl("list", "replicas")["replicas"]:
        c.replica_ids[(rep["endpoint"], rep["url"])] = rep["id"]
    c.gw.start()
    return c


def teardown(c):
    if c:
        c.gw.stop()
        for f in c.fakes.values():
            f.stop()


# ---- helpers ----

def fresh(c, *names, behavior=None):
    """Resets the named fakes' stats and behaviour; the first gets `behavior` as its default."""
    fs = [c.fakes[n] for n in names]
    for f in fs:
        f.reset()
    if behavior:
        fs[0].behavior(behavior)
    return fs


def chat(c, model, rid=None, behavior=None, stream=False, content="hello"):
    hdrs = {}
    if rid:
        hdrs["X-Request-Id"] = rid
    if behavior:
        hdrs["X-Fake-Behavior"] = behavior
    extra = {"stream": True} if stream else {}
    return c.gw.chat(c.key, model=model, content=content, headers=hdrs, **extra)


def chat_body(model, stream=False, content="hello"):
    b = {"model": model, "messages": [{"role": "user", "content": content}]}
    if stream:
        b["stream"] = True
    return b


def row_of(c, rid, timeout=5):
    rows = wait_for(lambda: c.gw.usage_events("request_id = ?", rid), timeout, what="usage row of %s" % rid)
    assert len(rows) == 1, "R-USE-4: request %s must be ONE usage event, got %d: %r" % (rid, len(rows), rows)
    return rows[0]


def sse_events(text):
    """Splits an SSE body into its events (without the blank line)."""
    return [e for e in text.replace("\r\n", "\n").split("\n\n") if e.strip()]


def error_event(ev):
    assert ev.startswith("data: "), "not a data event: %r" % ev
    obj = json.loads(ev[6:])
    assert set(obj) == {"error"} and set(obj["error"]) == ERROR_KEYS, "not an OpenAI error event: %r" % ev
    return obj["error"]


def total(fakes, field="requests"):
    return sum(f.stats()[field] for f in fakes)


def rep_id(c, ep, fake):
    return c.replica_ids[(ep, fake.url)]


# ---- R-HC-8: retry once before the first byte ----

def test_503_retried_once_on_other_replica_R_HC_8_R_USE_4(c):
    """R-HC-8: a 503 before the first byte is retried once on the other replica with the
    same X-Request-Id; R-USE-4: the retried request is one usage event (retries=1)."""
    a, b = fresh(c, "retry-a", "retry-b", behavior="status=503")
    rids, seen_by_b = [], {}
    for i in range(4):
        rid = "t4-retry-%d" % i
        r = chat(c, "m-retry", rid)
        assert r.status == 200, "request %d: expected 200 from the healthy replica, got %r" % (i, r)
        assert r.headers.get("x-fake-upstream") == "retry-b", "answered by %r" % r.headers.get("x-fake-upstream")
        assert r.json()["choices"][0]["message"]["content"], r
        rids.append(rid)
        seen_by_b[rid] = r.headers.get("x-fake-request-id")
    sa, sb = a.stats(), b.stats()
    assert sb["requests"] == 4, "B should have served all 4 requests: %r" % sb
    # One try on A, then A is banned for ban_ms, so exactly one request was retried.
    assert sa["requests"] == 1, "A should have been tried exactly once (then banned): %r" % sa
    retried = sa["last"]["headers"]["x-request-id"]
    assert retried in rids, "A saw X-Request-Id %r, not one of ours" % retried
    assert seen_by_b[retried] == retried, "B saw X-Request-Id %r for %r" % (seen_by_b[retried], retried)
    rows = {rid: row_of(c, rid) for rid in rids}
    retried_rows = [rid for rid, row in rows.items() if row["retries"] == 1]
    assert retried_rows == [retried], "rows with retries=1: %r (A saw %r); all: %r" % (retried_rows, retried, rows)
    assert all(row["retries"] <= 1 for row in rows.values()), "retried twice: %r" % rows
    row = rows[retried]
    assert row["status"] == 200, row
    assert row["replica_id"] == rep_id(c, "ep-retry", b), "usage names replica %r, B is %r" % (
        row["replica_id"], rep_id(c, "ep-retry", b))
    assert row["completion_tokens"] > 0, row


def test_banned_replica_skipped_until_ban_expires_R_HC_5(c):
    """R-HC-5: one proxy failure bans the replica for ban_ms; the requests in the ban
    window go straight to the other replica; after the ban it is tried again."""
    a, b = fresh(c, "ban-a", "ban-b", behavior="status=503")
    t_fail = None
    for i in range(3):
        t0 = time.time()
        r = chat(c, "m-ban")
        assert r.status == 200, r
        if a.stats()["requests"] == 1:
            t_fail = t0
            break
    assert t_fail is not None, "round robin never tried A in 3 requests: %r" % a.stats()
    sent = 0
    while time.time() < t_fail + BAN_S - 0.4 and sent < 8:
        r = chat(c, "m-ban")
        assert r.status == 200 and r.headers.get("x-fake-upstream") == "ban-b", r
        sent += 1
    assert sent >= 3, "too few requests inside the ban window (%d)" % sent
    assert a.stats()["requests"] == 1, "A got traffic while banned: %r" % a.stats()
    # After the ban, round robin reaches A again (within two picks).
    time.sleep(max(0, t_fail + BAN_S + 0.3 - time.time()))
    for i in range(3):
        r = chat(c, "m-ban")
        assert r.status == 200, r
        if a.stats()["requests"] == 2:
            break
    assert a.stats()["requests"] == 2, "A was not tried again after its ban expired: %r" % a.stats()
    assert b.stats()["requests"] == b.stats()["completed"], b.stats()


def _hit_a(c, model, a, n, within):
    """Sends requests every 0.1 s until A's request count reaches n; returns (t_before, t_after)."""
    end = time.time() + within
    while time.time() < end:
        t0 = time.time()
        r = chat(c, model)
        t1 = time.time()
        assert r.status == 200, "expected 200 (retried on B), got %r" % r
        if a.stats()["requests"] >= n:
            return t0, t1
        time.sleep(0.1)
    raise AssertionError("A did not receive request #%d within %.1fs: %r" % (n, within, a.stats()))


def test_circuit_opens_after_3_failures_then_half_open_R_HC_5(c):
    """R-HC-5: 3 consecutive failures open the circuit for circuit_open_ms (longer than the
    ban); then at most half_open_trials trial requests; a trial success closes it."""
    a, b = fresh(c, "circ-a", "circ-b", behavior="status=503")
    _hit_a(c, "m-circuit", a, 1, 2.0)
    _hit_a(c, "m-circuit", a, 2, BAN_S + 2.5)
    t3_0, t3_1 = _hit_a(c, "m-circuit", a, 3, BAN_S + 2.5)
    assert a.stats()["requests"] == 3
    # A is healthy again, but slow, so trials overlap the requests that follow them.
    a.behavior("ttfb_ms=700")
    n_open, late = 0, 0
    while time.time() < t3_0 + OPEN_S - 0.25 and n_open < 40:
        r = chat(c, "m-circuit")
        assert r.status == 200 and r.headers.get("x-fake-upstream") == "circ-b", r
        n_open += 1
        if time.time() > t3_1 + BAN_S + 0.1:
            late += 1       # the ban is over here; only the open circuit keeps A out
        time.sleep(0.15)
    assert late >= 1, "no request landed between the end of the ban and the end of the open time"
    assert a.stats()["requests"] == 3, "A got traffic while its circuit was open: %r" % a.stats()
    time.sleep(max(0, t3_1 + OPEN_S + 0.2 - time.time()))
    # Half-open: a burst of simultaneous requests; A may take at most half_open_trials of them.
    burst = 12
    results = [None] * burst
    gate = threading.Barrier(burst, timeout=10)
    def one(i):
        try:
            gate.wait()
            results[i] = chat(c, "m-circuit")
        except Exception as e:   # reported below
            results[i] = e
    threads = [threading.Thread(target=one, args=(i,)) for i in range(burst)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert all(getattr(r, "status", None) == 200 for r in results), "half-open burst: %r" % results
    trials = a.stats()["requests"] - 3
    print("   half-open burst of %d: %d trial request(s) reached A" % (burst, trials))
    assert 1 <= trials <= HALF_OPEN_TRIALS, (
        "half-open: expected 1..%d trial requests on A, got %d (%r)" % (HALF_OPEN_TRIALS, trials, a.stats()))
    # The successful trial closed the circuit: A gets its round-robin share again.
    a.behavior("")
    before = a.stats()["requests"]
    for i in range(6):
        r = chat(c, "m-circuit")
        assert r.status == 200, r
    got = a.stats()["requests"] - before
    assert got == 3, "after the circuit closed A should get 3 of 6 round-robin requests, got %d" % got


# ---- R-HC-8 / R-SSE-4: what is never retried ----

def test_stream_broken_after_first_byte_not_retried_R_HC_8_R_SSE_4(c):
    """R-HC-8: a stream broken after the first byte is never retried; R-SSE-4: the client
    gets the chunks already produced, then an OpenAI error event."""
    a, b = fresh(c, "die-a", "die-b")
    status, headers, chunks = c.gw.stream_raw(c.key, chat_body("m-die", stream=True),
                                              headers={"X-Fake-Behavior": "die_after=2",
                                                       "X-Request-Id": "t4-die-1"})
    text = b"".join(ch for _, ch in chunks).decode()
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), (status, headers)
    evs = sse_events(text)
    datas = [e for e in evs if e.startswith("data: ")]
    contents = [e for e in datas if '"content":"w' in e]
    assert len(contents) == 2 and '"w1 "' in contents[0] and '"w2 "' in contents[1], text
    assert "[DONE]" not in text, "a broken stream must not end with [DONE]: %r" % text
    err = error_event(datas[-1])
    assert err["type"] == "server_error", err
    assert total([a, b]) == 1, "the broken stream was retried: A %r B %r" % (a.stats(), b.stats())
    assert total([a, b], "died") == 1
    row = row_of(c, "t4-die-1")
    assert row["retries"] == 0 and row["stream"] == 1 and row["error_code"], row


def test_4xx_never_retried_R_HC_8(c):
    """R-HC-8: an upstream 4xx is passed through as is, never retried (B is not called)."""
    a, b = c.fakes["c4xx-a"], c.fakes["c4xx-b"]
    direct = http_request(a.port, "POST", "/v1/chat/completions", chat_body("m-4xx"),
                          {"X-Fake-Behavior": "status=400"})
    assert direct.status == 400
    fresh(c, "c4xx-a", "c4xx-b", behavior="status=400")
    res = [chat(c, "m-4xx", "t4-4xx-%d" % i) for i in range(4)]
    bad = [r for r in res if r.status == 400]
    good = [r for r in res if r.status == 200]
    assert len(bad) + len(good) == 4 and bad, "statuses %r" % [r.status for r in res]
    for r in bad:
        assert r.body == direct.body, "4xx body not passed through: %r vs %r" % (r.body, direct.body)
        assert r.headers.get("x-fake-upstream") == "c4xx-a", r.headers
    sa, sb = a.stats(), b.stats()
    assert sa["requests"] == len(bad), "A: %r, 400s: %d" % (sa, len(bad))
    assert sb["requests"] == len(good), "B was called for a 4xx request: B %r, 200s: %d" % (sb, len(good))
    # A 4xx is the caller's problem, not the replica's: A is not banned, round robin alternates.
    assert len(bad) == 2, "a 4xx should not ban the replica: %r" % [r.status for r in res]
    for i, r in enumerate(res):
        row = row_of(c, "t4-4xx-%d" % i)
        assert row["retries"] == 0 and row["status"] == r.status, row


def test_connection_failure_retried_R_HC_8(c):
    """R-HC-8: a connection failure (closed port) is retried on the other replica."""
    (b,) = fresh(c, "conn-b")
    rids = ["t4-conn-%d" % i for i in range(4)]
    for rid in rids:
        r = chat(c, "m-conn", rid)
        assert r.status == 200 and r.headers.get("x-fake-upstream") == "conn-b", r
        assert r.elapsed < 1.0, "a refused connection should fail over fast: %.2fs" % r.elapsed
        assert b.stats()["last"]["headers"]["x-request-id"] == rid
    assert b.stats()["requests"] == 4, b.stats()
    rows = [row_of(c, rid) for rid in rids]
    assert [r["retries"] for r in rows].count(1) == 1, "one retry expected (then the dead one is banned): %r" % rows
    assert all(r["status"] == 200 and r["replica_id"] == rep_id(c, "ep-conn", b) for r in rows), rows
    wait_for(lambda: "retrying on replica" in c.gw.log_text(), 2, what="the retry in sluice-fcgi.log")


# ---- R-HC-5 last sentence: a single replica never goes fully down ----

def test_single_replica_used_while_banned_R_HC_5(c):
    """R-HC-5: a single-replica endpoint whose replica just failed (and is banned) still
    serves the next request with it rather than failing; this is logged."""
    (s,) = fresh(c, "single")
    r1 = chat(c, "m-single", "t4-single-1", behavior="status=503")
    assert r1.status == 503, "no other replica: the upstream's 503 is passed through, got %r" % r1
    r2 = chat(c, "m-single", "t4-single-2")
    assert r2.status == 200 and r2.headers.get("x-fake-upstream") == "single", (
        "the banned single replica must still be used: %r" % r2)
    st = s.stats()
    assert st["requests"] == 2 and st["last"]["headers"]["x-request-id"] == "t4-single-2", st
    line = wait_for(lambda: [l for l in c.gw.log_text().splitlines() if "t4-single-2" in l and "anyway" in l],
                    2, what="log line about using the banned replica anyway")
    print("   logged: %s" % line[0].strip())
    assert row_of(c, "t4-single-1")["status"] == 503
    assert row_of(c, "t4-single-2")["status"] == 200


def test_503_passed_through_when_no_other_replica_R_HC_8(c):
    """R-HC-8 / R-API-1: with no other replica to retry on, the upstream's 503 reaches the
    client as is (status, body, Retry-After)."""
    (s,) = fresh(c, "pass")
    beh = "status=503;retry_after=7"
    direct = http_request(s.port, "POST", "/v1/chat/completions", chat_body("m-pass"), {"X-Fake-Behavior": beh})
    s.reset()
    r = chat(c, "m-pass", "t4-pass-1", behavior=beh)
    assert r.status == 503, r
    assert r.body == direct.body, "body changed: %r vs upstream %r" % (r.body, direct.body)
    assert r.headers.get("content-type") == "application/json", r.headers
    assert r.headers.get("retry-after") == "7", "upstream Retry-After lost: %r" % r.headers
    assert s.stats()["requests"] == 1, s.stats()
    row = row_of(c, "t4-pass-1")
    assert row["status"] == 503 and row["retries"] == 0 and row["prompt_tokens"] == 0, row


def test_retried_at_most_once_R_HC_8(c):
    """R-HC-8: "retried once": with three failing replicas only two attempts are made."""
    fs = fresh(c, "three-a", "three-b", "three-c")
    for f in fs:
        f.behavior("status=503")
    r = chat(c, "m-three", "t4-three-1")
    assert r.status in (502, 503), r
    assert set(r.json()["error"]) == ERROR_KEYS, r
    assert total(fs) == 2, "expected exactly 2 upstream attempts, got %r" % [f.stats()["requests"] for f in fs]
    row = row_of(c, "t4-three-1")
    assert row["retries"] == 1 and row["status"] == r.status, row


# ---- R-RT-7: timeouts per endpoint ----

def test_first_byte_timeout_R_RT_7(c):
    """R-RT-7: first-byte timeout 500 ms: the client gets 504 upstream_timeout in ~0.5 s,
    the upstream connection is closed, and a read timeout is never retried (R-HC-8)."""
    fs = fresh(c, "fbt-a", "fbt-b")
    r = chat(c, "m-fbt", "t4-fbt-1", behavior="ttfb_ms=2000")
    assert r.status == 504 and r.json()["error"]["code"] == "upstream_timeout", r
    assert set(r.json()["error"]) == ERROR_KEYS
    assert r.elapsed < 1.5, "504 after %.2fs; the first-byte timeout is 0.5 s" % r.elapsed
    assert r.elapsed >= 0.4, "504 after %.2fs, before the 0.5 s timeout" % r.elapsed
    wait_for(lambda: total(fs, "aborted") == 1, 3, what="the upstream to see the connection closed")
    time.sleep(0.3)
    assert total(fs) == 1, "a first-byte timeout was retried: %r" % [f.stats() for f in fs]
    row = row_of(c, "t4-fbt-1")
    assert row["status"] == 504 and row["error_code"] == "upstream_timeout" and row["retries"] == 0, row


def test_idle_timeout_ends_stream_with_error_event_R_RT_7(c):
    """R-RT-7: idle timeout 500 ms between upstream bytes: a stream that goes silent for
    1.5 s ends with an error event after its first chunk (R-SSE-4); upstream closed."""
    (f,) = fresh(c, "idle")
    status, headers, chunks = c.gw.stream_raw(c.key, chat_body("m-idle", stream=True),
                                              headers={"X-Fake-Behavior": "gap_ms=1500;role_chunks=0;chunks=3",
                                                       "X-Request-Id": "t4-idle-1"})
    text = b"".join(ch for _, ch in chunks).decode()
    assert status == 200, (status, text)
    datas = [e for e in sse_events(text) if e.startswith("data: ")]
    assert len(datas) == 2, "expected the first chunk then an error event: %r" % text
    assert '"content":"w1 "' in datas[0], text
    err = error_event(datas[1])
    assert err["code"] == "upstream_idle_timeout", err
    t_end = chunks[-1][0]
    assert t_end < 1.3, "the idle timeout fired only after %.2fs (first chunk at ~0 s, timeout 0.5 s)" % t_end
    wait_for(lambda: f.stats()["aborted"] == 1, 3, what="the upstream to see the connection closed")
    assert f.stats()["requests"] == 1, f.stats()


def test_connect_timeout_closed_port_fails_fast_R_RT_7(c):
    """R-RT-7: connect timeout set to 300 ms; a closed port fails at once with 502."""
    t0 = time.time()
    r = chat(c, "m-dead", "t4-dead-1")
    assert r.status == 502 and r.json()["error"]["code"] == "upstream_error", r
    assert time.time() - t0 < 1.0, "connection failure took %.2fs" % (time.time() - t0)
    row = row_of(c, "t4-dead-1")
    assert row["status"] == 502 and row["error_code"] == "upstream_error" and row["prompt_tokens"] == 0, row


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
