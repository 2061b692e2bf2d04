#!/usr/bin/env python3
"""t0142-front-errors: a client never sees the front server's HTML (issue 13).

When a responder dies while it holds a request (killed here with SIGKILL while the
upstream thinks), lighttpd answers that request itself: its status (500/502/503) with
sluice's JSON error body (code gateway_unavailable), the Anthropic shape on /v1/messages.
The pool comes back (lighttpd starts responders again) and answers as before; sluice's own
errors keep their bodies."""
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_tenant, setup_with, stop_all, wait_for


def build(c):
    c.fake = Fake("front-errors")
    c.gw = Gateway("t0142", procs=1, threads=8)
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.gw.start()
    wait_for(lambda: c.gw.chat(c.key).status == 200, 5, what="key live")
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


def killed_mid_request(c, path, body, headers=None):
    """Sends body to path with a thinking upstream, SIGKILLs the responders meanwhile."""
    c.fake.behavior("ttfb_ms=3000")
    out = {}
    def send():
        out["r"] = c.gw.request("POST", path, body, key=c.key, headers=headers)
    t = threading.Thread(target=send)
    t.start()
    wait_for(lambda: c.fake.stats()["inflight"] >= 1, 5, what="the request at the upstream")
    pids = c.gw.responder_pids()
    assert pids, "no responder"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    t.join(20)
    c.fake.behavior("")
    wait_for(lambda: c.gw.chat(c.key).status == 200, 15, what="the pool back")
    return out["r"]


def test_a_responder_killed_mid_request_gives_json(c):
    r = killed_mid_request(c, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status in (500, 502, 503), r
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers
    e = r.json()["error"]
    assert e["code"] == "gateway_unavailable" and e["type"] == "server_error", e
    assert b"<html" not in r.body.lower()


def test_anthropic_callers_get_their_shape(c):
    r = killed_mid_request(c, "/v1/messages", {"model": "m", "max_tokens": 16,
                                              "messages": [{"role": "user", "content": "hi"}]},
                           headers={"anthropic-version": "2023-06-01"})
    assert r.status in (500, 502, 503), r
    j = r.json()
    assert j["type"] == "error" and j["error"]["type"] == "api_error" and "message" in j["error"], j


def test_sluices_own_errors_keep_their_bodies(c):
    r = c.gw.request("POST", "/v1/chat/completions", {"model": "m", "messages": []}, key="sk-nope-0142")
    assert r.status == 401 and r.json()["error"]["code"] == "invalid_api_key", r
    r = c.gw.request("POST", "/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]},
                     key=c.key)
    assert r.status == 404 and r.json()["error"]["code"] == "model_not_found", r
    r = c.gw.request("GET", "/api/v1/tenants")
    assert r.status == 401 and r.json()["error"].get("code") != "gateway_unavailable", r


run_tests(globals(), setup, teardown)
