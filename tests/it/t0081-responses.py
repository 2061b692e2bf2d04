#!/usr/bin/env python3
"""t0081-responses: OpenAI's Responses API, POST /v1/responses (R-API-8).

Routed by `model` to OpenAI endpoints and relayed byte for byte, streamed or not (compared
with the same request made straight to the stand-in, ids and created_at normalised);
usage recorded from the body or response.completed (prompt = input_tokens, completion =
output_tokens, cache_read = input_tokens_details.cached_tokens, reasoning =
output_tokens_details.reasoning_tokens); the stream-start guard fails over invisibly from a
replica whose stream errors or dies before its first delta; max_output_tokens over the
model's cap is 400; Idempotency-Key replays. A response id is pinned to the replica that
made it: previous_response_id follow-ups, GET /v1/responses/{id}, GET .../input_items,
POST .../cancel and DELETE reach it (two stand-ins round robin, each knowing only its own
ids); an id sluice never saw, or another tenant's, is 404 response_not_found. To an
anthropic endpoint: 400 unsupported_endpoint_for_upstream_protocol.

On OpenAI endpoints X-Fake-Behavior is forwarded, so the stand-in's directives travel there."""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (Fake, Gateway, add_endpoint, fcgi_request, fcgi_sockets, http_request, run_tests,
                     setup_tenant, setup_with, stop_all, wait_for)

PID = os.getpid()
FAKES = ("solo", "pin1", "pin2", "g_err", "g_die", "g_good", "ant")
ERROR_KEYS = {"message", "type", "param", "code"}


def setup():
    return setup_with(build, teardown)


