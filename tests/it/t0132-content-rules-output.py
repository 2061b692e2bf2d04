#!/usr/bin/env python3
"""t0132-content-rules-output: content rules on the answer's text (R-GUARD-3, scope output).

The stand-in answers "w1 w2 ... wN" (N = [[fake chunks=N]]), one word an event when it
streams. Rules: global block `w7 w8` (spans two events), global flag `w4 w5`, tenant
acme's block `w2 w3`. A non-stream answer is checked whole before it is sent: block ->
400 content_policy_violation naming the rule, the upstream's tokens still billed (status
400, content_rule set); flag -> served with X-Content-Flag. A stream is checked as it
goes: a block ends it with an error event in the caller's protocol (OpenAI `data:
{"error":...}` and no [DONE]; Anthropic `event: error`) before the event that completed
the match; a flag is logged, counted and in the usage row. A blocked answer is never
cached (while output rules apply the exact cache is not used at all); rules are made
through sluicectl with --scope output.

Each channel of a stream has its own window: a scripted upstream (below; the stand-in
streams one choice of fixed words) interleaves two choices, two parallel tool calls,
and Anthropic content blocks, and a rule spanning one channel's pieces (global block
`bomb`) is found across the other's. A trailing word is held back from matching until
the next piece or the stream's end, so keyword `kill` (block) does not refuse "kill" +
"er" but does refuse a stream ending in "kill": the error event comes instead of
[DONE] / message_stop / response.completed (tenant ends' rule `\bw6\z` on the
stand-in's answer). Every event is screened: an `"error":null` beside content, an
Anthropic content_block_start carrying text."""
import http.client
import http.server
import json
import os
import re
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_with, stop_all, wait_for


def chunk(*choices):
    return json.dumps({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "ms",
                       "choices": list(choices)})


def say(i, text):
    return {"index": i, "delta": {"content": text}, "finish_reason": None}


def call(i, args, head=False):
    tc = {"index": i, "function": {"arguments": args}}
    if head:
        tc.update(id="call_%d" % i, type="function", function={"name": "lookup", "arguments": args})
    return {"index": 0, "delta": {"tool_calls": [tc]}, "finish_reason": None}


def stop(i):
    return {"index": i, "delta": {}, "finish_reason": "stop"}


def ant(kind, **kv):
    return kind, json.dumps(dict(type=kind, **kv))


ANT_START = ant("message_start", message={"id": "msg_s", "type": "message", "role": "assistant", "model": "ms",
                                          "content": [], "stop_reason": None, "stop_sequence": None,
                                          "usage": {"input_tokens": 3, "output_tokens": 1}})

