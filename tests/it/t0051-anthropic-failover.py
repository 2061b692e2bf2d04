#!/usr/bin/env python3
"""t0051-anthropic-failover: retries, failover, the stream-start guard, client disconnects
and model auto behave for `--protocol anthropic` endpoints exactly as for OpenAI ones
(R-ANT-1, R-HC-5, R-HC-8, R-SSE-3..5, R-AUTO-5, R-USE-4).

Every test owns its endpoint, model and stand-ins (passive state is per replica). Replica
A of a pair gets its misbehaviour as the stand-in's default (POST /_fake/behavior), so B
answers normally; directives for both go in the prompt ("[[fake ...]]"), as the adapter
forwards no caller header. Passive protection is shortened as in t0004 (ban 2 s)."""
import http.client
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, free_port, run_tests, setup_tenant, setup_with, stop_all, wait_for

SECRET = "sk-ant-api03-t0051-%d-Hw3pQ" % os.getpid()
KEEPALIVE_S = 1.0
PASSIVE = "ban_ms = 2000; circuit_failures = 3; circuit_open_ms = 3000; half_open_trials = 2;"
ERROR_KEYS = {"message", "type", "param", "code"}

# endpoint -> (model, [fake names or "dead"], endpoint set options)
ENDPOINTS = {
    "ep-529": ("m-529", ["o529-a", "o529-b"], {}),
    "ep-both": ("m-both", ["both-a", "both-b"], {}),
    "ep-conn": ("m-conn", ["dead", "conn-b"], {"connect-timeout-ms": 300}),
    "ep-die0": ("m-die0", ["die0-a", "die0-b"], {}),
    "ep-err0": ("m-err0", ["err0-a", "err0-b"], {}),
    "ep-noguard": ("m-noguard", ["ng-a", "ng-b"], {"stream-guard": "off"}),
    "ep-late": ("m-late", ["late-a", "late-b"], {}),
    "ep-4xx": ("m-4xx", ["c4-a", "c4-b"], {}),
    "ep-fbt": ("m-fbt", ["fbt-a", "fbt-b"], {"first-byte-timeout-ms": 500}),
    "ep-disc": ("m-disc", ["disc"], {}),
    "ep-ka": ("m-ka", ["ka"], {}),
    "ep-slow": ("m-slow", ["slow-a", "slow-b"], {}),
}


def add_anthropic(gw, name, tenant, urls, **opts):
    gw.ctl_secret(SECRET, "endpoint", "add", name, "--tenant", tenant, "--protocol", "anthropic")
    for k, v in opts.items():
        gw.ctl("endpoint", "set", name, "--" + k, v)
    for u in urls:
        gw.ctl("replica", "add", name, u)


def setup():
    return setup_with(build, teardown)


def build(c):
    c.fakes = {}
    c.gw = Gateway("t0051", keepalive_ms=int(KEEPALIVE_S * 1000), conf={"passive": PASSIVE})
    c.key = setup_tenant(c.gw, "acme", "alice")
    c.dead = "http://127.0.0.1:%d" % free_port()
    for ep, (model, names, opts) in ENDPOINTS.items():
        urls = []
        for n in names:
            if n == "dead":
                urls.append(c.dead)
                continue
            c.fakes[n] = Fake(n)
            urls.append(c.fakes[n].url)
        add_anthropic(c.gw, ep, "acme", urls, **opts)
        c.gw.ctl("route", "add", model, ep, "--tenant", "acme")
    # Model auto in its own tenant: an anthropic candidate (cheapest, tried first) and an openai one.
    c.auto_key = setup_tenant(c.gw, "beta", "bob")
    c.fakes["auto-ant"], c.fakes["auto-oai"] = Fake("auto-ant"), Fake("auto-oai")
    add_anthropic(c.gw, "ep-auto-ant", "beta", [c.fakes["auto-ant"].url])
    c.gw.ctl("endpoint", "add", "ep-auto-oai", "--tenant", "beta")
    c.gw.ctl("replica", "add", "ep-auto-oai", c.fakes["auto-oai"].url)
    c.gw.ctl("route", "add", "claude-auto", "ep-auto-ant", "--tenant", "beta")
    c.gw.ctl("route", "add", "gpt-auto", "ep-auto-oai", "--tenant", "beta")
    c.gw.ctl("policy", "set", "claude-auto", "--purpose", "chat", "--price-in", 0.1, "--price-out", 0.1)
    c.gw.ctl("policy", "set", "gpt-auto", "--purpose", "chat", "--price-in", 5, "--price-out", 5)
    c.gw.ctl("settings", "set", "auto_routing_strategy", "cost")
    c.gw.ctl("settings", "set", "auto_routing_enabled", "true")
    c.eps = {e["name"]: e["id"] for e in c.gw.ctl("list", "endpoints")["endpoints"]}
    c.reps = {r["url"]: r["id"] for r in c.gw.ctl("list", "replicas")["replicas"]}
    c.gw.start()
    return c


