#!/usr/bin/env python3
"""t0050-anthropic: endpoints with `--protocol anthropic`: the caller speaks OpenAI chat
completions, the upstream (the stand-in in its Anthropic Messages mode) sees Messages, and
the answer comes back in OpenAI's shape (R-ANT-1, R-ANT-3, R-ANT-4, R-RT-5, R-USE-1..3,
R-SSE-*, R-API-2). What the upstream saw is read from GET /_fake/stats ("last").

The adapter forwards none of the caller's headers, so the stand-in's directives travel
in the prompt ("[[fake k=v ...]]"); they count as words of the prompt (input_tokens is
the word count of system and message texts). Failover, disconnects and auto are in
t0051, refusals, the credential, idempotency, the pass-through and probes in t0052."""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, run_tests, setup_tenant, setup_with, stop_all, wait_for

SECRET = "sk-ant-api03-t0050-%d-Zq8vX2mN" % os.getpid()
SECRET_VER = "sk-ant-api03-t0050-ver-%d-Lk4" % os.getpid()
ERROR_KEYS = {"message", "type", "param", "code"}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ANT_TOOLS = [{"name": "get_weather", "description": "Weather of a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]


def setup():
    return setup_with(build, teardown)


def build(c):
    c.ant = Fake("ant")
    c.ver = Fake("ant-ver")
    c.err = Fake("ant-err")
    c.gw = Gateway("t0050", keepalive_ms=1000)
    c.key = setup_tenant(c.gw, "acme", "alice")
    ep = c.gw.ctl_secret(SECRET, "endpoint", "add", "ep-ant", "--tenant", "acme", "--protocol", "anthropic")
    assert ep["protocol"] == "anthropic" and ep["upstream_auth_set"] is True, ep
    assert ep["anthropic_version"] == "2023-06-01" and ep["default_max_tokens"] == 4096, ep
    c.gw.ctl("replica", "add", "ep-ant", c.ant.url)
    c.gw.ctl("route", "add", "claude", "ep-ant", "--tenant", "acme", "--target-model", "claude-3-real")
    c.gw.ctl("route", "add", "claude-direct", "ep-ant", "--tenant", "acme")
    # Per-endpoint version and default max_tokens, set after creation (endpoint set).
    c.gw.ctl_secret(SECRET_VER, "endpoint", "add", "ep-ver", "--tenant", "acme", "--protocol", "anthropic")
    ep = c.gw.ctl("endpoint", "set", "ep-ver", "--anthropic-version", "2023-01-01", "--default-max-tokens", 77)
    c.gw.ctl("replica", "add", "ep-ver", c.ver.url)
    c.gw.ctl("route", "add", "claude-ver", "ep-ver", "--tenant", "acme")
    c.gw.ctl_secret(SECRET, "endpoint", "add", "ep-err", "--tenant", "acme", "--protocol", "anthropic")
    c.gw.ctl("replica", "add", "ep-err", c.err.url)
    c.gw.ctl("route", "add", "claude-err", "ep-err", "--tenant", "acme")
    c.gw.start()
    return c


def teardown(c):
    stop_all(c, "gw", "ant", "ver", "err")


# ---- helpers ----

def chat(c, body, rid=None, headers=None):
    h = dict(headers or {})
    if rid:
        h["X-Request-Id"] = rid
    b = dict(body)
    b.setdefault("model", "claude")
    return c.gw.request("POST", "/v1/chat/completions", b, key=c.key, headers=h)


def user(text):
    return [{"role": "user", "content": text}]


def sent(f):
    """The body of the last request the stand-in received, parsed."""
    return json.loads(f.stats()["last"]["body"])


def row_of(c, rid):
    rows = wait_for(lambda: c.gw.usage_events("request_id = ?", rid), 5, what="usage row of %s" % rid)
    assert len(rows) == 1, "one usage event per request: %r" % rows
    return rows[0]


def stream(c, body, rid=None):
    b = dict(body, stream=True)
    b.setdefault("model", "claude")
    status, headers, chunks = c.gw.stream_raw(c.key, b, headers={"X-Request-Id": rid} if rid else None)
    return status, headers, b"".join(ch for _, ch in chunks).decode()


def sse_parse(text):
    """(comments, data payloads) of an SSE body; asserts no Anthropic wire format leaks."""
    events = [e for e in text.replace("\r\n", "\n").split("\n\n") if e.strip()]
    comments, datas = [], []
    for e in events:
        for line in e.split("\n"):
            assert not line.startswith("event:"), "an Anthropic `event:` line reached the client: %r" % text
        if e.startswith(":"):
            comments.append(e)
        else:
            assert e.startswith("data: ") and "\n" not in e, "unexpected SSE event %r in %r" % (e, text)
            datas.append(e[6:])
    assert all(cm == ": keep-alive" for cm in comments), "unexpected comments %r" % comments
    assert "ping" not in text, "an Anthropic ping reached the client: %r" % text
    assert datas.count("[DONE]") == 1 and datas[-1] == "[DONE]", "exactly one [DONE], at the end: %r" % text
    return comments, [json.loads(d) for d in datas[:-1]]


def check_chunks(chunks, model="claude"):
    ids = {ch["id"] for ch in chunks}
    assert len(ids) == 1 and re.match(r"^msg_fake\d+$", ids.pop()), chunks
    for ch in chunks:
        assert ch["object"] == "chat.completion.chunk" and ch["model"] == model, ch
        assert isinstance(ch["created"], int) and abs(ch["created"] - time.time()) < 60, ch


def deltas(chunks):
    """[(delta, finish_reason)] of the chunks that have a choice."""
    out = []
    for ch in chunks:
        if ch["choices"]:
            assert len(ch["choices"]) == 1 and ch["choices"][0]["index"] == 0, ch
            assert "usage" not in ch, "usage on a content chunk: %r" % ch
            out.append((ch["choices"][0]["delta"], ch["choices"][0]["finish_reason"]))
    return out


# ---- 1. the request as the upstream sees it (R-ANT-1, R-ANT-3, R-ANT-4) ----

def test_upstream_request_line_and_headers_R_ANT_4(c):
    """POST /v1/messages with the endpoint's credential as x-api-key, no Authorization, the
    default anthropic-version and the request id; of the caller's headers only its beta
    flags and trace context travel (R-OBS-3)."""
    c.ant.reset()
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    r = chat(c, {"messages": user("hello there")}, rid="t50-hdr-1",
             headers={"x-api-key": "caller-supplied-key", "anthropic-version": "2099-01-01",
                      "X-Fake-Behavior": "status=500", "X-Custom": "nope", "traceparent": tp,
                      "anthropic-beta": "tools-2024-04-04"})
    assert r.status == 200, r
    last = c.ant.stats()["last"]
    h = last["headers"]
    assert (last["method"], last["path"], last["query"]) == ("POST", "/v1/messages", ""), last
    assert h.get("x-api-key") == SECRET, "R-ANT-4: upstream x-api-key is %r" % h.get("x-api-key")
    assert "authorization" not in h, "an Authorization header went upstream: %r" % h
    assert h.get("anthropic-version") == "2023-06-01", h
    assert h.get("x-request-id") == "t50-hdr-1" and h.get("content-type") == "application/json", h
    # R-OBS-3: the caller's trace goes on, under sluice's own span id (one traceparent only)
    assert h.get("traceparent", "")[:36] == tp[:36] and h.get("traceparent") != tp, h
    assert len(h["traceparent"]) == 55 and h.get("anthropic-beta") == "tools-2024-04-04", h
    for k in ("x-fake-behavior", "x-custom", "cookie"):
        assert k not in h, "caller header %s forwarded: %r" % (k, h)
    blob = json.dumps(last)
    assert c.key not in blob and "caller-supplied-key" not in blob, "the caller's credential went upstream"
    assert c.ant.stats()["requests"] == 1


def test_endpoint_version_and_credential_R_ANT_4(c):
    """`endpoint set --anthropic-version` is what that endpoint's upstream gets, with its own credential."""
    c.ver.reset()
    r = chat(c, {"model": "claude-ver", "messages": user("hi")})
    assert r.status == 200, r
    h = c.ver.stats()["last"]["headers"]
    assert h.get("anthropic-version") == "2023-01-01" and h.get("x-api-key") == SECRET_VER, h


def test_body_translation_R_ANT_1_R_ANT_3(c):
    """system/developer -> system; assistant tool_calls -> tool_use; two tool messages and the
    next user text -> one user turn of tool_result + text; tools; stop -> stop_sequences;
    user -> metadata.user_id; the route's target model; the tool results reach the model."""
    c.ant.reset()
    body = {"model": "claude", "temperature": 0.25, "top_p": 0.5, "stop": "END", "user": "user-42",
            "max_tokens": 300, "tools": TOOLS, "tool_choice": "auto", "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "developer", "content": [{"type": "text", "text": "Answer in English."}]},
                {"role": "user", "content": "weather in Paris and Rome?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_p", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_r", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
                {"role": "tool", "tool_call_id": "call_p", "content": "sunny"},
                {"role": "tool", "tool_call_id": "call_r", "content": [{"type": "text", "text": "rain"}]},
                {"role": "user", "content": "thanks"}]}
    r = chat(c, body, rid="t50-body-1")
    assert r.status == 200, r
    expected = {
        "model": "claude-3-real", "max_tokens": 300,
        "system": [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Answer in English."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "weather in Paris and Rome?"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_p", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_r", "name": "get_weather", "input": {"city": "Rome"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_p", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "call_r", "content": [{"type": "text", "text": "rain"}]},
                {"type": "text", "text": "thanks"}]}],
        "temperature": 0.25, "top_p": 0.5, "stop_sequences": ["END"], "metadata": {"user_id": "user-42"},
        "tools": ANT_TOOLS, "tool_choice": {"type": "auto"}}
    got = sent(c.ant)
    assert got == expected, "upstream body:\n%s\nexpected:\n%s" % (json.dumps(got), json.dumps(expected))
    msg = r.json()["choices"][0]["message"]
    assert msg == {"role": "assistant", "content": "tool_result[call_p]: sunny tool_result[call_r]: rain w1 w2 w3"}, msg
    # input_tokens: 3 + 3 + 5 (system, developer, user) + sunny, rain, thanks; output: 2 echoes + 3 words.
    u = r.json()["usage"]
    assert (u["prompt_tokens"], u["completion_tokens"], u["total_tokens"]) == (14, 5, 19), u
    row = row_of(c, "t50-body-1")
    assert (row["prompt_tokens"], row["completion_tokens"], row["model"], row["routed_model"]) == \
        (14, 5, "claude", "claude-3-real"), row


