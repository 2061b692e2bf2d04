#!/usr/bin/env python3
"""t0148-pool-grow: a responder grows its thread pool while every thread is busy, up to
pool.max_threads, and gives the grown threads back once pool.threads others are free
(issue: no stream waits in the listen backlog for a free thread). With pool.park_streams off:
a stream then holds its thread to its end, as any long request does (t0149: the stream loop)."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, add_endpoint, run_tests, setup_tenant, threads_of, wait_for

BASE, CEILING = 2, 40
CHUNKS, GAP_MS = 4, 300          # one stream lasts about 1.2 s


class Ctx:
    pass


def setup():
    c = Ctx()
    c.fake = Fake("grow")
    c.gw = Gateway("t0148", procs=1, threads=BASE, peak_threads=CEILING + 16,
                   conf={"pool": "processes = 1; threads = %d; max_threads = %d; park_streams = false;" % (BASE, CEILING)})
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.gw.start()
    c.pid = c.gw.responder_pids()[0]
    # A few requests so every thread that is not a worker (writers, config poll) has started.
    for _ in range(3):
        assert c.gw.chat(c.key).status == 200
    c.others = threads_of(c.pid) - BASE
    return c


def teardown(c):
    if c:
        c.gw.stop()
        c.fake.stop()


def streams(c, n):
    """n concurrent streams; returns [(status, first content s, total s, complete)] and the
    peak number of worker threads seen meanwhile."""
    out, peak, done = [None] * n, [0], threading.Event()

    def one(i):
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "s%d" % i}]}
        st, _, chunks = c.gw.stream_raw(c.key, body, headers={"X-Fake-Behavior": "chunks=%d;gap_ms=%d" % (CHUNKS, GAP_MS)},
                                        timeout=60)
        text = b"".join(b for _, b in chunks)
        first = next((t for t, b in chunks if b'"content":"w' in b), None)
        out[i] = (st, first, chunks[-1][0] if chunks else None, b"data: [DONE]" in text)

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], threads_of(c.pid) - c.others)
            time.sleep(0.02)

    w = threading.Thread(target=watch)
    w.start()
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(90)
    done.set()
    w.join()
    return out, peak[0]


def test_grows_so_no_stream_waits(c):
    """30 streams on a pool started with 2 threads: all run at once (with 2 fixed threads they
    would take 15 rounds of 1.2 s), every one complete."""
    t0 = time.time()
    res, peak = streams(c, 30)
    took = time.time() - t0
    assert all(r and r[0] == 200 and r[3] for r in res), res
    firsts = sorted(r[1] for r in res)
    assert firsts[-1] < 3.0, "a stream waited for a thread: first content at %.2f s (%s)" % (firsts[-1], firsts)
    assert took < 8.0, took
    assert peak >= 30, "worker threads peaked at %d for 30 streams" % peak


def test_ceiling_holds(c):
    """50 streams with pool.max_threads 40: never more than 40 workers; the rest wait and
    still complete."""
    res, peak = streams(c, 50)
    assert all(r and r[0] == 200 and r[3] for r in res), res
    assert CEILING - 5 <= peak <= CEILING, "worker threads peaked at %d (ceiling %d)" % (peak, CEILING)
    late = [r[1] for r in res if r[1] > 1.0]
    assert late, "50 streams on 40 threads: some must have waited for a thread"


def test_grown_threads_end_when_free(c):
    """Once the streams are over the grown threads end (a few spare ones may be left waiting);
    pool.threads stay and serve."""
    wait_for(lambda: threads_of(c.pid) - c.others <= BASE + 3, 5, interval=0.2,
             what="worker threads back to about %d" % BASE)
    assert c.gw.chat(c.key).status == 200
    res, _ = streams(c, 8)
    assert all(r and r[0] == 200 and r[3] for r in res), res


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