def teardown(c):
    stop_all(c, "gw")
    for f in getattr(c, "fakes", {}).values():
        f.stop()


# ---- helpers ----

def fresh(c, *names, a_behavior=None):
    fs = [c.fakes[n] for n in names]
    for f in fs:
        f.reset()
    if a_behavior:
        fs[0].behavior(a_behavior)
    return fs


def body(model, content="hello", stream=False, **extra):
    b = {"model": model, "messages": [{"role": "user", "content": content}]}
    if stream:
        b["stream"] = True
    b.update(extra)
    return b


def chat(c, model, rid, content="hello", key=None):
    return c.gw.request("POST", "/v1/chat/completions", body(model, content), key=key or c.key,
                        headers={"X-Request-Id": rid})


def stream(c, model, rid, content="hello", key=None, **extra):
    status, headers, chunks = c.gw.stream_raw(key or c.key, body(model, content, True, **extra),
                                              headers={"X-Request-Id": rid})
    return status, headers, b"".join(ch for _, ch in chunks).decode()


def datas(text):
    evs = [e for e in text.replace("\r\n", "\n").split("\n\n") if e.strip()]
    assert not any(line.startswith("event:") for e in evs for line in e.split("\n")), text
    return [e[6:] for e in evs if e.startswith("data: ")]


def contents(ds):
    out = []
    for d in ds:
        if d.startswith("{") and "choices" in d:
            ch = json.loads(d)["choices"]
            if ch and ch[0]["delta"].get("content"):
                out.append(ch[0]["delta"]["content"])
    return out


def clean_stream(status, text, words=("w1 ", "w2 ", "w3")):
    assert status == 200, (status, text)
    ds = datas(text)
    assert sum(1 for d in ds if '"role":"assistant"' in d) == 1, "exactly one role chunk: %r" % text
    assert contents(ds) == list(words), text
    assert ds[-1] == "[DONE]" and ds.count("[DONE]") == 1 and '"error"' not in text, text


def error_of(d):
    obj = json.loads(d)
    assert set(obj) == {"error"} and set(obj["error"]) == ERROR_KEYS, "not an OpenAI error event: %r" % d
    return obj["error"]


def row_of(c, rid):
    rows = wait_for(lambda: c.gw.usage_events("request_id = ?", rid), 5, what="usage row of %s" % rid)
    assert len(rows) == 1, "R-USE-4: one usage event per request, got %r" % rows
    return rows[0]


def total(fs, field="requests"):
    return sum(f.stats()[field] for f in fs)


def until_a(c, a, send):
    """Sends (round robin) until replica A has been tried; returns (rid, result)."""
    for i in range(3):
        before = a.stats()["requests"]
        rid, res = send(i)
        if a.stats()["requests"] > before:
            return rid, res
    raise AssertionError("replica A never chosen in 3 requests: %r" % a.stats())


# ---- R-HC-8: failed before the first byte -> the other replica, invisibly ----

def test_529_served_by_other_replica_R_HC_8_R_USE_4(c):
    """A 529 overloaded (a 503 to OpenAI callers) before any byte is retried on B; the client
    sees B's ordinary answer; one usage event with retries=1 naming B."""
    a, b = fresh(c, "o529-a", "o529-b", a_behavior="status=529")
    def send(i):
        rid = "t51-529-%d" % i
        r = chat(c, "m-529", rid)
        assert r.status == 200 and r.headers.get("x-fake-upstream") == "o529-b", r
        assert r.json()["object"] == "chat.completion" and r.json()["choices"][0]["message"]["content"] == "w1 w2 w3", r
        return rid, r
    rid, r = until_a(c, a, send)
    assert a.stats()["requests"] == 1 and a.stats()["last"]["path"] == "/v1/messages", a.stats()
    assert b.stats()["last"]["headers"]["x-request-id"] == rid, "the retry keeps X-Request-Id"
    assert b.stats()["last"]["headers"]["x-api-key"] == SECRET
    row = row_of(c, rid)
    assert (row["status"], row["retries"], row["replica_id"]) == (200, 1, c.reps[b.url]), row
    assert (row["prompt_tokens"], row["completion_tokens"]) == (1, 3), row