def test_image_parts_and_prefill_R_ANT_3(c):
    """image_url parts -> image blocks (base64 data URL or https URL); a final assistant
    message is sent as the prefill turn; an http:// image cannot be mapped (400, not sent)."""
    parts = [{"type": "text", "text": "what is this"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
             {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]
    r = chat(c, {"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": "It is"}]})
    assert r.status == 200, r
    assert sent(c.ant)["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "It is"}]}], sent(c.ant)
    n0 = c.ant.stats()["requests"]
    bad = [{"type": "image_url", "image_url": {"url": "http://example.com/cat.jpg"}}]
    r = chat(c, {"messages": [{"role": "user", "content": bad}]})
    assert r.status == 400 and (r.json()["error"]["code"], r.json()["error"]["param"]) == \
        ("unsupported_parameter", "messages"), r
    r = chat(c, {"messages": [{"role": "system", "content": "only a system prompt"}]})
    assert r.status == 400 and (r.json()["error"]["code"], r.json()["error"]["param"]) == ("missing_field", "messages"), r
    assert c.ant.stats()["requests"] == n0, "an untranslatable request reached the upstream"


def test_tool_choice_mapping_R_ANT_3(c):
    """tool_choice none/required/named/absent and parallel_tool_calls false, as Messages has them."""
    cases = [
        ({"tool_choice": "none"}, {"type": "none"}),
        ({"tool_choice": "required"}, {"type": "any"}),
        ({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
         {"type": "tool", "name": "get_weather"}),
        ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
        ({"tool_choice": "required", "parallel_tool_calls": False}, {"type": "any", "disable_parallel_tool_use": True}),
        ({}, None),
    ]
    for extra, want in cases:
        r = chat(c, dict({"tools": TOOLS, "messages": user("hi")}, **extra))
        assert r.status == 200, (extra, r)
        got = sent(c.ant)
        assert got.get("tool_choice") == want, "%r -> %r, expected %r" % (extra, got.get("tool_choice"), want)
        assert got["tools"] == ANT_TOOLS, got
        # A forced tool (any / named) makes the model call it; none and auto (no "use the tool") do not.
        calls = r.json()["choices"][0]["message"].get("tool_calls")
        assert bool(calls) == (want is not None and want["type"] in ("any", "tool")), (extra, r.json())


def test_max_tokens_default_and_per_endpoint_R_ANT_3(c):
    """max_tokens absent -> 4096 (ep-ant) or the endpoint's --default-max-tokens (77); given
    ones pass; max_completion_tokens wins; `endpoint set` changes the default at run time."""
    for extra, want in (({}, 4096), ({"max_tokens": 50}, 50), ({"max_completion_tokens": 60, "max_tokens": 50}, 60)):
        assert chat(c, dict({"messages": user("hi")}, **extra)).status == 200
        assert sent(c.ant)["max_tokens"] == want, (extra, sent(c.ant))
    assert chat(c, {"model": "claude-ver", "messages": user("hi")}).status == 200
    assert sent(c.ver)["max_tokens"] == 77, sent(c.ver)
    c.gw.ctl("endpoint", "set", "ep-ver", "--default-max-tokens", 99)
    def applied():
        chat(c, {"model": "claude-ver", "messages": user("hi")})
        return sent(c.ver)["max_tokens"] == 99
    wait_for(applied, 3, interval=0.2, what="the new default max_tokens (R-CFG-1)")
    assert chat(c, {"model": "claude-ver", "messages": user("hi"), "max_tokens": 5}).status == 200
    assert sent(c.ver)["max_tokens"] == 5


def test_model_names_R_RT_5(c):
    """The upstream gets the route's target model; the client sees its own model name and
    X-Routed-Model the real one; a route without target passes its name unchanged."""
    r = chat(c, {"messages": user("hi")})
    assert sent(c.ant)["model"] == "claude-3-real" and r.json()["model"] == "claude", r
    assert r.headers.get("x-routed-model") == "claude-3-real" and r.headers.get("x-routed-endpoint") == "ep-ant", r.headers
    status, _, text = stream(c, {"messages": user("hi")})
    assert status == 200 and sent(c.ant)["model"] == "claude-3-real", text
    check_chunks(sse_parse(text)[1], model="claude")
    r = chat(c, {"model": "claude-direct", "messages": user("hi")})
    assert sent(c.ant)["model"] == "claude-direct" and r.json()["model"] == "claude-direct", r


# ---- 2. non-stream answers (R-ANT-1, R-USE-3) ----

def test_non_stream_chat_completion_shape_R_ANT_1(c):
    r = chat(c, {"messages": user("[[fake chunks=4]] say something")}, rid="t50-ns-1")
    assert r.status == 200 and r.headers["content-type"] == "application/json", r
    assert r.headers.get("request-id", "").startswith("req_fake"), "the upstream's request-id: %r" % r.headers
    j = r.json()
    assert set(j) == {"id", "object", "created", "model", "choices", "usage"}, j
    assert re.match(r"^msg_fake\d+$", j["id"]) and j["object"] == "chat.completion" and j["model"] == "claude", j
    assert isinstance(j["created"], int) and abs(j["created"] - time.time()) < 60, j
    assert j["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "w1 w2 w3 w4"},
                             "finish_reason": "stop", "logprobs": None}], j
    assert j["usage"] == {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8,
                          "prompt_tokens_details": {"cached_tokens": 0}}, j
    assert "stream" not in sent(c.ant), sent(c.ant)
    row = row_of(c, "t50-ns-1")
    assert (row["prompt_tokens"], row["completion_tokens"], row["status"], row["stream"], row["finish_reason"]) == \
        (4, 4, 200, 0, "stop"), row


def test_finish_reasons_length_and_stop_R_ANT_1(c):
    """A max_tokens cut is "length"; a stop sequence cut is "stop" (text ends before it)."""
    r = chat(c, {"messages": user("[[fake chunks=5]] go"), "max_tokens": 2}, rid="t50-len-1")
    ch = r.json()["choices"][0]
    assert (ch["message"]["content"], ch["finish_reason"]) == ("w1 w2 ", "length"), r
    assert r.json()["usage"]["completion_tokens"] == 2, r
    assert row_of(c, "t50-len-1")["finish_reason"] == "length"
    r = chat(c, {"messages": user("[[fake chunks=5]] go"), "stop": ["w3", "zz"]})
    ch = r.json()["choices"][0]
    assert sent(c.ant)["stop_sequences"] == ["w3", "zz"], sent(c.ant)
    assert (ch["message"]["content"], ch["finish_reason"]) == ("w1 w2 ", "stop"), r


def test_tool_call_round_trip_R_ANT_1(c):
    """tool_use -> tool_calls with the arguments as a JSON string, finish tool_calls; sending
    the call and its result back reaches the model as tool_use + tool_result."""
    r = chat(c, {"messages": user("please use the tool"), "tools": TOOLS}, rid="t50-tool-1")
    j = r.json()
    ch = j["choices"][0]
    assert ch["finish_reason"] == "tool_calls" and ch["message"]["content"] == "w1 w2 w3", j
    calls = ch["message"]["tool_calls"]
    assert len(calls) == 1 and re.match(r"^toolu_fake\d+$", calls[0]["id"]), calls
    assert calls[0]["type"] == "function" and calls[0]["function"]["name"] == "get_weather", calls
    args = calls[0]["function"]["arguments"]
    assert isinstance(args, str) and json.loads(args) == {"q": "fake"}, calls
    assert j["usage"]["completion_tokens"] == 6, j       # 3 words + 3 tool input pieces
    assert row_of(c, "t50-tool-1")["finish_reason"] == "tool_calls"
    follow = user("please use the tool") + [
        {"role": "assistant", "content": ch["message"]["content"], "tool_calls": calls},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "21 degrees"}]
    r = chat(c, {"messages": follow, "tools": TOOLS})
    assert r.status == 200, r
    turns = sent(c.ant)["messages"]
    assert turns[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "w1 w2 w3"},
        {"type": "tool_use", "id": calls[0]["id"], "name": "get_weather", "input": {"q": "fake"}}]}, turns
    assert turns[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": calls[0]["id"], "content": "21 degrees"}]}, turns
    ch = r.json()["choices"][0]
    assert ch["message"]["content"] == "tool_result[%s]: 21 degrees w1 w2 w3" % calls[0]["id"], r.json()
    assert ch["finish_reason"] == "stop" and "tool_calls" not in ch["message"], r.json()


def test_cache_tokens_in_prompt_tokens_R_USE_3(c):
    """Cache reads and writes count as prompt tokens; reads are prompt_tokens_details.cached_tokens."""
    beh = "[[fake prompt_tokens=10 completion_tokens=9 cache_read_tokens=5 cache_write_tokens=2]] hi"
    want = {"prompt_tokens": 17, "completion_tokens": 9, "total_tokens": 26,
            "prompt_tokens_details": {"cached_tokens": 5}}
    r = chat(c, {"messages": user(beh)}, rid="t50-cache-1")
    assert r.json()["usage"] == want, r
    row = row_of(c, "t50-cache-1")
    assert (row["prompt_tokens"], row["completion_tokens"]) == (17, 9), row
    status, _, text = stream(c, {"messages": user(beh), "stream_options": {"include_usage": True}}, rid="t50-cache-2")
    usage = [ch["usage"] for ch in sse_parse(text)[1] if ch.get("usage")]
    assert usage == [want], text
    row = row_of(c, "t50-cache-2")
    assert (row["prompt_tokens"], row["completion_tokens"], row["stream"]) == (17, 9, 1), row


# ---- 3. streams (R-ANT-1, R-SSE-*, R-USE-1/2) ----

def test_stream_translation_R_ANT_1_R_USE_2(c):
    """Role chunk, one content delta per text_delta, finish chunk, [DONE] once; no event:
    lines, no pings (role_chunks=3 sends three), no usage chunk the client did not ask for."""
    status, headers, text = stream(c, {"messages": user("[[fake chunks=3 role_chunks=3]] hi")}, rid="t50-st-1")
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), (status, headers)
    up = sent(c.ant)
    assert up["stream"] is True and "stream_options" not in up, up
    _, chunks = sse_parse(text)
    check_chunks(chunks)
    assert deltas(chunks) == [({"role": "assistant", "content": ""}, None), ({"content": "w1 "}, None),
                              ({"content": "w2 "}, None), ({"content": "w3"}, None), ({}, "stop")], text
    assert '"usage"' not in text, "usage the client did not ask for: %r" % text
    row = row_of(c, "t50-st-1")
    assert (row["prompt_tokens"], row["completion_tokens"], row["stream"], row["status"], row["finish_reason"]) == \
        (4, 3, 1, 200, "stop"), row


