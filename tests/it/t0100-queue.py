#!/usr/bin/env python3
"""t0100-queue: caps are exact across the pool and a full backend is waited for, never
overloaded (R-PRIO-1): the queue's bounds, its timeout, a client that leaves it, a process
killed while holding places and waiters, priorities (R-PRIO-2)."""
import json
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, burst, free_port, run_tests, setup_with, stop_all, wait_for


def build(c):
    c.fake = Fake("queue")
    c.gw = Gateway("t0100", procs=2, threads=48)
    c.gw.ctl("tenant", "add", "acme")
    c.gw.ctl("user", "add", "alice", "--tenant", "acme", "--role", "member")
    c.key = c.gw.ctl("key", "add", "--user", "alice")["key"]
    c.vip = c.gw.ctl("key", "add", "--user", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.gw.start()
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


def configure(c, replica_cap=0, endpoint_cap=0, queue_max=100, queue_timeout_ms=10000):
    c.gw.ctl("replica", "set", "ep", c.fake.url, "--max-concurrency", replica_cap)
    c.gw.ctl("endpoint", "set", "ep", "--max-concurrency", endpoint_cap, "--queue-max", queue_max,
             "--queue-timeout-ms", queue_timeout_ms)
    shown = [e for e in c.gw.ctl("list", "endpoints")["endpoints"] if e["name"] == "ep"][0]
    assert (shown["max_concurrency"], shown["queue_max"], shown["queue_timeout_ms"]) == \
        (endpoint_cap, queue_max, queue_timeout_ms), shown
    time.sleep(0.8)                 # every responder polls the configuration (250 ms)
    c.fake.reset()


def timed_chat(c, i, behavior, key=None, headers=None):
    h = {"X-Fake-Behavior": behavior}
    h.update(headers or {})
    t0 = time.time()
    r = c.gw.chat(key or c.key, headers=h, content="q%d-%f" % (i, t0))
    r.t_start, r.t_end = t0, time.time()
    return r


def metric(c, name, **labels):
    r = c.gw.request("GET", "/metrics")
    assert r.status == 200, r
    total = 0.0
    for line in r.body.decode().splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all('%s="%s"' % kv in line for kv in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_replica_cap_2_exact_over_two_processes(c):
    """40 concurrent requests, replica max_concurrency 2: the stand-in never sees more than 2
    at once, and all 40 are answered within the wait."""
    configure(c, replica_cap=2)
    granted0 = metric(c, "sluice_queue_requests_total", outcome="granted")
    t0 = time.time()
    res = burst(lambda i: timed_chat(c, i, "ttfb_ms=150"), 40)
    took = time.time() - t0
    assert all(getattr(r, "status", 0) == 200 for r in res), [getattr(r, "status", r) for r in res]
    st = c.fake.stats()
    assert st["max_inflight"] == 2, st
    assert st["requests"] == 40, st
    # 20 rounds of 150 ms at the cap: no overload, and no idle gap either.
    assert 2.9 <= took < 6.0, took
    waits = [w for (w,) in c.gw.sql("SELECT queue_ms FROM usage_events WHERE status = 200 ORDER BY id DESC LIMIT 40")]
    assert max(waits) >= 2000 and sorted(waits)[20] > 0, waits
    assert metric(c, "sluice_queue_requests_total", outcome="granted") - granted0 >= 30
    assert metric(c, "sluice_queue_length") == 0
    print("   40 requests in %.2f s, stand-in max in flight %d, longest wait %d ms" % (took, st["max_inflight"], max(waits)))


def test_endpoint_cap_over_its_replicas(c):
    """An endpoint's max_concurrency caps the sum over its replicas (two URLs of one stand-in)."""
    second = c.fake.url.replace("127.0.0.1", "localhost")
    c.gw.ctl("replica", "add", "ep", second)
    try:
        configure(c, replica_cap=0, endpoint_cap=3)
        res = burst(lambda i: timed_chat(c, i, "ttfb_ms=150"), 18)
        assert all(getattr(r, "status", 0) == 200 for r in res), [getattr(r, "status", r) for r in res]
        st = c.fake.stats()
        assert st["max_inflight"] == 3, st
    finally:
        c.gw.ctl("replica", "rm", "ep", second)


def test_queue_full_is_429_queue_full(c):
    configure(c, replica_cap=1, queue_max=2)
    box = {}
    t = threading.Thread(target=lambda: box.update(res=burst(lambda i: timed_chat(c, i, "ttfb_ms=1200"), 6,
                                                             stagger=0.05)))
    t.start()
    time.sleep(0.7)                 # one in flight, two waiting: the views say so
    ep = [e for e in c.gw.ctl("stats")["endpoints"] if e["endpoint"] == "ep"][0]
    assert ep["waiting"] == 2 and ep["active"] == 1, ep
    assert metric(c, "sluice_queue_length", endpoint="ep") == 2
    t.join(30)
    res = box["res"]
    statuses = sorted(r.status for r in res)
    assert statuses == [200, 200, 200, 429, 429, 429], statuses
    full = [r for r in res if r.status == 429]
    e = full[0].json()["error"]
    assert e["code"] == "queue_full" and e["type"] == "rate_limit_error", e
    assert "queue" in e["message"] and "ep" in e["message"], e
    assert int(full[0].headers["retry-after"]) >= 1, full[0].headers
    # refused at once, not after a wait
    assert all(r.t_end - r.t_start < 0.8 for r in full), [r.t_end - r.t_start for r in full]
    rows = c.gw.sql("SELECT status, error_code FROM usage_events WHERE error_code = 'queue_full'")
    assert len(rows) >= 3 and all(s == 429 for s, _ in rows), rows
    assert metric(c, "sluice_queue_requests_total", outcome="full") >= 3


def test_queue_timeout_is_503_with_retry_after(c):
    configure(c, replica_cap=1, queue_timeout_ms=300)
    res = burst(lambda i: timed_chat(c, i, "ttfb_ms=1500"), 3, stagger=0.05)
    ok = [r for r in res if r.status == 200]
    late = [r for r in res if r.status == 503]
    assert len(ok) == 1 and len(late) == 2, [r.status for r in res]
    e = late[0].json()["error"]
    assert e["code"] == "queue_timeout" and e["type"] == "server_error", e
    assert int(late[0].headers["retry-after"]) >= 1
    assert all(0.25 <= r.t_end - r.t_start < 1.2 for r in late), [r.t_end - r.t_start for r in late]
    rows = c.gw.sql("SELECT status, queue_ms FROM usage_events WHERE error_code = 'queue_timeout'")
    assert len(rows) == 2 and all(s == 503 and q >= 290 for s, q in rows), rows
    assert metric(c, "sluice_queue_requests_total", outcome="timeout") >= 2


def raw_request(port, key, body, behavior):
    """A request on a socket of its own, so the test can close it while it waits."""
    s = socket.create_connection(("127.0.0.1", port), 5)
    data = json.dumps(body).encode()
    s.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nX-Fake-Behavior: %s\r\nContent-Length: %d\r\n\r\n"
               % (key, behavior, len(data))).encode() + data)
    return s