def test_529_on_both_replicas_retried_once_R_HC_8(c):
    """Both overloaded: two attempts, then the client gets the upstream's 503-mapped answer."""
    a, b = fresh(c, "both-a", "both-b")
    r = chat(c, "m-both", "t51-both-1", content="[[fake status=529]] x")
    assert r.status == 503 and r.json() == {"error": {"message": "Overloaded", "type": "server_error",
                                                      "param": None, "code": "overloaded_error"}}, r
    assert r.headers.get("retry-after") == "5", r.headers
    assert total([a, b]) == 2, "retried exactly once: %r" % [a.stats(), b.stats()]
    row = row_of(c, "t51-both-1")
    assert (row["status"], row["retries"]) == (503, 1), row


def test_529_after_keepalive_still_failed_over_R_SSE_5(c):
    """A stream whose upstream answers 529 only after 1.5 s: a keep-alive has committed the
    200 stream head by then, but no data went out, so B still serves it invisibly."""
    a, b = fresh(c, "slow-a", "slow-b", a_behavior="ttfb_ms=1500 status=529")
    def send(i):
        rid = "t51-slow-%d" % i
        status, _, text = stream(c, "m-slow", rid)
        clean_stream(status, text)
        return rid, text
    rid, text = until_a(c, a, send)
    assert text.startswith(": keep-alive\n\n"), text
    row = row_of(c, rid)
    assert (row["status"], row["retries"], row["replica_id"]) == (200, 1, c.reps[b.url]), row


def test_529_after_keepalive_single_replica_error_event_R_SSE_4(c):
    """Nobody to fail over to: the translated 529 becomes the stream's error event."""
    (f,) = fresh(c, "ka")
    status, headers, text = stream(c, "m-ka", "t51-slow-single", content="[[fake ttfb_ms=1500 status=529]] x")
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), (status, headers)
    ds = datas(text)
    assert text.startswith(": keep-alive\n\n") and len(ds) == 1, text
    assert error_of(ds[0]) == {"message": "Overloaded", "type": "server_error", "param": None,
                               "code": "overloaded_error"}, text
    row = row_of(c, "t51-slow-single")
    assert (row["status"], row["retries"]) == (503, 0) and f.stats()["requests"] == 1, row


def test_connection_refused_served_by_other_replica_R_HC_8(c):
    (b,) = fresh(c, "conn-b")
    rids = ["t51-conn-%d" % i for i in range(3)]
    for rid in rids:
        r = chat(c, "m-conn", rid)
        assert r.status == 200 and r.headers.get("x-fake-upstream") == "conn-b" and r.elapsed < 1.0, r
    assert b.stats()["requests"] == 3, b.stats()
    rows = [row_of(c, rid) for rid in rids]
    assert [x["retries"] for x in rows].count(1) == 1 and all(x["status"] == 200 for x in rows), rows


def test_stream_closed_before_content_fails_over_R_SSE_5(c):
    """A sends message_start and a ping, then closes (die_after=0): with the guard the held
    role chunk never went out, so B serves the stream and the client sees one clean stream."""
    a, b = fresh(c, "die0-a", "die0-b", a_behavior="die_after=0 role_chunks=1")
    def send(i):
        rid = "t51-die0-%d" % i
        status, _, text = stream(c, "m-die0", rid)
        clean_stream(status, text)
        return rid, text
    rid, text = until_a(c, a, send)
    assert a.stats()["died"] == 1, a.stats()
    row = row_of(c, rid)
    assert (row["status"], row["retries"], row["completion_tokens"], row["replica_id"]) == \
        (200, 1, 3, c.reps[b.url]), row


