#!/usr/bin/env python3
"""t0121-context-precheck: estimated prompt tokens + max_tokens above the served model's
max_context is a 400 context_length_exceeded before any upstream call (R-GUARD-2); without
max_tokens only the prompt must fit. The estimate is the calibrated one (fcgi/estimate.c):
a short English word is one token, each message 4 more, the reply 3. Within
guard.tokenize_margin_pct (10 %) of the limit a vLLM replica's /tokenize counts exactly, and a
slow (guard.tokenize_timeout_ms) or missing /tokenize leaves the estimate deciding."""
import time
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
    c.vllm = Fake("fitv")
    c.gw.ctl("endpoint", "add", "epv", "--tenant", "acme")
    c.gw.ctl("replica", "add", "epv", c.vllm.url, "--engine", "vllm")
    c.gw.ctl("route", "add", "big", "epv", "--tenant", "acme")
    c.gw.sql_write("INSERT INTO model_policies (model, max_context, max_output) VALUES ('big', 1000, 1000)")
    c.gw.start()
    wait_for(lambda: post(c, "hello " * 2000).status == 400, 5, what="policy live")
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake", "vllm")


def body(content, model="small", **extra):
    b = {"model": model, "messages": [{"role": "user", "content": content}]}
    b.update(extra)
    return b


def post(c, content, rid=None, model="small", **extra):
    return c.gw.request("POST", "/v1/chat/completions", body(content, model, **extra), key=c.key,
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


def vllm_calls(c, content):
    """The stand-in's requests for one chat to the vLLM replica: 1 = no /tokenize, 2 = one."""
    before = c.vllm.stats()["requests"]
    r = post(c, content, model="big")
    return r, c.vllm.stats()["requests"] - before


def test_far_from_the_limit_no_tokenize(c):
    r, calls = vllm_calls(c, "hello " * 10)
    assert r.status == 200 and calls == 1, (r, calls)
    r, calls = vllm_calls(c, "hello " * 2000)          # far over: the estimate alone refuses
    expect(r, 400, "context_length_exceeded")
    assert calls == 0, calls


def test_estimate_over_count_fits(c):
    # estimate 995 + 7 = 1002 > 1000, within 10 %: /tokenize counts the 995 words, which fit
    assert estimate("hello " * 995) == 1002
    r, calls = vllm_calls(c, "hello " * 995)
    assert r.status == 200 and calls == 2, (r, calls)
    # the same on the replica that is not vLLM: the estimate decides
    expect(post(c, "hello " * 995), 400, "context_length_exceeded")


def test_estimate_fits_count_over(c):
    r, calls = vllm_calls(c, "[[fake tokenize_count=1200]] " + "hello " * 900)
    e = expect(r, 400, "context_length_exceeded", "messages")
    assert calls == 1, calls                           # the /tokenize call, no chat
    assert "requested 1200 tokens" in e["error"]["message"], e


def test_slow_or_missing_tokenize_keeps_the_estimate(c):
    # a count of 5 would let them through: the estimate (over) decides instead
    t0 = time.monotonic()
    r, calls = vllm_calls(c, "[[fake tokenize_ms=3000 tokenize_count=5]] " + "hello " * 995)
    took = time.monotonic() - t0
    expect(r, 400, "context_length_exceeded")
    assert took < 2, took                              # guard.tokenize_timeout_ms is 200
    r, calls = vllm_calls(c, "[[fake tokenize_status=404 tokenize_count=5]] " + "hello " * 995)
    e = expect(r, 400, "context_length_exceeded")
    assert calls == 1 and "about" in e["error"]["message"], (calls, e)
    # and the same request with a count that fits is served (the route works)
    r, calls = vllm_calls(c, "[[fake tokenize_count=5]] " + "hello " * 995)
    assert r.status == 200 and calls == 2, (r, calls)


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