# What the scripted upstream streams for "[[script NAME]]": (event name or None, data).
SCRIPTS = {
    "n2": [(None, chunk({"index": 0, "delta": {"role": "assistant", "content": ""}},
                        {"index": 1, "delta": {"role": "assistant", "content": ""}})),
           (None, chunk(say(0, "a bo"))), (None, chunk(say(1, "xx "))), (None, chunk(say(0, "mb now"))),
           (None, chunk(say(1, "yy"))), (None, chunk(stop(0), stop(1))), (None, "[DONE]")],
    "n2-clean": [(None, chunk(say(0, "a bo"))), (None, chunk(say(1, "xx "))), (None, chunk(say(0, "ok now"))),
                 (None, chunk(say(1, "mb "))), (None, chunk(stop(0), stop(1))), (None, "[DONE]")],
    "tools": [(None, chunk(call(0, "", head=True))), (None, chunk(call(1, "", head=True))),
              (None, chunk(call(0, '{"q":"bo'))), (None, chunk(call(1, '{"q":"xx'))),
              (None, chunk(call(0, 'mb"}'))), (None, chunk(call(1, '"}'))), (None, "[DONE]")],
    "killer": [(None, chunk(say(0, "the kill"))), (None, chunk(say(0, "er whale swims"))),
               (None, chunk(stop(0))), (None, "[DONE]")],
    "ends-kill": [(None, chunk(say(0, "we will "))), (None, chunk(say(0, "kill"))), (None, chunk(stop(0))),
                  (None, "[DONE]")],
    "error-null": [(None, chunk(say(0, "hello "))),
                   (None, json.dumps({"error": None, "choices": [say(0, "a bomb here")]})),
                   (None, chunk(stop(0))), (None, "[DONE]")],
    "ant-block-start": [ANT_START, ant("content_block_start", index=0, content_block={"type": "text", "text": ""}),
                        ant("content_block_delta", index=0, delta={"type": "text_delta", "text": "hello "}),
                        ant("content_block_stop", index=0),
                        ant("content_block_start", index=1, content_block={"type": "text", "text": "a bomb here"}),
                        ant("content_block_stop", index=1),
                        ant("message_delta", delta={"stop_reason": "end_turn", "stop_sequence": None},
                            usage={"output_tokens": 4}),
                        ant("message_stop")],
    "ant-blocks": [ANT_START, ant("content_block_start", index=0, content_block={"type": "text", "text": ""}),
                   ant("content_block_start", index=1, content_block={"type": "text", "text": ""}),
                   ant("content_block_delta", index=0, delta={"type": "text_delta", "text": "a bo"}),
                   ant("content_block_delta", index=1, delta={"type": "text_delta", "text": "xx "}),
                   ant("content_block_delta", index=0, delta={"type": "text_delta", "text": "mb now"}),
                   ant("content_block_stop", index=0), ant("content_block_stop", index=1),
                   ant("message_delta", delta={"stop_reason": "end_turn", "stop_sequence": None},
                       usage={"output_tokens": 4}),
                   ant("message_stop")],
}


class Script:
    """A stand-in upstream that streams a script verbatim: what sluice's stand-in cannot
    send (interleaved choices, parallel tool calls, chosen words, an error key beside
    content, text in a content_block_start)."""

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                m = re.search(r"\[\[script ([\w-]+)\]\]", body)
                script = SCRIPTS.get(m.group(1) if m else "", [])
                self.send_response(200 if script else 404)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for name, data in script:
                    self.wfile.write(((("event: %s\n" % name) if name else "") + "data: %s\n\n" % data).encode())
                    self.wfile.flush()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def build(c):
    c.fake = Fake("t0132")
    c.script = Script()
    c.gw = Gateway("t0132", procs=2, threads=8)
    c.gw.ctl("tenant", "add", "acme")
    c.gw.ctl("tenant", "add", "beta")
    c.gw.ctl("user", "add", "op", "--tenant", "default", "--role", "operator")
    c.key = c.gw.ctl("key", "add", "--user", "op")["key"]
    add_endpoint(c.gw, "ep", "default", [c.fake])
    for model in ("m", "mc"):
        c.gw.ctl("route", "add", model, "ep", "--tenant", "default")
    # R-ANT-1: answers translated from an Anthropic upstream (the stand-in wants a credential)
    c.gw.ctl_secret("sk-ant-t0132", "endpoint", "add", "ep-ant", "--tenant", "default", "--protocol", "anthropic")
    c.gw.ctl("replica", "add", "ep-ant", c.fake.url)
    c.gw.ctl("route", "add", "ma", "ep-ant", "--tenant", "default")
    add_endpoint(c.gw, "ep-s", "default", [c.script])
    c.gw.ctl("route", "add", "ms", "ep-s", "--tenant", "default")
    c.gw.ctl_secret("sk-ant-script", "endpoint", "add", "ep-sa", "--tenant", "default", "--protocol", "anthropic")
    c.gw.ctl("replica", "add", "ep-sa", c.script.url)
    c.gw.ctl("route", "add", "msa", "ep-sa", "--tenant", "default")
    c.gw.ctl("tenant", "add", "ends")
    c.gw.sql_write("INSERT INTO model_policies (model, cache, cache_ttl_s, default_greedy) VALUES ('mc', 'exact', 60, 1)")
    for name, pattern, action, tenant in (("g-block", r"w7 w8\b", "block", None), ("g-flag", r"w4 w5\b", "flag", None),
                                          ("acme-block", r"w2 w3\b", "block", "acme"),
                                          ("bomb-block", "bomb", "block", None), ("end-block", r"\bw6\z", "block", "ends")):
        made = c.gw.ctl(*(["rule", "add", name, "--pattern", pattern, "--action", action, "--scope", "output"] +
                          (["--tenant", tenant] if tenant else [])))
        assert made["scope"] == "output", made
    made = c.gw.ctl("rule", "add", "k-block", "--keyword", "kill", "--action", "block", "--scope", "output")
    assert made["scope"] == "output", made
    c.gw.start()
    wait_for(lambda: chat(c, 1, "beta").status == 200, 5, what="key live")
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake", "script")