def test_error_event_before_content_fails_over_R_SSE_5(c):
    """An `event: error` (overloaded) before the first content delta is failed over invisibly."""
    a, b = fresh(c, "err0-a", "err0-b", a_behavior="error_after=0")
    def send(i):
        rid = "t51-err0-%d" % i
        status, _, text = stream(c, "m-err0", rid)
        clean_stream(status, text)
        return rid, text
    rid, _ = until_a(c, a, send)
    assert a.stats()["completed"] == 1, a.stats()      # A ended its stream itself, with the error event
    row = row_of(c, rid)
    assert (row["status"], row["retries"], row["completion_tokens"]) == (200, 1, 3), row


def test_error_event_guard_off_reaches_client_R_SSE_5(c):
    """With --stream-guard off the role chunk goes out at once, so the same error event ends
    the stream (R-SSE-4) and B is never asked."""
    a, b = fresh(c, "ng-a", "ng-b", a_behavior="error_after=0")
    def send(i):
        rid = "t51-ng-%d" % i
        b0 = b.stats()["requests"]
        status, _, text = stream(c, "m-noguard", rid)
        assert status == 200, text
        return rid, (text, b.stats()["requests"] - b0)
    rid, (text, b_calls) = until_a(c, a, send)
    ds = datas(text)
    assert len(ds) == 2 and '"role":"assistant"' in ds[0], text
    assert error_of(ds[1]) == {"message": "Overloaded", "type": "server_error", "param": None,
                               "code": "overloaded_error"}, text
    assert b_calls == 0, "B was asked for A's stream although it had begun: %d calls" % b_calls
    row = row_of(c, rid)
    assert (row["retries"], row["error_code"]) == (0, "upstream_error"), row


# ---- R-HC-8 / R-SSE-4: never retried ----

def test_error_event_after_content_not_retried_R_SSE_4(c):
    """`event: error` after two deltas -> the chunks, then data: {"error":...}; no [DONE],
    no retry. The usage event says the stream failed (error_code)."""
    a, b = fresh(c, "late-a", "late-b")
    status, _, text = stream(c, "m-late", "t51-late-err", content="[[fake error_after=2]] x")
    assert status == 200, text
    ds = datas(text)
    assert contents(ds) == ["w1 ", "w2 "] and "[DONE]" not in ds, text
    assert error_of(ds[-1]) == {"message": "Overloaded", "type": "server_error", "param": None,
                                "code": "overloaded_error"}, text
    assert total([a, b]) == 1, "a stream that had begun was retried: %r" % [a.stats(), b.stats()]
    row = row_of(c, "t51-late-err")
    assert row["retries"] == 0 and row["stream"] == 1, row
    # As for a stream that breaks (upstream_error), not a success.
    assert row["error_code"] == "upstream_error", "the failed stream is recorded as a success: %r" % row


def test_stream_broken_after_content_not_retried_R_HC_8(c):
    a, b = fresh(c, "late-a", "late-b")
    status, _, text = stream(c, "m-late", "t51-late-die", content="[[fake die_after=2]] x")
    ds = datas(text)
    assert status == 200 and contents(ds) == ["w1 ", "w2 "] and "[DONE]" not in ds, text
    err = error_of(ds[-1])
    assert (err["type"], err["code"]) == ("server_error", "upstream_error"), err
    assert total([a, b]) == 1 and total([a, b], "died") == 1, [a.stats(), b.stats()]
    row = row_of(c, "t51-late-die")
    assert (row["retries"], row["error_code"]) == (0, "upstream_error"), row


def test_4xx_never_retried_R_HC_8(c):
    """Anthropic 400/401/404/413/429 pass (translated) with one upstream call each; 4xx does
    not ban the replica either."""
    fs = fresh(c, "c4-a", "c4-b")
    for st in (400, 401, 404, 413, 429):
        n0 = total(fs)
        rid = "t51-4xx-%d" % st
        r = chat(c, "m-4xx", rid, content="[[fake status=%d]] x" % st)
        assert r.status == st and set(r.json()["error"]) == ERROR_KEYS, r
        assert total(fs) - n0 == 1, "status %d retried: %r" % (st, [f.stats() for f in fs])
        assert row_of(c, rid)["retries"] == 0
    got = [chat(c, "m-4xx", "t51-4xx-ok-%d" % i).headers.get("x-fake-upstream") for i in range(2)]
    assert sorted(got) == ["c4-a", "c4-b"], "a 4xx banned a replica: %r" % got