def test_stream_usage_chunk_only_when_asked_R_USE_1_R_USE_2(c):
    for opt, rid in (({"include_usage": True}, "t50-su-1"), ({"include_usage": False}, "t50-su-2")):
        status, _, text = stream(c, {"messages": user("[[fake chunks=2]] hi"), "stream_options": opt}, rid=rid)
        assert status == 200, text
        _, chunks = sse_parse(text)
        check_chunks(chunks)
        usage = [ch for ch in chunks if "usage" in ch]
        if opt["include_usage"]:
            assert chunks[-1] is usage[0] and len(usage) == 1, "one usage chunk, last before [DONE]: %r" % text
            assert usage[0]["choices"] == [] and usage[0]["usage"] == {
                "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 0}}, usage
            assert chunks[-2]["choices"][0]["finish_reason"] == "stop", text
        else:
            assert usage == [] and '"usage"' not in text, text
        assert [d for d, _ in deltas(chunks)][1:3] == [{"content": "w1 "}, {"content": "w2"}], text
        row = row_of(c, rid)
        assert (row["prompt_tokens"], row["completion_tokens"]) == (3, 2), row


def test_stream_tool_calls_R_ANT_1(c):
    """tool_use block -> tool_calls delta with index, id and name first, then the argument pieces."""
    status, _, text = stream(c, {"messages": user("use the tool now"), "tools": TOOLS}, rid="t50-stool-1")
    assert status == 200, text
    _, chunks = sse_parse(text)
    check_chunks(chunks)
    ds = deltas(chunks)
    assert ds[:4] == [({"role": "assistant", "content": ""}, None), ({"content": "w1 "}, None),
                      ({"content": "w2 "}, None), ({"content": "w3"}, None)], text
    first = ds[4][0]["tool_calls"]
    assert len(first) == 1 and re.match(r"^toolu_fake\d+$", first[0]["id"]), first
    assert first[0] == {"index": 0, "id": first[0]["id"], "type": "function",
                        "function": {"name": "get_weather", "arguments": ""}}, first
    pieces = []
    for d, fin in ds[5:-1]:
        assert fin is None and list(d) == ["tool_calls"] and len(d["tool_calls"]) == 1, d
        tc = d["tool_calls"][0]
        assert tc["index"] == 0 and set(tc) == {"index", "function"} and list(tc["function"]) == ["arguments"], tc
        pieces.append(tc["function"]["arguments"])
    assert len(pieces) == 3 and json.loads("".join(pieces)) == {"q": "fake"}, pieces
    assert ds[-1] == ({}, "tool_calls"), text
    row = row_of(c, "t50-stool-1")
    assert (row["completion_tokens"], row["finish_reason"]) == (6, "tool_calls"), row


def test_stream_length_cut_R_ANT_1(c):
    status, _, text = stream(c, {"messages": user("[[fake chunks=6]] go"), "max_tokens": 2})
    _, chunks = sse_parse(text)
    assert deltas(chunks)[1:] == [({"content": "w1 "}, None), ({"content": "w2 "}, None), ({}, "length")], text


# ---- 4. upstream errors in OpenAI's shape (R-API-2) ----

# Anthropic status -> (client status, OpenAI type, code = the Anthropic type, message, Retry-After)
ERRORS = {
    400: (400, "invalid_request_error", "invalid_request_error", "fake error 400", None),
    401: (401, "authentication_error", "authentication_error", "fake error 401", None),
    403: (403, "permission_error", "permission_error", "fake error 403", None),
    404: (404, "not_found_error", "not_found_error", "fake error 404", None),
    413: (413, "invalid_request_error", "request_too_large", "fake error 413", None),
    429: (429, "rate_limit_error", "rate_limit_error", "fake error 429", "1"),
    500: (500, "server_error", "api_error", "fake error 500", None),
    529: (503, "server_error", "overloaded_error", "Overloaded", "5"),
}


def test_upstream_errors_openai_shaped_R_API_2(c):
    """Each Anthropic error status: the OpenAI error object, a status the SDKs classify the
    same (529 overloaded -> 503 with Retry-After), stream or not; one upstream call each."""
    for st, (cst, typ, code, msg, ra) in ERRORS.items():
        for streamed in (False, True):
            c.err.reset()
            rid = "t50-err-%d-%d" % (st, streamed)
            body = {"model": "claude-err", "messages": user("[[fake status=%d]] x" % st)}
            if streamed:
                body["stream"] = True
            r = chat(c, body, rid=rid)
            what = "upstream %d (stream %s)" % (st, streamed)
            assert r.status == cst, "%s -> %r" % (what, r)
            assert r.headers["content-type"] == "application/json", (what, r.headers)
            assert r.json() == {"error": {"message": msg, "type": typ, "param": None, "code": code}}, (what, r)
            assert r.headers.get("retry-after") == ra, "%s: Retry-After %r" % (what, r.headers.get("retry-after"))
            assert c.err.stats()["requests"] == 1, (what, c.err.stats())
            row = row_of(c, rid)
            assert (row["status"], row["prompt_tokens"], row["completion_tokens"]) == (cst, 0, 0), (what, row)


# ---- R-ANT-4: last, after every other request of this file ----

def test_zz_credential_never_in_logs_R_ANT_4(c):
    """The upstream credentials appear in no file the gateway wrote, the database aside."""
    listed = json.dumps(c.gw.ctl("list", "endpoints"))
    assert SECRET not in listed and SECRET_VER not in listed and '"upstream_auth"' not in listed, listed
    hits = []
    for root, _, files in os.walk(c.gw.dir):
        for name in files:
            if name.startswith("sluice.db") or name.startswith("sluice.state") or ".sock" in name:
                continue
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            if SECRET.encode() in data or SECRET_VER.encode() in data:
                hits.append(name)
    assert not hits, "R-ANT-4: the upstream credential is written in %r" % hits
    # The log searched is the live one: it names requests of this file that failed upstream.
    assert "t50-err-500-0" in c.gw.log_text(), c.gw.log_text()[-2000:]


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
