#!/usr/bin/env python3
"""t0008-attempts: the driver's rules beyond plain failover (R-SSE-4/5, R-HC-8, R-ANT-2/3,
R-USE-2): an error event before any content is failed over only when the server caused it;
a caller's own mistake reaches the caller as the upstream sent it and bans no replica; a request
one endpoint's protocol cannot express is served by another endpoint of the same model; the
pass-through keeps a usage chunk the client asked for."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_tenant, wait_for


class Ctx:
    pass


def setup():
    c = Ctx()
    c.a, c.b, c.ant = Fake("att-a"), Fake("att-b"), Fake("att-ant")
    c.gw = Gateway("t0008", procs=2, threads=16,
                   conf={"passive": "ban_ms = 15000; circuit_failures = 3; circuit_open_ms = 30000; half_open_trials = 2;"})
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.a, c.b])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    # One model served by an OpenAI and an Anthropic endpoint at the same priority.
    add_endpoint(c.gw, "ep-ant", "acme", [c.ant], protocol="anthropic")
    p = subprocess.run(c.gw.ctl_argv() + ["endpoint", "set", "ep-ant", "--upstream-auth-stdin"],
                       input="ant-secret\n", text=True, capture_output=True)
    assert p.returncode == 0, p.stderr
    add_endpoint(c.gw, "ep-oai", "acme", [c.a])
    c.gw.ctl("route", "add", "mixed", "ep-ant", "--tenant", "acme")
    c.gw.ctl("route", "add", "mixed", "ep-oai", "--tenant", "acme")
    c.gw.ctl("route", "add", "ant-only", "ep-ant", "--tenant", "acme")
    c.gw.start()
    return c


def teardown(c):
    if c:
        c.gw.stop()
        for f in (c.a, c.b, c.ant):
            f.stop()


def stream(c, behavior, rid, model="m", **extra):
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    body.update(extra)
    st, h, chunks = c.gw.stream_raw(c.key, body, headers={"X-Fake-Behavior": behavior, "X-Request-Id": rid})
    return st, h, b"".join(x for _, x in chunks).decode()


def test_server_error_before_content_fails_over_R_SSE_5(c):
    """A server_error event while the guard held everything back: the other replica serves
    it invisibly (one retry)."""
    for f in (c.a, c.b):
        f.behavior("error_after=0")
    c.b.behavior("")
    served = 0
    for i in range(4):
        st, _, body = stream(c, "", "se-%d" % i)
        assert st == 200 and body.endswith("data: [DONE]\n\n") and '"error"' not in body, body
        row = wait_for(lambda: c.gw.usage_events("request_id = ?", "se-%d" % i), 3)[0]
        served += row["retries"]
    assert served >= 1, "no request was failed over"
    c.a.behavior("")


def test_a_callers_error_event_is_relayed_and_bans_nothing_R_SSE_4(c):
    """invalid_request_error (context_length_exceeded) before content: not a replica failure.
    The client gets the upstream's own event; repeating it never opens a circuit."""
    before = c.a.stats()["requests"] + c.b.stats()["requests"]
    for i in range(5):
        st, _, body = stream(c, "error_after=0;client_error=1", "ce-%d" % i)
        assert st == 200, body
        assert "context_length_exceeded" in body and body.count('"error"') == 1, body
    after = c.a.stats()["requests"] + c.b.stats()["requests"]
    assert after - before == 5, "a caller's error was retried on another replica"
    assert "circuit open" not in c.gw.log_text()
    st, _, body = stream(c, "", "ce-ok")
    assert st == 200 and body.endswith("data: [DONE]\n\n"), body


def test_every_replica_failing_early_passes_the_upstreams_event_R_SSE_4(c):
    for f in (c.a, c.b):
        f.behavior("error_after=0")
    try:
        st, _, body = stream(c, "", "all-early")
        assert st == 200 and "The server had an error" in body, body
        row = wait_for(lambda: c.gw.usage_events("request_id = 'all-early'"), 3)[0]
        assert row["retries"] == 1 and row["error_code"] == "upstream_error", row
    finally:
        for f in (c.a, c.b):
            f.behavior("")


def test_refused_by_one_protocol_served_by_another_R_ANT_3(c):
    """temperature 1.5 cannot go to the anthropic endpoint; the model's openai endpoint takes it
    every time instead of a coin flip between 200 and 400."""
    n_ant = c.ant.stats()["requests"]
    for i in range(10):
        r = c.gw.chat(c.key, model="mixed", temperature=1.5, headers={"X-Request-Id": "mix-%d" % i})
        assert r.status == 200, r
        assert r.headers["x-routed-endpoint"] == "ep-oai", r.headers
    assert c.ant.stats()["requests"] == n_ant
    row = wait_for(lambda: c.gw.usage_events("request_id = 'mix-9'"), 3)[0]
    assert row["retries"] == 0 and row["status"] == 200, row
    # Only the anthropic endpoint: the refusal itself (R-ANT-3), never sent upstream.
    r = c.gw.chat(c.key, model="ant-only", temperature=1.5)
    assert r.status == 400 and r.json()["error"]["code"] == "unsupported_parameter", r
    assert r.json()["error"]["param"] == "temperature", r
    r = c.gw.request("POST", "/v1/embeddings", {"model": "mixed", "input": "x"}, key=c.key)
    assert r.status == 200 and r.headers["x-routed-endpoint"] == "ep-oai", r
    assert c.ant.stats()["requests"] == n_ant


def test_pass_through_keeps_the_usage_chunk_it_asked_for_R_USE_2(c):
    import http.client
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "p"}]}
    for path in ("/api/v1/proxy/ep/v1/chat/completions", "/api/v1/proxy/ep/v1/chat/completions?x=1"):
        conn = http.client.HTTPConnection("127.0.0.1", c.gw.port, timeout=10)
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Authorization": "Bearer " + c.key, "Content-Type": "application/json"})
        resp = conn.getresponse()
        text = resp.read().decode()
        conn.close()
        assert resp.status == 200, (path, text)
        assert '"choices":[],"usage":{' in text.replace(" ", ""), (path, text)


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
