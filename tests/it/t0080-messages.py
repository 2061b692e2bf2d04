#!/usr/bin/env python3
"""t0080-messages: the Anthropic Messages ingress, POST /v1/messages (R-ANT-6, R-ANT-7).

Callers speak Messages, authenticated by `x-api-key` or `Authorization: Bearer`; the body's
model is routed like chat (aliases, failover, limits, idempotency, usage rows, session
affinity on `system` + the first user turn, only the `cache_control` system blocks when
some carry it). To an `--protocol anthropic` endpoint the request is a native pass-through
(body unchanged but `model`, the caller's anthropic-version / anthropic-beta and query kept,
the answer byte for byte with the upstream's request-id, all four usage parts recorded); to
an OpenAI endpoint it is translated both ways (the exact Anthropic event sequence, usage
asked for upstream). Errors are Anthropic-shaped (401 authentication_error, 404
not_found_error, 400 invalid_request_error, 429 rate_limit_error with Retry-After and
X-RateLimit-*, 5xx api_error / overloaded_error), inside a stream as `event: error`.
POST /v1/messages/count_tokens (native, or body bytes // 4 + 1 without an upstream call;
spends a call, never tokens) and GET /v1/models[/{id}] in Anthropic's shape with
anthropic-version (R-ANT-7).

The native path forwards no client header but anthropic-* and traceparent, so the
stand-in's directives travel in the prompt ("[[fake k=v]]")."""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (Fake, Gateway, add_endpoint, free_port, http_request, run_tests, setup_tenant, setup_with,
                     stop_all, wait_for)

PID = os.getpid()
SECRET = "sk-ant-api03-t0080-%d-Hq3Wm" % PID
FAKES = ("ant", "oai", "fo_bad", "fo_good", "aff1", "aff2", "naff1", "naff2", "down")


def setup():
    return setup_with(build, teardown)


def build(c):
    for name in FAKES:
        setattr(c, name, Fake("t80-" + name))
    c.fo_bad.behavior("status=529")
    c.down.behavior("status=503")
    c.gw = Gateway("t0080", procs=2, threads=16)
    gw = c.gw
    c.key = setup_tenant(gw, "acme", "alice")
    k = gw.ctl("key", "add", "--user", "alice", "--qps", 1)
    c.qps_key, c.qps_key_id = k["key"], k["id"]
    # Native: an anthropic endpoint with its own credential; an alias and a plain route.
    gw.ctl_secret(SECRET, "endpoint", "add", "ep-ant", "--tenant", "acme", "--protocol", "anthropic")
    gw.ctl("replica", "add", "ep-ant", c.ant.url)
    gw.ctl("route", "add", "claude", "ep-ant", "--tenant", "acme", "--target-model", "claude-real")
    gw.ctl("route", "add", "claude-direct", "ep-ant", "--tenant", "acme")
    gw.ctl("route", "add", "claude-capped", "ep-ant", "--tenant", "acme")
    gw.ctl("policy", "set", "claude-capped", "--max-output", 100)
    # Native failover: a replica that answers 529 overloaded, and a good one.
    gw.ctl_secret(SECRET, "endpoint", "add", "ep-fo", "--tenant", "acme", "--protocol", "anthropic")
    gw.ctl("replica", "add", "ep-fo", c.fo_bad.url)
    gw.ctl("replica", "add", "ep-fo", c.fo_good.url)
    gw.ctl("route", "add", "claude-fo", "ep-fo", "--tenant", "acme")
    # Translated: an OpenAI endpoint.
    add_endpoint(gw, "ep-oai", "acme", [c.oai])
    gw.ctl("route", "add", "gpt", "ep-oai", "--tenant", "acme", "--target-model", "gpt-real")
    # Affinity: two OpenAI stand-ins round robin, so a miss alternates.
    add_endpoint(gw, "ep-aff", "acme", [c.aff1, c.aff2], affinity="on")
    gw.ctl("route", "add", "gpt-aff", "ep-aff", "--tenant", "acme")
    gw.ctl_secret(SECRET, "endpoint", "add", "ep-naff", "--tenant", "acme", "--protocol", "anthropic",
               "--affinity", "on")
    gw.ctl("replica", "add", "ep-naff", c.naff1.url)
    gw.ctl("replica", "add", "ep-naff", c.naff2.url)
    gw.ctl("route", "add", "claude-aff", "ep-naff", "--tenant", "acme")
    # Unreachable: nothing listens on the replica's port; and one that answers 503.
    gw.ctl("endpoint", "add", "ep-dead", "--tenant", "acme")
    gw.ctl("replica", "add", "ep-dead", "http://127.0.0.1:%d" % free_port())
    gw.ctl("route", "add", "gpt-dead", "ep-dead", "--tenant", "acme")
    add_endpoint(gw, "ep-down", "acme", [c.down])
    gw.ctl("route", "add", "gpt-down", "ep-down", "--tenant", "acme")
    gw.start()
    return c


