#!/usr/bin/env python3
"""t0013-temperature: GPU temperatures read by sluice-healthd from a DCGM exporter; replicas on
a node over settings.gpu_temperature_threshold are not candidates until it cools (R-HC-7, R-LB-6)."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, Healthd, run_tests, setup_tenant, wait_for

ROUND_MS = 300
STALE_MS = 2000


class Ctx:
    pass


def setup():
    c = Ctx()
    c.a, c.b, c.dcgm = Fake("t-a"), Fake("t-b"), Fake("t-dcgm")
    c.gw = Gateway("t0013",
                   conf={"health": "round_ms = 5000; timeout_ms = 2000; run_seconds = 60; lock_wait_ms = 500;"
                                   " scrape_parallel = 10; metrics_stale_ms = 15000; temperature_stale_ms = %d;"
                                   % STALE_MS})
    c.key = setup_tenant(c.gw, "acme", "alice")
    c.dcgm.dcgm(64, 70)
    c.gw.ctl("node", "add", "gpu1", "--metrics-url", c.dcgm.url + "/dcgm/metrics")
    c.gw.ctl("settings", "set", "gpu_temperature_threshold", "85")
    c.gw.ctl("endpoint", "add", "ep", "--tenant", "acme")
    c.gw.ctl("replica", "add", "ep", c.a.url, "--node", "gpu1")
    c.gw.ctl("replica", "add", "ep", c.b.url)
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.gw.start()
    c.hd = Healthd(c.gw, round_ms=ROUND_MS)
    return c


def teardown(c):
    if c:
        c.hd.stop()
        c.gw.stop()
        for f in (c.a, c.b, c.dcgm):
            f.stop()


def node_temp(c):
    return c.gw.sql("SELECT gpu_temperature FROM nodes WHERE name = 'gpu1'")[0][0]


def spread(c, n=6):
    a0, b0 = c.a.stats()["requests"], c.b.stats()["requests"]
    for _ in range(n):
        r = c.gw.chat(c.key)
        assert r.status == 200, r
    return c.a.stats()["requests"] - a0, c.b.stats()["requests"] - b0


def test_cool_node_serves(c):
    wait_for(lambda: node_temp(c) == 70.0, 5, what="the hottest GPU's reading")
    assert spread(c) == (3, 3)


def test_hot_node_loses_its_replicas_until_it_cools(c):
    """R-LB-6: 90 C over a threshold of 85: the node's replicas are not candidates."""
    c.dcgm.dcgm(64, 90, None)
    wait_for(lambda: node_temp(c) == 90.0, 5, what="90 C read")
    time.sleep(0.1)
    assert spread(c) == (0, 6)
    # A blank sentinel alone is no reading: the node keeps its last one (the hot one).
    c.dcgm.dcgm(None, None)
    time.sleep(3 * ROUND_MS / 1000)
    assert node_temp(c) == 90.0 and spread(c) == (0, 6)
    c.dcgm.dcgm(60, 71)
    wait_for(lambda: node_temp(c) == 71.0, 5, what="cooled")
    assert spread(c) == (3, 3)


def test_threshold_is_a_setting(c):
    """R-LB-6: settings.gpu_temperature_threshold changes at run time."""
    c.gw.ctl("settings", "set", "gpu_temperature_threshold", "70")
    time.sleep(0.5)
    assert spread(c) == (0, 6)
    c.gw.ctl("settings", "set", "gpu_temperature_threshold", "85")
    time.sleep(0.5)
    assert spread(c) == (3, 3)


