#!/usr/bin/env python3
"""t0011-engine-aware: vLLM metrics scraped by sluice-healthd drive replica choice: score,
tie-break by live active counts, mean fill, staleness and non-vLLM fallback (R-LB-2..5, R-HC-6)."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, Healthd, run_tests, setup_tenant, wait_for

ROUND_MS = 300
STALE_MS = 1500


class Ctx:
    pass


def setup():
    c = Ctx()
    c.a, c.b, c.o = Fake("ea-a"), Fake("ea-b"), Fake("ea-other")
    c.gw = Gateway("t0011", threads=32,
                   conf={"health": "round_ms = 5000; timeout_ms = 2000; run_seconds = 60; lock_wait_ms = 500;"
                                   " scrape_parallel = 10; metrics_stale_ms = %d; temperature_stale_ms = 60000;"
                                   % STALE_MS})
    c.key = setup_tenant(c.gw, "acme", "alice")
    ctl = c.gw.ctl
    ctl("endpoint", "add", "ea", "--tenant", "acme", "--algorithm", "engine_aware")
    for f in (c.a, c.b):
        ctl("replica", "add", "ea", f.url, "--engine", "vllm")
    ctl("route", "add", "m", "ea", "--tenant", "acme")
    # Two vLLM replicas and one that is not (no metrics: the mean of the others).
    ctl("endpoint", "add", "mixed", "--tenant", "acme", "--algorithm", "engine_aware")
    ctl("replica", "add", "mixed", c.a.url, "--engine", "vllm")
    ctl("replica", "add", "mixed", c.b.url, "--engine", "vllm")
    ctl("replica", "add", "mixed", c.o.url, "--engine", "openai")
    ctl("route", "add", "mixed", "mixed", "--tenant", "acme")
    # Only engines other than vLLM: least_connections.
    ctl("endpoint", "add", "plain", "--tenant", "acme", "--algorithm", "engine_aware")
    for f in (c.a, c.b):
        ctl("replica", "add", "plain", f.url, "--engine", "openai")
    ctl("route", "add", "plain", "plain", "--tenant", "acme")
    c.gw.start()
    c.hd = Healthd(c.gw, round_ms=ROUND_MS)
    return c


def teardown(c):
    if c:
        c.hd.stop()
        c.gw.stop()
        for f in (c.a, c.b, c.o):
            f.stop()


def scraped(c, *want):
    """Waits until the shared state holds the metrics just set: want is (fake, waiting, kv)
    for each fake whose gauges changed (`sluicectl stats` shows what balancing reads)."""
    def fresh():
        reps = c.gw.ctl("stats")["replicas"]
        for fake, waiting, kv in want:
            got = [(r.get("waiting"), r.get("kv_cache_permille")) for r in reps
                   if r["url"] == fake.url and "waiting" in r and r["metrics_age_ms"] < STALE_MS / 2]
            if not got or any(g != (waiting, round(kv * 1000)) for g in got):
                return False
        return True
    wait_for(fresh, 5, what="healthd to scrape %r" % [(f.name, w, k) for f, w, k in want])


def counts(c):
    return [f.stats()["requests"] for f in (c.a, c.b, c.o)]


def burst(c, n, model="m", ttfb_ms=1500):
    """n concurrent requests held ttfb_ms by the upstream; returns requests per fake."""
    before = counts(c)
    res = []

    def one():
        res.append(c.gw.chat(c.key, model=model, headers={"X-Fake-Behavior": "ttfb_ms=%d" % ttfb_ms}).status)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
        time.sleep(0.01)
    for t in threads:
        t.join(30)
    assert res == [200] * n, res
    return [x - y for x, y in zip(counts(c), before)]


def sequential(c, n, model="m"):
    before = counts(c)
    for _ in range(n):
        r = c.gw.chat(c.key, model=model)
        assert r.status == 200, r
    return [x - y for x, y in zip(counts(c), before)]


def test_burst_over_idle_replicas_splits_evenly(c):
    """R-LB-3: equal scores (both idle) -> fewer live active wins: 6/6, not 12/0."""
    c.a.metrics(waiting=0, kv=0)
    c.b.metrics(waiting=0, kv=0)
    scraped(c, (c.a, 0, 0), (c.b, 0, 0))
    got = burst(c, 12)
    assert got == [6, 6, 0], got


def test_deep_queue_gets_nothing(c):
    """R-LB-2: a replica with a queue loses to a free one, whatever the active counts."""
    c.a.metrics(waiting=20, kv=0.1)
    c.b.metrics(waiting=0, kv=0.3)
    scraped(c, (c.a, 20, 0.1), (c.b, 0, 0.3))
    assert burst(c, 8) == [0, 8, 0]
    assert sequential(c, 4) == [0, 4, 0]


def test_kv_cache_decides_with_either_metric_name(c):
    """R-LB-2: kv_cache_usage_perc as a 0-1 fraction; the older gpu_cache_usage_perc as fallback."""
    c.a.metrics(waiting=0, kv=0.9)
    c.b.metrics(waiting=0, kv=0.2, legacy=1)
    scraped(c, (c.a, 0, 0.9), (c.b, 0, 0.2))
    assert sequential(c, 4) == [0, 4, 0]
    c.a.metrics(waiting=0, kv=0.05, legacy=1)
    c.b.metrics(waiting=0, kv=0.5, legacy=0)
    scraped(c, (c.a, 0, 0.05), (c.b, 0, 0.5))
    assert sequential(c, 4) == [4, 0, 0]


def test_partial_data_mean_fill(c):
    """R-LB-4: a replica without data gets the mean score of those with data."""
    # a 400, b 100 -> the non-vLLM replica counts 250: b wins (as 0 it would win, as worst it loses too).
    c.a.metrics(waiting=4, kv=0)
    c.b.metrics(waiting=1, kv=0)
    scraped(c, (c.a, 4, 0), (c.b, 1, 0))
    assert sequential(c, 6, model="mixed") == [0, 6, 0]
    # a 100, b 100 -> mean 100: a three-way tie that live active counts split evenly.
    c.a.metrics(waiting=1, kv=0)
    scraped(c, (c.a, 1, 0), (c.b, 1, 0))
    assert burst(c, 6, model="mixed") == [2, 2, 2]


def test_other_engines_fall_back_to_least_connections(c):
    """R-LB-5: metrics of vLLM replicas only; others behave as least_connections."""
    c.a.metrics(waiting=50, kv=1)
    scraped(c, (c.a, 50, 1))
    assert burst(c, 6, model="plain") == [3, 3, 0]


def test_stale_metrics_behave_as_least_connections(c):
    """R-LB-4: without a scrape for metrics_stale_ms, the data counts as none."""
    c.a.metrics(waiting=30, kv=0.9)
    c.b.metrics(waiting=0, kv=0)
    scraped(c, (c.a, 30, 0.9), (c.b, 0, 0))
    assert burst(c, 4) == [0, 4, 0]
    c.hd.stop()
    time.sleep(STALE_MS / 1000 + 0.5)
    assert burst(c, 8) == [4, 4, 0]
    c.hd.start()
    scraped(c, (c.a, 30, 0.9), (c.b, 0, 0))
    assert burst(c, 4) == [0, 4, 0]


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
