#!/usr/bin/env python3
"""t0083-ingress-accounting: what the new ingresses bill, how they end, and what they let through.

Guards fixes to the /v1/messages and /v1/responses ingresses (R-USE-1, R-USE-3, R-SSE-3,
R-SSE-4, R-IDEM-2, R-API-7, R-API-8, R-ANT-6, R-ANT-7):
- a native Messages stream cut short after message_start (the upstream breaks, or the client
  leaves) is billed at least the content relayed, marked estimated; message_start's
  output_tokens=1 is only the start, not the stream's usage;
- a translated Messages request whose upstream reports no usage is estimated (prompt and
  completion > 0), not billed 0; with usage, the stand-in's counts, not estimated;
- cache read / creation tokens survive the OpenAI-caller -> anthropic-endpoint translation
  (the reasoning sub-case, Anthropic caller -> OpenAI endpoint, is not covered: the OpenAI
  stand-in's chat route has no reasoning knob, reasoning_tokens is a Responses-only directive);
- an error event after content ends the request failed (error_code upstream_error) and an
  Idempotency-Key retry runs again instead of replaying the failed stream;
- previous_response_id pinned to a replica that now fails gets that replica's answer, never
  another replica's 404;
- a Responses stream that breaks ends in the Responses API's own `event: error` shape;
- count_tokens for an OpenAI-only model counts locally even when every replica is down;
- a proxy's Basic Authorization beside a valid x-api-key is not a failed Bearer;
- with CORS off a pass-through OPTIONS is the upstream's, with CORS on sluice's preflight;
- OpenAI-Organization / OpenAI-Project / Origin never reach an OpenAI upstream.

The native path forwards no client header but anthropic-* and traceparent, so the
stand-in's directives travel in the prompt ("[[fake k=v]]") there; on OpenAI endpoints
X-Fake-Behavior is forwarded."""
import http.client
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_tenant, setup_with, stop_all, wait_for

PID = os.getpid()
SECRET = "sk-ant-api03-t0083-%d-Zr8Kq" % PID
FAKES = ("ant", "oai", "pin1", "pin2", "rsp", "ct")
ORIGIN = "http://app.t0083.example"
BASIC = "Basic dXNlcjpwYXNz"


def setup():
    return setup_with(build, teardown)


def build(c):
    for name in FAKES:
        setattr(c, name, Fake("t83-" + name))
    c.gw = Gateway("t0083", procs=2, threads=16, keepalive_ms=1000)
    gw = c.gw
    c.key = setup_tenant(gw, "acme", "alice")
    # Native Messages: an anthropic endpoint with its own credential.
    gw.ctl_secret(SECRET, "endpoint", "add", "ep-ant", "--tenant", "acme", "--protocol", "anthropic")
    gw.ctl("replica", "add", "ep-ant", c.ant.url)
    gw.ctl("route", "add", "claude", "ep-ant", "--tenant", "acme")
    # An OpenAI endpoint: translated Messages, chat, Responses, the pass-through.
    add_endpoint(gw, "ep-oai", "acme", [c.oai])
    gw.ctl("route", "add", "gpt", "ep-oai", "--tenant", "acme")
    # Responses pinning: two stand-ins round robin, each knowing only its own ids.
    add_endpoint(gw, "ep-pin", "acme", [c.pin1, c.pin2])
    gw.ctl("route", "add", "gpt-pin", "ep-pin", "--tenant", "acme")
    # A Responses stream that breaks: its own replica, so a ban touches nothing else.
    add_endpoint(gw, "ep-rsp", "acme", [c.rsp])
    gw.ctl("route", "add", "gpt-rsp", "ep-rsp", "--tenant", "acme")
    # count_tokens: an OpenAI-only model whose every replica is down (disabled).
    gw.ctl("endpoint", "add", "ep-ct", "--tenant", "acme")
    gw.ctl("replica", "add", "ep-ct", c.ct.url, "--state", "disabled")
    gw.ctl("route", "add", "gpt-ct", "ep-ct", "--tenant", "acme")
    gw.start()
    return c


def teardown(c):
    stop_all(c, "gw", *FAKES)


# ---- helpers ----