def build(c):
    for name in FAKES:
        setattr(c, name, Fake("t81-" + name))
    c.gw = Gateway("t0081", procs=2, threads=16)
    gw = c.gw
    c.key = setup_tenant(gw, "acme", "alice")
    c.key_b = setup_tenant(gw, "beta", "bob")
    add_endpoint(gw, "ep-solo", "acme", [c.solo])
    gw.ctl("route", "add", "gpt", "ep-solo", "--tenant", "acme")
    gw.ctl("route", "add", "gpt-capped", "ep-solo", "--tenant", "acme")
    gw.ctl("policy", "set", "gpt-capped", "--max-output", 100)
    add_endpoint(gw, "ep-pin", "acme", [c.pin1, c.pin2])
    gw.ctl("route", "add", "gpt-pin", "ep-pin", "--tenant", "acme", "--target-model", "pin-real")
    # The other tenant reaches the same two stand-ins through its own endpoint and route.
    add_endpoint(gw, "ep-pin-b", "beta", [c.pin1, c.pin2])
    gw.ctl("route", "add", "gpt-pin", "ep-pin-b", "--tenant", "beta")
    # Stream-start guard: a replica whose stream errors (g_err) or dies (g_die) before the
    # first delta, each beside a good one. One endpoint each: a failed replica is banned
    # for passive.ban_ms, and would not be tried again in this file's time.
    c.g_err.behavior("error_after=0")
    c.g_die.behavior("die_after=0")
    add_endpoint(gw, "ep-guard-err", "acme", [c.g_err, c.g_good])
    gw.ctl("route", "add", "gpt-guard-err", "ep-guard-err", "--tenant", "acme")
    add_endpoint(gw, "ep-guard-die", "acme", [c.g_die, c.g_good])
    gw.ctl("route", "add", "gpt-guard-die", "ep-guard-die", "--tenant", "acme")
    p = subprocess.run(gw.ctl_argv() + ["--json", "endpoint", "add", "ep-ant", "--tenant", "acme", "--protocol",
                        "anthropic", "--upstream-auth-stdin"], input="sk-ant-t0081-%d\n" % PID,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    gw.ctl("replica", "add", "ep-ant", c.ant.url)
    gw.ctl("route", "add", "claude", "ep-ant", "--tenant", "acme")
    gw.start()
    return c


def teardown(c):
    stop_all(c, "gw", *FAKES)


# ---- helpers ----

def create(c, b, key=None, rid=None, headers=None):
    h = dict(headers or {})
    if rid:
        h["X-Request-Id"] = rid
    return c.gw.request("POST", "/v1/responses", b, key=key or c.key, headers=h)


def direct(fake, b, headers=None):
    return http_request(fake.port, "POST", "/v1/responses", b, headers or {})


def norm(raw):
    """Ids (resp_<name>_<n>, msg_<name>_<n>) and created_at are the only things that may differ."""
    raw = re.sub(rb'"(resp|msg)_t81-[a-z0-9_]+?_\d+"', rb'"\1_X"', raw)
    return re.sub(rb'"created_at":\d+', b'"created_at":0', raw)


def events(text):
    """[(event name, data)] of a Responses SSE body."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), block
        data = json.loads(lines[1][6:])
        assert data["type"] == lines[0][7:], block
        out.append((lines[0][7:], data))
    return out


def row_of(c, rid):
    rows = wait_for(lambda: c.gw.usage_events("request_id = ?", rid), 5, what="usage row of %s" % rid)
    assert len(rows) == 1, "one usage event per request: %r" % rows
    return rows[0]


def openai_error(r, status, code, param="-"):
    assert r.status == status, "expected %d, got %r" % (status, r)
    e = r.json()["error"]
    assert set(e) == ERROR_KEYS and e["code"] == code, "error %r, expected code %r" % (e, code)
    if param != "-":
        assert e["param"] == param, e
    return e


def origin(r):
    return r.headers.get("x-fake-upstream")


# ---- 1. relay byte for byte, usage ----

def test_non_stream_byte_for_byte_R_API_8(c):
    b = {"model": "gpt", "input": [{"role": "user", "content": [{"type": "input_text", "text": "hello there"}]}],
         "instructions": "Be brief.", "temperature": 0.3, "metadata": {"k": "v"}, "max_output_tokens": 64}
    hb = {"X-Fake-Behavior": "chunks=4"}
    r = create(c, b, headers=hb)
    up = c.solo.stats()["last"]
    assert r.status == 200 and r.headers["content-type"].startswith("application/json"), r
    assert (up["method"], up["path"]) == ("POST", "/v1/responses"), up
    assert json.loads(up["body"]) == b, "the body upstream: %s" % up["body"]
    d = direct(c.solo, b, hb)
    assert d.status == 200, d
    assert norm(r.body) == norm(d.body), "gateway:\n%s\ndirect:\n%s" % (r.body.decode(), d.body.decode())
    j = r.json()
    assert j["object"] == "response" and j["status"] == "completed" and j["id"].startswith("resp_t81-solo_"), j
    assert j["output"][0]["content"][0]["text"] == "w1 w2 w3 w4", j


def test_stream_byte_for_byte_R_API_8(c):
    b = {"model": "gpt", "input": "stream this please", "stream": True}
    hb = {"X-Fake-Behavior": "chunks=3"}
    r = create(c, b, headers=hb)
    d = direct(c.solo, b, hb)
    assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream"), r
    assert norm(r.body) == norm(d.body), "gateway:\n%s\ndirect:\n%s" % (r.body.decode(), d.body.decode())
    names = [n for n, _ in events(r.body.decode())]
    assert names[0] == "response.created" and names[-1] == "response.completed", names
    assert names.count("response.output_text.delta") == 3, names


def test_usage_recorded_non_stream_and_stream_R_API_8(c):
    beh = {"X-Fake-Behavior": "prompt_tokens=12 completion_tokens=9 cache_read_tokens=5 reasoning_tokens=4"}
    r = create(c, {"model": "gpt", "input": "count me"}, rid="t81-use-ns", headers=beh)
    u = r.json()["usage"]
    assert (u["input_tokens"], u["output_tokens"], u["input_tokens_details"]["cached_tokens"],
            u["output_tokens_details"]["reasoning_tokens"]) == (12, 9, 5, 4), u
    row = row_of(c, "t81-use-ns")
    assert (row["prompt_tokens"], row["completion_tokens"], row["cache_read_tokens"], row["reasoning_tokens"],
            row["cache_creation_tokens"], row["status"], row["stream"], row["path"]) == \
        (12, 9, 5, 4, 0, 200, 0, "/v1/responses"), row
    r = create(c, {"model": "gpt", "input": "count me", "stream": True}, rid="t81-use-st", headers=beh)
    assert r.status == 200 and events(r.body.decode())[-1][0] == "response.completed", r
    row = row_of(c, "t81-use-st")
    assert (row["prompt_tokens"], row["completion_tokens"], row["cache_read_tokens"], row["reasoning_tokens"],
            row["stream"]) == (12, 9, 5, 4, 1), row


# ---- 2. stream-start guard, limits, idempotency ----

def test_stream_start_guard_fails_over_invisibly_R_API_8(c):
    """A replica whose stream errors (or dies) before the first delta: every client stream
    is a clean one from the other replica."""
    for model, bad in (("gpt-guard-err", c.g_err), ("gpt-guard-die", c.g_die)):
        good0 = c.g_good.stats()["requests"]
        for i in range(4):
            r = create(c, {"model": model, "input": "guarded %d" % i, "stream": True})
            assert r.status == 200, (model, i, r)
            ev = events(r.body.decode())
            names = [n for n, _ in ev]
            assert "error" not in names and names[-1] == "response.completed", (model, names)
            assert names.count("response.created") == 1 and names.count("response.output_text.delta") == 3, names
            seqs = [d["sequence_number"] for _, d in ev]
            assert seqs == list(range(len(ev))), "sequence numbers of one stream: %r" % seqs
            assert ev[0][1]["response"]["id"].startswith("resp_t81-g_good_"), ev[0]
            assert origin(r) == "t81-g_good", r.headers
        assert bad.stats()["requests"] >= 1, "%s: the bad replica was never tried: %r" % (model, bad.stats())
        assert c.g_good.stats()["requests"] - good0 == 4, c.g_good.stats()


def test_max_output_tokens_cap_R_API_8(c):
    n0 = c.solo.stats()["requests"]
    e = openai_error(create(c, {"model": "gpt-capped", "input": "x", "max_output_tokens": 101}), 400, "invalid_value")
    assert "100" in e["message"], e
    assert c.solo.stats()["requests"] == n0, "a refused request reached the upstream"
    assert create(c, {"model": "gpt-capped", "input": "x", "max_output_tokens": 100}).status == 200


def test_idempotency_replay_one_usage_row_R_API_8(c):
    b = {"model": "gpt", "input": "only once"}
    n0 = c.solo.stats()["requests"]
    r1 = create(c, b, rid="t81-idem", headers={"Idempotency-Key": "t81-idem-1"})
    r2 = create(c, b, rid="t81-idem", headers={"Idempotency-Key": "t81-idem-1"})
    assert r1.status == 200 and r2.status == 200, (r1, r2)
    assert r2.body == r1.body and r2.headers.get("x-idempotent-replay") == "true", (r2.headers, r2.body[:200])
    assert c.solo.stats()["requests"] - n0 == 1, "the replay called the upstream"
    time.sleep(0.5)
    rows = c.gw.usage_events("request_id = ?", "t81-idem")
    assert len(rows) == 1 and rows[0]["status"] == 200, rows


# ---- 3. response ids pinned to their replica ----

def test_previous_response_id_follow_ups_pinned_R_API_8(c):
    r = create(c, {"model": "gpt-pin", "input": "start a conversation"})
    assert r.status == 200, r
    rid, home = r.json()["id"], origin(r)
    assert home in ("t81-pin1", "t81-pin2") and rid.startswith("resp_%s_" % home), (rid, home)
    assert json.loads(getattr(c, home[4:]).stats()["last"]["body"])["model"] == "pin-real"
    assert r.json()["model"] == "gpt-pin", "R-RT-5: the client's model name: %r" % r.json()["model"]
    prev = rid
    for i in range(4):
        f = create(c, {"model": "gpt-pin", "input": "follow-up %d" % i, "previous_response_id": prev})
        assert f.status == 200, "follow-up %d: %r" % (i, f)
        assert origin(f) == home, "follow-up %d landed on %s, the response lives on %s" % (i, origin(f), home)
        text = f.json()["output"][0]["content"][0]["text"]
        assert text.startswith("continuing %s " % prev), text
        if i % 2:
            prev = f.json()["id"]       # a chain: the follow-up's own id is pinned too


def test_streamed_create_pinned_R_API_8(c):
    r = create(c, {"model": "gpt-pin", "input": "streamed start", "stream": True})
    assert r.status == 200, r
    ev = events(r.body.decode())
    rid, home = ev[0][1]["response"]["id"], origin(r)
    models = [d["response"]["model"] for _, d in ev if "response" in d]
    assert models == ["gpt-pin"] * 3, "R-RT-5: created, in_progress, completed name the client's model: %r" % models
    for i in range(3):
        f = create(c, {"model": "gpt-pin", "input": "after stream %d" % i, "previous_response_id": rid,
                       "stream": True})
        names = [n for n, _ in events(f.body.decode())]
        assert f.status == 200 and origin(f) == home and names[-1] == "response.completed", (i, origin(f), home, names)


def test_pinning_is_pool_wide_R_API_8(c):
    """Made through one responder process, followed up through the other (straight to
    their FastCGI sockets): the id -> replica map is shared by the pool."""
    socks = fcgi_sockets(c.gw)
    assert len(socks) == 2, socks
    auth = {"Authorization": "Bearer " + c.key}
    for maker, follower in ((socks[0], socks[1]), (socks[1], socks[0])):
        r = fcgi_request(maker, "POST", "/v1/responses", {"model": "gpt-pin", "input": "cross process"}, headers=auth)
        assert r.status == 200, r
        rid, home = r.json()["id"], origin(r)
        for i in range(3):
            f = fcgi_request(follower, "POST", "/v1/responses",
                             {"model": "gpt-pin", "input": "next %d" % i, "previous_response_id": rid}, headers=auth)
            assert f.status == 200 and origin(f) == home, (i, origin(f), home, f)
            g = fcgi_request(follower, "GET", "/v1/responses/" + rid, headers=auth)
            assert g.status == 200 and origin(g) == home and g.json()["id"] == rid, (i, g)


def test_item_operations_reach_the_replica_R_API_8(c):
    r = create(c, {"model": "gpt-pin", "input": "item ops input text"})
    rid, home = r.json()["id"], origin(r)
    for i in range(2):                  # twice: round robin would alternate
        g = c.gw.request("GET", "/v1/responses/" + rid, key=c.key)
        assert g.status == 200 and origin(g) == home and g.json()["id"] == rid, g
        items = c.gw.request("GET", "/v1/responses/%s/input_items" % rid, key=c.key)
        assert items.status == 200 and origin(items) == home, items
        assert items.json()["data"][0]["content"][0]["text"] == "item ops input text", items
    cancel = c.gw.request("POST", "/v1/responses/%s/cancel" % rid, key=c.key)
    assert cancel.status == 200 and origin(cancel) == home and cancel.json()["status"] == "cancelled", cancel
    g = c.gw.request("GET", "/v1/responses/" + rid, key=c.key)
    assert g.status == 200 and g.json()["status"] == "cancelled", g
    d = c.gw.request("DELETE", "/v1/responses/" + rid, key=c.key)
    assert d.status == 200 and origin(d) == home and d.json() == {"id": rid, "object": "response", "deleted": True}, d
    g = c.gw.request("GET", "/v1/responses/" + rid, key=c.key)
    assert g.status == 404, "a deleted response: %r" % g


def test_unknown_id_404_R_API_8(c):
    n = c.pin1.stats()["requests"] + c.pin2.stats()["requests"]
    unknown = "/v1/responses/resp_never_seen_1"
    for method, path in (("GET", unknown), ("GET", unknown + "/input_items"), ("POST", unknown + "/cancel"),
                         ("DELETE", unknown)):
        r = c.gw.request(method, path, key=c.key)
        assert r.headers["content-type"].startswith("application/json"), r.headers
        openai_error(r, 404, "response_not_found")
    assert c.pin1.stats()["requests"] + c.pin2.stats()["requests"] == n, "an unknown id was sent upstream"
    # An unknown previous_response_id goes through normal routing; the upstream says it is unknown.
    r = create(c, {"model": "gpt-pin", "input": "x", "previous_response_id": "resp_never_seen_2"})
    assert r.status == 404 and r.json()["error"]["code"] in ("previous_response_not_found", "response_not_found"), r


def test_other_tenants_id_404_R_API_8(c):
    r = create(c, {"model": "gpt-pin", "input": "acme's secret conversation"})
    rid, home = r.json()["id"], origin(r)
    n = c.pin1.stats()["requests"] + c.pin2.stats()["requests"]
    for method, path in (("GET", "/v1/responses/" + rid), ("GET", "/v1/responses/%s/input_items" % rid),
                         ("POST", "/v1/responses/%s/cancel" % rid), ("DELETE", "/v1/responses/" + rid)):
        openai_error(c.gw.request(method, path, key=c.key_b), 404, "response_not_found")
    for i in range(2):
        f = create(c, {"model": "gpt-pin", "input": "beta follows %d" % i, "previous_response_id": rid}, key=c.key_b)
        assert f.status == 404 and f.json()["error"]["code"] == "response_not_found", f
        assert "continuing" not in f.body.decode(), "another tenant continued acme's response: %r" % f
    assert c.pin1.stats()["requests"] + c.pin2.stats()["requests"] == n, "another tenant's id was sent upstream"
    g = c.gw.request("GET", "/v1/responses/" + rid, key=c.key)
    assert g.status == 200 and origin(g) == home and g.json()["status"] == "completed", g


def test_anthropic_endpoint_refused_R_API_8(c):
    n0 = c.ant.stats()["requests"]
    for b in ({"model": "claude", "input": "x"}, {"model": "claude", "input": "x", "stream": True}):
        e = openai_error(create(c, b), 400, "unsupported_endpoint_for_upstream_protocol")
        assert e["type"] == "invalid_request_error", e
    assert c.ant.stats()["requests"] == n0, "a Responses request reached an anthropic upstream"


run_tests(globals(), setup, teardown)