def body(chunks, stream=False, model="m"):
    b = {"model": model, "messages": [{"role": "user", "content": "say it [[fake chunks=%d]]" % chunks}]}
    if stream:
        b["stream"] = True
    return b


def chat(c, chunks, tenant, rid=None, model="m"):
    h = {"X-Sluice-Tenant": tenant}
    if rid:
        h["X-Request-Id"] = rid
    return c.gw.request("POST", "/v1/chat/completions", body(chunks, model=model), key=c.key, headers=h)


def stream(c, path, b, tenant, rid):
    """POST a stream; (status, headers, the whole body text)."""
    conn = http.client.HTTPConnection("127.0.0.1", c.gw.port, timeout=30)
    conn.request("POST", path, body=json.dumps(b).encode(),
                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + c.key,
                          "X-Sluice-Tenant": tenant, "X-Request-Id": rid, "anthropic-version": "2023-06-01"})
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, text


def events(text):
    """The data of each SSE event, with its event name ("" when none)."""
    out = []
    for block in text.split("\n\n"):
        name, data = "", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            out.append((name, "\n".join(data)))
    return out


def usage_row(c, rid):
    return wait_for(lambda: c.gw.usage_events("request_id = ?", rid) or None, 5, what="usage row " + rid)[0]


def matches(c, rule):
    text = c.gw.request("GET", "/metrics").body.decode()
    m = re.search(r'^sluice_content_rule_matches_total\{rule="%s",action="(\w+)",scope="(\w+)"\} (\d+)$'
                  % re.escape(rule), text, re.M)
    return (m.group(1), m.group(2), int(m.group(3))) if m else None


def test_nonstream_block_billed_R_GUARD_3(c):
    up = c.fake.stats()["requests"]
    before = matches(c, "g-block")
    assert before and before[:2] == ("block", "output"), before
    r = chat(c, 8, "beta", rid="out-block")
    assert r.status == 400, (r, r.body)
    e = r.json()["error"]
    assert e["code"] == "content_policy_violation" and "'g-block'" in e["message"] and "answer" in e["message"], e
    assert "w1" not in r.body.decode(), "nothing of the answer reaches the client"
    assert c.fake.stats()["requests"] == up + 1, "the upstream answered it"
    row = usage_row(c, "out-block")
    assert (row["status"], row["error_code"], row["content_rule"]) == (400, "content_policy_violation", "g-block"), row
    assert row["completion_tokens"] == 8 and row["prompt_tokens"] > 0, "the upstream's tokens are billed: %r" % row
    assert matches(c, "g-block")[2] == before[2] + 1


def test_nonstream_flag_served_with_header_R_GUARD_3(c):
    r = chat(c, 5, "beta", rid="out-flag")
    assert r.status == 200, (r, r.body)
    assert r.headers.get("x-content-flag") == "g-flag", r.headers
    assert r.json()["choices"][0]["message"]["content"] == "w1 w2 w3 w4 w5"
    row = usage_row(c, "out-flag")
    assert (row["status"], row["content_rule"], row["completion_tokens"]) == (200, "g-flag", 5), row
    r = chat(c, 4, "beta")
    assert r.status == 200 and r.headers.get("x-content-flag") is None, r.headers