def test_first_byte_timeout_not_retried_R_HC_8(c):
    fs = fresh(c, "fbt-a", "fbt-b")
    r = chat(c, "m-fbt", "t51-fbt-1", content="[[fake ttfb_ms=2000]] x")
    assert r.status == 504 and r.json()["error"]["code"] == "upstream_timeout", r
    assert 0.4 <= r.elapsed < 1.5, "504 after %.2fs with a 0.5 s first-byte timeout" % r.elapsed
    wait_for(lambda: total(fs, "aborted") == 1, 3, what="the upstream to see the connection closed")
    time.sleep(0.3)
    assert total(fs) == 1, "a first-byte timeout was retried: %r" % [f.stats() for f in fs]
    row = row_of(c, "t51-fbt-1")
    assert (row["status"], row["error_code"], row["retries"]) == (504, "upstream_timeout", 0), row


# ---- R-SSE-3: the client leaves ----

def open_stream(c, b, rid):
    conn = http.client.HTTPConnection("127.0.0.1", c.gw.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(b).encode(),
                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + c.key,
                          "X-Request-Id": rid})
    return conn, conn.sock


def read_until(resp, needle, timeout):
    buf, end = b"", time.time() + timeout
    while needle not in buf and time.time() < end:
        b = resp.read1(65536)
        if not b:
            break
        buf += b
    return buf


def hang_up(conn, sock, resp):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    resp.close()
    conn.close()
    sock.close()


def test_client_disconnect_aborts_upstream_R_SSE_3(c):
    """The client closes after the first content chunk: the Messages transfer is aborted
    (the stand-in sees the close) and the usage event is 499 client_disconnected, charged."""
    for rid, beh in (("t51-disc-1", "chunks=100 gap_ms=300"), ("t51-disc-2", "hang_after=1")):
        (f,) = fresh(c, "disc")
        conn, sock = open_stream(c, body("m-disc", "[[fake %s]] x" % beh, True), rid)
        resp = conn.getresponse()
        got = read_until(resp, b'"content":"w1 "', 5)
        assert resp.status == 200 and b'"content":"w1 "' in got and b"event:" not in got, got
        t_close = time.time()
        hang_up(conn, sock, resp)
        wait_for(lambda: f.stats()["aborted"] == 1, 5, what="the upstream to see the abort (%s)" % beh)
        took = time.time() - t_close
        print("   %s: upstream aborted %.2fs after the client left" % (beh, took))
        assert took < KEEPALIVE_S + 2.5, took
        assert f.stats()["requests"] == 1 and f.stats()["completed"] == 0, f.stats()
        row = row_of(c, rid)
        assert (row["status"], row["error_code"], row["finish_reason"], row["stream"]) == \
            (499, "client_disconnected", "client_disconnected", 1), row
        assert row["completion_tokens"] >= 1 and row["prompt_tokens"] >= 1, "charged for what was produced: %r" % row


# ---- R-SSE-2 and what cannot be translated ----

def test_keepalives_while_messages_upstream_silent_R_SSE_2(c):
    """1.5 s between upstream events: `: keep-alive` comments while the guard holds the role
    chunk and between deltas; the translated stream itself is intact."""
    (f,) = fresh(c, "ka")
    status, _, text = stream(c, "m-ka", "t51-ka-1", content="[[fake chunks=2 gap_ms=1500]] x")
    assert status == 200, text
    kinds = []
    for e in [e for e in text.split("\n\n") if e.strip()]:
        if e.startswith(":"):
            assert e == ": keep-alive", "unexpected comment %r" % e
            kinds.append("ka")
        elif '"role":"assistant"' in e:
            kinds.append("role")
        elif e == "data: [DONE]":
            kinds.append("done")
        elif '"finish_reason":"stop"' in e:
            kinds.append("finish")
        else:
            kinds.append("c:" + "".join(contents([e[6:]])))
    data_kinds = [k for k in kinds if k != "ka"]
    assert data_kinds == ["role", "c:w1 ", "c:w2", "finish", "done"], kinds
    assert kinds[:kinds.index("c:w1 ")].count("ka") >= 1, "no keep-alive before the first delta: %r" % kinds
    assert kinds[kinds.index("c:w1 "):kinds.index("c:w2")].count("ka") >= 1, "none between deltas: %r" % kinds
    assert f.stats()["completed"] == 1 and row_of(c, "t51-ka-1")["completion_tokens"] == 2


