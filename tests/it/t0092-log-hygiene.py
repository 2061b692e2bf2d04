#!/usr/bin/env python3
"""t0092-log-hygiene: logs that tell the operator what to do (issue 12): a replica failure
names the endpoint, the URL and the reason; identical errors are collapsed into
"last message repeated N times"; a database that stops taking writes is said once, its
recovery once with the records written, and no usage record is lost."""
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (Fake, Gateway, add_endpoint, free_port, on_postgresql, run_tests, setup_tenant, setup_with,
                     stop_all, wait_for)

LOCK_S = 7.0        # longer than the writer's 5 s busy timeout: its batch fails at least once


def build(c):
    c.fake = Fake("t0092")
    # One responder: every line of interest comes from the same process and call sites.
    c.gw = Gateway("t0092", procs=1, threads=8)
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.dead_url = "http://127.0.0.1:%d" % free_port()       # nothing listens: connection refused
    c.gw.ctl("endpoint", "add", "ep-dead", "--tenant", "acme", "--algorithm", "round_robin")
    c.gw.ctl("replica", "add", "ep-dead", c.dead_url)
    c.gw.ctl("route", "add", "m-dead", "ep-dead", "--tenant", "acme")
    c.gw.start()
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


def log_since(c, offset):
    return c.gw.log_text()[offset:]


def test_replica_failure_names_endpoint_url_and_reason(c):
    """The warning of a failed attempt says which endpoint, which replica URL, and why."""
    r = c.gw.chat(c.key, model="m-dead", headers={"X-Request-Id": "h-dead-1"})
    assert r.status >= 500, r
    line = wait_for(lambda: [l for l in c.gw.log_text().splitlines() if "h-dead-1" in l and " failed: " in l], 3,
                    what="the replica failure line")[0]
    print("   logged: %s" % line.strip())
    assert "WARN" in line and "endpoint ep-dead" in line and c.dead_url in line, line
    assert "connection refused" in line, "the reason must be named: %s" % line


def test_identical_errors_collapsed(c):
    """Forty identical replica failures in ~1.5 s: a handful of lines, and summaries whose
    counts add up to the rest."""
    time.sleep(1.1)                      # the previous test's window is over
    offset = len(c.gw.log_text())
    n = 40
    for i in range(n):
        c.gw.chat(c.key, model="m-dead", headers={"X-Request-Id": "h-rep-%d" % i})
        time.sleep(0.04)
    time.sleep(1.1)
    c.gw.chat(c.key, model="m", headers={"X-Request-Id": "h-rep-flush"})   # any line writes the summaries
    time.sleep(0.5)
    text = log_since(c, offset)
    written = [l for l in text.splitlines() if re.search(r"serving\.c:\d+: request h-rep-\d+: .* failed: ", l)]
    summaries = [int(m.group(1)) for m in re.finditer(r"serving\.c:\d+: last message repeated (\d+) times", text)]
    print("   %d failures: %d lines, summaries %r" % (n, len(written), summaries))
    assert summaries, "no 'last message repeated N times' line:\n%s" % text[-3000:]
    # The first failures differ (their count in a row), then the circuit opens and the
    # lines are identical: about one a second from there.
    assert len(written) <= 6, "identical errors must be collapsed to ~1 line/s, got %d:\n%s" % (
        len(written), "\n".join(written))
    assert len(written) + sum(summaries) == n, "every failure is a line or counted in a summary: %d + %r != %d" % (
        len(written), summaries, n)


def hold_lock(gw, seconds, locked):
    with gw.write_lock(exclusive=True):
        locked.set()
        time.sleep(seconds)


def test_database_outage_said_once_and_recovery_counted(c):
    """A database that stops taking writes (an exclusive lock held for 7 s, as a stuck
    backup would) while requests keep coming: the writer says so once (then at most
    once a second), says when it is writable again with how many records it wrote, and
    every request still gets its usage row."""
    offset = len(c.gw.log_text())
    locked = threading.Event()
    t = threading.Thread(target=hold_lock, args=(c.gw, LOCK_S, locked))
    t.start()
    locked.wait(5)
    rids = []
    t0 = time.time()
    while time.time() - t0 < LOCK_S - 0.5:
        rid = "h-db-%d" % len(rids)
        r = c.gw.chat(c.key, headers={"X-Request-Id": rid})
        assert r.status == 200, "answers must not wait for the database: %r" % r
        rids.append(rid)
        time.sleep(0.05)
    t.join()
    line = wait_for(lambda: re.search(r"database writable again after (\d+) s, (\d+) usage records written",
                                      log_since(c, offset)), 10, what="the recovery line")
    text = log_since(c, offset)
    secs, written = int(line.group(1)), int(line.group(2))
    writer_lines = [l for l in text.splitlines() if "usage_writer.c" in l]
    print("   %d requests during the outage; usage_writer.c lines: %d; recovery: after %d s, %d records"
          % (len(rids), len(writer_lines), secs, written))
    for l in writer_lines:
        print("     %s" % l[:200])
    # The reason is the engine's own words: SQLite's "database is locked"; PostgreSQL's differ.
    reason = "" if on_postgresql() else "database is locked"
    assert any("does not take writes" in l and reason in l for l in writer_lines), writer_lines
    assert len(writer_lines) <= 6 and len(writer_lines) < len(rids) / 5, "the outage is said once, not per retry"
    assert written >= len(rids) and 4 <= secs <= LOCK_S + 2, (secs, written, len(rids))
    rows = wait_for(lambda: len(c.gw.usage_events("request_id LIKE 'h-db-%'")) == len(rids) or None, 10,
                    what="every usage row written after the outage")
    assert rows


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