def test_a_waiter_that_leaves_frees_its_place(c):
    """A queued stream's client leaves: the keep-alive comment it gets while it waits shows the
    front server it is gone, and it is out of the queue before its turn comes."""
    configure(c, replica_cap=1)
    first = threading.Thread(target=lambda: timed_chat(c, 0, "ttfb_ms=1800"))
    first.start()
    time.sleep(0.2)
    leaver = raw_request(c.gw.port, c.key, {"model": "m", "stream": True,
                                            "messages": [{"role": "user", "content": "leaver"}]}, "ttfb_ms=1000")
    head = leaver.recv(4096)        # committed at once while it waits: 200, event stream, a comment
    assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head, head
    out = {}
    def third():
        out["r"] = timed_chat(c, 2, "ttfb_ms=200")
    t3 = threading.Thread(target=third)
    t3.start()
    time.sleep(0.2)
    leaver.shutdown(socket.SHUT_RDWR)
    leaver.close()                  # the client leaves while it waits
    first.join(10)
    t3.join(10)
    r = out["r"]
    assert r.status == 200, r
    # the third got the place when the first ended (~1.8 s), not after the leaver's turn
    assert r.t_end - r.t_start < 2.0, r.t_end - r.t_start
    st = c.fake.stats()
    assert st["requests"] == 2, st          # the leaver never reached the stand-in
    wait_for(lambda: c.gw.sql("SELECT count(*) FROM usage_events WHERE status = 499 AND error_code = "
                              "'client_disconnected' AND queue_ms > 0")[0][0] >= 1, 5, what="the leaver's record")
    assert metric(c, "sluice_queue_requests_total", outcome="gone") >= 1


def test_a_queued_stream_gets_keepalives(c):
    """R-SSE-2 while queued: the stream is committed with comments, then the answer follows."""
    configure(c, replica_cap=1)
    first = threading.Thread(target=lambda: timed_chat(c, 0, "ttfb_ms=2600"))
    first.start()
    time.sleep(0.2)
    status, headers, chunks = c.gw.stream_raw(c.key, {"model": "m", "stream": True,
                                                      "messages": [{"role": "user", "content": "s"}]},
                                              headers={"X-Fake-Behavior": "chunks=3"})
    first.join(10)
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), (status, headers)
    text = b"".join(b for _, b in chunks).decode()
    kas = [t for t, b in chunks if b.startswith(b": keep-alive")]
    assert len(kas) >= 2 and kas[0] < 0.5, chunks[:4]
    assert "data: [DONE]" in text and '"chat.completion.chunk"' in text, text[-300:]