def teardown(c):
    stop_all(c, "gw", *FAKES)


# ---- helpers ----

def body(model="claude", text="hello there", **extra):
    b = {"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": text}]}
    b.update(extra)
    return b


def post(c, b, path="/v1/messages", key=None, rid=None, headers=None, bearer=False):
    h = {"anthropic-version": "2023-06-01"}
    k = c.key if key is None else key
    if k:
        h["Authorization" if bearer else "x-api-key"] = ("Bearer " + k) if bearer else k
    if rid:
        h["X-Request-Id"] = rid
    h.update(headers or {})
    return c.gw.request("POST", path, b, headers=h)


def direct(fake, b, path="/v1/messages"):
    """The same request straight to a stand-in, as the gateway would send it natively."""
    return http_request(fake.port, "POST", path, b, {"x-api-key": SECRET, "anthropic-version": "2023-06-01"})


def last(fake):
    return fake.stats()["last"]


def ordered(text):
    """JSON with object members kept in order (lists of pairs), to see reordering."""
    return json.loads(text, object_pairs_hook=lambda pairs: [list(p) for p in pairs])


def row_of(c, rid):
    rows = wait_for(lambda: c.gw.usage_events("request_id = ?", rid), 5, what="usage row of %s" % rid)
    assert len(rows) == 1, "one usage event per request: %r" % rows
    return rows[0]