def test_untranslatable_event_dropped_without_crash(c):
    """An upstream event whose data is not JSON cannot be translated: it is left out, the
    stream goes on to [DONE], no responder dies."""
    (f,) = fresh(c, "ka")
    pids = c.gw.responder_pids()
    status, _, text = stream(c, "m-ka", "t51-bad-1", content="[[fake chunks=4 bad_json=1]] x")
    assert status == 200 and "not json" not in text, text
    assert contents(datas(text)) == ["w1 ", "w2 ", "w3 ", "w4"] and datas(text)[-1] == "[DONE]", text
    assert c.gw.responder_pids() == pids, "a responder died: %r -> %r" % (pids, c.gw.responder_pids())
    assert f.stats()["completed"] == 1


# ---- R-AUTO-5: model auto across protocols ----

def auto(c, rid, stream_=False, content="hello"):
    if stream_:
        return stream(c, "auto", rid, content, key=c.auto_key)
    return chat(c, "auto", rid, content, key=c.auto_key)


def test_auto_serves_from_anthropic_candidate_R_ANT_1(c):
    """The cheapest candidate is the anthropic one: auto is translated there like a named model."""
    a, o = fresh(c, "auto-ant", "auto-oai")
    r = auto(c, "t51-auto-1")
    assert r.status == 200 and r.headers["x-routed-model"] == "claude-auto" and "x-fallback" not in r.headers, r
    assert r.json()["object"] == "chat.completion" and r.json()["choices"][0]["message"]["content"] == "w1 w2 w3", r
    up = json.loads(a.stats()["last"]["body"])
    assert a.stats()["last"]["path"] == "/v1/messages" and up["model"] == "claude-auto" and up["max_tokens"] == 4096, up
    assert o.stats()["requests"] == 0
    status, _, text = auto(c, "t51-auto-2", stream_=True)
    clean_stream(status, text)
    assert a.stats()["requests"] == 2 and o.stats()["requests"] == 0


def test_auto_degrades_from_anthropic_to_openai_R_AUTO_5(c):
    """The anthropic candidate answers 529 -> the next candidate (openai) serves, its body's
    model rewritten; one usage event attributed to the serving endpoint."""
    a, o = fresh(c, "auto-ant", "auto-oai", a_behavior="status=529")
    try:
        r = auto(c, "t51-auto-deg-1")
        assert r.status == 200, r
        assert r.headers["x-routed-model"] == "gpt-auto" and r.headers.get("x-fallback") == "true", r.headers
        assert r.headers.get("x-degradation-level") == "1" and r.headers.get("x-fake-upstream") == "auto-oai", r.headers
        assert a.stats()["requests"] == 1 and a.stats()["last"]["path"] == "/v1/messages", a.stats()
        last = o.stats()["last"]
        assert last["path"] == "/v1/chat/completions" and json.loads(last["body"])["model"] == "gpt-auto", last
        assert "x-api-key" not in last["headers"] and "authorization" not in last["headers"], last["headers"]
        row = row_of(c, "t51-auto-deg-1")
        assert (row["model"], row["endpoint_id"], row["status"], row["retries"]) == \
            ("gpt-auto", c.eps["ep-auto-oai"], 200, 1), row
        # A stream that dies before its first delta degrades too (guard held the role chunk).
        a.behavior("die_after=0 role_chunks=1")
        status, _, text = auto(c, "t51-auto-deg-2", stream_=True)
        clean_stream(status, text)
        row = row_of(c, "t51-auto-deg-2")
        assert (row["model"], row["status"]) == ("gpt-auto", 200), row
        # A 4xx of the anthropic candidate passes through, never degraded.
        a.behavior("status=400")
        n0 = o.stats()["requests"]
        r = auto(c, "t51-auto-4xx")
        assert r.status == 400 and r.json()["error"]["code"] == "invalid_request_error", r
        assert o.stats()["requests"] == n0, "a 4xx was degraded to the next candidate"
    finally:
        a.behavior("")


def test_zz_credential_never_in_logs_R_ANT_4(c):
    hits = []
    for root, _, files in os.walk(c.gw.dir):
        for name in files:
            if name.startswith(("sluice.db", "sluice.state")) or ".sock" in name:
                continue
            with open(os.path.join(root, name), "rb") as f:
                if SECRET.encode() in f.read():
                    hits.append(name)
    assert not hits, "R-ANT-4: the upstream credential is written in %r" % hits
    assert "t51-529-" in c.gw.log_text(), "not the live log"


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
