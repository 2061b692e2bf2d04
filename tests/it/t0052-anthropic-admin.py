#!/usr/bin/env python3
"""t0052-anthropic-admin: what an anthropic endpoint refuses, its credential, and the rest
of the chain around the translation: unsupported paths and parameters never reach the
upstream (R-ANT-2, R-ANT-3); the upstream credential is never returned or logged (R-ANT-4);
key limits and idempotency (R-KEY-2, R-IDEM-2); the raw pass-through (R-API-1, R-KEY-0);
the endpoint test and the business probe in the Messages protocol (R-ANT-5, R-HC-1)."""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, Healthd, http_request, run_tests, setup_tenant, setup_with, stop_all, wait_for

PID = os.getpid()
SECRET = "sk-ant-api03-t0052-%d-Pq7Rt" % PID
SECRET2 = "sk-ant-api03-t0052-%d-second-Vb9" % PID
ROOT_PW = "root-pass-t0052"
ERROR_KEYS = {"message", "type", "param", "code"}


def ctl_in(gw, stdin, *args):
    p = subprocess.run(gw.ctl_argv() + ["--json"] + [str(a) for a in args], input=stdin + "\n",
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, "sluicectl %r: %s %s" % (args, p.stdout, p.stderr)
    assert SECRET not in p.stdout + p.stderr and SECRET2 not in p.stdout + p.stderr, p.stdout
    return json.loads(p.stdout) if p.stdout.strip() else {}


def add_anthropic(gw, name, fake, model, target=None, secret=SECRET, *opts):
    args = ["endpoint", "add", name, "--tenant", "acme", "--protocol", "anthropic"] + list(opts)
    if secret:
        ctl_in(gw, secret, *(args + ["--upstream-auth-stdin"]))
    else:
        gw.ctl(*args)
    gw.ctl("replica", "add", name, fake.url)
    gw.ctl("route", "add", model, name, "--tenant", "acme", *(["--target-model", target] if target else []))


def setup():
    return setup_with(build, teardown)


def build(c):
    for name in ("ant", "cred", "nocred", "biz", "switch"):
        setattr(c, name, Fake(name if name in ("ant", "switch") else "ant-" + name))
    c.gw = Gateway("t0052", keepalive_ms=1000)
    c.key = setup_tenant(c.gw, "acme", "alice")
    k = c.gw.ctl("key", "add", "--user", "alice", "--daily", 2)
    c.limited, c.limited_id = k["key"], k["id"]
    ctl_in(c.gw, ROOT_PW, "user", "add", "root", "--tenant", "default", "--role", "operator", "--password-stdin")
    add_anthropic(c.gw, "ep-ant", c.ant, "claude", "claude-3-real")
    add_anthropic(c.gw, "ep-cred", c.cred, "claude-cred")
    add_anthropic(c.gw, "ep-nocred", c.nocred, "claude-nocred", None, None, "--anthropic-version", "2023-01-01")
    add_anthropic(c.gw, "ep-biz", c.biz, "claude-biz", "claude-biz-real", SECRET, "--business-probe-rounds", 1)
    ctl_in(c.gw, SECRET, "endpoint", "add", "ep-switch", "--tenant", "acme", "--upstream-auth-stdin")
    c.gw.ctl("replica", "add", "ep-switch", c.switch.url)
    c.gw.ctl("route", "add", "switchy", "ep-switch", "--tenant", "acme")
    c.eps = {e["name"]: e["id"] for e in c.gw.ctl("list", "endpoints")["endpoints"]}
    c.gw.start()
    r = c.gw.request("POST", "/api/v1/auth/login", {"username": "root", "password": ROOT_PW})
    assert r.status == 200, r
    c.cookie, c.csrf = r.headers["set-cookie"].split(";")[0], r.json()["csrf_token"]
    return c


def teardown(c):
    stop_all(c, "gw", "ant", "cred", "nocred", "biz", "switch")


# ---- helpers ----

def api(c, method, path, body=None):
    h = {"Cookie": c.cookie}
    if method != "GET":
        h["X-CSRF-Token"] = c.csrf
    return http_request(c.gw.port, method, path, body, h)


def chat(c, body, rid=None, key=None, headers=None):
    h = dict(headers or {})
    if rid:
        h["X-Request-Id"] = rid
    b = dict(body)
    b.setdefault("model", "claude")
    b.setdefault("messages", [{"role": "user", "content": "hello"}])
    return c.gw.request("POST", "/v1/chat/completions", b, key=key or c.key, headers=h)


def row_of(c, rid):
    rows = wait_for(lambda: c.gw.usage_events("request_id = ?", rid), 5, what="usage row of %s" % rid)
    assert len(rows) == 1, rows
    return rows[0]


def no_secret(*objs):
    for o in objs:
        s = o if isinstance(o, str) else json.dumps(o)
        assert SECRET not in s and SECRET2 not in s, "R-ANT-4: the credential was returned: %s" % s[:500]
        assert '"upstream_auth"' not in s, "R-ANT-4: an upstream_auth field was returned: %s" % s[:500]


# ---- R-ANT-2 / R-ANT-3: refusals, none of which reaches the upstream ----

def test_unsupported_paths_R_ANT_2(c):
    c.ant.reset()
    for path, body in (("/v1/embeddings", {"model": "claude", "input": "x"}),
                       ("/v1/completions", {"model": "claude", "prompt": "x"}),
                       ("/v1/completions", {"model": "claude", "prompt": "x", "stream": True})):
        rid = "t52-path-%s-%d" % (path.rsplit("/", 1)[1], "stream" in body)
        r = c.gw.request("POST", path, body, key=c.key, headers={"X-Request-Id": rid})
        assert r.status == 400 and r.headers["content-type"] == "application/json", (path, r)
        e = r.json()["error"]
        assert set(e) == ERROR_KEYS and (e["code"], e["type"], e["param"]) == \
            ("unsupported_endpoint_for_upstream_protocol", "invalid_request_error", None), (path, e)
        assert path in e["message"] and "ep-ant" in e["message"], e
        assert r.headers.get("x-should-retry") == "false", r.headers
        row = row_of(c, rid)
        assert (row["status"], row["error_code"]) == (400, "unsupported_endpoint_for_upstream_protocol"), row
    assert c.ant.stats()["requests"] == 0, "a refused path reached the upstream: %r" % c.ant.stats()


UNSUPPORTED = [
    ("n", 2), ("logprobs", True), ("top_logprobs", 2), ("response_format", {"type": "json_object"}),
    ("response_format", {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}),
    ("frequency_penalty", 0.5), ("presence_penalty", -0.5), ("seed", 42), ("logit_bias", {"50256": -100}),
    ("temperature", 1.5), ("store", True), ("service_tier", "flex"), ("audio", {"voice": "alloy"}),
    ("modalities", ["text", "audio"]), ("foo_bar", 1),
]


def test_unsupported_parameters_R_ANT_3(c):
    """Each unmappable parameter: 400 unsupported_parameter naming it, stream or not; nothing
    is sent upstream, nothing silently dropped."""
    c.ant.reset()
    for i, (param, value) in enumerate(UNSUPPORTED):
        for streamed in (False, True):
            rid = "t52-param-%d-%d" % (i, streamed)
            r = chat(c, {param: value, "stream": streamed}, rid=rid)
            what = "%s=%r stream=%s" % (param, value, streamed)
            assert r.status == 400 and r.headers["content-type"] == "application/json", (what, r)
            e = r.json()["error"]
            assert set(e) == ERROR_KEYS and (e["code"], e["type"], e["param"]) == \
                ("unsupported_parameter", "invalid_request_error", param), (what, e)
            assert param in e["message"] and r.headers.get("x-should-retry") == "false", (what, e, r.headers)
            if not streamed:
                row = row_of(c, rid)
                assert (row["status"], row["error_code"]) == (400, "unsupported_parameter"), (what, row)
    assert "1.5" in chat(c, {"temperature": 1.5}).json()["error"]["message"]
    assert c.ant.stats()["requests"] == 0, "a refused request reached the upstream: %r" % c.ant.stats()["last"]


def test_neutral_values_pass_and_are_not_sent_R_ANT_3(c):
    """The values that ask for nothing pass, and do not appear upstream (Messages would refuse them)."""
    neutral = {"n": 1, "logprobs": False, "top_logprobs": 0, "frequency_penalty": 0, "presence_penalty": 0.0,
               "logit_bias": {}, "response_format": {"type": "text"}, "store": False, "service_tier": "auto",
               "seed": None, "temperature": 1, "stream_options": None}
    r = chat(c, neutral)
    assert r.status == 200, r
    up = json.loads(c.ant.stats()["last"]["body"])
    assert up == {"model": "claude-3-real", "max_tokens": 4096, "temperature": 1,
                  "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]}, up
    r = chat(c, {"temperature": 0})
    assert r.status == 200 and json.loads(c.ant.stats()["last"]["body"])["temperature"] == 0, r


# ---- R-ANT-4: the upstream credential ----

def test_credential_never_returned_R_ANT_4(c):
    """CLI and API show upstream_auth_set only, whether set by CLI (stdin) or API; a change
    reaches the upstream within 2 s; cleared, no credential at all goes upstream."""
    eid = c.eps["ep-cred"]
    listed = c.gw.ctl("list", "endpoints")
    ep = [e for e in listed["endpoints"] if e["name"] == "ep-cred"][0]
    assert ep["upstream_auth_set"] is True and ep["protocol"] == "anthropic", ep
    shown = c.gw.ctl("show", "endpoint", eid)
    a_list, a_get = api(c, "GET", "/api/v1/endpoints"), api(c, "GET", "/api/v1/endpoints/%d" % eid)
    assert a_list.status == 200 and a_get.status == 200, (a_list, a_get)
    assert a_get.json()["upstream_auth_set"] is True, a_get
    no_secret(listed, shown, a_list.body.decode(), a_get.body.decode())
    assert chat(c, {"model": "claude-cred"}).status == 200
    assert c.cred.stats()["last"]["headers"]["x-api-key"] == SECRET
    # Changed through the API: the answer does not echo it; the upstream gets it.
    r = api(c, "PUT", "/api/v1/endpoints/%d" % eid, {"upstream_auth": SECRET2})
    assert r.status == 200 and r.json()["upstream_auth_set"] is True, r
    no_secret(r.body.decode())
    def sees(secret):
        return chat(c, {"model": "claude-cred"}).status == 200 and \
            c.cred.stats()["last"]["headers"].get("x-api-key") == secret
    wait_for(lambda: sees(SECRET2), 3, interval=0.2, what="the new credential upstream (R-CFG-1)")
    # Cleared: neither a credential nor the caller's key goes upstream; its 401 reaches the caller.
    out = c.gw.ctl("endpoint", "set", "ep-cred", "--clear-upstream-auth")
    assert out.get("upstream_auth_set") is False, out
    def refused():
        r = chat(c, {"model": "claude-cred"})
        return r if r.status == 401 else None
    r = wait_for(refused, 3, interval=0.2, what="requests without a credential")
    assert r.json() == {"error": {"message": "x-api-key header is required", "type": "authentication_error",
                                  "param": None, "code": "authentication_error"}}, r
    h = c.cred.stats()["last"]["headers"]
    assert "x-api-key" not in h and "authorization" not in h, h
    ctl_in(c.gw, SECRET, "endpoint", "set", "ep-cred", "--upstream-auth-stdin")
    wait_for(lambda: sees(SECRET), 3, interval=0.2, what="the credential set again")
    # The audit log records the changes, never the value.
    audit = c.gw.sql("SELECT coalesce(before, ''), coalesce(after, '') FROM audit_log")
    assert len(audit) > 0, audit
    no_secret(json.dumps(audit), c.gw.ctl("list", "audit", "--limit", 1000))


def test_protocol_switch_at_run_time_R_ANT_1_R_ANT_4(c):
    """An openai endpoint sends its credential as Bearer to /v1/chat/completions; switched
    with `endpoint set --protocol anthropic` it speaks Messages with x-api-key within 2 s,
    and back."""
    assert chat(c, {"model": "switchy"}).status == 200
    last = c.switch.stats()["last"]
    assert last["path"] == "/v1/chat/completions" and last["headers"].get("authorization") == "Bearer " + SECRET, last
    assert "x-api-key" not in last["headers"], last
    c.gw.ctl("endpoint", "set", "ep-switch", "--protocol", "anthropic")
    def speaks(path):
        r = chat(c, {"model": "switchy"})
        return r.status == 200 and c.switch.stats()["last"]["path"] == path
    wait_for(lambda: speaks("/v1/messages"), 3, interval=0.2, what="the switch to Messages (R-CFG-1)")
    h = c.switch.stats()["last"]["headers"]
    assert h.get("x-api-key") == SECRET and "authorization" not in h and h.get("anthropic-version") == "2023-06-01", h
    r = c.gw.request("POST", "/v1/embeddings", {"model": "switchy", "input": "x"}, key=c.key)
    assert r.status == 400 and r.json()["error"]["code"] == "unsupported_endpoint_for_upstream_protocol", r
    c.gw.ctl("endpoint", "set", "ep-switch", "--protocol", "openai")
    wait_for(lambda: speaks("/v1/chat/completions"), 3, interval=0.2, what="the switch back")
    assert c.gw.request("POST", "/v1/embeddings", {"model": "switchy", "input": "x"}, key=c.key).status == 200


# ---- R-IDEM-2 / R-KEY-2 through the translation ----

def test_idempotency_replay_R_IDEM_2(c):
    c.ant.reset()
    b = {"model": "claude", "messages": [{"role": "user", "content": "[[fake chunks=4]] idempotent"}]}
    h = {"Idempotency-Key": "ant-order-1", "X-Request-Id": "t52-idem"}
    first = c.gw.request("POST", "/v1/chat/completions", b, key=c.key, headers=h)
    assert first.status == 200 and first.json()["choices"][0]["message"]["content"] == "w1 w2 w3 w4", first
    for _ in range(2):
        r = c.gw.request("POST", "/v1/chat/completions", b, key=c.key, headers=h)
        assert r.status == 200 and r.headers.get("x-idempotent-replay") == "true", r
        assert r.body == first.body, (r.body, first.body)
    assert c.ant.stats()["requests"] == 1, "a replay called the upstream: %r" % c.ant.stats()
    time.sleep(0.5)
    assert c.gw.sql("SELECT count(*) FROM usage_events WHERE request_id = 't52-idem'")[0][0] == 1
    b2 = dict(b, messages=[{"role": "user", "content": "other"}])
    r = c.gw.request("POST", "/v1/chat/completions", b2, key=c.key, headers=h)
    assert r.status == 422 and r.json()["error"]["code"] == "IDEMPOTENCY_KEY_BODY_MISMATCH", r
    assert c.ant.stats()["requests"] == 1


def test_key_daily_limit_R_KEY_2(c):
    c.ant.reset()
    for i in range(2):
        r = chat(c, {}, key=c.limited)
        assert r.status == 200, (i, r)
    r = chat(c, {}, key=c.limited)
    assert r.status == 429 and r.json()["error"]["code"] == "DAILY_LIMIT_EXCEEDED", r
    assert r.headers.get("x-should-retry") == "false", r.headers
    assert c.ant.stats()["requests"] == 2, "the refused call reached the upstream: %r" % c.ant.stats()


# ---- the pass-through stays raw ----

RAW = ('{ "model" : "claude-raw",  "max_tokens": 7, "system": [{"type": "text", "text": "sys",'
       ' "cache_control": {"type": "ephemeral"}}], "top_k": 3,\n "messages": [ {"role": "user", "content": "hey you"} ] }')


def test_passthrough_stays_raw_R_API_1_R_ANT_4(c):
    """/api/v1/proxy/ep-ant/v1/messages: the body byte for byte, query and anthropic headers
    kept, x-api-key from the endpoint (not the caller's), the answer untranslated."""
    c.ant.reset()
    r = c.gw.request("POST", "/api/v1/proxy/ep-ant/v1/messages?beta=true", RAW, key=c.key,
                     headers={"anthropic-version": "2023-06-01", "anthropic-beta": "prompt-caching-2024-07-31",
                              "x-api-key": "caller-own-x-key", "X-Request-Id": "t52-proxy-1"})
    assert r.status == 200 and r.headers["content-type"] == "application/json", r
    last = c.ant.stats()["last"]
    assert (last["path"], last["query"], last["body"]) == ("/v1/messages", "beta=true", RAW), last
    h = last["headers"]
    assert h.get("x-api-key") == SECRET and "authorization" not in h, h
    assert h.get("anthropic-version") == "2023-06-01" and h.get("anthropic-beta") == "prompt-caching-2024-07-31", h
    assert c.key not in json.dumps(last) and "caller-own-x-key" not in json.dumps(last)
    j = r.json()
    assert re.match(r"^msg_fake\d+$", j.pop("id")), r
    assert j == {"type": "message", "role": "assistant", "model": "claude-raw",
                 "content": [{"type": "text", "text": "w1 w2 w3"}], "stop_reason": "end_turn", "stop_sequence": None,
                 "usage": {"input_tokens": 3, "output_tokens": 3, "cache_creation_input_tokens": 0,
                           "cache_read_input_tokens": 0}}, r
    assert r.headers.get("request-id", "").startswith("req_fake"), r.headers
    # A streamed pass-through keeps the Messages event stream as it came.
    raw_stream = RAW.replace('"top_k": 3', '"top_k": 3, "stream": true')
    st = c.gw.request("POST", "/api/v1/proxy/ep-ant/v1/messages", raw_stream, key=c.key,
                      headers={"anthropic-version": "2023-06-01"})
    text = st.body.decode()
    assert st.status == 200 and c.ant.stats()["last"]["body"] == raw_stream, st
    assert text.startswith("event: message_start\ndata: ") and "event: message_stop" in text, text
    assert "[DONE]" not in text and "chat.completion" not in text, text
    row = row_of(c, "t52-proxy-1")
    assert (row["status"], row["path"]) == (200, "/api/v1/proxy/ep-ant/v1/messages"), row


def test_passthrough_messages_tokens_counted_R_KEY_0(c):
    """R-KEY-0: the pass-through counts in usage accounting like /v1: the Message's own
    usage (input 3 + cache 2, output 4) is what the usage event records."""
    body = RAW.replace("hey you", "[[fake completion_tokens=4 prompt_tokens=3 cache_read_tokens=2]] hey")
    r = c.gw.request("POST", "/api/v1/proxy/ep-ant/v1/messages", body, key=c.key,
                     headers={"anthropic-version": "2023-06-01", "X-Request-Id": "t52-proxy-tok"})
    assert r.status == 200 and r.json()["usage"]["output_tokens"] == 4, r
    row = row_of(c, "t52-proxy-tok")
    assert (row["prompt_tokens"], row["completion_tokens"]) == (5, 4), \
        "the pass-through's Messages usage was not accounted: %r" % row


# ---- R-ANT-5 / R-HC-1: the endpoint test and the business probe ----

def test_endpoint_test_in_messages_protocol_R_ANT_5(c):
    c.ant.reset()
    t = c.gw.ctl("endpoint", "test", "ep-ant")
    assert (t["ok"], t["protocol"], t["model"], t["status"], t["error"], t["replica"]) == \
        (True, "anthropic", "claude-3-real", 200, None, c.ant.url), t
    last = c.ant.stats()["last"]
    assert (last["method"], last["path"]) == ("POST", "/v1/messages"), last
    assert json.loads(last["body"]) == {"model": "claude-3-real", "max_tokens": 1,
                                        "messages": [{"role": "user", "content": "ping"}]}, last
    h = last["headers"]
    assert h.get("x-api-key") == SECRET and h.get("anthropic-version") == "2023-06-01" and "authorization" not in h, h
    no_secret(t)
    r = api(c, "POST", "/api/v1/endpoints/%d/test" % c.eps["ep-ant"])
    assert r.status == 200 and r.json()["ok"] is True and r.json()["status"] == 200, r
    no_secret(r.body.decode())
    # A failing upstream, and an endpoint without a credential (and its own version).
    c.ant.behavior("status=529")
    try:
        t = c.gw.ctl("endpoint", "test", "ep-ant")
    finally:
        c.ant.behavior("")
    assert (t["ok"], t["status"]) == (False, 529) and "529" in t["error"], t
    t = c.gw.ctl("endpoint", "test", "ep-nocred")
    assert (t["ok"], t["status"]) == (False, 401), t
    h = c.nocred.stats()["last"]["headers"]
    assert h.get("anthropic-version") == "2023-01-01" and "x-api-key" not in h and "authorization" not in h, h


def test_business_probe_in_messages_protocol_R_HC_1(c):
    """healthd's max_tokens=1 probe speaks Messages with the credential; an overloaded
    upstream removes the replica, recovery brings it back."""
    hd = Healthd(c.gw, round_ms=300)
    try:
        wait_for(lambda: c.biz.stats()["requests"] >= 2, 5, what="business probes")
        last = c.biz.stats()["last"]
        assert last["path"] == "/v1/messages" and last["headers"].get("x-api-key") == SECRET, last
        assert last["headers"].get("anthropic-version") == "2023-06-01", last
        body = json.loads(last["body"])
        assert body["model"] == "claude-biz-real" and body["max_tokens"] == 1, body
        healthy = lambda: c.gw.sql("SELECT healthy FROM replicas WHERE url = ?", c.biz.url)[0][0]
        assert healthy() == 1
        c.biz.behavior("status=529")          # /health still passes; the real request fails
        wait_for(lambda: healthy() == 0, 5, what="removal by the business probe")
        c.biz.behavior("")
        wait_for(lambda: healthy() == 1, 5, what="recovery")
        assert chat(c, {"model": "claude-biz"}).status == 200
    finally:
        c.biz.behavior("")
        hd.stop()


def test_zz_credential_never_in_logs_R_ANT_4(c):
    """After everything above (errors, probes, changes): no file but the database holds it."""
    hits = []
    for root, _, files in os.walk(c.gw.dir):
        for name in files:
            if name.startswith(("sluice.db", "sluice.state")) or ".sock" in name:
                continue
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            if SECRET.encode() in data or SECRET2.encode() in data:
                hits.append(name)
    assert not hits, "R-ANT-4: the upstream credential is written in %r" % hits
    assert os.path.getsize(os.path.join(c.gw.dir, "healthd.out")) > 0 and c.gw.log_text(), "no logs were searched"


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