def events(text):
    """[(event name, data object)] of an Anthropic SSE body; every data line is JSON."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        name, data = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
            else:
                raise AssertionError("unexpected SSE line %r in %r" % (line, text))
        assert name and data is not None, "event without name or data: %r" % block
        assert data["type"] == name, "event %s carries data of type %s" % (name, data["type"])
        out.append((name, data))
    return out


def anthropic_error(r, status, etype):
    assert r.status == status, "expected %d, got %r" % (status, r)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    j = r.json()
    assert j["type"] == "error" and set(j["error"]) >= {"type", "message"}, j
    assert j["error"]["type"] == etype, "error type %r, expected %r: %r" % (j["error"]["type"], etype, j)
    assert isinstance(j["error"]["message"], str) and j["error"]["message"], j
    assert "code" not in j["error"] and "param" not in j["error"], "an OpenAI-shaped error: %r" % j
    return j


def norm_ids(b):
    return re.sub(rb"req_fake\d+", b"req_X", re.sub(rb"msg_fake\d+", b"msg_X", b))


# ---- 1. authentication (R-ANT-6) ----

def test_auth_x_api_key_and_bearer_R_ANT_6(c):
    r = post(c, body(), rid="t80-auth-x")
    assert r.status == 200 and r.json()["type"] == "message", r
    r = post(c, body(), rid="t80-auth-b", bearer=True)
    assert r.status == 200 and r.json()["type"] == "message", r
    h = last(c.ant)["headers"]
    assert "authorization" not in h and h.get("x-api-key") == SECRET, "the caller's credential went upstream: %r" % h
    assert row_of(c, "t80-auth-b")["key_id"] == row_of(c, "t80-auth-x")["key_id"]


def test_auth_errors_anthropic_shaped_R_ANT_6(c):
    n0 = c.ant.stats()["requests"]
    anthropic_error(post(c, body(), key=""), 401, "authentication_error")
    anthropic_error(post(c, body(), key="sk-not-a-real-key-%d" % PID), 401, "authentication_error")
    anthropic_error(post(c, body(), key="sk-not-a-real-key-%d" % PID, bearer=True), 401, "authentication_error")
    assert c.ant.stats()["requests"] == n0, "an unauthenticated request reached the upstream"


# ---- 2. native pass-through to an anthropic endpoint ----

def test_native_request_unchanged_but_model_R_ANT_6(c):
    """Alias target in `model`; every other member, cache_control, tool order and unknown
    fields untouched; the caller's anthropic-version / anthropic-beta / traceparent and the
    query travel; no other client header does."""
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    b = {"model": "claude", "max_tokens": 64,
         "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
         "tools": [{"name": "zeta_tool", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}},
                   {"name": "alpha_tool", "description": "second", "input_schema": {"type": "object"}}],
         "messages": [{"role": "user", "content": [
             {"type": "text", "text": "first block", "x_unknown_block_field": {"keep": [1, 2, 3]}},
             {"type": "text", "text": "second block", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}],
         "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
         "temperature": 0.25, "top_k": 5}
    c.ant.reset()
    r = post(c, b, path="/v1/messages?beta=true", rid="t80-native-req",
             headers={"anthropic-version": "2023-01-01", "anthropic-beta": "prompt-caching-2024-07-31,tools-x",
                      "traceparent": tp, "X-Fake-Behavior": "status=500", "X-Custom": "nope"})
    assert r.status == 200, r
    up = last(c.ant)
    assert (up["method"], up["path"], up["query"]) == ("POST", "/v1/messages", "beta=true"), up
    h = up["headers"]
    assert h.get("anthropic-version") == "2023-01-01", "the caller's anthropic-version: %r" % h
    assert h.get("anthropic-beta") == "prompt-caching-2024-07-31,tools-x", h
    # R-OBS-3: the caller's trace goes on, under sluice's own span id (one traceparent only)
    assert h.get("traceparent", "")[:36] == tp[:36] and h.get("traceparent") != tp, h
    assert len(h["traceparent"]) == 55 and h.get("x-api-key") == SECRET, h
    for k in ("x-fake-behavior", "x-custom", "authorization"):
        assert k not in h, "client header %s forwarded: %r" % (k, h)
    want = ordered(json.dumps(dict(b, model="claude-real")))
    got = ordered(up["body"])
    assert got == want, "upstream body:\n%s\nexpected:\n%s" % (up["body"], json.dumps(dict(b, model="claude-real")))
    # Without the caller's version the endpoint's default goes.
    r = c.gw.request("POST", "/v1/messages", body(), headers={"x-api-key": c.key})
    assert r.status == 200 and last(c.ant)["headers"].get("anthropic-version") == "2023-06-01", (r, last(c.ant))


def test_native_unknown_top_level_field_reaches_upstream_R_ANT_6(c):
    """An unknown member is not the gateway's business natively: it goes up, and the
    upstream's own 400 comes back as it sent it."""
    b = body("claude-direct", "unknown member", x_future_param={"a": [1, 2]})
    r = post(c, b)
    assert ordered(last(c.ant)["body"]) == ordered(json.dumps(b)), last(c.ant)["body"]
    d = direct(c.ant, b)
    assert (r.status, d.status) == (400, 400), (r, d)
    assert norm_ids(r.body) == norm_ids(d.body), (r.body, d.body)
    assert "x_future_param" in r.json()["error"]["message"], r


def test_translated_unmappable_fields_refused_R_ANT_6(c):
    """To an OpenAI endpoint, fields that cannot be expressed are 400 naming them, not sent."""
    n0 = c.oai.stats()["requests"]
    j = anthropic_error(post(c, body("gpt", x_future_param=1)), 400, "invalid_request_error")
    assert "x_future_param" in j["error"]["message"], j
    j = anthropic_error(post(c, body("gpt", thinking={"type": "enabled", "budget_tokens": 1024})), 400,
                        "invalid_request_error")
    assert "thinking" in j["error"]["message"], j
    assert c.oai.stats()["requests"] == n0, "an unmappable request reached the upstream"