def mbody(model="claude", text="hello there", **extra):
    b = {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": text}]}
    b.update(extra)
    return b


def ant_headers(c, rid=None, extra=None):
    h = {"anthropic-version": "2023-06-01", "x-api-key": c.key}
    if rid:
        h["X-Request-Id"] = rid
    h.update(extra or {})
    return h


def post_messages(c, b, rid=None, headers=None):
    return c.gw.request("POST", "/v1/messages", b, headers=ant_headers(c, rid, headers))


def row_of(c, rid, timeout=8):
    rows = wait_for(lambda: c.gw.usage_events("request_id = ?", rid), timeout, what="usage row of %s" % rid)
    assert len(rows) == 1, "one usage event per request: %r" % rows
    return rows[0]


def sse_blocks(text):
    """[(event name or None, data text)] of an SSE body; comment lines (keep-alives) skipped."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            else:
                raise AssertionError("unexpected SSE line %r in %r" % (line, text))
        if name is not None or data:
            out.append((name, "\n".join(data)))
    return out


def named_events(text):
    """[(event name, data object)] of a stream whose every event is named with JSON data of that type."""
    out = []
    for name, data in sse_blocks(text):
        assert name is not None, "an unnamed event %r in %r" % (data, text)
        obj = json.loads(data)
        assert obj.get("type") == name, "event %s carries data of type %r: %r" % (name, obj.get("type"), data)
        out.append((name, obj))
    return out


def open_stream(c, path, b, headers):
    conn = http.client.HTTPConnection("127.0.0.1", c.gw.port, timeout=10)
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers)
    conn.request("POST", path, body=json.dumps(b).encode(), headers=hdrs)
    return conn, conn.sock


def hang_up(conn, sock, resp=None):
    """The client leaves: FIN now, whatever still references the socket."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    if resp is not None:
        resp.close()
    conn.close()
    sock.close()


def last_headers(fake):
    return fake.stats()["last"]["headers"]


def preflight(c, path, origin=ORIGIN):
    return c.gw.request("OPTIONS", path, headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                                  "Access-Control-Request-Headers": "authorization, content-type"})


def set_origins(c, value, want_status):
    c.gw.ctl("config", "set", "cors_allowed_origins", value)
    # Every responder must have reloaded: several answers in a row agree.
    wait_for(lambda: all(preflight(c, "/v1/chat/completions").status == want_status for _ in range(6)), 5,
             interval=0.1, what="cors_allowed_origins=%r applied" % value)


# ---- 1. a native Messages stream cut short after message_start (R-USE-1, R-SSE-3) ----

def test_native_stream_upstream_breaks_billed_what_was_relayed_R_USE_1(c):
    """die_after=4: message_start (output_tokens 1), four deltas, then the upstream closes.
    The row bills at least the four deltas, estimated (not message_start's 1, as measured)."""
    r = post_messages(c, mbody(text="[[fake chunks=10 die_after=4 prompt_tokens=9]] break please", stream=True),
                      rid="t83-ant-die")
    assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream"), r
    blocks = sse_blocks(r.body.decode())
    names = [n for n, _ in blocks]
    assert names[0] == "message_start" and names.count("content_block_delta") == 4, names
    assert "message_stop" not in names and "message_delta" not in names, names
    start = json.loads(blocks[0][1])
    assert start["message"]["usage"]["output_tokens"] == 1, "the stand-in's message_start: %r" % start
    row = row_of(c, "t83-ant-die")
    assert row["completion_tokens"] >= 4, "billed %r for 4 relayed deltas (message_start's 1?): %r" % (
        row["completion_tokens"], row)
    assert row["usage_estimated"] == 1, "a broken stream's usage is estimated: %r" % row
    assert row["prompt_tokens"] == 9, "message_start's input_tokens: %r" % row
    assert row["stream"] == 1 and row["error_code"] == "upstream_error", row


