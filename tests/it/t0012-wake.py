#!/usr/bin/env python3
"""t0012-wake: sleeping replicas woken on demand: one wake for many requests, a bounded wait,
503 service_waking / wake_queued_gpu_borrowed / wake_failed_node_offline with their
Retry-After, the configured wake URL, and healthd recording the replica as running (R-WAKE-1..3)."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (Fake, Gateway, Healthd, fcgi_request, fcgi_sockets, free_port, run_tests, setup_tenant,
                     wait_for)


class Ctx:
    pass


def setup():
    c = Ctx()
    c.gw = Gateway("t0012", threads=32)
    c.key = setup_tenant(c.gw, "acme", "alice")
    c.fakes = []
    c.gw.start()
    c.hd = Healthd(c.gw, round_ms=300)
    return c


def teardown(c):
    if c:
        c.hd.stop()
        c.gw.stop()
        for f in c.fakes:
            f.stop()


def sleeping_endpoint(c, name, n=1, start_period=10, delay_ms=800, node=None, engine="vllm", **opts):
    """An endpoint whose n replicas (fresh fakes) are asleep; returns the fakes."""
    fakes = [Fake("%s-%d" % (name, i)) for i in range(n)]
    c.fakes += fakes
    extra = ["--start-period-seconds", str(start_period)]
    for k, v in opts.items():
        extra += ["--" + k.replace("_", "-"), str(v)]
    c.gw.ctl("endpoint", "add", name, "--tenant", "acme", *extra)
    for f in fakes:
        f.sleep_config(sleeping=1, delay_ms=delay_ms)
        args = ["replica", "add", name, f.url, "--engine", engine, "--state", "sleeping"]
        if node:
            args += ["--node", node]
        c.gw.ctl(*args)
    c.gw.ctl("route", "add", name, name, "--tenant", "acme")
    routable(c, name)
    return fakes


def routable(c, model):
    """Waits until every responder process's snapshot has the model."""
    def seen():
        for sock in fcgi_sockets(c.gw):
            r = fcgi_request(sock, "GET", "/v1/models", headers={"Authorization": "Bearer " + c.key})
            if r.status != 200 or model not in [m["id"] for m in r.json()["data"]]:
                return False
        return True
    wait_for(seen, 5, what="model %s in every responder" % model)


def state(c, fake):
    return c.gw.sql("SELECT state FROM replicas WHERE url = ?", fake.url)[0][0]


