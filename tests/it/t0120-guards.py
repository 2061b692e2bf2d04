#!/usr/bin/env python3
"""t0120-guards: parameter validation before any backend sees the request (R-GUARD-1).

temperature 0-2, top_p 0-1, n 1..limits.max_n (8 here), max_tokens <= the model's
max_output (refused with param, or clamped in the forwarded body when the policy says
--clamp-max-tokens on), messages non-empty with known roles (tool needs tool_call_id),
stream boolean; /v1/messages takes roles user and assistant only and answers in the
Anthropic shape. A refused request never reaches the stand-in and leaves exactly one
usage record with its error code and no tokens."""
import json
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, expect, run_tests, setup_tenant, setup_with, stop_all, wait_for


def build(c):
    c.fake = Fake("guards")
    c.gw = Gateway("t0120", procs=1, threads=8)
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    for model in ("m", "capped", "clamped"):
        c.gw.ctl("route", "add", model, "ep", "--tenant", "acme")
    c.gw.sql_write("INSERT INTO model_policies (model, max_output, clamp_max_tokens) VALUES ('capped', 100, 0),"
                   " ('clamped', 100, 1)")
    c.gw.start()
    wait_for(lambda: chat(c, model="clamped").status == 200, 5, what="policy live")
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


def chat(c, rid=None, model="m", messages=None, **extra):
    body = {"model": model, "messages": messages or [{"role": "user", "content": "hello"}]}
    body.update(extra)
    h = {"X-Request-Id": rid} if rid else None
    return c.gw.request("POST", "/v1/chat/completions", body, key=c.key, headers=h)


def refused(c, param, code="invalid_value", status=400, path="/v1/chat/completions", body=None, **extra):
    """A request refused with this code and param: the stand-in never saw it, one usage row."""
    before = c.fake.stats()["requests"]
    rid = "g-" + uuid.uuid4().hex[:12]
    if body is None:
        r = chat(c, rid, **extra)
    else:
        r = c.gw.request("POST", path, body, key=c.key, headers={"X-Request-Id": rid})
    got = expect(r, status, code, param) if path != "/v1/messages" else r.json()
    assert c.fake.stats()["requests"] == before, "the upstream saw a refused request"
    rows = wait_for(lambda: c.gw.usage_events("request_id = ?", rid) or None, 5, what="usage row")
    assert len(rows) == 1, rows
    assert rows[0]["error_code"] == (code if path != "/v1/messages" else rows[0]["error_code"]), rows
    assert rows[0]["status"] == status and rows[0]["prompt_tokens"] == 0 and rows[0]["completion_tokens"] == 0, rows
    return got


def accepted(c, **extra):
    r = chat(c, **extra)
    assert r.status == 200, r
    return json.loads(c.fake.stats()["last"]["body"])


def test_temperature_bounds(c):
    for t in (0, 0.7, 2):
        accepted(c, temperature=t)
    for t in (-0.01, 2.01):
        assert "temperature" in refused(c, "temperature", temperature=t)["error"]["message"]
    refused(c, "temperature", code="invalid_type", temperature="hot")


def test_top_p_bounds(c):
    for p in (0, 0.5, 1):
        accepted(c, top_p=p)
    for p in (-0.1, 1.5):
        refused(c, "top_p", top_p=p)


def test_n_bounds_follow_limits_max_n(c):
    for n in (1, 8):
        assert accepted(c, n=n)["n"] == n
    for n in (0, 9, 128):
        refused(c, "n", n=n)
    refused(c, "n", code="invalid_type", n=1.5)


def test_stream_boolean(c):
    accepted(c, stream=False)
    refused(c, "stream", code="invalid_type", stream="yes")
    refused(c, "stream", code="invalid_type", stream=1)


def test_max_tokens_refused_above_max_output(c):
    assert accepted(c, model="capped", max_tokens=100)["max_tokens"] == 100
    e = refused(c, "max_tokens", model="capped", max_tokens=101)
    assert "100" in e["error"]["message"], e
    refused(c, "max_completion_tokens", model="capped", max_completion_tokens=5000)
    refused(c, "max_tokens", code="invalid_type", model="capped", max_tokens=-1)


def test_max_tokens_clamped_when_policy_says_so(c):
    rid = "clamp-" + uuid.uuid4().hex[:8]
    r = chat(c, rid, model="clamped", max_tokens=5000)
    assert r.status == 200, r
    assert json.loads(c.fake.stats()["last"]["body"])["max_tokens"] == 100
    sent = accepted(c, model="clamped", max_completion_tokens=101)
    assert sent["max_completion_tokens"] == 100, sent
    assert accepted(c, model="clamped", max_tokens=50)["max_tokens"] == 50


def test_messages_non_empty_array(c):
    refused(c, "messages", code="invalid_type", body={"model": "m", "messages": []})
    refused(c, "messages", code="invalid_type", body={"model": "m", "messages": "hi"})
    refused(c, "messages", code="missing_field", body={"model": "m"})


def test_roles(c):
    for role in ("system", "developer", "user"):
        accepted(c, messages=[{"role": role, "content": "x"}, {"role": "user", "content": "hi"}])
    accepted(c, messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                          {"role": "assistant", "content": None, "tool_calls": [
                              {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                          {"role": "tool", "tool_call_id": "c1", "content": "42"}])
    ok = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    refused(c, "messages[3].role", messages=ok + [{"role": "wizard", "content": "x"}])
    refused(c, "messages[0].role", code="missing_field", messages=[{"content": "x"}])
    refused(c, "messages[1].role", messages=[ok[0], {"role": 7, "content": "x"}])
    refused(c, "messages[0]", code="invalid_type", messages=["hello"])
    refused(c, "messages[0].content", code="invalid_type", messages=[{"role": "user", "content": 5}])
    refused(c, "messages[0].content", code="missing_field", messages=[{"role": "user"}])
    refused(c, "messages[1].tool_call_id", code="missing_field",
            messages=[ok[0], {"role": "tool", "content": "42"}])


def test_anthropic_messages_roles_and_shape(c):
    good = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    r = c.gw.request("POST", "/v1/messages", good, key=c.key)
    assert r.status == 200, r
    for msgs in ([{"role": "system", "content": "x"}], [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]):
        e = refused(c, None, path="/v1/messages", body=dict(good, messages=msgs))
        assert e["type"] == "error" and e["error"]["type"] == "invalid_request_error", e
        assert "role" in e["error"]["message"], e
    e = refused(c, None, path="/v1/messages", body=dict(good, model="capped", max_tokens=101))
    assert e["type"] == "error" and "max_tokens" in e["error"]["message"], e
    r = c.gw.request("POST", "/v1/messages", dict(good, model="clamped", max_tokens=999), key=c.key)
    assert r.status == 200, r
    assert json.loads(c.fake.stats()["last"]["body"])["max_tokens"] == 100


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
