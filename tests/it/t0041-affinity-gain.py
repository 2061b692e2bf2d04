#!/usr/bin/env python3
"""t0041-affinity-gain: affinity sends a conversation's next turns to the replica that holds its
prefix (R-AFF-1), measured on stand-ins that simulate a prefix cache (prefix_cache=1)."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_tenant, wait_for

MISS_MS = 300
BEHAVIOR = "prefix_cache=1 prefix_miss_ms=%d prefix_hit_ms=0" % MISS_MS
CONVS, TURNS = 5, 4


class Ctx:
    pass


def setup():
    c = Ctx()
    c.fakes = [Fake("gain%d" % i) for i in range(3)]
    c.gw = Gateway("t0041", procs=2, threads=16)
    c.key = setup_tenant(c.gw, "acme", "alice")
    # The same three replicas behind two endpoints: one sticky, one plain round robin.
    add_endpoint(c.gw, "sticky", "acme", c.fakes, algorithm="least_connections", affinity="on")
    add_endpoint(c.gw, "plain", "acme", c.fakes, algorithm="round_robin")
    c.gw.ctl("route", "add", "m-on", "sticky", "--tenant", "acme")
    c.gw.ctl("route", "add", "m-off", "plain", "--tenant", "acme")
    c.gw.start()
    for m in ("m-on", "m-off"):
        wait_for(lambda: c.gw.chat(c.key, model=m).status == 200, 5, what="route " + m)
    return c


def teardown(c):
    if c:
        c.gw.stop()
        for f in c.fakes:
            f.stop()


def conversations(c, model):
    """CONVS conversations of TURNS turns, one after the other; returns the later turns'
    [(conversation, elapsed s, upstream, X-Session-Affinity)] and each conversation's first upstream."""
    for f in c.fakes:
        f.reset()
        f.behavior(BEHAVIOR)
    later, first = [], {}
    for k in range(CONVS):
        msgs = [{"role": "system", "content": "conversation %s-%d" % (model, k)},
                {"role": "user", "content": "question 1"}]
        for turn in range(1, TURNS + 1):
            t0 = time.time()
            r = c.gw.request("POST", "/v1/chat/completions", {"model": model, "messages": msgs}, key=c.key)
            elapsed = time.time() - t0
            assert r.status == 200, r
            up = r.headers.get("x-fake-upstream")
            if turn == 1:
                first[k] = up
            else:
                later.append((k, elapsed, up, r.headers.get("x-session-affinity")))
            msgs = msgs + [{"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]},
                           {"role": "user", "content": "question %d" % (turn + 1)}]
    stats = [f.stats() for f in c.fakes]
    return later, first, sum(s["prefix_hits"] for s in stats), sum(s["prefix_misses"] for s in stats)


def test_followup_turns_hit_the_prefix_holder_R_AFF_1(c):
    later, first, hits, misses = conversations(c, "m-on")
    # Upstream side: every first turn is new (a miss), every later turn found its prefix.
    assert (hits, misses) == (CONVS * (TURNS - 1), CONVS), (hits, misses)
    # Client side: the turns stayed on their first replica, by the content levels, and were fast.
    for k, _, up, aff in later:
        assert up == first[k] and aff in ("hit:l1", "hit:l2"), (k, up, first[k], aff)
    assert statistics.median(e for _, e, _, _ in later) < MISS_MS / 2000.0, [e for _, e, _, _ in later]


def test_without_affinity_the_prefix_is_mostly_elsewhere_R_AFF_1(c):
    later, first, hits, misses = conversations(c, "m-off")
    assert hits + misses == CONVS * TURNS, (hits, misses)
    assert hits <= CONVS * (TURNS - 1) // 2, (hits, misses)
    # Each miss made the client wait at least MISS_MS; the upstream's count and the client's agree.
    slow = sum(1 for _, e, _, _ in later if e >= MISS_MS / 1000.0)
    assert slow >= len(later) - hits, (slow, len(later), hits)
    assert all(aff is None for _, _, _, aff in later), later


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
