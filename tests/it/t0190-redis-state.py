#!/usr/bin/env python3
"""t0190-redis-state: key limits exact across three gateway "hosts" sharing one SQLite
database and one Redis (`state = "redis+unix://..."`, issue 19).

Three Gateways (three lighttpd + pools, their own ports and state folders) on one system of
record and one redis-server this test starts itself (a unix socket in its out dir, no
persistence, stopped by PID). Skipped (counted as skipped) only when redis-server is absent."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import harness
from harness import Fake, Gateway, add_endpoint, burst, run_tests, wait_for
from redis_server import REDIS, Redis
LEASE_S = 3


class Ctx:
    pass


def setup():
    c = Ctx()
    c.redis = Redis(os.path.join(harness.OUTDIR, "t0190-redis-%d" % os.getpid()))
    c.fake = Fake("redis19")
    state = {"state": '"redis+unix://%s?db=2"' % c.redis.sock}
    c.gws = [Gateway("t0190-a", procs=2, threads=32, conf=state)]
    c.gw = c.gws[0]
    c.gw.ctl("tenant", "add", "acme")
    c.gw.ctl("user", "add", "alice", "--tenant", "acme", "--role", "member")
    add_endpoint(c.gw, "ep", "acme", [c.fake], algorithm="least_connections")
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.gw.ctl("settings", "set", "state_lease_seconds", str(LEASE_S))
    for name in ("t0190-b", "t0190-c"):
        c.gws.append(Gateway(name, procs=2, threads=32, conf=state, db=c.gw.db))
    for g in c.gws:
        g.start()
    return c


def teardown(c):
    if c:
        for g in getattr(c, "gws", []):
            g.stop()
        if getattr(c, "fake", None):
            c.fake.stop()
        if getattr(c, "redis", None):
            c.redis.stop()


def new_key(c, *limits):
    """A key, live on every host; returns (key, id, calls its liveness probes spent)."""
    k = c.gw.ctl("key", "add", "--user", "alice", *limits)
    spent = [0]
    for g in c.gws:
        def live(g=g):
            r = g.chat(k["key"], headers={"X-Fake-Behavior": "chunks=1"})
            if r.status == 200:
                spent[0] += 1
            return r.status != 401
        wait_for(live, 5, what="key live on %s" % g.name)
    time.sleep(0.6)     # every responder's config poll (R-CFG-1)
    return k["key"], k["id"], spent[0]


def on_host(c, i):
    return c.gws[i % len(c.gws)]


def redis_cli(c, *args):
    p = subprocess.run(["redis-cli", "-s", c.redis.sock, "-n", "2"] + list(args), capture_output=True, text=True,
                       timeout=10)
    return p.stdout.strip()


def test_concurrency_3_across_three_hosts(c):
    key, kid, _ = new_key(c, "--concurrency", 3)
    c.fake.reset()
    res = burst(lambda i: on_host(c, i).chat(key, headers={"X-Fake-Behavior": "ttfb_ms=600"}, content="c%d" % i), 60)
    ok = [r for r in res if getattr(r, "status", 0) == 200]
    refused = [r for r in res if getattr(r, "status", 0) == 429]
    assert len(ok) + len(refused) == 60, res
    st = c.fake.stats()
    assert st["max_inflight"] <= 3, st
    assert len(ok) >= 3, len(ok)
    e = refused[0].json()["error"]
    assert e["code"] == "CONCURRENCY_EXCEEDED" and e["limit"] == 3, e
    # Every host refused some: they count the same slots.
    hosts = {i % 3 for i, r in enumerate(res) if getattr(r, "status", 0) == 429}
    assert hosts == {0, 1, 2}, hosts
    print("   %d admitted, %d refused, stand-in max in flight %d" % (len(ok), len(refused), st["max_inflight"]))


def test_qps_10_in_any_one_second_window_across_hosts(c):
    key, kid, probes = new_key(c, "--qps", 10)
    time.sleep(1.1)
    t_end = time.time() + 2.5

    def worker(i):
        codes = []
        g = on_host(c, i)
        while time.time() < t_end:
            r = g.chat(key, headers={"X-Request-Id": "qps-%d-%d" % (i, len(codes))})
            codes.append(r.status)
            if r.status == 429:
                assert r.json()["error"]["code"] == "QPS_EXCEEDED", r
        return codes
    res = burst(worker, 9)
    for x in res:
        assert isinstance(x, list), x
    admitted = sum(x.count(200) for x in res)
    time.sleep(0.8)
    ts = [row[0] for row in c.gw.sql("SELECT ts_ms FROM usage_events WHERE key_id = ? AND status = 200 AND "
                                     "request_id LIKE 'qps-%' ORDER BY ts_ms", kid)]
    assert len(ts) == admitted, (len(ts), admitted)
    worst = max(sum(1 for t in ts if s <= t < s + 1000) for s in ts)
    assert worst <= 10, "a one-second window admitted %d across the hosts" % worst
    assert admitted >= 20, admitted
    print("   %d admitted in 2.5 s over 3 hosts, busiest one-second window %d" % (admitted, worst))


def test_daily_25_exact_under_200_concurrent_over_hosts(c):
    key, kid, probes = new_key(c, "--daily", 25)
    res = burst(lambda i: on_host(c, i).chat(key, content="d%d" % i), 200)
    ok = [r for r in res if getattr(r, "status", 0) == 200]
    refused = [r for r in res if getattr(r, "status", 0) == 429]
    assert len(ok) == 25 - probes and len(refused) == 200 - len(ok), (len(ok), len(refused), probes)
    e = refused[0].json()["error"]
    assert e["code"] == "DAILY_LIMIT_EXCEEDED" and e["limit"] == 25 and e["current"] == 25, e
    # SQLite stays the record, exact too (every host's usage writer adds its own).
    total = lambda: c.gw.sql("SELECT sum(calls) FROM quota_counters WHERE key_id = ? AND period LIKE 'd:%'", kid)[0][0]
    wait_for(lambda: total() == 25, 5, what="25 calls in SQLite")
    time.sleep(0.5)
    assert total() == 25, total()


def test_kill9_of_a_host_frees_its_slots_within_the_lease(c):
    key, kid, _ = new_key(c, "--concurrency", 3)
    c.fake.reset()
    victim = c.gws[2]
    holders = [threading.Thread(target=lambda i=i: _ignore(lambda: victim.chat(
        key, headers={"X-Fake-Behavior": "ttfb_ms=60000"}, content="hold%d" % i))) for i in range(3)]
    for t in holders:
        t.start()
    wait_for(lambda: c.fake.stats()["inflight"] >= 3, 5, what="3 slots held on host c")
    r = c.gws[0].chat(key, content="refused")
    assert r.status == 429 and r.json()["error"]["code"] == "CONCURRENCY_EXCEEDED", r
    pids = victim.responder_pids()
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    t0 = time.time()
    # Right after the kill the leases still hold (nobody released them) ...
    r = c.gws[1].chat(key, content="still-held")
    early = r.status
    # ... and they free within the lease time, without the dead host.
    wait_for(lambda: c.gws[1].chat(key, headers={"X-Fake-Behavior": "chunks=1"}, content="after").status == 200,
             LEASE_S + 3, interval=0.2, what="the dead host's slots freed")
    took = time.time() - t0
    assert took <= LEASE_S + 1.5, took
    assert early == 429, "the slots were free at once (%d): the leases did not hold" % early
    for t in holders:
        t.join(10)
    print("   slots of the killed host free after %.1f s (lease %d s)" % (took, LEASE_S))
    # lighttpd starts the responders again; wait so later tests have the whole pool.
    wait_for(lambda: len(victim.responder_pids()) >= victim.procs, 15, what="host c's responders back")


def _ignore(fn):
    try:
        fn()
    except Exception:
        pass


def metric(g, name, labels):
    r = g.request("GET", "/metrics")
    assert r.status == 200, r
    for line in r.body.decode().split("\n"):
        if line.startswith(name + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_redis_down_fail_open_then_fail_closed_then_recovery(c):
    key, kid, probes = new_key(c, "--daily", 40, "--concurrency", 20)
    load_key, _, _ = new_key(c, "--concurrency", 50, "--qps", 1000)
    # 10 calls counted while Redis is up (and written to SQLite by the usage writers).
    for i in range(10 - probes):
        assert on_host(c, i).chat(key, content="up%d" % i).status == 200
    total = lambda: c.gw.sql("SELECT sum(calls) FROM quota_counters WHERE key_id = ? AND period LIKE 'd:%'", kid)[0][0]
    wait_for(lambda: total() == 10, 5, what="10 calls in SQLite")
    # Redis stopped mid-load: a load runs on every host while it goes.
    stop_load = threading.Event()
    statuses = []

    def load(i):
        g = on_host(c, i)
        while not stop_load.is_set():
            r = g.chat(load_key, content="load")
            statuses.append(r.status)
    threads = [threading.Thread(target=load, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    c.redis.stop()
    time.sleep(1.0)
    stop_load.set()
    for t in threads:
        t.join(30)
    # fail_open (the default): every request served, before, while and after Redis went.
    assert statuses and all(s == 200 for s in statuses), sorted(set(statuses))
    after = [on_host(c, i).chat(key, content="open%d" % i) for i in range(6)]
    assert all(r.status == 200 for r in after), after
    open_count = max(metric(g, "sluice_state_unavailable_total", 'policy="fail_open"') for g in c.gws)
    assert open_count >= 1, open_count
    assert "does not answer" in c.gw.log_text() + c.gws[1].log_text() + c.gws[2].log_text()
    # fail_closed: 503 state_unavailable, in the caller's protocol (OpenAI and Anthropic).
    c.gw.ctl("settings", "set", "state_fail_policy", "fail_closed")
    wait_for(lambda: all(on_host(c, i).chat(key).status == 503 for i in range(3)), 5, what="fail_closed on every host")
    r = c.gws[1].chat(key)
    e = r.json()["error"]
    assert r.status == 503 and e["code"] == "state_unavailable" and e["type"] == "server_error", r
    assert "retry-after" in r.headers, r.headers
    m = c.gws[2].request("POST", "/v1/messages", {"model": "m", "max_tokens": 8,
                                                   "messages": [{"role": "user", "content": "hi"}]},
                         headers={"x-api-key": key, "anthropic-version": "2023-06-01"})
    assert m.status == 503 and m.json().get("type") == "error", m
    assert m.json()["error"]["type"] in ("api_error", "overloaded_error", "server_error"), m.json()
    closed = max(metric(g, "sluice_state_unavailable_total", 'policy="fail_closed"') for g in c.gws)
    assert closed >= 1, closed
    # A key without limits never asks the state: served while Redis is down.
    free = c.gw.ctl("key", "add", "--user", "alice")["key"]
    wait_for(lambda: c.gws[0].chat(free).status == 200, 5, what="a key without limits")
    # Redis back (empty: no persistence): the daily count is seeded from SQLite, never reset.
    in_sqlite = total()
    c.redis.start()
    wait_for(lambda: all(on_host(c, i).chat(key, headers={"X-Fake-Behavior": "chunks=1"},
                                            content="back%d" % i).status != 503 for i in range(3)),
             8, interval=0.3, what="every host answered by Redis again")
    time.sleep(0.8)     # the usage writers' flush
    used = total()
    assert used >= in_sqlite and used < 40, (used, in_sqlite)
    res = burst(lambda i: on_host(c, i).chat(key, content="rest%d" % i), 60)
    ok = sum(1 for r in res if getattr(r, "status", 0) == 200)
    assert ok == 40 - used, "after Redis came back %d admitted; SQLite had %d of 40" % (ok, used)
    wait_for(lambda: total() == 40, 5, what="40 calls in SQLite")
    assert redis_cli(c, "HGET", "sluice:k:{%d}:d:%s" % (kid, time.strftime("%Y-%m-%d", time.gmtime())),
                     "calls") == "40"
    c.gw.ctl("settings", "set", "state_fail_policy", "fail_open")
    print("   during the outage: %d requests, fail_open metered %d, fail_closed %d; %d calls after recovery"
          % (len(statuses), open_count, closed, ok))


def test_tpm_reserved_and_settled_in_redis(c):
    key, kid, _ = new_key(c, "--tpm", 5000)
    r = c.gws[0].chat(key, max_tokens=100, content="x" * 40)
    assert r.status == 200, r
    level = lambda: int(redis_cli(c, "HGET", "sluice:k:{%d}:tpm" % kid, "level") or 0)
    # Settled to what was used (the stand-in's usage), not the reservation of ~110 tokens.
    used = r.json()["usage"]["total_tokens"]
    wait_for(lambda: 5000 * 1000 - level() <= (used + 1) * 1000 * 3, 3, what="the TPM bucket settled")
    r = c.gws[1].chat(key, max_tokens=6000)
    assert r.status == 429 and r.json()["error"]["code"] == "TPM_EXCEEDED", r


def test_leases_come_back_after_a_redis_restart(c):
    """Redis restarted empty while three requests hold a key's slots: the renewal thread of
    the holders' host adds their leases again, so the limit holds again within a third of the
    lease, not only once they end."""
    key, kid, _ = new_key(c, "--concurrency", 3)
    c.fake.reset()
    holders = [threading.Thread(target=lambda i=i: _ignore(lambda: c.gws[0].chat(
        key, headers={"X-Fake-Behavior": "ttfb_ms=8000"}, content="lease%d" % i))) for i in range(3)]
    for t in holders:
        t.start()
    wait_for(lambda: c.fake.stats()["inflight"] >= 3, 5, what="3 slots held on host a")
    opened = lambda: sum(metric(g, "sluice_state_unavailable_total", 'policy="fail_open"') for g in c.gws)
    before = opened()
    c.redis.stop()
    c.redis.start()
    time.sleep(LEASE_S / 3.0 + 1.0)
    conc = redis_cli(c, "ZCARD", "sluice:k:{%d}:conc" % kid)
    assert conc == "3", "leases in Redis after the restart: %r" % conc
    r = c.gws[1].chat(key, content="over")
    assert r.status == 429 and r.json()["error"]["code"] == "CONCURRENCY_EXCEEDED", r
    for t in holders:
        t.join(15)
    wait_for(lambda: c.gws[2].chat(key, headers={"X-Fake-Behavior": "chunks=1"}).status == 200, 5,
             what="slots free once the holders ended")
    # Connections the restart closed are opened again at once: no request went unchecked.
    assert opened() == before, (before, opened())


def test_monthly_tokens_settled_in_redis_and_sqlite(c):
    key, kid, _ = new_key(c, "--monthly-tokens", 1000000)
    for i in range(6):
        assert on_host(c, i).chat(key, max_tokens=50, content="tokens %d" % i).status == 200
    month = "m:" + time.strftime("%Y-%m", time.gmtime())

    def settled():
        used = c.gw.sql("SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM usage_events WHERE key_id = ? "
                        "AND status = 200", kid)[0][0]
        row = c.gw.sql("SELECT tokens FROM quota_counters WHERE key_id = ? AND period = ?", kid, month)
        in_redis = redis_cli(c, "HGET", "sluice:k:{%d}:%s" % (kid, month), "tokens")
        return used and row and row[0][0] == int(used) and in_redis == str(int(used))
    wait_for(settled, 5, what="the month's tokens settled to the real usage in Redis and SQLite")


def test_route_change_on_host_a_applies_on_host_c_within_2s(c):
    """Configuration reaches every responder of every host from the shared system of
    record (each responder's config poll), within 2 s of the change on another host."""
    key, _, _ = new_key(c)
    model = "m-moved-%d" % os.getpid()
    before = c.gws[2].chat(key, model=model)
    assert before.status == 404, before
    t0 = time.monotonic()
    c.gws[0].ctl("route", "add", model, "ep", "--tenant", "acme")
    # every responder of host C: several calls, since each lands on any of its responders
    wait_for(lambda: all(c.gws[2].chat(key, model=model).status == 200 for _ in range(4)), 2.0,
             what="the route added on host A served by host C")
    took = time.monotonic() - t0
    assert took < 2.0, took


def test_usage_rows_exactly_one_per_request_across_hosts(c):
    """R-USE-1 across hosts: every request leaves one usage row, written by the host that
    served it, none twice."""
    key, kid, _ = new_key(c)
    ids = ["req-one-%d-%d" % (os.getpid(), i) for i in range(30)]
    for i, rid in enumerate(ids):
        r = on_host(c, i).chat(key, headers={"X-Request-Id": rid})
        assert r.status == 200, r

    def written():
        rows = c.gw.sql("SELECT request_id, COUNT(*) FROM usage_events WHERE key_id = ? GROUP BY request_id", kid)
        got = {r[0]: r[1] for r in rows}
        return all(rid in got for rid in ids) and got
    got = wait_for(written, 5, what="the usage rows of 30 requests over three hosts")
    assert all(got[rid] == 1 for rid in ids), {rid: got[rid] for rid in ids if got[rid] != 1}


def test_a_replica_banned_on_one_host_is_out_on_every_host_R_HC_5(c):
    """A proxy failure on host A bans the replica there (R-HC-5) and tells the other
    hosts through Redis: host B and C send it nothing while the ban lasts, where on
    their own they would try it again (round robin) and retry each such request."""
    bad, good = Fake("redis19-ban-a"), Fake("redis19-ban-b")
    try:
        add_endpoint(c.gw, "ep-ban", "acme", [bad, good])
        c.gw.ctl("route", "add", "m-ban", "ep-ban", "--tenant", "acme")
        key, _, _ = new_key(c)
        for g in c.gws:
            wait_for(lambda g=g: g.chat(key, model="m-ban").status == 200, 5, what="m-ban on %s" % g.name)
        bad.reset()
        good.reset()
        bad.behavior("status=503")
        # host A: until the bad replica was tried once (and the request retried on the good one)
        for _ in range(4):
            r = c.gws[0].chat(key, model="m-ban")
            assert r.status == 200, r
            if bad.stats()["requests"]:
                break
        tried = bad.stats()["requests"]
        assert tried == 1, "host A should have tried the bad replica once, then banned it: %r" % bad.stats()
        time.sleep(0.3)     # the news: one Redis round trip
        for g in c.gws[1:]:
            for i in range(6):
                r = g.chat(key, model="m-ban")
                assert r.status == 200, r
        assert bad.stats()["requests"] == tried, \
            "hosts B and C sent %d requests to the replica host A banned" % (bad.stats()["requests"] - tried)
    finally:
        bad.stop()
        good.stop()


def test_a_session_keeps_its_replica_on_every_host_R_AFF_1(c):
    """Session affinity across hosts: the replica host A chose for a session (X-Session-Id)
    is the one hosts B and C send it to, from the mapping in Redis (a miss in their own
    table). On their own they would choose by load among four idle replicas, so with
    four sessions a shared choice by luck is about one in 4^8."""
    fakes = [Fake("redis19-aff-%d" % i) for i in range(4)]
    try:
        add_endpoint(c.gw, "ep-aff", "acme", fakes, algorithm="round_robin", affinity="on")
        c.gw.ctl("route", "add", "m-aff", "ep-aff", "--tenant", "acme")
        key, _, _ = new_key(c)
        for g in c.gws:
            wait_for(lambda g=g: g.chat(key, model="m-aff").status == 200, 5, what="m-aff on %s" % g.name)
        for s in range(4):
            sid = "sess-%d-%d" % (os.getpid(), s)
            r = c.gws[0].chat(key, model="m-aff", content="turn one %d" % s, headers={"X-Session-Id": sid})
            assert r.status == 200, r
            first = r.headers.get("x-fake-upstream")
            for g in c.gws[1:]:
                r = g.chat(key, model="m-aff", content="turn two %d" % s, headers={"X-Session-Id": sid})
                assert r.status == 200, r
                assert r.headers.get("x-fake-upstream") == first, \
                    "session %s: host A chose %s, %s sent it to %s (%s)" % (sid, first, g.name,
                                                                           r.headers.get("x-fake-upstream"),
                                                                           r.headers.get("x-session-affinity"))
                assert (r.headers.get("x-session-affinity") or "").startswith("hit:"), r.headers
    finally:
        for f in fakes:
            f.stop()


def capped_endpoint(c, name, replica_cap=0, endpoint_cap=0, n_fakes=1, queue_timeout_ms=20000):
    """An endpoint of fresh stand-ins with caps (R-PRIO-1), live on every host."""
    fakes = [Fake("redis19-%s-%d" % (name, i)) for i in range(n_fakes)]
    add_endpoint(c.gw, name, "acme", fakes, algorithm="least_connections")
    for f in fakes:
        c.gw.ctl("replica", "set", name, f.url, "--max-concurrency", replica_cap)
    c.gw.ctl("endpoint", "set", name, "--max-concurrency", endpoint_cap, "--queue-max", 200,
             "--queue-timeout-ms", queue_timeout_ms)
    c.gw.ctl("route", "add", "m-" + name, name, "--tenant", "acme")
    key, _, _ = new_key(c)
    for g in c.gws:
        wait_for(lambda g=g: g.chat(key, model="m-" + name).status == 200, 5, what="m-%s on %s" % (name, g.name))
    time.sleep(0.6)
    for f in fakes:
        f.reset()
    return fakes, key


def served_under_cap(c, name, n, cap, what, **caps):
    """n requests of 250 ms spread over the three hosts through a fresh endpoint with caps:
    all succeed (the rest wait in the queues) and the stand-in never sees more than cap."""
    fakes, key = capped_endpoint(c, name, **caps)
    try:
        res = burst(lambda i: on_host(c, i).chat(key, model="m-" + name, content="%s%d" % (name, i),
                                                 headers={"X-Fake-Behavior": "ttfb_ms=250"}), n)
        codes = [getattr(r, "status", r) for r in res]
        assert codes == [200] * n, codes
        st = fakes[0].stats()
        assert st["max_inflight"] <= cap, "the stand-in saw %d at once under %s of %d over the hosts" % (
            st["max_inflight"], what, cap)
        assert st["requests"] == n, st
        print("   %d of %d served over three hosts, stand-in max in flight %d (%s %d)" % (
            n, n, st["max_inflight"], what, cap))
    finally:
        for f in fakes:
            f.stop()


def test_a_replica_cap_of_2_holds_in_total_over_three_hosts_R_PRIO_1(c):
    """max_concurrency 2 on a GPU server is 2 over every gateway host, not 2 per host.
    Counted per host the stand-in would see up to 6."""
    served_under_cap(c, "cap-r", 30, 2, "a replica cap", replica_cap=2)


def test_an_endpoint_cap_of_3_holds_in_total_over_three_hosts(c):
    """The endpoint's own max_concurrency (its replica uncapped) is counted across hosts too."""
    served_under_cap(c, "cap-e", 24, 3, "an endpoint cap", endpoint_cap=3)


def test_kill9_of_a_host_gives_its_places_back_within_the_lease(c):
    """Host C holds both places of a capped replica and is killed (kill -9): a request
    queued on host A is served within the lease time, not before (the places are held
    while the lease lives) and not never."""
    fakes, key = capped_endpoint(c, "cap-k", replica_cap=2)
    victim = c.gws[2]
    try:
        holders = [threading.Thread(target=lambda i=i: _ignore(lambda: victim.chat(
            key, model="m-cap-k", headers={"X-Fake-Behavior": "ttfb_ms=60000"}, content="hold%d" % i)))
            for i in range(2)]
        for t in holders:
            t.start()
        wait_for(lambda: fakes[0].stats()["inflight"] >= 2, 5, what="2 places held on host c")
        out = {}
        def queued():
            t0 = time.time()
            out["r"] = c.gws[0].chat(key, model="m-cap-k", content="queued", headers={"X-Fake-Behavior": "chunks=1"})
            out["t"] = time.time()
        q = threading.Thread(target=queued)
        q.start()
        time.sleep(0.5)
        assert "r" not in out, "served at once: the places held on host C were not counted on host A"
        pids = victim.responder_pids()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        t0 = time.time()
        q.join(LEASE_S + 10)
        assert "r" in out and out["r"].status == 200, out
        took = out["t"] - t0
        assert took <= LEASE_S + 2.0, took
        print("   queued request served %.1f s after the holder host was killed (lease %d s)" % (took, LEASE_S))
        for t in holders:
            t.join(10)
        wait_for(lambda: len(victim.responder_pids()) >= victim.procs, 15, what="host c's responders back")
    finally:
        for f in fakes:
            f.stop()


def test_many_requests_over_three_hosts_cause_one_wake_R_WAKE_3(c):
    """A sleeping replica asked for by 12 requests spread over three hosts gets one
    /wake_up: the host that claims the wake across hosts sends it, the others only wait
    for readiness. Each host on its own would send its own."""
    f = Fake("redis19-sleepy")
    try:
        c.gw.ctl("endpoint", "add", "ep-sleepy", "--tenant", "acme", "--start-period-seconds", "10")
        f.sleep_config(sleeping=1, delay_ms=800)
        c.gw.ctl("replica", "add", "ep-sleepy", f.url, "--engine", "vllm", "--state", "sleeping")
        c.gw.ctl("route", "add", "m-sleepy", "ep-sleepy", "--tenant", "acme")
        key, _, _ = new_key(c)
        for g in c.gws:
            wait_for(lambda g=g: "m-sleepy" in [m["id"] for m in g.request(
                "GET", "/v1/models", headers={"Authorization": "Bearer " + key}).json()["data"]], 5,
                what="m-sleepy on %s" % g.name)
        time.sleep(0.6)
        res = burst(lambda i: on_host(c, i).chat(key, model="m-sleepy", content="w%d" % i), 12)
        codes = [getattr(r, "status", r) for r in res]
        assert codes == [200] * 12, codes
        st = f.stats()
        assert st["wake_ups"] == 1, "%d wake-ups for one sleeping replica over three hosts" % st["wake_ups"]
        assert st["requests"] == 12 and not st["sleeping"], st
        print("   12 requests over three hosts, %d wake-up" % st["wake_ups"])
    finally:
        f.stop()


def test_a_response_id_is_followed_up_on_its_replica_from_every_host_R_API_8(c):
    """previous_response_id across hosts: a response created through host A lives on one
    replica; a follow-up sent to host B or C goes there too, from the pin in Redis. On
    their own hosts B and C would route it by round robin among four, and a stand-in that
    does not hold the response refuses it."""
    fakes = [Fake("redis19-resp-%d" % i) for i in range(4)]
    try:
        add_endpoint(c.gw, "ep-resp", "acme", fakes, algorithm="round_robin")
        c.gw.ctl("route", "add", "m-resp", "ep-resp", "--tenant", "acme")
        key, _, _ = new_key(c)
        def responses(g, body):
            return g.request("POST", "/v1/responses", body, key=key)
        for g in c.gws:
            wait_for(lambda g=g: responses(g, {"model": "m-resp", "input": "warm"}).status == 200, 5,
                     what="m-resp on %s" % g.name)
        # Each host's round robin moves on its own: put B and C one and two places on, so
        # that a follow-up routed by B or C alone would not land where A's request did.
        for i, g in enumerate(c.gws):
            for _ in range(i):
                assert responses(g, {"model": "m-resp", "input": "offset"}).status == 200
        for n in range(4):
            r = responses(c.gws[0], {"model": "m-resp", "input": "start %d" % n})
            assert r.status == 200, r
            rid, home = r.json()["id"], r.headers.get("x-fake-upstream")
            for g in c.gws[1:]:
                f = responses(g, {"model": "m-resp", "input": "more %d" % n, "previous_response_id": rid})
                assert f.status == 200, "%s: follow-up of %s: %r" % (g.name, rid, f)
                assert f.headers.get("x-fake-upstream") == home, \
                    "%s sent the follow-up of %s to %s; it lives on %s" % (g.name, rid,
                                                                         f.headers.get("x-fake-upstream"), home)
                text = f.json()["output"][0]["content"][0]["text"]
                assert text.startswith("continuing %s " % rid), text
    finally:
        for f in fakes:
            f.stop()


if __name__ == "__main__":
    if not REDIS:
        print("skip - redis-server is not installed (apt-get install redis-server)")
        print("0 passed, 0 failed, 1 skipped")
        sys.exit(0)
    run_tests(globals(), setup, teardown)