def test_ten_requests_one_wake(c):
    """R-WAKE-1, R-WAKE-3: 10 concurrent requests cause one /wake_up and are all served."""
    (f,) = sleeping_endpoint(c, "sleepy", delay_ms=800)
    res, lock = [], threading.Lock()

    def one():
        r = c.gw.chat(c.key, model="sleepy")
        with lock:
            res.append((r.status, r.elapsed))

    t0 = time.time()
    threads = [threading.Thread(target=one) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert [s for s, _ in res] == [200] * 10, res
    st = f.stats()
    assert st["wake_ups"] == 1, st
    assert st["requests"] == 10 and not st["sleeping"], st
    assert 0.7 < time.time() - t0 < 8, time.time() - t0
    # healthd records the wake: the replica is `running`, with an audit record.
    wait_for(lambda: state(c, f) == "running", 5, what="replica recorded as running")
    rid = c.gw.sql("SELECT id FROM replicas WHERE url = ?", f.url)[0][0]
    assert c.gw.sql("SELECT count(*) FROM audit_log WHERE action = 'wake' AND object_id = ?", rid) == [(1,)]
    assert c.gw.chat(c.key, model="sleepy").status == 200
    assert f.stats()["wake_ups"] == 1


def test_slow_wake_is_503_service_waking(c):
    """R-WAKE-2: not ready within max(start_period, 1 s): 503 service_waking, Retry-After 30."""
    (f,) = sleeping_endpoint(c, "slow", start_period=1, delay_ms=6000)
    t0 = time.time()
    r = c.gw.chat(c.key, model="slow")
    took = time.time() - t0
    assert r.status == 503 and r.json()["error"]["code"] == "service_waking", r
    assert r.headers.get("retry-after") == "30", r.headers
    assert 0.9 < took < 4, took
    st = f.stats()
    assert st["wake_ups"] == 1 and st["requests"] == 0 and st["sleeping"], st
    ev = wait_for(lambda: c.gw.usage_events("model = 'slow'"), 3, what="the usage event")
    assert ev[-1]["status"] == 503 and ev[-1]["error_code"] == "service_waking", ev


def test_proxy_path_wakes_too(c):
    """R-WAKE-1 on /api/v1/proxy/{endpoint}/...: the pass-through wakes the endpoint as well."""
    (f,) = sleeping_endpoint(c, "proxied", delay_ms=300, engine="other")
    r = c.gw.request("POST", "/api/v1/proxy/proxied/v1/chat/completions",
                     {"model": "x", "messages": [{"role": "user", "content": "hi"}]}, key=c.key)
    assert r.status == 200, r
    assert f.stats()["wake_ups"] == 1


def test_wake_url_instead_of_wake_up(c):
    """R-WAKE-1: an endpoint's configured wake URL is called once instead of each /wake_up."""
    fakes = sleeping_endpoint(c, "wakeurl", n=2, delay_ms=300, start_period=5)
    # The wake URL here is one replica's own wake route: only that replica wakes.
    c.gw.ctl("endpoint", "set", "wakeurl", "--wake-url", fakes[0].url + "/wake_up")
    time.sleep(0.8)                       # a snapshot poll or three
    r = c.gw.chat(c.key, model="wakeurl")
    assert r.status == 200, r
    assert [f.stats()["wake_ups"] for f in fakes] == [1, 0]
    assert [f.stats()["requests"] for f in fakes] == [1, 0]


def test_borrowed_node(c):
    """R-WAKE-2: sleeping on a borrowed node: 503 wake_queued_gpu_borrowed, Retry-After 60, no wake."""
    c.gw.ctl("node", "add", "gpu-b")
    c.gw.ctl("node", "set", "gpu-b", "--status", "borrowed")
    (f,) = sleeping_endpoint(c, "lent", node="gpu-b")
    r = c.gw.chat(c.key, model="lent")
    assert r.status == 503 and r.json()["error"]["code"] == "wake_queued_gpu_borrowed", r
    assert r.headers.get("retry-after") == "60", r.headers
    assert f.stats()["wake_ups"] == 0


def test_offline_node_and_unreachable_wake(c):
    """R-WAKE-2: node offline, or the wake call cannot connect: 503 wake_failed_node_offline, 60."""
    c.gw.ctl("node", "add", "gpu-o")
    c.gw.ctl("node", "set", "gpu-o", "--status", "offline")
    (f,) = sleeping_endpoint(c, "down", node="gpu-o")
    r = c.gw.chat(c.key, model="down")
    assert r.status == 503 and r.json()["error"]["code"] == "wake_failed_node_offline", r
    assert r.headers.get("retry-after") == "60", r.headers
    assert f.stats()["wake_ups"] == 0
    # No node, but nothing listens where the replica should be.
    c.gw.ctl("endpoint", "add", "gone", "--tenant", "acme", "--start-period-seconds", "5")
    c.gw.ctl("replica", "add", "gone", "http://127.0.0.1:%d" % free_port(), "--engine", "vllm",
             "--state", "sleeping")
    c.gw.ctl("route", "add", "gone", "gone", "--tenant", "acme")
    routable(c, "gone")
    t0 = time.time()
    r = c.gw.chat(c.key, model="gone")
    assert r.status == 503 and r.json()["error"]["code"] == "wake_failed_node_offline", r
    assert r.headers.get("retry-after") == "60", r.headers
    assert time.time() - t0 < 4, "an unreachable wake fails fast, it does not wait the bound"


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