def test_threshold_decimal_and_a_bad_stored_value(c):
    """R-LB-6 with lib/settings.c: the threshold keeps one decimal; a stored text that no longer
    parses (written around sluicectl) is the schema's default (85), logged once per process."""
    assert node_temp(c) == 71.0
    c.gw.ctl("settings", "set", "gpu_temperature_threshold", "70.9")
    time.sleep(0.5)
    assert spread(c) == (0, 6)                         # 71.0 > 70.9
    c.gw.ctl("settings", "set", "gpu_temperature_threshold", "71.0")
    time.sleep(0.5)
    assert spread(c) == (3, 3)                         # 71.0 is not over 71.0
    c.gw.ctl("settings", "set", "gpu_temperature_threshold", "70")
    time.sleep(0.5)
    assert spread(c) == (0, 6)
    c.gw.sql_write("UPDATE settings SET value = 'hot' WHERE key = 'gpu_temperature_threshold'")
    time.sleep(0.5)
    assert spread(c) == (3, 3)                         # the default, not 70 and not 0
    assert c.gw.ctl("config", "get")["gpu_temperature_threshold"] == 85
    c.gw.ctl("settings", "set", "response_model", "client")   # another change: a new snapshot
    time.sleep(0.5)
    assert spread(c) == (3, 3)
    warned = [l for l in c.gw.log_text().splitlines() if "setting gpu_temperature_threshold:" in l]
    assert 1 <= len(warned) <= c.gw.procs and "WARN" in warned[0], warned
    c.gw.ctl("settings", "rm", "response_model")
    c.gw.ctl("settings", "set", "gpu_temperature_threshold", "85")
    time.sleep(0.5)
    assert spread(c) == (3, 3)


def test_stale_reading_counts_as_none(c):
    """A reading older than health.temperature_stale_ms no longer keeps replicas out."""
    c.dcgm.dcgm(95)
    wait_for(lambda: node_temp(c) == 95.0, 5, what="95 C read")
    assert spread(c, 4) == (0, 4)
    c.hd.stop()
    time.sleep(STALE_MS / 1000 + 0.3)
    assert spread(c) == (3, 3)
    c.dcgm.dcgm(60)
    c.hd.start()
    wait_for(lambda: node_temp(c) == 60.0, 5, what="60 C read")


def test_pushed_reading_applies_within_two_seconds(c):
    """R-LB-6 within R-CFG-1: a reading pushed for a node without an exporter takes effect (and
    clears) at once, without waiting for sluice-healthd's round: healthd is stopped here, so
    only the push can act. A node read from a DCGM exporter keeps the exporter's word."""
    c.hd.stop()
    c.gw.ctl("node", "add", "gpu2")
    c.gw.ctl("replica", "set", "ep", c.a.url, "--node", "gpu2")
    time.sleep(0.6)
    try:
        t0 = time.time()
        c.gw.ctl("node", "temperature", "gpu2", "96")
        wait_for(lambda: spread(c, 4) == (0, 4), 2, what="the pushed 96 C applied")
        assert time.time() - t0 < 2.0
        t0 = time.time()
        c.gw.ctl("node", "temperature", "gpu2", "60")
        wait_for(lambda: spread(c, 6) == (3, 3), 2, what="the pushed 60 C cleared it")
        assert time.time() - t0 < 2.0
    finally:
        c.gw.ctl("replica", "set", "ep", c.a.url, "--node", "gpu1")
        c.dcgm.dcgm(60)
        c.hd.start()
        wait_for(lambda: node_temp(c) == 60.0, 5, what="60 C read")
        time.sleep(0.6)


def test_every_replica_hot_is_503(c):
    """No candidate left: 503 no_backends_available."""
    c.gw.ctl("replica", "set", "ep", c.b.url, "--node", "gpu1")
    c.dcgm.dcgm(99)
    wait_for(lambda: node_temp(c) == 99.0, 5, what="99 C read")
    time.sleep(0.4)
    r = c.gw.chat(c.key)
    assert r.status == 503 and r.json()["error"]["code"] == "no_backends_available", r
    c.dcgm.dcgm(50)
    wait_for(lambda: node_temp(c) == 50.0, 5, what="cooled")
    assert c.gw.chat(c.key).status == 200


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