def test_kill_9_while_holding_places_and_waiters_leaks_nothing(c):
    configure(c, replica_cap=2)
    pids = c.gw.responder_pids()
    res = []
    ts = [threading.Thread(target=lambda i=i: res.append(timed_chat(c, i, "ttfb_ms=3000"))) for i in range(10)]
    for t in ts:
        t.start()
    time.sleep(0.6)                 # 2 in flight, 8 waiting, spread over both processes
    os.kill(pids[0], signal.SIGKILL)
    for t in ts:
        t.join(30)
    # Whatever that process held or waited for is given back (rows reaped within a second).
    time.sleep(1.5)
    wait_for(lambda: metric(c, "sluice_queue_length") == 0, 15, what="queue empty")
    wait_for(lambda: c.fake.stats()["inflight"] == 0, 10, what="stand-in idle")
    c.fake.reset()
    t0 = time.time()
    again = burst(lambda i: timed_chat(c, i, "ttfb_ms=400"), 4)
    took = time.time() - t0
    assert all(r.status == 200 for r in again), [r.status for r in again]
    st = c.fake.stats()
    assert st["max_inflight"] == 2, st     # both places are back: two at a time, not fewer
    assert took < 1.6, took
    print("   after kill -9 of %d: 4 requests in %.2f s, max in flight %d" % (pids[0], took, st["max_inflight"]))


def test_priority_0_arriving_last_is_served_first(c):
    configure(c, replica_cap=1)
    c.gw.ctl("key", "set", c.vip["id"], "--max-priority", 0)
    time.sleep(0.6)
    order = []
    lock = threading.Lock()
    def go(i, key, hdrs):
        r = timed_chat(c, i, "ttfb_ms=700", key=key, headers=hdrs)
        with lock:
            order.append((i, r.status, r.t_end))
    ts = [threading.Thread(target=go, args=(0, c.key, {}))]
    ts[0].start()
    time.sleep(0.15)
    for i in range(1, 4):           # three priority-5 requests wait
        ts.append(threading.Thread(target=go, args=(i, c.key, {})))
        ts[-1].start()
        time.sleep(0.05)
    # a key whose maximum is its own tier cannot jump the queue with X-Priority
    ts.append(threading.Thread(target=go, args=(4, c.key, {"X-Priority": "0"})))
    ts[-1].start()
    time.sleep(0.05)
    ts.append(threading.Thread(target=go, args=(5, c.vip["key"], {"X-Priority": "0"})))
    ts[-1].start()
    for t in ts:
        t.join(20)
    done = [i for i, s, _ in sorted(order, key=lambda x: x[2])]
    assert all(s == 200 for _, s, _ in order), order
    assert done[0] == 0 and done[1] == 5, done        # the vip's priority-0 request is next
    assert done.index(4) > done.index(3), done        # the clamped one keeps its FIFO turn


def test_a_retry_waits_for_the_full_replica(c):
    """A replica that refuses connections fails the attempt; the retry finds the other replica
    full and waits for it (the driver's wait after a failed attempt), then succeeds."""
    dead = "http://127.0.0.1:%d" % free_port()
    c.gw.ctl("replica", "add", "ep", dead, "--max-concurrency", 1)
    try:
        configure(c, replica_cap=1)
        busy = threading.Thread(target=lambda: timed_chat(c, 0, "ttfb_ms=900"))
        out = []
        busy.start()
        wait_for(lambda: c.fake.stats()["inflight"] == 1, 5, what="the stand-in's place taken")
        for i in range(4):          # the stand-in is full: the dead replica is the only candidate left
            out.append(timed_chat(c, i + 1, "ttfb_ms=50"))
        busy.join(10)
        assert all(r.status == 200 for r in out), [(r.status, r.body[:200]) for r in out]
        assert len(c.gw.responder_pids()) == 2, "a responder died"
        wait_for(lambda: c.gw.sql("SELECT count(*) FROM usage_events WHERE retries > 0 AND queue_ms > 0 AND "
                                  "status = 200")[0][0] >= 1, 5, what="a retry that waited")
    finally:
        c.gw.ctl("replica", "rm", "ep", dead)


def test_x_priority_must_be_0_to_9(c):
    configure(c)
    for bad in ("high", "10", "-1", "1.5", "5x"):
        r = c.gw.chat(c.key, headers={"X-Priority": bad})
        assert r.status == 400, (bad, r)
        e = r.json()["error"]
        assert e["code"] == "invalid_header" and "X-Priority" in e["message"], e
    assert c.gw.chat(c.key, headers={"X-Priority": "7"}).status == 200


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
