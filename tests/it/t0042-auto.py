#!/usr/bin/env python3
"""t0042-auto: model "auto" — layers, purpose and capability filters, strategies, degradation (R-AUTO-1..6)."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_tenant, wait_for


class Ctx:
    pass


MODELS = {
    # name: (policy flags)
    "chat-big": ["--purpose", "chat", "--quality", 90, "--price-in", 10, "--price-out", 30, "--tools", "on",
                 "--vision", "on", "--max-context", 32768],
    "chat-small": ["--purpose", "chat", "--quality", 60, "--price-in", 0.5, "--price-out", 1.5, "--tools", "off",
                   "--vision", "off", "--max-context", 4096],
    "embed": ["--purpose", "embedding", "--price-in", 0.1, "--price-out", 0],
    "plain": [],
}


def setup():
    c = Ctx()
    c.fakes = {m: Fake(m) for m in MODELS}
    c.gw = Gateway("t0042", procs=2, threads=16)
    c.key = setup_tenant(c.gw, "acme", "alice")
    c.kid = c.gw.ctl("list", "keys")["keys"][0]["id"]
    c.key2 = c.gw.ctl("key", "add", "--user", "alice")
    for m, flags in MODELS.items():
        add_endpoint(c.gw, "ep-" + m, "acme", [c.fakes[m]])
        c.gw.ctl("route", "add", m, "ep-" + m, "--tenant", "acme")
        if flags:
            c.gw.ctl("policy", "set", m, *flags)
    c.gw.start()
    return c


def teardown(c):
    if c:
        c.gw.stop()
        for f in c.fakes.values():
            f.stop()


def auto_chat(c, key=None, headers=None, **extra):
    body = {"model": "auto", "messages": [{"role": "user", "content": "hello"}]}
    body.update(extra)
    return c.gw.request("POST", "/v1/chat/completions", body, key=key or c.key, headers=headers)


def setting(c, k, v):
    c.gw.ctl("settings", "set", k, v)


def applied(c, check, what):
    return wait_for(check, 3, what=what)


def test_off_by_default_R_AUTO_1(c):
    r = auto_chat(c)
    assert r.status == 404 and r.json()["error"]["code"] == "model_not_found", r
    ids = [m["id"] for m in c.gw.request("GET", "/v1/models", key=c.key).json()["data"]]
    assert "auto" not in ids, ids


def test_cost_strategy_and_models_list_R_AUTO_4_R_AUTH_6(c):
    setting(c, "auto_routing_strategy", "cost")
    setting(c, "auto_routing_enabled", "true")
    applied(c, lambda: auto_chat(c).status == 200, "auto on")
    data = c.gw.request("GET", "/v1/models", key=c.key).json()["data"]
    assert data[0] == {"id": "auto", "object": "model", "created": 0, "owned_by": "sluice-router"}, data[0]
    r = auto_chat(c)
    assert r.headers["x-routed-model"] == "chat-small" and r.headers["x-fake-upstream"] == "chat-small", r.headers
    assert json.loads(c.fakes["chat-small"].stats()["last"]["body"])["model"] == "chat-small"
    assert "x-fallback" not in r.headers


def test_capability_filters_R_AUTO_3(c):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    r = auto_chat(c, tools=tools)
    assert r.headers["x-routed-model"] == "chat-big", r.headers
    img = [{"role": "user", "content": [{"type": "text", "text": "what"},
                                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]
    r = c.gw.request("POST", "/v1/chat/completions", {"model": "auto", "messages": img}, key=c.key)
    assert r.headers["x-routed-model"] == "chat-big", r.headers
    long = "word " * 20000       # ~25k tokens estimated: over chat-small's 4096 context
    r = auto_chat(c, messages=[{"role": "user", "content": long}])
    assert r.headers["x-routed-model"] == "chat-big", r.headers


def test_purpose_filter_R_AUTO_2(c):
    r = c.gw.request("POST", "/v1/embeddings", {"model": "auto", "input": "x"}, key=c.key)
    assert r.status == 200 and r.headers["x-routed-model"] == "embed", r
    r = c.gw.request("POST", "/v1/completions", {"model": "auto", "prompt": "x"}, key=c.key)
    assert r.status == 200 and r.headers["x-routed-model"] == "plain", r
    assert r.headers.get("x-routing-purpose-fallback") == "unlabeled", r.headers


def test_degrades_to_next_candidate_R_AUTO_5(c):
    c.fakes["chat-small"].behavior("status=503")
    try:
        before = c.fakes["chat-big"].stats()["requests"]
        r = auto_chat(c, headers={"X-Request-Id": "auto-degrade-1"})
        assert r.status == 200, r
        assert r.headers["x-routed-model"] == "chat-big" and r.headers["x-fallback"] == "true", r.headers
        assert r.headers["x-degradation-level"] == "1", r.headers
        assert json.loads(c.fakes["chat-big"].stats()["last"]["body"])["model"] == "chat-big"
        assert c.fakes["chat-big"].stats()["requests"] == before + 1
        # Usage is the serving endpoint's, one event (R-AUTO-5, R-USE-4).
        row = wait_for(lambda: c.gw.usage_events("request_id = 'auto-degrade-1'"), 3)
        assert len(row) == 1 and row[0]["model"] == "chat-big" and row[0]["status"] == 200, row
        ep_big = [e for e in c.gw.ctl("list", "endpoints")["endpoints"] if e["name"] == "ep-chat-big"][0]["id"]
        assert row[0]["endpoint_id"] == ep_big, row
    finally:
        c.fakes["chat-small"].behavior("")


def test_no_degradation_on_4xx_or_after_first_byte_R_AUTO_5(c):
    c.fakes["chat-small"].behavior("status=400")
    try:
        before = c.fakes["chat-big"].stats()["requests"]
        r = auto_chat(c)
        assert r.status == 400 and r.json()["error"]["message"] == "fake error 400", r
        assert c.fakes["chat-big"].stats()["requests"] == before
    finally:
        c.fakes["chat-small"].behavior("")
    before = c.fakes["chat-big"].stats()["requests"]
    st, h, chunks = c.gw.stream_raw(c.key, {"model": "auto", "stream": True, "messages": [{"role": "user", "content": "s"}]},
                                    headers={"X-Fake-Behavior": "die_after=1"})
    text = b"".join(x for _, x in chunks).decode()
    assert st == 200 and '"error"' in text and c.fakes["chat-big"].stats()["requests"] == before, text


def test_all_failed_502_R_AUTO_6(c):
    for m in ("chat-small", "chat-big"):
        c.fakes[m].behavior("status=503")
    try:
        r = auto_chat(c)
        assert r.status == 502 and r.json()["error"]["code"] == "auto_routing_all_failed", r
    finally:
        for m in ("chat-small", "chat-big"):
            c.fakes[m].behavior("")


def test_latency_strategy_uses_observed_ttft_R_AUTO_4(c):
    # Teach the gateway: chat-small slow, chat-big fast.
    for _ in range(4):
        c.gw.chat(c.key, model="chat-small", headers={"X-Fake-Behavior": "ttfb_ms=300"})
        c.gw.chat(c.key, model="chat-big")
    setting(c, "auto_routing_strategy", "latency")
    applied(c, lambda: auto_chat(c).headers.get("x-routed-model") == "chat-big", "latency strategy")


def test_key_policy_over_global_R_AUTO_1(c):
    c.gw.ctl("key", "set", c.key2["id"], "--auto", "off")
    applied(c, lambda: auto_chat(c, key=c.key2["key"]).status == 404, "key policy off")
    c.gw.ctl("key", "set", c.key2["id"], "--auto", "on", "--strategy", "cost")
    applied(c, lambda: auto_chat(c, key=c.key2["key"]).headers.get("x-routed-model") == "chat-small", "key strategy")
    # The global strategy (latency) still applies to the first key.
    assert auto_chat(c).headers["x-routed-model"] == "chat-big"
    setting(c, "auto_routing_enabled", "false")
    applied(c, lambda: auto_chat(c).status == 404, "global off")
    r = auto_chat(c, key=c.key2["key"])
    assert r.status == 200, r      # the key's own policy still says on


def test_no_candidates_codes_R_AUTO_6(c):
    setting(c, "auto_routing_enabled", "true")
    c.gw.ctl("policy", "set", "plain", "--routing", "off")
    c.gw.ctl("replica", "set", "ep-embed", c.fakes["embed"].url, "--state", "disabled")
    try:
        def code():
            r = c.gw.request("POST", "/v1/embeddings", {"model": "auto", "input": "x"}, key=c.key)
            return r.status == 503 and r.json()["error"]["code"]
        assert applied(c, code, "no embedding candidate") == "no_auto_candidates_for_purpose"
        stats = c.gw.ctl("stats")["auto_routing"]
        d = {(x["outcome"], x["strategy"]): x["count"] for x in stats}
        assert d.get(("degraded", "cost"), 0) >= 1 and d.get(("failed", "cost"), 0) >= 1, d
    finally:
        c.gw.ctl("replica", "set", "ep-embed", c.fakes["embed"].url, "--state", "running")
        c.gw.ctl("policy", "set", "plain", "--routing", "on")


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
