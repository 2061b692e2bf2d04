#!/usr/bin/env python3
"""t0001-basics: the four OpenAI routes end to end, byte for byte (R-API-1..4, R-USE-1..2)."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_tenant, wait_for, http_request


class Ctx:
    pass


def setup():
    c = Ctx()
    c.fake = Fake("basics")
    c.gw = Gateway("t0001")
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep1", "acme", [c.fake])
    c.gw.ctl("route", "add", "m", "ep1", "--tenant", "acme")
    c.gw.start()
    return c


def teardown(c):
    if c:
        c.gw.stop()
        c.fake.stop()


def direct(c, path, body, headers=None):
    return http_request(c.fake.port, "POST", path, body, headers)


def test_chat_matches_upstream_bytes(c):
    body = {"model": "m", "messages": [{"role": "user", "content": "one two three"}]}
    r = c.gw.request("POST", "/v1/chat/completions", body, key=c.key)
    assert r.status == 200, r
    last = c.fake.stats()["last"]
    d = direct(c, "/v1/chat/completions", body)
    a, b = r.json(), d.json()
    # Same bytes apart from the id and created the upstream changes per call.
    for k in ("id", "created"):
        a.pop(k), b.pop(k)
    assert a == b, (a, b)
    assert r.headers["content-type"] == "application/json"
    assert r.headers["x-routed-model"] == "m"
    assert r.headers["x-request-id"].startswith("req_")
    assert last["headers"]["x-request-id"] == r.headers["x-request-id"], last["headers"]
    assert "authorization" not in last["headers"], "caller credential forwarded upstream"


def test_request_id_kept(c):
    r = c.gw.chat(c.key, headers={"X-Request-Id": "my-trace-123"})
    assert r.headers["x-request-id"] == "my-trace-123"
    assert c.fake.stats()["last"]["headers"]["x-request-id"] == "my-trace-123"
    # An unsafe id is replaced, never echoed (R-SEC-4).
    r = c.gw.chat(c.key, headers={"X-Request-Id": "a\"b<script>"})
    assert r.headers["x-request-id"].startswith("req_"), r.headers


def test_completions_and_embeddings(c):
    r = c.gw.request("POST", "/v1/completions", {"model": "m", "prompt": "hi there"}, key=c.key)
    assert r.status == 200 and r.json()["object"] == "text_completion", r
    r = c.gw.request("POST", "/v1/embeddings", {"model": "m", "input": ["a", "b"]}, key=c.key)
    assert r.status == 200 and len(r.json()["data"]) == 2, r
    assert r.json()["usage"]["prompt_tokens"] >= 1


def test_models(c):
    r = c.gw.request("GET", "/v1/models", key=c.key)
    assert r.status == 200
    ids = [m["id"] for m in r.json()["data"]]
    assert ids == ["m"], ids
    assert r.json()["object"] == "list"
    r = c.gw.request("GET", "/v1/models/m", key=c.key)
    assert r.status == 200 and r.json()["id"] == "m", r
    r = c.gw.request("GET", "/v1/models/nope", key=c.key)
    assert r.status == 404 and r.json()["error"]["code"] == "model_not_found", r


def test_stream_is_exactly_upstream_without_usage_chunk(c):
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    status, headers, chunks = c.gw.stream_raw(c.key, body)
    got = b"".join(ch for _, ch in chunks).decode()
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    # The upstream was asked for usage (R-USE-1) ...
    sent = json.loads(c.fake.stats()["last"]["body"])
    assert sent["stream_options"] == {"include_usage": True}, sent
    # ... but the client sees exactly what a direct call without it gives (R-USE-2).
    d = direct(c, "/v1/chat/completions", body).body.decode()
    norm = lambda s: [json.loads(l[6:]).get("choices") if l.startswith("data: {") else l
                      for l in s.split("\n")]
    assert norm(got) == norm(d), (got, d)
    assert '"usage"' not in got
    assert got.endswith("data: [DONE]\n\n")


def test_stream_with_client_usage_passes_usage_chunk(c):
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "x"}]}
    status, _, chunks = c.gw.stream_raw(c.key, body)
    got = b"".join(ch for _, ch in chunks).decode()
    assert status == 200 and '"choices":[]' in got and '"usage":{' in got, got


def test_errors_are_openai_shaped(c):
    cases = [
        ("POST", "/v1/chat/completions", "{bad json", c.key, 400, "invalid_json", None),
        ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}, c.key, 400, "missing_field", "model"),
        ("POST", "/v1/chat/completions", {"model": 5, "messages": []}, c.key, 400, "invalid_type", "model"),
        ("POST", "/v1/chat/completions", {"model": "m"}, c.key, 400, "missing_field", "messages"),
        ("POST", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}, c.key, 400, "invalid_type", "stream"),
        ("POST", "/v1/chat/completions", {"model": "zzz", "messages": [{"role": "user", "content": "x"}]}, c.key, 404, "model_not_found", "model"),
        ("POST", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]}, "sk-tenant-wrong", 401, "invalid_api_key", None),
        ("POST", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]}, None, 401, "invalid_api_key", None),
        ("GET", "/v1/chat/completions", None, c.key, 405, "method_not_allowed", None),
        ("GET", "/v1/nothing-here", None, c.key, 404, "not_found", None),
    ]
    for method, path, body, key, status, code, param in cases:
        r = c.gw.request(method, path, body, key=key)
        assert r.status == status, (path, body, r)
        e = r.json()["error"]
        assert set(e) == {"message", "type", "param", "code"}, e
        assert e["code"] == code and e["param"] == param, (body, e)
        if status in (400, 401, 404):
            assert r.headers.get("x-should-retry") == "false", r.headers


def test_body_limit_413(c):
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * (9 << 20)}]}
    r = c.gw.request("POST", "/v1/chat/completions", big, key=c.key)
    assert r.status == 413 and r.json()["error"]["code"] == "request_too_large", r


def test_usage_rows(c):
    rid = "usage-check-1"
    r = c.gw.chat(c.key, content="a b c d", headers={"X-Request-Id": rid})
    assert r.status == 200
    u = r.json()["usage"]
    row = wait_for(lambda: c.gw.usage_events("request_id = ?", rid), 5, what="usage row")[0]
    assert (row["prompt_tokens"], row["completion_tokens"], row["status"]) == (u["prompt_tokens"], u["completion_tokens"], 200), row
    assert row["model"] == "m" and row["key_id"] > 0 and row["user_id"] > 0
    # A streamed request's usage comes from the final chunk.
    rid = "usage-check-2"
    c.gw.stream_raw(c.key, {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]},
                    headers={"X-Request-Id": rid})
    row = wait_for(lambda: c.gw.usage_events("request_id = ?", rid), 5, what="stream usage row")[0]
    assert row["completion_tokens"] == 3 and row["stream"] == 1, row
    # Failures are recorded with their status (R-USE-4).
    rid = "usage-check-3"
    c.gw.chat(c.key, model="nope", headers={"X-Request-Id": rid})
    row = wait_for(lambda: c.gw.usage_events("request_id = ?", rid), 5, what="failure row")[0]
    assert row["status"] == 404 and row["error_code"] == "model_not_found" and row["prompt_tokens"] == 0, row
    daily = c.gw.sql("SELECT sum(requests), sum(errors) FROM usage_daily")[0]
    assert daily[0] >= 3 and daily[1] >= 1, daily


def test_passthrough_inference_is_counted_R_KEY_0_R_USE_1(c):
    """The pass-through to /v1/chat/completions asks for usage and records it like /v1 (R-USE-1/2)."""
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "via proxy"}]}
    r = c.gw.request("POST", "/api/v1/proxy/ep1/v1/chat/completions", body, key=c.key,
                     headers={"X-Request-Id": "proxy-usage-1", "X-Fake-Behavior": "completion_tokens=7"})
    assert r.status == 200, r
    sent = json.loads(c.fake.stats()["last"]["body"])
    assert sent["stream_options"] == {"include_usage": True}, sent
    assert b'"usage"' not in r.body, r.body
    row = wait_for(lambda: c.gw.usage_events("request_id = 'proxy-usage-1'"), 5, what="usage row")[0]
    assert row["completion_tokens"] == 7 and row["model"] == "m" and row["stream"] == 1, row


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
