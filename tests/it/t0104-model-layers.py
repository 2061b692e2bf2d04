#!/usr/bin/env python3
"""t0104-model-layers: the model and endpoint quota layers (R-KEY-6): a model's concurrency is
exact across the pool; before refusing, a cheaper model of the same group serves, then the
model's queue holds the request, and only then MODEL_CONCURRENCY_EXCEEDED; an endpoint's
concurrency layer refuses with ENDPOINT_CONCURRENCY_EXCEEDED; every refusal gives back what
the key's own limits took."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, burst, run_tests, setup_with, stop_all, wait_for


def build(c):
    c.big = Fake("big")
    c.small = Fake("small")
    c.gw = Gateway("t0104", procs=2, threads=32)
    c.gw.ctl("tenant", "add", "acme")
    c.gw.ctl("user", "add", "alice", "--tenant", "acme", "--role", "member")
    c.key = c.gw.ctl("key", "add", "--user", "alice")["key"]
    add_endpoint(c.gw, "big", "acme", [c.big])
    add_endpoint(c.gw, "small", "acme", [c.small])
    c.gw.ctl("route", "add", "m-big", "big", "--tenant", "acme")
    c.gw.ctl("route", "add", "m-small", "small", "--tenant", "acme")
    c.gw.start()
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "big", "small")


def settle():
    time.sleep(0.8)                 # every responder polls the configuration (250 ms)


def chat(c, i, model, ttfb, key=None):
    t0 = time.time()
    r = c.gw.chat(key or c.key, model=model, headers={"X-Fake-Behavior": "ttfb_ms=%d" % ttfb},
                  content="%s-%d-%f" % (model, i, t0))
    r.took = time.time() - t0
    return r


def check_layer_429(r, code, scope, limit):
    assert r.status == 429, r
    e = r.json()["error"]
    assert e["code"] == code and e["scope"] == scope and e["type"] == "rate_limit_error", e
    assert e["limit"] == limit and e["current"] >= limit and e["remaining"] == 0, e
    for h in ("retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
        assert h in r.headers, (h, r.headers)
    assert int(r.headers["x-ratelimit-limit"]) == limit, r.headers


def test_model_concurrency_exact_then_queue_then_429(c):
    c.gw.ctl("quota", "set", "--model", "m-big", "--concurrency", 2, "--queue-max", 3)
    settle()
    try:
        c.big.reset()
        res = burst(lambda i: chat(c, i, "m-big", 800), 8, stagger=0.03)
        st = [r.status for r in res]
        assert sorted(st) == [200] * 5 + [429] * 3, st       # 2 at once + 3 queued; the rest refused
        assert c.big.stats()["max_inflight"] == 2, c.big.stats()
        refused = [r for r in res if r.status == 429]
        check_layer_429(refused[0], "MODEL_CONCURRENCY_EXCEEDED", "per_model", 2)
        assert all(r.took < 0.6 for r in refused), [r.took for r in refused]
        queued = [r for r in res if r.status == 200 and r.took > 1.2]
        assert len(queued) == 3, [r.took for r in res]
        # queued for the model: the degrade order's second step, in the header and the access log
        assert all(r.headers.get("x-degradation-level") == "2" for r in queued), [r.headers for r in queued]
        assert c.gw.sql("SELECT count(*) FROM usage_events WHERE error_code = 'MODEL_CONCURRENCY_EXCEEDED'")[0][0] >= 3
    finally:
        c.gw.ctl("quota", "rm", "--model", "m-big")


def test_a_cheaper_model_of_the_group_serves_first(c):
    c.gw.ctl("policy", "set", "m-big", "--purpose", "chat", "--price-input", 10, "--price-output", 30)
    c.gw.ctl("policy", "set", "m-small", "--purpose", "chat", "--price-input", 1, "--price-output", 2)
    c.gw.ctl("quota", "set", "--model", "m-big", "--concurrency", 1)
    settle()
    try:
        c.big.reset()
        c.small.reset()
        res = burst(lambda i: chat(c, i, "m-big", 600), 3, stagger=0.03)
        assert all(r.status == 200 for r in res), [r.status for r in res]
        assert c.big.stats()["requests"] == 1 and c.small.stats()["requests"] == 2, (c.big.stats(), c.small.stats())
        down = [r for r in res if r.headers.get("x-routed-model") == "m-small"]
        assert len(down) == 2, [r.headers for r in res]
        assert all(r.headers.get("x-degradation-level") == "1" for r in down), [r.headers for r in down]
        assert all(r.took < 0.9 for r in res), [r.took for r in res]   # nobody waited
        def degraded_lines():
            lines = open(os.path.join(c.gw.dir, "access.log")).read().splitlines()
            return sum('"degradation_level":1' in l and '"degraded_from":"m-big"' in l and
                       '"model":"m-small"' in l for l in lines) >= 2
        wait_for(degraded_lines, 5, what="the access log's degraded lines")
    finally:
        c.gw.ctl("quota", "rm", "--model", "m-big")
        c.gw.ctl("policy", "rm", "m-big")
        c.gw.ctl("policy", "rm", "m-small")


def test_endpoint_concurrency_layer_refuses(c):
    c.gw.ctl("quota", "set", "--endpoint", "big", "--concurrency", 2)
    settle()
    try:
        c.big.reset()
        res = burst(lambda i: chat(c, i, "m-big", 700), 6, stagger=0.02)
        st = sorted(r.status for r in res)
        assert st == [200, 200, 429, 429, 429, 429], st
        refused = [r for r in res if r.status == 429]
        check_layer_429(refused[0], "ENDPOINT_CONCURRENCY_EXCEEDED", "per_endpoint", 2)
        assert c.big.stats()["max_inflight"] == 2, c.big.stats()
    finally:
        c.gw.ctl("quota", "rm", "--endpoint", "big")


def test_a_layer_refusal_gives_back_the_keys_concurrency(c):
    """The key's own concurrency (2) is taken at admission; the model layer (1, no queue) refuses
    the second request: it must give the key's place back, so two more fit the key at once."""
    k = c.gw.ctl("key", "add", "--user", "alice", "--concurrency", 2)["key"]
    c.gw.ctl("quota", "set", "--model", "m-big", "--concurrency", 1, "--queue-max", 0)
    settle()
    try:
        res = burst(lambda i: chat(c, i, "m-big", 600, key=k), 2, stagger=0.1)
        assert sorted(r.status for r in res) == [200, 429], [r.status for r in res]
        check_layer_429([r for r in res if r.status == 429][0], "MODEL_CONCURRENCY_EXCEEDED", "per_model", 1)
        c.gw.ctl("quota", "rm", "--model", "m-big")
        settle()
        res = burst(lambda i: chat(c, i, "m-big", 300, key=k), 2, stagger=0)
        assert [r.status for r in res] == [200, 200], [(r.status, r.body[:200]) for r in res]
    finally:
        c.gw.ctl("quota", "rm", "--model", "m-big", check=False)


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