def test_native_answer_byte_for_byte_R_ANT_6(c):
    """Non-stream and stream: what the stand-in sends for the same body, with its request-id."""
    b = body("claude-direct", "[[fake chunks=4]] tell me")
    r = post(c, b)
    d = direct(c.ant, b)
    assert r.status == 200 and d.status == 200, (r, d)
    assert norm_ids(r.body) == norm_ids(d.body), "gateway:\n%r\ndirect:\n%r" % (r.body, d.body)
    mid = r.json()["id"]
    assert r.headers.get("request-id") == "req_fake" + mid[len("msg_fake"):], \
        "the upstream's request-id: %r for %s" % (r.headers.get("request-id"), mid)
    bs = dict(b, stream=True)
    r = post(c, bs)
    d = direct(c.ant, bs)
    assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream"), r
    assert norm_ids(r.body) == norm_ids(d.body), "gateway:\n%s\ndirect:\n%s" % (r.body.decode(), d.body.decode())
    assert r.headers.get("request-id", "").startswith("req_fake"), r.headers
    names = [n for n, _ in events(r.body.decode())]
    assert names[0] == "message_start" and names[-1] == "message_stop", names


def test_native_alias_model_in_answer_R_RT_5(c):
    """Through an alias the client sees its own model name; the rest is the upstream's."""
    r = post(c, body("claude", "alias check"))
    assert r.status == 200 and r.json()["model"] == "claude", r
    assert json.loads(last(c.ant)["body"])["model"] == "claude-real"
    assert r.headers.get("x-routed-model") == "claude-real", r.headers


def test_native_usage_four_parts_R_ANT_6(c):
    """prompt_tokens = input + cache_creation + cache_read, completion = output, parts apart."""
    txt = "[[fake prompt_tokens=10 completion_tokens=6 cache_read_tokens=7 cache_write_tokens=3]] hi"
    r = post(c, body(text=txt), rid="t80-use-ns")
    u = r.json()["usage"]
    assert u == {"input_tokens": 10, "output_tokens": 6, "cache_creation_input_tokens": 3,
                 "cache_read_input_tokens": 7}, u
    row = row_of(c, "t80-use-ns")
    assert (row["prompt_tokens"], row["completion_tokens"], row["cache_read_tokens"], row["cache_creation_tokens"],
            row["status"], row["stream"], row["path"], row["routed_model"]) == \
        (20, 6, 7, 3, 200, 0, "/v1/messages", "claude-real"), row
    r = post(c, body(text=txt, stream=True), rid="t80-use-st")
    assert r.status == 200 and events(r.body.decode())[-1][0] == "message_stop", r
    row = row_of(c, "t80-use-st")
    assert (row["prompt_tokens"], row["completion_tokens"], row["cache_read_tokens"], row["cache_creation_tokens"],
            row["stream"]) == (20, 6, 7, 3, 1), row


def test_native_failover_between_replicas_R_ANT_6(c):
    """One replica answers 529 overloaded: every request is served by the other."""
    c.fo_bad.reset()
    c.fo_bad.behavior("status=529")
    c.fo_good.reset()
    for i in range(4):
        r = post(c, body("claude-fo", "failover %d" % i))
        assert r.status == 200 and r.json()["type"] == "message", (i, r)
        assert r.headers.get("x-fake-upstream") == "t80-fo_good", r.headers
    assert c.fo_good.stats()["requests"] == 4, c.fo_good.stats()
    assert c.fo_bad.stats()["requests"] >= 1, "round robin never tried the bad replica: %r" % c.fo_bad.stats()