def test_native_stream_client_leaves_billed_what_was_relayed_R_SSE_3(c):
    """A slow native stream (gap_ms); the client reads three deltas and hangs up: 499,
    at least those three deltas billed, estimated."""
    rid = "t83-ant-gone"
    n_aborted = c.ant.stats()["aborted"]
    conn, sock = open_stream(c, "/v1/messages",
                             mbody(text="[[fake chunks=40 gap_ms=300 prompt_tokens=9]] slow please", stream=True),
                             ant_headers(c, rid))
    resp = conn.getresponse()
    assert resp.status == 200, resp.status
    buf, deadline = b"", time.time() + 8
    while buf.count(b"event: content_block_delta") < 3 and time.time() < deadline:
        b = resp.read1(65536)
        if not b:
            break
        buf += b
    got = buf.count(b"event: content_block_delta")
    assert got >= 3 and b"event: message_start" in buf, buf
    hang_up(conn, sock, resp)
    wait_for(lambda: c.ant.stats()["aborted"] > n_aborted, 6, what="the upstream to see the abort")
    row = row_of(c, rid)
    assert row["status"] == 499 and row["error_code"] == "client_disconnected", row
    assert row["completion_tokens"] >= got, "billed %r, the client had received %d deltas: %r" % (
        row["completion_tokens"], got, row)
    assert row["usage_estimated"] == 1, "a stream the client left is estimated: %r" % row
    assert row["prompt_tokens"] == 9, row


# ---- 2. translated Messages without / with upstream usage (R-USE-1) ----

def test_translated_no_usage_estimated_R_USE_1(c):
    for stream in (False, True):
        rid = "t83-tr-nousage-%d" % stream
        r = post_messages(c, mbody("gpt", "[[fake chunks=5 no_usage=1]] please estimate these words", stream=stream),
                          rid=rid)
        assert r.status == 200, (stream, r)
        if stream:
            names = [n for n, _ in named_events(r.body.decode())]
            assert names[-1] == "message_stop" and "error" not in names, names
        else:
            assert r.json()["content"] == [{"type": "text", "text": "w1 w2 w3 w4 w5"}], r
        up = json.loads(c.oai.stats()["last"]["body"])
        assert up["messages"][-1]["content"].startswith("[[fake"), up
        row = row_of(c, rid)
        assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0, \
            "no upstream usage must be estimated, not billed 0 (stream=%s): %r" % (stream, row)
        assert row["usage_estimated"] == 1, "stream=%s: %r" % (stream, row)
        assert (row["status"], row["stream"], row["path"]) == (200, int(stream), "/v1/messages"), row


def test_translated_with_usage_exact_R_USE_1(c):
    for stream in (False, True):
        rid = "t83-tr-usage-%d" % stream
        r = post_messages(c, mbody("gpt", "[[fake chunks=4 prompt_tokens=11 completion_tokens=7]] hi", stream=stream),
                          rid=rid)
        assert r.status == 200, (stream, r)
        row = row_of(c, rid)
        assert (row["prompt_tokens"], row["completion_tokens"], row["usage_estimated"], row["stream"]) == \
            (11, 7, 0, int(stream)), "stream=%s: %r" % (stream, row)


# ---- 3. usage details through a translation ----

def test_chat_to_anthropic_keeps_cache_parts_R_USE_1(c):
    """An OpenAI caller on an anthropic endpoint: cache read and creation recorded apart,
    prompt = input + cache read + cache creation, non-stream and stream."""
    txt = "[[fake prompt_tokens=10 completion_tokens=6 cache_read_tokens=7 cache_write_tokens=3]] cached"
    for stream in (False, True):
        rid = "t83-chat-ant-%d" % stream
        r = c.gw.request("POST", "/v1/chat/completions",
                         {"model": "claude", "max_tokens": 50, "messages": [{"role": "user", "content": txt}],
                          "stream": stream}, key=c.key, headers={"X-Request-Id": rid})
        assert r.status == 200, (stream, r)
        assert c.ant.stats()["last"]["path"] == "/v1/messages", c.ant.stats()["last"]
        row = row_of(c, rid)
        assert (row["prompt_tokens"], row["completion_tokens"], row["cache_read_tokens"],
                row["cache_creation_tokens"], row["usage_estimated"], row["stream"]) == \
            (20, 6, 7, 3, 0, int(stream)), "stream=%s: %r" % (stream, row)


# ---- 4. an error event after content (R-USE-3, R-IDEM-2) ----

