#!/usr/bin/env python3
"""t0040-affinity: session affinity, pool-wide (R-AFF-1..6)."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_tenant, wait_for


class Ctx:
    pass


def setup():
    c = Ctx()
    c.fakes = [Fake("aff%d" % i) for i in range(3)]
    c.other = Fake("affother")
    c.gw = Gateway("t0040", procs=2, threads=32)
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "sticky", "acme", c.fakes, algorithm="least_connections", affinity="on")
    c.gw.ctl("route", "add", "m", "sticky", "--tenant", "acme")
    c.key_b = setup_tenant(c.gw, "beta", "bob")
    add_endpoint(c.gw, "sticky-b", "beta", [c.other], algorithm="round_robin", affinity="on")
    c.gw.ctl("route", "add", "m", "sticky-b", "--tenant", "beta")
    c.gw.start()
    return c


def teardown(c):
    if c:
        c.gw.stop()
        for f in c.fakes + [c.other]:
            f.stop()


def turn(c, messages, key=None, headers=None, **extra):
    body = {"model": "m", "messages": messages}
    body.update(extra)
    r = c.gw.request("POST", "/v1/chat/completions", body, key=key or c.key, headers=headers)
    assert r.status == 200, r
    return r, r.headers.get("x-fake-upstream"), r.headers.get("x-session-affinity"), r.headers.get("x-session-id")


def convo(tag):
    sys_msg = {"role": "system", "content": "You are terse. " + tag}
    q1 = {"role": "user", "content": "first question " + tag}
    a1 = {"role": "assistant", "content": "first answer"}
    q2 = {"role": "user", "content": "second question"}
    a2 = {"role": "assistant", "content": "second answer"}
    q3 = {"role": "user", "content": "third question"}
    return [sys_msg, q1], [sys_msg, q1, a1, q2], [sys_msg, q1, a1, q2, a2, q3]


def test_cascade_levels_without_headers_R_AFF_1(c):
    t1, t2, t3 = convo("levels")
    r, up1, aff, sid = turn(c, t1)
    assert aff == "miss" and sid and sid.startswith("sess_"), (aff, sid)
    r, up2, aff, _ = turn(c, t2)
    assert aff == "hit:l1" and up2 == up1, (aff, up1, up2)
    r, up3, aff, _ = turn(c, t3)
    assert aff == "hit:l2" and up3 == up1, (aff, up1, up3)
    # Sending the returned X-Session-Id back lands at level 1.
    r, up4, aff, sid2 = turn(c, t1, headers={"X-Session-Id": sid})
    assert aff == "hit:header" and up4 == up1 and sid2 == sid, (aff, sid2)


def test_body_levels_R_AFF_1(c):
    _, up, aff, _ = turn(c, [{"role": "user", "content": "pck 1"}], prompt_cache_key="cache-abc")
    _, up2, aff2, _ = turn(c, [{"role": "user", "content": "pck 2 different"}], prompt_cache_key="cache-abc")
    assert aff == "miss" and aff2 == "hit:prompt_cache_key" and up2 == up, (aff, aff2)
    _, up, aff, _ = turn(c, [{"role": "user", "content": "usr 1"}], user="user-77")
    _, up2, aff2, _ = turn(c, [{"role": "user", "content": "usr 2 different"}], user="user-77")
    assert aff2 == "hit:user" and up2 == up, aff2


def test_not_for_completions_or_embeddings_R_AFF_1(c):
    r = c.gw.request("POST", "/v1/completions", {"model": "m", "prompt": "x"}, key=c.key)
    assert r.status == 200 and "x-session-affinity" not in r.headers, r.headers
    r = c.gw.request("POST", "/v1/embeddings", {"model": "m", "input": "x"}, key=c.key)
    assert r.status == 200 and "x-session-affinity" not in r.headers, r.headers


def test_passthrough_chat_counts_R_AFF_1(c):
    body = {"model": "m", "messages": [{"role": "user", "content": "through the proxy"}]}
    r1 = c.gw.request("POST", "/api/v1/proxy/sticky/v1/chat/completions", body, key=c.key)
    r2 = c.gw.request("POST", "/api/v1/proxy/sticky/v1/chat/completions", body, key=c.key)
    assert r1.headers.get("x-session-affinity") == "miss", r1.headers
    assert r2.headers.get("x-session-affinity") == "hit:l1", r2.headers
    assert r1.headers["x-fake-upstream"] == r2.headers["x-fake-upstream"]


def test_client_session_id_scoped_to_tenant_R_AFF_2(c):
    _, up, aff, sid = turn(c, [{"role": "user", "content": "tenant A"}], headers={"X-Session-Id": "shared-id-1"})
    _, _, aff_a, _ = turn(c, [{"role": "user", "content": "tenant A again"}], headers={"X-Session-Id": "shared-id-1"})
    assert aff_a == "hit:header", aff_a
    _, _, aff_b, _ = turn(c, [{"role": "user", "content": "tenant B"}], key=c.key_b,
                          headers={"X-Session-Id": "shared-id-1"})
    assert aff_b == "miss", aff_b


def pin_session(c, target):
    """A session id the table maps onto replica `target` (least_connections spreads new ones)."""
    for i in range(30):
        sid = "pin-%s-%d" % (target, i)
        _, up, _, _ = turn(c, [{"role": "user", "content": "pin " + sid}], headers={"X-Session-Id": sid})
        if up == target:
            return sid
    raise AssertionError("no session landed on " + target)


def hold(c, sid, n, ms):
    """n slow requests of session sid in flight at once."""
    ts = []
    for i in range(n):
        t = threading.Thread(target=lambda i=i: c.gw.chat(c.key, content="load %d" % i,
                             headers={"X-Session-Id": sid, "X-Fake-Behavior": "ttfb_ms=%d" % ms}))
        t.daemon = True
        t.start()
        ts.append(t)
    return ts


def test_overload_needs_both_margins_R_AFF_3(c):
    _, up, _, _ = turn(c, [{"role": "user", "content": "ov"}], headers={"X-Session-Id": "ov-1"})
    pin = pin_session(c, up)
    # 3 in flight on the sticky replica, none elsewhere: ABS 3 < 4, it stays put.
    ts = hold(c, pin, 3, 1500)
    wait_for(lambda: sum(r.get("active", 0) for r in c.gw.ctl("stats")["replicas"]) == 3, 2)
    _, up2, aff, _ = turn(c, [{"role": "user", "content": "ov"}], headers={"X-Session-Id": "ov-1"})
    assert aff == "hit:header" and up2 == up, (aff, up, up2)
    for t in ts:
        t.join(5)
    # 4 in flight there (a 5th of the pin session overflows elsewhere): ABS 4 >= 4 and
    # REL 4 >= 1.5 x 0 against an idle replica: the session moves, and its mapping too.
    ts = hold(c, pin, 5, 1500)
    wait_for(lambda: sum(r.get("active", 0) for r in c.gw.ctl("stats")["replicas"]) == 5, 2)
    _, up3, aff, _ = turn(c, [{"role": "user", "content": "ov"}], headers={"X-Session-Id": "ov-1"})
    assert aff == "overload:header" and up3 != up, (aff, up, up3)
    for t in ts:
        t.join(5)
    _, up4, aff, _ = turn(c, [{"role": "user", "content": "ov"}], headers={"X-Session-Id": "ov-1"})
    assert aff == "hit:header" and up4 == up3, (aff, up3, up4)


def test_stale_when_replica_removed_R_AFF_5(c):
    _, up, _, _ = turn(c, [{"role": "user", "content": "stale"}], headers={"X-Session-Id": "st-1"})
    fake = [f for f in c.fakes if f.name == up][0]
    c.gw.ctl("replica", "set", "sticky", fake.url, "--state", "disabled")
    try:
        def moved():
            _, up2, aff, _ = turn(c, [{"role": "user", "content": "stale"}], headers={"X-Session-Id": "st-1"})
            return (up2, aff) if up2 != up else None
        up2, aff = wait_for(moved, 3, what="config applied")
        assert aff == "stale:header", aff
        _, up3, aff, _ = turn(c, [{"role": "user", "content": "stale"}], headers={"X-Session-Id": "st-1"})
        assert aff == "hit:header" and up3 == up2, (aff, up2, up3)
    finally:
        c.gw.ctl("replica", "set", "sticky", fake.url, "--state", "running")


def test_same_across_all_responders_R_AFF_4(c):
    """The table is pool-wide: 20 turns of one session, spread by lighttpd over both processes, one replica."""
    _, up, _, _ = turn(c, [{"role": "user", "content": "pool"}], headers={"X-Session-Id": "pool-1"})
    seen = set()
    for i in range(20):
        _, u, aff, _ = turn(c, [{"role": "user", "content": "pool %d" % i}], headers={"X-Session-Id": "pool-1"})
        assert aff == "hit:header", aff
        seen.add(u)
    assert seen == {up}, seen


def test_outcome_counter_R_AFF_6(c):
    rows = c.gw.ctl("stats")["session_affinity"]
    d = {(r["outcome"], r["level"]): r["count"] for r in rows}
    assert d.get(("hit", "header"), 0) >= 20 and d.get(("miss", "none"), 0) >= 3, d
    assert d.get(("hit", "l1"), 0) >= 1 and d.get(("hit", "l2"), 0) >= 1 and d.get(("stale", "header"), 0) >= 1, d


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