def test_per_tenant_and_global_R_GUARD_3(c):
    r = chat(c, 3, "acme", rid="out-acme")
    assert r.status == 400 and "'acme-block'" in r.json()["error"]["message"], (r, r.body)
    r = chat(c, 3, "beta")
    assert r.status == 200 and r.headers.get("x-content-flag") is None, (r, r.headers)
    r = chat(c, 8, "acme")              # acme's own rule is met first ("w2 w3"), the global one too
    assert r.status == 400 and r.json()["error"]["code"] == "content_policy_violation", (r, r.body)
    r = chat(c, 8, "default")
    assert r.status == 400 and "'g-block'" in r.json()["error"]["message"], (r, r.body)


def test_stream_block_mid_stream_across_chunks_R_GUARD_3(c):
    before = matches(c, "g-block")[2]
    status, headers, text = stream(c, "/v1/chat/completions", body(10, stream=True), "beta", "out-sblock")
    assert status == 200, (status, text)
    evs = events(text)
    deltas = "".join(json.loads(d)["choices"][0]["delta"].get("content") or ""
                     for _, d in evs if d.startswith("{") and "choices" in d and json.loads(d)["choices"])
    assert deltas == "w1 w2 w3 w4 w5 w6 w7 ", "what went out before the match completed: %r" % deltas
    name, last = evs[-1]
    err = json.loads(last)["error"]
    assert err["code"] == "content_policy_violation" and "'g-block'" in err["message"], last
    assert "[DONE]" not in text and "w8" not in text, text
    row = usage_row(c, "out-sblock")
    assert (row["status"], row["error_code"], row["content_rule"], row["stream"]) == \
        (400, "content_policy_violation", "g-block", 1), row
    assert row["completion_tokens"] > 0, "the stream's tokens so far are billed: %r" % row
    assert matches(c, "g-block")[2] == before + 1


def test_stream_flag_logged_and_in_usage_R_GUARD_3(c):
    before = matches(c, "g-flag")[2]
    status, headers, text = stream(c, "/v1/chat/completions", body(6, stream=True), "beta", "out-sflag")
    assert status == 200 and text.rstrip().endswith("data: [DONE]"), text
    assert "w6" in text
    row = usage_row(c, "out-sflag")
    assert (row["status"], row["content_rule"], row["completion_tokens"]) == (200, "g-flag", 6), row
    line = wait_for(lambda: next((json.loads(x) for x in open(os.path.join(c.gw.dir, "access.log"))
                                  if '"out-sflag"' in x), None), 5, what="access line")
    assert line.get("content_flag") == "g-flag", line
    assert matches(c, "g-flag")[2] == before + 1, "counted once, not once per event"


def test_stream_block_anthropic_ingress_error_event_R_GUARD_3(c):
    b = {"model": "m", "max_tokens": 50, "stream": True,
         "messages": [{"role": "user", "content": "say it [[fake chunks=10]]"}]}
    status, headers, text = stream(c, "/v1/messages", b, "beta", "out-ablock")
    assert status == 200, (status, text)
    evs = events(text)
    name, last = evs[-1]
    assert name == "error", evs[-3:]
    err = json.loads(last)
    assert err["type"] == "error" and "'g-block'" in err["error"]["message"], err
    assert "message_stop" not in text and "w8" not in text, text
    row = usage_row(c, "out-ablock")
    assert (row["status"], row["content_rule"]) == (400, "g-block"), row


def test_responses_api_answer_and_stream_R_GUARD_3(c):
    b = {"model": "m", "input": "say it [[fake chunks=10]]"}
    r = c.gw.request("POST", "/v1/responses", b, key=c.key, headers={"X-Sluice-Tenant": "beta"})
    assert r.status == 400 and "'g-block'" in r.json()["error"]["message"], (r, r.body)
    r = c.gw.request("POST", "/v1/responses", dict(b, input="say it [[fake chunks=5]]"), key=c.key,
                     headers={"X-Sluice-Tenant": "beta"})
    assert r.status == 200 and r.headers.get("x-content-flag") == "g-flag", (r, r.headers)
    status, _, text = stream(c, "/v1/responses", dict(b, stream=True), "beta", "out-rblock")
    assert status == 200, (status, text)
    name, last = events(text)[-1]
    assert name == "error" and "content_policy_violation" in last and "'g-block'" in last, (name, last)
    assert "response.completed" not in text and "w8" not in text, text
    assert usage_row(c, "out-rblock")["content_rule"] == "g-block"