def test_native_stream_upstream_dies_ends_in_error_event_R_ANT_6(c):
    r = post(c, body(text="[[fake chunks=4 die_after=2]] go", stream=True))
    assert r.status == 200, r
    ev = events(r.body.decode())
    names = [n for n, _ in ev]
    assert names[0] == "message_start" and names.count("content_block_delta") == 2, names
    assert names[-1] == "error" and "message_stop" not in names, names
    err = ev[-1][1]
    assert set(err) == {"type", "error"} and err["error"]["type"] in ("api_error", "overloaded_error"), err
    assert err["error"]["message"], err
    # The upstream's own error event passes as it came.
    r = post(c, body(text="[[fake chunks=4 error_after=1]] go", stream=True))
    ev = events(r.body.decode())
    assert ev[-1] == ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}), ev


def test_max_tokens_cap_R_ANT_6(c):
    n0 = c.ant.stats()["requests"]
    j = anthropic_error(post(c, body("claude-capped", max_tokens=101)), 400, "invalid_request_error")
    assert "100" in j["error"]["message"], j
    assert c.ant.stats()["requests"] == n0, "a refused request reached the upstream"
    assert post(c, body("claude-capped", max_tokens=100)).status == 200


# ---- 3. validation and routing errors ----

def test_request_errors_anthropic_shaped_R_ANT_6(c):
    n0 = c.ant.stats()["requests"]
    j = anthropic_error(post(c, body("no-such-model")), 404, "not_found_error")
    assert "no-such-model" in j["error"]["message"], j
    b = body()
    del b["max_tokens"]
    j = anthropic_error(post(c, b), 400, "invalid_request_error")
    assert "max_tokens" in j["error"]["message"], j
    for bad in (body(max_tokens=0), body(max_tokens=2.5), body(max_tokens="10"), body(messages=[]),
                body(messages="hi"), {"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}):
        anthropic_error(post(c, bad), 400, "invalid_request_error")
    anthropic_error(post(c, '{"model": "claude", "max_tokens": 5, "messages": ['), 400, "invalid_request_error")
    assert c.ant.stats()["requests"] == n0, "an invalid request reached the upstream"


def test_rate_limited_429_keeps_headers_R_ANT_6(c):
    time.sleep(1.1)      # a fresh one-second window for the QPS key
    codes = []
    for i in range(3):
        r = post(c, body("gpt", "qps %d" % i), key=c.qps_key)
        codes.append(r.status)
        if r.status == 429:
            break
    assert codes[0] == 200 and codes[-1] == 429, codes
    anthropic_error(r, 429, "rate_limit_error")
    assert r.headers.get("retry-after", "").isdigit() and int(r.headers["retry-after"]) >= 1, r.headers
    assert r.headers.get("x-ratelimit-limit") == "1" and r.headers.get("x-ratelimit-remaining") == "0", r.headers
    assert r.headers.get("x-ratelimit-reset"), r.headers


def test_upstream_unavailable_5xx_R_ANT_6(c):
    """Unreachable replica: 5xx api_error; a 503 upstream: overloaded_error (Anthropic's word for it)."""
    r = post(c, body("gpt-dead"))
    assert r.status in (502, 503), r
    anthropic_error(r, r.status, "api_error" if r.status == 502 else "overloaded_error")
    r = post(c, body("gpt-down"))
    anthropic_error(r, 503, "overloaded_error")
    r = post(c, body("gpt-down", stream=True))
    anthropic_error(r, 503, "overloaded_error")


# ---- 4. translated to an OpenAI endpoint ----

TOOLS = [{"name": "get_weather", "description": "Weather of a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
         {"name": "b_tool", "input_schema": {"type": "object"}}]


def test_translated_request_R_ANT_6(c):
    """system first, tools as functions in order, tool_use / tool_result, stop, user from
    metadata.user_id, tool_choice any -> required, the alias target, usage asked for."""
    b = {"model": "gpt", "max_tokens": 40, "system": "Be terse.", "stop_sequences": ["END"],
         "metadata": {"user_id": "user-77"}, "tools": TOOLS, "tool_choice": {"type": "any"}, "temperature": 0.5,
         "stream": True,
         "messages": [{"role": "user", "content": "weather?"},
                      {"role": "assistant", "content": [
                          {"type": "text", "text": "checking"},
                          {"type": "tool_use", "id": "tu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "sunny"},
                                                   {"type": "text", "text": "thanks"}]}]}
    r = post(c, b)
    assert r.status == 200, r
    up = last(c.oai)
    assert up["path"] == "/v1/chat/completions", up
    got = json.loads(up["body"])
    assert got["model"] == "gpt-real" and got["max_tokens"] == 40, got
    msgs = got["messages"]
    assert msgs[0] == {"role": "system", "content": "Be terse."}, msgs
    assert msgs[1] == {"role": "user", "content": "weather?"}, msgs
    assert msgs[2]["role"] == "assistant" and msgs[2]["content"] == "checking", msgs
    calls = msgs[2]["tool_calls"]
    assert len(calls) == 1 and calls[0]["id"] == "tu_1" and calls[0]["type"] == "function", calls
    assert calls[0]["function"]["name"] == "get_weather" and \
        json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}, calls
    assert msgs[3] == {"role": "tool", "tool_call_id": "tu_1", "content": "sunny"}, msgs
    assert msgs[4]["role"] == "user" and msgs[4]["content"] in ("thanks", [{"type": "text", "text": "thanks"}]), msgs
    assert len(msgs) == 5, msgs
    assert [t["type"] for t in got["tools"]] == ["function", "function"], got["tools"]
    assert [t["function"]["name"] for t in got["tools"]] == ["get_weather", "b_tool"], got["tools"]
    assert got["tools"][0]["function"]["parameters"] == TOOLS[0]["input_schema"], got["tools"]
    assert got["tools"][0]["function"].get("description") == "Weather of a city", got["tools"]
    assert got["stop"] in (["END"], "END") and got["user"] == "user-77" and got["temperature"] == 0.5, got
    assert got["tool_choice"] == "required", got
    assert got["stream"] is True and got["stream_options"] == {"include_usage": True}, got
    h = up["headers"]
    assert "authorization" not in h and "x-api-key" not in h, "the caller's key went upstream: %r" % h


def test_translated_non_stream_answer_and_usage_R_ANT_6(c):
    r = post(c, body("gpt", "[[fake chunks=4 prompt_tokens=11 completion_tokens=7]] hi"), rid="t80-tr-ns")
    assert r.status == 200 and r.headers["content-type"].startswith("application/json"), r
    j = r.json()
    assert j["type"] == "message" and j["role"] == "assistant" and j["model"] == "gpt", j
    assert j["content"] == [{"type": "text", "text": "w1 w2 w3 w4"}], j
    assert j["stop_reason"] == "end_turn" and j["stop_sequence"] is None, j
    assert j["usage"]["input_tokens"] == 11 and j["usage"]["output_tokens"] == 7, j
    assert r.headers.get("x-routed-model") == "gpt-real", r.headers
    assert "stream" not in json.loads(last(c.oai)["body"]), last(c.oai)
    row = row_of(c, "t80-tr-ns")
    assert (row["prompt_tokens"], row["completion_tokens"], row["stream"], row["status"], row["model"]) == \
        (11, 7, 0, 200, "gpt"), row


def test_translated_stream_event_sequence_R_ANT_6(c):
    r = post(c, body("gpt", "[[fake chunks=3 prompt_tokens=9 completion_tokens=3]] stream me", stream=True),
             rid="t80-tr-st")
    assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream"), r
    ev = events(r.body.decode())
    names = [n for n, _ in ev]
    assert names == ["message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
                     "content_block_delta", "content_block_stop", "message_delta", "message_stop"], names
    m = ev[0][1]["message"]
    assert m["type"] == "message" and m["role"] == "assistant" and m["model"] == "gpt" and m["content"] == [], m
    assert ev[1][1] == {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, ev[1]
    texts = [d["delta"]["text"] for n, d in ev if n == "content_block_delta"]
    assert all(d["delta"]["type"] == "text_delta" and d["index"] == 0 for n, d in ev if n == "content_block_delta")
    assert "".join(texts) == "w1 w2 w3", texts
    assert ev[6][1] == {"type": "content_block_stop", "index": 0}, ev[6]
    md = ev[7][1]
    assert md["delta"]["stop_reason"] == "end_turn" and md["usage"]["output_tokens"] == 3, md
    assert md["usage"].get("input_tokens", m["usage"].get("input_tokens")) == 9, (md, m)
    row = row_of(c, "t80-tr-st")
    assert (row["prompt_tokens"], row["completion_tokens"], row["stream"]) == (9, 3, 1), row


def test_translated_stream_failures_end_in_error_event_R_ANT_6(c):
    for directive in ("die_after=1", "error_after=1"):
        r = post(c, body("gpt", "[[fake chunks=3 %s]] go" % directive, stream=True))
        assert r.status == 200, (directive, r)
        ev = events(r.body.decode())
        names = [n for n, _ in ev]
        assert names[0] == "message_start" and names.count("content_block_delta") == 1, (directive, names)
        assert names[-1] == "error" and "message_stop" not in names, (directive, names)
        err = ev[-1][1]
        assert set(err) == {"type", "error"} and err["error"]["type"] in ("api_error", "overloaded_error"), err


# ---- 5. idempotency and affinity ----

def test_idempotency_replay_one_usage_row_R_IDEM_2(c):
    b = body("claude", "idempotent question")
    n0 = c.ant.stats()["requests"]
    r1 = post(c, b, rid="t80-idem", headers={"Idempotency-Key": "t80-idem-1"})
    r2 = post(c, b, rid="t80-idem", headers={"Idempotency-Key": "t80-idem-1"})
    assert r1.status == 200 and r2.status == 200, (r1, r2)
    assert r2.body == r1.body and r2.headers.get("x-idempotent-replay") == "true", (r1.headers, r2.headers)
    assert c.ant.stats()["requests"] - n0 == 1, "the replay called the upstream"
    time.sleep(0.5)
    rows = c.gw.usage_events("request_id = ?", "t80-idem")
    assert len(rows) == 1 and rows[0]["status"] == 200, rows


def test_affinity_hashes_only_cache_control_system_blocks_R_ANT_6(c):
    """On an OpenAI (translated) and an anthropic (native) endpoint of two replicas each."""
    for model in ("gpt-aff", "claude-aff"):
        ups, affs = [], []
        for i in range(3):
            system = [{"type": "text", "text": "x-billing: request %d at %f" % (i, time.time())},
                      {"type": "text", "text": "You are the t0080 assistant.", "cache_control": {"type": "ephemeral"}}]
            r = post(c, body(model, "first user turn", system=system))
            assert r.status == 200, r
            ups.append(r.headers.get("x-fake-upstream"))
            affs.append(r.headers.get("x-session-affinity"))
        assert affs == ["miss", "hit:l1", "hit:l1"] and len(set(ups)) == 1, (model, affs, ups)
        # Without cache_control the varying block is part of the hash: every request a miss,
        # alternating between the two replicas.
        ups, affs = [], []
        for i in range(2):
            system = [{"type": "text", "text": "x-billing: request %d at %f" % (i, time.time())},
                      {"type": "text", "text": "You are the t0080 assistant."}]
            r = post(c, body(model, "another first user turn", system=system))
            ups.append(r.headers.get("x-fake-upstream"))
            affs.append(r.headers.get("x-session-affinity"))
        assert affs == ["miss", "miss"] and len(set(ups)) == 2, (model, affs, ups)
        # A different first user turn is another conversation even with the same marked block.
        system = [{"type": "text", "text": "You are the t0080 assistant.", "cache_control": {"type": "ephemeral"}}]
        r = post(c, body(model, "a different first user turn", system=system))
        assert r.headers.get("x-session-affinity") == "miss", (model, r.headers)


# ---- 6. count_tokens and models (R-ANT-7) ----

def test_count_tokens_native_and_estimated_R_ANT_7(c):
    b = {"model": "claude", "messages": [{"role": "user", "content": "one two three four five"}]}
    r = post(c, b, path="/v1/messages/count_tokens", rid="t80-ct-native")
    assert r.status == 200 and r.json() == {"input_tokens": 5}, r
    assert last(c.ant)["path"] == "/v1/messages/count_tokens", last(c.ant)
    assert json.loads(last(c.ant)["body"])["model"] == "claude-real"
    raw = json.dumps({"model": "gpt", "messages": [{"role": "user", "content": "count these words please " * 7}]})
    n0 = c.oai.stats()["requests"]
    r = post(c, raw, path="/v1/messages/count_tokens", rid="t80-ct-est")
    assert r.status == 200 and r.json() == {"input_tokens": len(raw.encode()) // 4 + 1}, (r, len(raw))
    assert c.oai.stats()["requests"] == n0, "count_tokens for an OpenAI endpoint called the upstream"
    # Bytes, not characters.
    raw = json.dumps({"model": "gpt", "messages": [{"role": "user", "content": "h\u00e9llo w\u00f6rld \u2713 " * 9}]},
                     ensure_ascii=False).encode()
    r = post(c, raw, path="/v1/messages/count_tokens", rid="t80-ct-utf8")
    assert r.status == 200 and r.json() == {"input_tokens": len(raw) // 4 + 1}, (r, len(raw))
    assert c.oai.stats()["requests"] == n0, "count_tokens for an OpenAI endpoint called the upstream"
    for rid in ("t80-ct-native", "t80-ct-est", "t80-ct-utf8"):
        row = row_of(c, rid)
        assert (row["prompt_tokens"], row["completion_tokens"], row["status"]) == (0, 0, 200), row
        assert row["path"] == "/v1/messages/count_tokens", row


def test_count_tokens_spends_qps_R_ANT_7(c):
    time.sleep(1.1)
    b = {"model": "gpt", "messages": [{"role": "user", "content": "x"}]}
    r1 = post(c, b, path="/v1/messages/count_tokens", key=c.qps_key)
    r2 = post(c, b, path="/v1/messages/count_tokens", key=c.qps_key)
    assert r1.status == 200, r1
    anthropic_error(r2, 429, "rate_limit_error")
    assert r2.headers.get("retry-after"), r2.headers


def test_models_anthropic_shape_R_ANT_7(c):
    r = c.gw.request("GET", "/v1/models", headers={"x-api-key": c.key, "anthropic-version": "2023-06-01"})
    assert r.status == 200, r
    j = r.json()
    assert set(j) == {"data", "has_more", "first_id", "last_id"} and j["has_more"] is False, j
    ids = [m["id"] for m in j["data"]]
    assert set(ids) == {"claude", "claude-direct", "claude-capped", "claude-fo", "claude-aff", "gpt", "gpt-aff",
                        "gpt-dead", "gpt-down"}, ids
    assert j["first_id"] == ids[0] and j["last_id"] == ids[-1], j
    for m in j["data"]:
        assert set(m) == {"type", "id", "display_name", "created_at"} and m["type"] == "model", m
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", m["created_at"]), m
    r = c.gw.request("GET", "/v1/models", key=c.key)
    j = r.json()
    assert r.status == 200 and j["object"] == "list" and {m["object"] for m in j["data"]} == {"model"}, j
    assert sorted(m["id"] for m in j["data"]) == sorted(ids), j
    r = c.gw.request("GET", "/v1/models/claude", headers={"x-api-key": c.key, "anthropic-version": "2023-06-01"})
    assert r.status == 200, r
    m = r.json()
    assert set(m) == {"type", "id", "display_name", "created_at"} and (m["type"], m["id"]) == ("model", "claude"), m
    r = c.gw.request("GET", "/v1/models/claude", key=c.key)
    assert r.status == 200 and r.json()["object"] == "model" and r.json()["id"] == "claude", r
    r = c.gw.request("GET", "/v1/models/nope", headers={"x-api-key": c.key, "anthropic-version": "2023-06-01"})
    anthropic_error(r, 404, "not_found_error")


run_tests(globals(), setup, teardown)
