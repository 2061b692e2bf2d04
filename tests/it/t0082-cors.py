#!/usr/bin/env python3
"""t0082-cors: browsers on the data plane (R-API-7).

The setting cors_allowed_origins (sluicectl config set; responders reload within about a
second) lists the origins whose pages may call the data plane; empty (the default) turns
CORS off, `*` allows any origin (echoed). For an allowed Origin sluice answers preflights
(OPTIONS with Access-Control-Request-Method / -Headers) on /v1/chat/completions,
/v1/messages, /v1/responses, ... itself, unauthenticated: 204, Access-Control-Allow-Origin
= the origin, Vary: Origin, -Allow-Methods with POST, -Allow-Headers with the SDKs' headers
(authorization, content-type, x-api-key, anthropic-*, idempotency-key, x-request-id,
x-session-id, openai-organization / -project, x-stainless-*) and any token header the
browser asks for, -Max-Age. Real answers to that origin, 200s, streams and errors (401,
429) alike, carry Access-Control-Allow-Origin and Access-Control-Expose-Headers
(x-request-id, x-routed-model, retry-after, x-ratelimit-*). Upstream Access-Control-*
headers are always stripped (stand-in directive cors=1 adds some). Another origin: a
preflight is 403 cors_origin_not_allowed without any Access-Control-* header, and real
answers carry none."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_tenant, setup_with, stop_all, wait_for

PID = os.getpid()
A, B = "http://a.example", "http://b.example"
EVIL = ("http://evil.example", "https://a.example", "http://a.example:8080", "http://a.example.evil.com",
        "http://sub.a.example", "null")
PATHS = ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/messages/count_tokens", "/v1/embeddings",
         "/v1/completions")
SDK_HEADERS = ("authorization", "content-type", "x-api-key", "anthropic-version", "anthropic-beta", "idempotency-key",
               "x-request-id", "x-session-id", "openai-organization", "openai-project", "x-stainless-os",
               "x-stainless-lang", "x-stainless-package-version", "x-stainless-runtime",
               "x-stainless-runtime-version", "x-stainless-arch", "x-stainless-retry-count", "x-stainless-timeout")
EXPOSED = ("x-request-id", "x-routed-model", "retry-after", "x-ratelimit-limit", "x-ratelimit-remaining",
           "x-ratelimit-reset")


def setup():
    return setup_with(build, teardown)


def build(c):
    c.oai = Fake("t82-oai")
    c.ant = Fake("t82-ant")
    c.gw = Gateway("t0082", procs=2, threads=8)
    c.key = setup_tenant(c.gw, "acme", "alice")
    c.qps_key = c.gw.ctl("key", "add", "--user", "alice", "--qps", 1)["key"]
    add_endpoint(c.gw, "ep", "acme", [c.oai])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme", "--target-model", "m-real")
    c.gw.ctl_secret("sk-ant-t0082-%d" % PID, "endpoint", "add", "ep-ant", "--tenant", "acme", "--protocol", "anthropic")
    c.gw.ctl("replica", "add", "ep-ant", c.ant.url)
    c.gw.ctl("route", "add", "claude", "ep-ant", "--tenant", "acme")
    c.gw.start()
    return c


def teardown(c):
    stop_all(c, "gw", "oai", "ant")


# ---- helpers ----

def preflight(c, origin, path="/v1/chat/completions", method="POST",
              req_headers="authorization, content-type, x-stainless-os"):
    h = {"Origin": origin, "Access-Control-Request-Method": method}
    if req_headers:
        h["Access-Control-Request-Headers"] = req_headers
    return c.gw.request("OPTIONS", path, headers=h)


def acx(r):
    """Every Access-Control-* header as received, duplicates kept: [(lower name, value)]."""
    return [(k.lower(), v) for k, v in r.header_list if k.lower().startswith("access-control-")]


def one(r, name):
    vals = [v for k, v in r.header_list if k.lower() == name]
    assert len(vals) == 1, "expected exactly one %s header, got %r in %r" % (name, vals, r.header_list)
    return vals[0]


def csv(v):
    return [x.strip().lower() for x in v.split(",") if x.strip()]


def set_origins(c, value, probe_origin, want_status):
    c.gw.ctl("config", "set", "cors_allowed_origins", value)
    # Every responder must have reloaded: several answers in a row agree.
    wait_for(lambda: all(preflight(c, probe_origin).status == want_status for _ in range(6)), 5, interval=0.1,
             what="cors_allowed_origins=%r applied" % value)


def chat(c, origin, key=None, content="hello", **extra):
    b = {"model": "m", "messages": [{"role": "user", "content": content}]}
    b.update(extra)
    h = {"Origin": origin, "X-Fake-Behavior": "cors=1"}
    return c.gw.request("POST", "/v1/chat/completions", b, key=key or c.key, headers=h)


def assert_no_cors(r, what):
    assert acx(r) == [], "%s: Access-Control-* headers present: %r" % (what, acx(r))


def assert_real_cors(r, origin, what):
    assert one(r, "access-control-allow-origin") == origin, (what, r.header_list)
    assert "origin" in csv(",".join(v for k, v in r.header_list if k.lower() == "vary")), (what, r.header_list)
    exposed = csv(one(r, "access-control-expose-headers"))
    for h in EXPOSED:
        assert h in exposed, "%s: %s not exposed: %r" % (what, h, exposed)
    assert "access-control-allow-credentials" not in dict(acx(r)), "%s: upstream header leaked: %r" % (what, acx(r))


# ---- 1. off by default ----

def test_default_off_R_API_7(c):
    r = preflight(c, A)
    assert r.status == 403, r
    assert r.json()["error"]["code"] == "cors_origin_not_allowed", r
    assert_no_cors(r, "default preflight")
    r = chat(c, A)
    assert r.status == 200, r
    assert_no_cors(r, "default real answer (upstream sent cors=1)")
    assert c.oai.stats()["last"]["headers"].get("x-fake-behavior") == "cors=1", "the directive did not go upstream"


# ---- 2. a list of origins ----

def test_preflight_allowed_origin_R_API_7(c):
    set_origins(c, "%s, %s" % (A, B), A, 204)
    asked = ", ".join(SDK_HEADERS) + ", X-Custom-Token"
    for origin in (A, B):
        for path in PATHS:
            n0 = c.oai.stats()["requests"]
            r = preflight(c, origin, path, req_headers=asked)
            what = "%s %s" % (origin, path)
            assert r.status == 204 and r.body == b"", (what, r)
            assert one(r, "access-control-allow-origin") == origin, (what, r.header_list)
            assert "origin" in csv(one(r, "vary")), (what, r.header_list)
            methods = csv(one(r, "access-control-allow-methods"))
            assert "post" in methods, (what, methods)
            allowed = csv(one(r, "access-control-allow-headers"))
            for h in SDK_HEADERS + ("x-custom-token",):
                assert h in allowed, "%s: %s not in Access-Control-Allow-Headers %r" % (what, h, allowed)
            age = one(r, "access-control-max-age")
            assert age.isdigit() and int(age) > 0, (what, age)
            assert c.oai.stats()["requests"] == n0, "a preflight reached the upstream"
    # Other methods of the data plane: GET /v1/models, DELETE a response.
    r = preflight(c, A, "/v1/models", method="GET", req_headers="authorization")
    assert r.status == 204 and "get" in csv(one(r, "access-control-allow-methods")), r
    r = preflight(c, A, "/v1/responses/resp_x_1", method="DELETE", req_headers="authorization")
    assert r.status == 204 and "delete" in csv(one(r, "access-control-allow-methods")), r
    # Without Access-Control-Request-Headers (a simple header set) the SDK list still comes.
    r = preflight(c, A, req_headers=None)
    assert r.status == 204 and "authorization" in csv(one(r, "access-control-allow-headers")), r


def test_preflight_header_smuggling_refused_R_API_7(c):
    """A requested header name that is not a token is not echoed into the allow list."""
    r = preflight(c, A, req_headers="x-ok-token, header:evil;a=b, x-(y), " + "x" * 300)
    assert r.status == 204, r
    allowed = csv(one(r, "access-control-allow-headers"))
    assert "x-ok-token" in allowed, allowed
    assert not any(ch in h for h in allowed for ch in ":;=()"), allowed
    assert len(one(r, "access-control-allow-headers")) < 1500, "an oversized name was echoed"


def test_real_answers_carry_cors_R_API_7(c):
    r = chat(c, A)
    assert r.status == 200, r
    assert_real_cors(r, A, "chat 200")
    assert r.headers.get("x-routed-model") == "m-real", r.headers
    r = chat(c, B, stream=True)
    assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream"), r
    assert_real_cors(r, B, "chat stream")
    r = chat(c, A, key="sk-wrong-%d" % PID)
    assert r.status == 401, r
    assert_real_cors(r, A, "401")
    r = c.gw.request("POST", "/v1/messages", {"model": "claude", "max_tokens": 10, "messages": [
        {"role": "user", "content": "[[fake cors=1]] hi"}]}, headers={"x-api-key": c.key, "Origin": A,
                                                                       "anthropic-version": "2023-06-01"})
    assert r.status == 200 and r.json()["type"] == "message", r
    assert_real_cors(r, A, "messages native (upstream sent cors=1)")
    r = c.gw.request("GET", "/v1/models", key=c.key, headers={"Origin": A})
    assert r.status == 200, r
    assert_real_cors(r, A, "models")
    r = c.gw.request("POST", "/v1/responses", {"model": "m", "input": "x"}, key=c.key,
                     headers={"Origin": A, "X-Fake-Behavior": "cors=1"})
    assert r.status == 200, r
    assert_real_cors(r, A, "responses")


def test_429_carries_cors_and_rate_headers_R_API_7(c):
    time.sleep(1.1)
    codes = []
    for i in range(3):
        r = chat(c, A, key=c.qps_key, content="qps %d" % i)
        codes.append(r.status)
        if r.status == 429:
            break
    assert codes[-1] == 429 and codes[0] == 200, codes
    assert_real_cors(r, A, "429")
    assert r.headers.get("retry-after") and r.headers.get("x-ratelimit-limit") == "1", r.headers


def test_origin_not_allowed_R_API_7(c):
    for origin in EVIL:
        n0 = c.oai.stats()["requests"]
        for path in ("/v1/chat/completions", "/v1/messages", "/v1/responses"):
            r = preflight(c, origin, path)
            assert r.status == 403, (origin, path, r)
            assert_no_cors(r, "preflight from %s to %s" % (origin, path))
            j = r.json()
            assert j.get("error"), j
        assert c.oai.stats()["requests"] == n0, "a refused preflight reached the upstream"
        r = chat(c, origin)
        assert r.status == 200, (origin, r)
        assert_no_cors(r, "real answer to %s (upstream sent cors=1)" % origin)
        r = chat(c, origin, key="sk-wrong-%d" % PID)
        assert r.status == 401, r
        assert_no_cors(r, "401 to %s" % origin)


# ---- 3. any origin, then off again ----

def test_star_echoes_any_origin_R_API_7(c):
    set_origins(c, "*", "http://random-%d.example:1234" % PID, 204)
    for origin in ("http://random-%d.example:1234" % PID, "https://app.example", A):
        r = preflight(c, origin)
        assert r.status == 204 and one(r, "access-control-allow-origin") == origin, (origin, r.header_list)
        r = chat(c, origin)
        assert r.status == 200, r
        assert_real_cors(r, origin, "* real answer to %s" % origin)


def test_back_to_empty_turns_cors_off_R_API_7(c):
    set_origins(c, "", A, 403)
    r = preflight(c, A)
    assert r.status == 403, r
    assert_no_cors(r, "preflight after reset")
    r = chat(c, A)
    assert r.status == 200, r
    assert_no_cors(r, "real answer after reset")


run_tests(globals(), setup, teardown)