def test_native_error_event_fails_request_and_is_not_replayed_R_IDEM_2(c):
    b = mbody(text="[[fake chunks=4 error_after=2]] idempotent but failing", stream=True)
    idem = {"Idempotency-Key": "t83-idem-err-%d" % PID}
    n0 = c.ant.stats()["requests"]
    r1 = post_messages(c, b, rid="t83-idem-err-1", headers=idem)
    assert r1.status == 200, r1
    ev = named_events(r1.body.decode())
    names = [n for n, _ in ev]
    assert names.count("content_block_delta") == 2 and names[-1] == "error", names
    assert ev[-1][1]["error"]["type"] == "overloaded_error", ev[-1]
    row = row_of(c, "t83-idem-err-1")
    assert row["error_code"] == "upstream_error", "an error event after content ends the request failed: %r" % row
    assert c.ant.stats()["requests"] - n0 == 1, c.ant.stats()
    r2 = post_messages(c, b, rid="t83-idem-err-2", headers=idem)
    assert r2.status == 200, r2
    assert r2.headers.get("x-idempotent-replay") is None, "the failed stream was replayed: %r" % r2.headers
    assert c.ant.stats()["requests"] - n0 == 2, "the retry did not reach the upstream: %r" % c.ant.stats()


# ---- 5. a pinned replica that fails (R-API-8) ----

def test_pinned_replica_failure_is_its_own_answer_R_API_8(c):
    r = c.gw.request("POST", "/v1/responses", {"model": "gpt-pin", "input": "remember me"}, key=c.key)
    assert r.status == 200, r
    rid, home = r.json()["id"], r.headers.get("x-fake-upstream")
    assert home in ("t83-pin1", "t83-pin2") and rid.startswith("resp_%s_" % home), (rid, home)
    a, b = (c.pin1, c.pin2) if home == "t83-pin1" else (c.pin2, c.pin1)
    a.behavior("status=503")
    try:
        na, nb = a.stats()["requests"], b.stats()["requests"]
        f = c.gw.request("POST", "/v1/responses", {"model": "gpt-pin", "input": "and now?",
                                                   "previous_response_id": rid}, key=c.key)
        assert f.status == 503, "expected the pinned replica's 503, got %r" % f
        assert f.headers.get("x-fake-upstream") == home, "not the pinned replica's answer: %r" % f.headers
        assert f.json() == {"error": {"message": "fake error 503", "type": "server_error", "param": None,
                                      "code": None}}, "the pinned replica's own body: %r" % f
        assert b.stats()["requests"] == nb, "the follow-up went to the replica without the response: %r" % f
        assert a.stats()["requests"] > na, "the pinned replica was not asked"
    finally:
        a.behavior("")


# ---- 6. a Responses stream that breaks (R-SSE-4, R-API-8) ----

def test_responses_stream_break_ends_in_responses_error_event_R_SSE_4(c):
    r = c.gw.request("POST", "/v1/responses", {"model": "gpt-rsp", "input": "break the stream", "stream": True},
                     key=c.key, headers={"X-Fake-Behavior": "chunks=5 die_after=2"})
    assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream"), r
    text = r.body.decode()
    blocks = sse_blocks(text)
    names = [n for n, _ in blocks]
    assert names[0] == "response.created" and names.count("response.output_text.delta") == 2, names
    assert "response.completed" not in names, names
    assert 'data: {"error"' not in text, "an OpenAI chat-shaped error event in a Responses stream:\n%s" % text
    name, data = blocks[-1]
    assert name == "error", "the stream must end with `event: error`: %r" % blocks[-1:]
    obj = json.loads(data)
    assert obj.get("type") == "error", obj
    assert isinstance(obj.get("code"), str) and obj["code"], "a Responses error event has a code: %r" % obj
    assert isinstance(obj.get("message"), str) and obj["message"], obj
    assert "error" not in obj, "the Responses error event is flat, not {\"error\":...}: %r" % obj


# ---- 7. count_tokens with every replica down (R-ANT-7) ----

