#!/usr/bin/env python3
"""t0010-healthd: sluice-healthd probes, removal from every entry point, alert and audit,
recovery (by probe and by a real request), start grace, restart reconciliation, the lock
(R-HC-1..4, R-HC-9)."""
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import HEALTHD, Fake, Gateway, Healthd, add_endpoint, run_tests, setup_tenant, wait_for

ROUND_MS = 300


class Ctx:
    pass


def setup():
    c = Ctx()
    c.a, c.b = Fake("hc-a"), Fake("hc-b")
    c.gw = Gateway("t0010", conf={"health": "round_ms = 5000; timeout_ms = 2000; run_seconds = 60;"
                                            " lock_wait_ms = 500; scrape_parallel = 10;"
                                            " metrics_stale_ms = 15000; temperature_stale_ms = 60000;"})
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.a, c.b])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.gw.start()
    c.hd = Healthd(c.gw, round_ms=ROUND_MS)
    return c


def teardown(c):
    if c:
        c.hd.stop()
        c.gw.stop()
        c.a.stop()
        c.b.stop()


def replica(c, fake):
    rows = c.gw.sql("SELECT id, healthy, consecutive_failures FROM replicas WHERE url = ?", fake.url)
    assert len(rows) == 1, rows
    return rows[0]


def alerts(c, rid):
    return c.gw.sql("SELECT status, severity, resolved_at FROM alerts WHERE type = 'ENDPOINT_UNHEALTHY'"
                    " AND replica_id = ? ORDER BY id", rid)


def audits(c, rid, action):
    return [json.loads(r[0]) for r in c.gw.sql(
        "SELECT after FROM audit_log WHERE object_type = 'replica' AND object_id = ? AND action = ?"
        " AND actor = 'sluice-healthd' ORDER BY id", rid, action)]


def spread(c, n, proxy=False):
    """n requests; returns how many each fake received."""
    a0, b0 = c.a.stats()["requests"], c.b.stats()["requests"]
    for _ in range(n):
        if proxy:
            r = c.gw.request("POST", "/api/v1/proxy/ep/v1/chat/completions",
                             {"model": "x", "messages": [{"role": "user", "content": "hi"}]}, key=c.key)
        else:
            r = c.gw.chat(c.key)
        assert r.status == 200, r
    return c.a.stats()["requests"] - a0, c.b.stats()["requests"] - b0


def test_probes_are_parallel_and_counted_apart(c):
    """R-HC-1: every running replica gets GET /health each round; probes are not data requests."""
    p0 = c.a.stats()["probes"]
    time.sleep(ROUND_MS * 4 / 1000)
    p1 = c.a.stats()["probes"]
    assert p1 - p0 >= 2, (p0, p1)
    assert replica(c, c.a)[1] == 1 and replica(c, c.b)[1] == 1
    assert spread(c, 4) == (2, 2)


def test_removed_from_every_entry_point_after_threshold(c):
    """R-HC-2: 3 failed probes remove the replica within a round, one alert, one audit record."""
    rid = replica(c, c.a)[0]
    t0 = time.time()
    c.a.health(False)
    wait_for(lambda: replica(c, c.a)[1] == 0, 5, what="replica a removed")
    took = time.time() - t0
    # Three failures take three rounds; removal must not lag more than about one more.
    assert took < (3 + 2) * ROUND_MS / 1000 + 1.0, took
    assert replica(c, c.a)[2] >= 3
    # Named route and pass-through proxy: nothing reaches a any more.
    assert spread(c, 6) == (0, 6)
    assert spread(c, 4, proxy=True) == (0, 4)
    time.sleep(ROUND_MS * 3 / 1000)       # more failing rounds: still one alert, one audit row
    al = alerts(c, rid)
    assert len(al) == 1 and al[0][0] == "ACTIVE" and al[0][1] == "ERROR", al
    rm = audits(c, rid, "remove")
    assert len(rm) == 1 and rm[0]["healthy"] is False and rm[0]["consecutive_failures"] == 3, rm
    assert "503" in rm[0]["reason"], rm
    listed = c.gw.ctl("list", "alerts")["alerts"]
    assert any(a["replica_id"] == rid and a["status"] == "ACTIVE" and a["type"] == "ENDPOINT_UNHEALTHY"
               for a in listed), listed


def test_recovery_resolves_the_alert(c):
    """R-HC-2: a passing probe brings it back, clears the counter, alert RECOVERED."""
    rid = replica(c, c.a)[0]
    c.a.health(True)
    wait_for(lambda: replica(c, c.a)[1] == 1, 5, what="replica a recovered")
    assert replica(c, c.a)[2] == 0
    al = alerts(c, rid)
    assert len(al) == 1 and al[0][0] == "RECOVERED" and al[0][2], al
    assert len(audits(c, rid, "recover")) == 1
    assert spread(c, 4) == (2, 2)
    audit = c.gw.ctl("list", "audit")
    assert any(r["action"] == "recover" and r["object_id"] == rid for r in audit["audit"]), audit