def test_translated_anthropic_upstream_R_GUARD_3(c):
    """An OpenAI caller of an Anthropic endpoint: the rules read the translated answer."""
    r = chat(c, 8, "beta", model="ma")
    assert r.status == 400 and "'g-block'" in r.json()["error"]["message"], (r, r.body)
    r = chat(c, 5, "beta", model="ma")
    assert r.status == 200 and r.headers.get("x-content-flag") == "g-flag", (r, r.body)
    status, _, text = stream(c, "/v1/chat/completions", body(10, stream=True, model="ma"), "beta", "out-tblock")
    assert status == 200, (status, text)
    last = json.loads(events(text)[-1][1])
    assert last["error"]["code"] == "content_policy_violation", last
    assert "[DONE]" not in text and "w8" not in text and "w7" in text, text
    assert usage_row(c, "out-tblock")["content_rule"] == "g-block"


def test_blocked_answer_never_cached_R_GUARD_3(c):
    up = c.fake.stats()["requests"]
    for i in range(2):
        r = chat(c, 8, "beta", model="mc")
        assert r.status == 400, (r, r.body)
    status, _, text = stream(c, "/v1/chat/completions", body(8, stream=True, model="mc"), "beta", "out-cache-s")
    assert "content_policy_violation" in text, text
    assert c.fake.stats()["requests"] == up + 3, "each blocked answer came from the upstream"
    wait_for(lambda: usage_row(c, "out-cache-s"), 5)
    assert c.gw.sql("SELECT count(*) FROM cache_entries WHERE model = 'mc'")[0][0] == 0
    # R-GUARD-3: while output rules apply, the exact cache neither answers nor stores: a
    # stored answer would go out without being screened (a rule made later included)
    r = chat(c, 2, "beta", model="mc")
    assert r.status == 200 and r.headers.get("x-cache") is None, r.headers
    wait_for(lambda: usage_row(c, "out-cache-s"), 5)
    assert c.gw.sql("SELECT count(*) FROM cache_entries")[0][0] == 0


def scripted(c, name, rid, path="/v1/chat/completions", model="ms", tenant="beta"):
    """A stream of the scripted upstream: (status, the body text, its events' data parsed)."""
    b = {"model": model, "stream": True, "messages": [{"role": "user", "content": "go [[script %s]]" % name}]}
    if path == "/v1/messages":
        b["max_tokens"] = 50
    status, _, text = stream(c, path, b, tenant, rid)
    assert status == 200, (status, text)
    return text, [json.loads(d) for _, d in events(text) if d.startswith("{")]


def choice_text(evs, i):
    """Chat stream: what choice i said (content, else its tool calls' arguments by index)."""
    out = {}
    for e in evs:
        for ch in e.get("choices") or []:
            if ch.get("index") != i:
                continue
            d = ch.get("delta") or {}
            out.setdefault(-1, "")
            out[-1] += d.get("content") or ""
            for tc in d.get("tool_calls") or []:
                out[tc["index"]] = out.get(tc["index"], "") + (tc.get("function") or {}).get("arguments", "")
    return out


def assert_blocked(c, text, evs, rid, rule, end="[DONE]"):
    err = evs[-1].get("error")
    assert err and "'%s'" % rule in err["message"], evs[-3:]
    if end == "[DONE]":             # OpenAI's code; Anthropic's error event has its own types
        assert err["code"] == "content_policy_violation", err
    assert end not in text, text
    row = usage_row(c, rid)
    assert (row["status"], row["content_rule"]) == (400, rule), row