def test_count_tokens_local_when_replicas_down_R_ANT_7(c):
    chat = c.gw.request("POST", "/v1/chat/completions",
                        {"model": "gpt-ct", "messages": [{"role": "user", "content": "x"}]}, key=c.key)
    assert chat.status == 503, "the premise: no replica of gpt-ct serves: %r" % chat
    raw = json.dumps({"model": "gpt-ct", "messages": [{"role": "user", "content": "count me while down " * 5}]})
    r = c.gw.request("POST", "/v1/messages/count_tokens", raw, headers=ant_headers(c, "t83-ct-down"))
    assert r.status == 200, "count_tokens needs no replica: %r" % r
    assert r.json() == {"input_tokens": len(raw.encode()) // 4 + 1}, (r, len(raw))
    assert c.ct.stats()["requests"] == 0, "count_tokens reached the (disabled) upstream"


# ---- 8. a Basic Authorization beside x-api-key (R-ANT-6) ----

def test_basic_authorization_with_x_api_key_R_ANT_6(c):
    h = {"Authorization": BASIC, "x-api-key": c.key, "anthropic-version": "2023-06-01"}
    r = c.gw.request("POST", "/v1/messages", mbody(text="basic beside x-api-key"), headers=h)
    assert r.status == 200 and r.json()["type"] == "message", r
    r = c.gw.request("POST", "/v1/chat/completions", {"model": "gpt", "messages": [{"role": "user", "content": "hi"}]},
                     headers={"Authorization": BASIC, "x-api-key": c.key})
    assert r.status == 200 and r.json()["object"] == "chat.completion", r
    up = last_headers(c.oai)
    assert "authorization" not in up and "x-api-key" not in up, "the caller's credentials went upstream: %r" % up
    # Neither credential alone is enough when it is not a valid key.
    r = c.gw.request("POST", "/v1/chat/completions", {"model": "gpt", "messages": [{"role": "user", "content": "x"}]},
                     headers={"Authorization": BASIC})
    assert r.status == 401, r
    r = c.gw.request("POST", "/v1/chat/completions", {"model": "gpt", "messages": [{"role": "user", "content": "x"}]},
                     headers={"Authorization": BASIC, "x-api-key": "sk-not-a-key-%d" % PID})
    assert r.status == 401, r


# ---- 9. OPTIONS on the pass-through (R-API-7) ----

def test_proxy_options_forwarded_unless_cors_on_R_API_7(c):
    n0 = c.oai.stats()["requests"]
    r = c.gw.request("OPTIONS", "/api/v1/proxy/ep-oai/echo", key=c.key,
                     headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert r.status == 200, "with CORS off the pass-through's OPTIONS is the upstream's: %r" % r
    j = r.json()
    assert (j["method"], j["path"]) == ("OPTIONS", "/echo"), j
    assert c.oai.stats()["requests"] - n0 == 1, c.oai.stats()
    set_origins(c, ORIGIN, 204)
    try:
        n0 = c.oai.stats()["requests"]
        r = preflight(c, "/api/v1/proxy/ep-oai/echo")
        assert r.status == 204 and r.body == b"", "with CORS on sluice answers the preflight: %r" % r
        assert r.headers.get("access-control-allow-origin") == ORIGIN, r.header_list
        assert c.oai.stats()["requests"] == n0, "a preflight reached the upstream"
    finally:
        set_origins(c, "", 403)


# ---- 10. caller headers that pick the operator's upstream account ----

def test_openai_account_headers_and_origin_not_forwarded(c):
    evil = {"OpenAI-Organization": "org-evil", "OpenAI-Project": "proj-evil", "Origin": "http://evil.example",
            "X-Fake-Behavior": "chunks=2"}
    for path, b in (("/v1/chat/completions", {"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}),
                    ("/v1/responses", {"model": "gpt", "input": "hi"})):
        r = c.gw.request("POST", path, b, key=c.key, headers=evil)
        assert r.status == 200, (path, r)
        last = c.oai.stats()["last"]
        assert last["path"] == path, last
        h = last["headers"]
        assert h.get("x-fake-behavior") == "chunks=2", "the harmless header did not go upstream: %r" % h
        for name in ("openai-organization", "openai-project", "origin"):
            assert name not in h, "%s: %s reached the upstream: %r" % (path, name, h)


run_tests(globals(), setup, teardown)