def test_real_request_success_recovers(c):
    """R-HC-2: a data-plane success on a removed replica takes the recovery path."""
    rid = replica(c, c.a)[0]
    c.a.health(False)
    results = []

    def slow():
        results.append(c.gw.chat(c.key, headers={"X-Fake-Behavior": "ttfb_ms=3000"}).status)

    a0 = c.a.stats()["requests"]
    threads = [threading.Thread(target=slow) for _ in range(2)]
    for t in threads:
        t.start()
    wait_for(lambda: c.a.stats()["inflight"] >= 1, 3, what="a slow request on replica a")
    wait_for(lambda: replica(c, c.a)[1] == 0, 5, what="replica a removed while the request runs")
    assert alerts(c, rid)[-1][0] == "ACTIVE"
    c.hd.stop()                           # no probe may recover it: only the request can
    for t in threads:
        t.join(10)
    assert results == [200, 200], results
    assert c.a.stats()["requests"] - a0 == 1
    # Back in the data plane at once, before any healthd round.
    assert replica(c, c.a)[1] == 0
    assert spread(c, 4) == (2, 2)
    # healthd records it on its next round (and its own probes then fail again).
    c.hd.start()
    wait_for(lambda: len(audits(c, rid, "recover")) == 2, 5, what="recovery recorded")
    assert "request" in audits(c, rid, "recover")[-1]["reason"]
    assert alerts(c, rid)[1][0] == "RECOVERED", alerts(c, rid)
    c.a.health(True)
    wait_for(lambda: replica(c, c.a)[1] == 1 and replica(c, c.a)[2] == 0, 5, what="a healthy again")


def test_start_grace(c):
    """R-HC-3: failures within start_period_seconds of a (re)start do not count."""
    g = Fake("hc-grace")
    try:
        g.health(False)
        c.gw.ctl("endpoint", "add", "ep-grace", "--tenant", "acme", "--start-period-seconds", "3")
        t0 = time.time()
        c.gw.ctl("replica", "add", "ep-grace", g.url)
        time.sleep(1.5)
        rows = c.gw.sql("SELECT healthy, consecutive_failures FROM replicas WHERE url = ?", g.url)
        assert rows == [(1, 0)], rows
        assert g.stats()["probes"] >= 2, "it is probed during the grace"
        wait_for(lambda: c.gw.sql("SELECT healthy FROM replicas WHERE url = ?", g.url) == [(0,)], 8,
                 what="removal after the grace")
        assert time.time() - t0 >= 2.0
    finally:
        c.gw.ctl("endpoint", "rm", "ep-grace")
        g.stop()


def test_business_probe(c):
    """R-HC-1: with --business-probe-rounds, a real max_tokens=1 request is part of the check."""
    f = Fake("hc-biz")
    try:
        c.gw.ctl("endpoint", "add", "ep-biz", "--tenant", "acme", "--business-probe-rounds", "1")
        c.gw.ctl("replica", "add", "ep-biz", f.url)
        c.gw.ctl("route", "add", "biz", "ep-biz", "--tenant", "acme", "--target-model", "real-biz")
        wait_for(lambda: f.stats()["requests"] >= 2, 5, what="business probes")
        body = json.loads(f.stats()["last"]["body"])
        assert body["model"] == "real-biz" and body["max_tokens"] == 1, body
        assert c.gw.sql("SELECT healthy FROM replicas WHERE url = ?", f.url) == [(1,)]
        f.behavior("status=500")          # /health still passes; real requests fail
        wait_for(lambda: c.gw.sql("SELECT healthy FROM replicas WHERE url = ?", f.url) == [(0,)], 5,
                 what="removed by the business probe")
        rid = c.gw.sql("SELECT id FROM replicas WHERE url = ?", f.url)[0][0]
        assert "business probe answered HTTP 500" in audits(c, rid, "remove")[-1]["reason"]
        f.behavior("")
        wait_for(lambda: c.gw.sql("SELECT healthy FROM replicas WHERE url = ?", f.url) == [(1,)], 5,
                 what="recovered")
    finally:
        c.gw.ctl("endpoint", "rm", "ep-biz")
        f.stop()


def test_killed_and_restarted_reconciles(c):
    """R-HC-4: counts and removals survive a healthd kill; a passing probe resolves the alert."""
    rid = replica(c, c.a)[0]
    c.a.health(False)
    wait_for(lambda: replica(c, c.a)[2] >= 1, 5, what="a failure counted")
    c.hd.stop(sig=9)
    f0 = replica(c, c.a)[2]
    c.hd.start()
    wait_for(lambda: replica(c, c.a)[2] > f0, 5, what="counting continues after the restart")
    wait_for(lambda: replica(c, c.a)[1] == 0, 5, what="removed")
    c.hd.stop(sig=9)
    n_alerts = len(alerts(c, rid))
    assert alerts(c, rid)[-1][0] == "ACTIVE"
    # A gateway restart with a fresh state file keeps the removal (the database has it).
    c.gw.stop()
    os.unlink(os.path.join(c.gw.dir, "sluice.state"))
    c.gw.start()
    assert spread(c, 4) == (0, 4)
    c.a.health(True)
    c.hd.start()
    wait_for(lambda: replica(c, c.a)[1] == 1, 5, what="recovered after the restarts")
    al = alerts(c, rid)
    assert len(al) == n_alerts and all(s == "RECOVERED" for s, _, _ in al), al
    assert spread(c, 4) == (2, 2)


def test_one_instance_at_a_time(c):
    """R-HC-9: a second healthd (as cron would start it) finds the lock and exits."""
    t0 = time.time()
    p = subprocess.run([HEALTHD, "-c", c.gw.conf_path, "--round-ms", "300"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and "holds" in p.stderr, p
    assert time.time() - t0 < 3, "waits health.lock_wait_ms (500 here), not a whole run"
    # Without --forever a lone instance works for health.run_seconds and exits.
    c.hd.stop()
    t0 = time.time()
    p = subprocess.run([HEALTHD, "-c", c.gw.conf_path, "--round-ms", "300", "--rounds", "3"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and time.time() - t0 < 5, p
    c.hd.start()


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