def test_stream_choices_have_their_own_window_R_GUARD_3(c):
    """n=2: "a bo" (choice 0) "xx " (choice 1) "mb now" (choice 0) is "a bomb now" for choice 0."""
    text, evs = scripted(c, "n2", "out-n2")
    assert choice_text(evs, 0)[-1] == "a bo" and choice_text(evs, 1)[-1] == "xx ", evs
    assert "now" not in text and "yy" not in text, text
    assert_blocked(c, text, evs, "out-n2", "bomb-block")
    # the pieces of two choices do not join either: "a bo" + "mb " in another choice is nothing
    text, evs = scripted(c, "n2-clean", "out-n2-clean")
    assert text.rstrip().endswith("data: [DONE]") and "error" not in text, text
    assert usage_row(c, "out-n2-clean")["content_rule"] is None


def test_stream_parallel_tool_calls_have_their_own_window_R_GUARD_3(c):
    text, evs = scripted(c, "tools", "out-tools")
    calls = choice_text(evs, 0)
    assert calls.get(0) == '{"q":"bo' and calls.get(1) == '{"q":"xx', calls
    assert 'mb\\"}' not in text, text
    assert_blocked(c, text, evs, "out-tools", "bomb-block")


def test_stream_anthropic_blocks_have_their_own_window_R_GUARD_3(c):
    text, evs = scripted(c, "ant-blocks", "out-ant-blocks", path="/v1/messages", model="msa")
    assert "now" not in text and events(text)[-1][0] == "error", text
    assert_blocked(c, text, evs, "out-ant-blocks", "bomb-block", end="message_stop")


def test_stream_last_word_held_back_R_GUARD_3(c):
    """Keyword kill: "the kill" + "er whale" is not the word; a stream ending in "kill" is,
    found at its end (the error event instead of [DONE], every word already sent)."""
    text, evs = scripted(c, "killer", "out-killer")
    assert text.rstrip().endswith("data: [DONE]") and "content_policy_violation" not in text, text
    assert choice_text(evs, 0)[-1] == "the killer whale swims", evs
    assert usage_row(c, "out-killer")["content_rule"] is None
    text, evs = scripted(c, "ends-kill", "out-ends-kill")
    assert choice_text(evs, 0)[-1] == "we will kill", evs
    assert_blocked(c, text, evs, "out-ends-kill", "k-block")


def test_stream_end_checks_whole_window_each_protocol_R_GUARD_3(c):
    """Tenant ends' rule \\bw6\\z matches the stand-in's 6-word answer only at its end."""
    b = {"model": "m", "stream": True, "max_tokens": 50,
         "messages": [{"role": "user", "content": "say it [[fake chunks=6]]"}]}
    for path, end in (("/v1/chat/completions", "[DONE]"), ("/v1/messages", "message_stop")):
        rid = "out-end" + path.replace("/", "-")
        status, _, text = stream(c, path, b, "ends", rid)
        assert status == 200 and "w6" in text, (status, text)
        assert_blocked(c, text, [json.loads(d) for _, d in events(text) if d.startswith("{")], rid, "end-block", end)
    rb = {"model": "m", "stream": True, "input": "say it [[fake chunks=6]]"}
    status, _, text = stream(c, "/v1/responses", rb, "ends", "out-end-resp")
    assert status == 200 and "w6" in text, (status, text)
    name, last = events(text)[-1]
    assert name == "error" and "'end-block'" in last and "response.completed" not in text, (name, last)
    assert usage_row(c, "out-end-resp")["content_rule"] == "end-block"
    status, _, text = stream(c, "/v1/chat/completions", dict(b, messages=[{"role": "user", "content":
                                                                             "say it [[fake chunks=5]]"}]),
                             "ends", "out-end-5")
    assert text.rstrip().endswith("data: [DONE]"), text


def test_stream_every_event_screened_R_GUARD_3(c):
    """A chunk with "error":null beside its content, and text in an Anthropic content_block_start."""
    text, evs = scripted(c, "error-null", "out-errnull")
    assert "hello" in text and "a bomb" not in text, text
    assert_blocked(c, text, evs, "out-errnull", "bomb-block")
    text, evs = scripted(c, "ant-block-start", "out-ant-start", path="/v1/messages", model="msa")
    assert "hello" in text and "a bomb" not in text and events(text)[-1][0] == "error", text
    assert_blocked(c, text, evs, "out-ant-start", "bomb-block", end="message_stop")


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
