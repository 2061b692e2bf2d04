#!/usr/bin/env python3
"""t0121-context-precheck: estimated prompt tokens + max_tokens above the served model's
max_context is a 400 context_length_exceeded before any upstream call (R-GUARD-2); without
max_tokens only the prompt must fit. The estimate is the calibrated one (fcgi/estimate.c):
a short English word is one token, each message 4 more, the reply 3; vLLM /tokenize is
not in yet."""
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, expect, run_tests, setup_tenant, setup_with, stop_all, wait_for


def build(c):
    c.fake = Fake("fit")
    c.gw = Gateway("t0121", procs=1, threads=8)
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "small", "ep", "--tenant", "acme")
    c.gw.sql_write("INSERT INTO model_policies (model, max_context, max_output) VALUES ('small', 1000, 1000)")
    c.gw.start()
    wait_for(lambda: post(c, "hello " * 2000).status == 400, 5, what="policy live")
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


def body(content, **extra):
    b = {"model": "small", "messages": [{"role": "user", "content": content}]}
    b.update(extra)
    return b


def post(c, content, rid=None, **extra):
    return c.gw.request("POST", "/v1/chat/completions", body(content, **extra), key=c.key,
                        headers={"X-Request-Id": rid} if rid else None)


def estimate(content, **extra):
    # one user message of short words with single spaces: a token a word, 4 for the
    # message, 3 for the reply (test_estimate checks the same rule on its own)
    return len(content.split()) + 4 + 3


def test_prompt_alone_both_sides_of_the_limit(c):
    fits, over = "hello " * 993, "hello " * 994
    assert estimate(fits) == 1000 and estimate(over) == 1001
    assert post(c, fits).status == 200
    before = c.fake.stats()["requests"]
    rid = "fit-" + uuid.uuid4().hex[:8]
    e = expect(post(c, over, rid), 400, "context_length_exceeded", "messages")
    assert "1000" in e["error"]["message"], e
    assert c.fake.stats()["requests"] == before
    rows = wait_for(lambda: c.gw.usage_events("request_id = ?", rid) or None, 5, what="usage row")
    assert len(rows) == 1 and rows[0]["error_code"] == "context_length_exceeded" and rows[0]["prompt_tokens"] == 0


def test_max_tokens_counts(c):
    e = estimate("hi", max_tokens=1)
    assert post(c, "hi", max_tokens=1000 - e).status == 200
    before = c.fake.stats()["requests"]
    expect(post(c, "hi", max_tokens=1001 - e), 400, "context_length_exceeded")
    assert c.fake.stats()["requests"] == before


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
