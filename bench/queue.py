#!/usr/bin/env python3
"""queue.py: the concurrency cap and the pool-wide queue under saturation (R-PRIO-1, issue 14).

One stand-in replica with max_concurrency CAP and a fixed service time (ttfb_ms=SERVICE_MS
per request) behind a 2-process sluice pool, driven by CLIENTS > CAP keep-alive clients for
WARMUP + DURATION seconds, so the endpoint's queue is never empty. Two phases: the replica at
CAP, then at cap 1. Each phase reports
  - throughput (200s finished in the DURATION window, per second) against the cap's capacity
    cap / service time: target within 5 %;
  - requests in flight at the stand-in, from its timeline (GET /_fake/timeline: arrival,
    answered = the start of its last write, finish): target at most the cap, and the cap
    reached; and its max_inflight counter (GET /_fake/stats, which leaves the count before an
    answer's last bytes go) at most the cap;
  - every answer 200;
  - the queue wait (usage_events.queue_ms) p50 / p99, and the queue lines of GET /metrics;
  - the handoff gap, on the stand-in's clock: for each request arriving in the window, the
    time from the answer that freed its place to its arrival. Places are paired first freed,
    first filled (with cap 1: the previous request's answer); the sum of idle place-time is
    the same for any pairing. The gap holds the whole handoff, forwarding included: sluice
    reading the answer, releasing the place, waking the waiter (futex) and that waiter's new
    upstream request. Target p99 <= 5 ms.
Prints one summary with PASS/FAIL per target and exits 1 when one fails.

Environment (defaults): BENCH_QUEUE_CAP=4 BENCH_QUEUE_SERVICE_MS=50 BENCH_QUEUE_CLIENTS=32
  BENCH_QUEUE_DURATION=10 BENCH_QUEUE_WARMUP=1 BENCH_QUEUE_CAP1=1 (0: skip the cap-1 phase)
Everything runs on 127.0.0.1 and is stopped by PID at the end (tests/it/lib/harness.py)."""
import collections
import http.client
import json
import os
import sqlite3
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("SLUICE_TEST_OUT", os.path.join(HERE, "out", "queue"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "it", "lib"))
from harness import Fake, Gateway, http_request, setup_tenant, wait_for  # noqa: E402

os.makedirs(os.environ["SLUICE_TEST_OUT"], exist_ok=True)

CAP = int(os.environ.get("BENCH_QUEUE_CAP", "4"))
SERVICE_MS = int(os.environ.get("BENCH_QUEUE_SERVICE_MS", "50"))
CLIENTS = int(os.environ.get("BENCH_QUEUE_CLIENTS", "32"))
DURATION = float(os.environ.get("BENCH_QUEUE_DURATION", "10"))
WARMUP = float(os.environ.get("BENCH_QUEUE_WARMUP", "1"))
CAP1 = os.environ.get("BENCH_QUEUE_CAP1", "1") != "0"
THROUGHPUT_TOL = 0.05
HANDOFF_P99_MS = 5.0
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "queue bench"}],
                   "max_tokens": 8}).encode()


def now_us():
    return time.monotonic_ns() // 1000    # CLOCK_MONOTONIC, the stand-in's clock too


def pct(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def client(port, key, stop_us, rows):
    """Requests back to back on one kept-alive connection until stop_us: rows of (end_us, status)."""
    hdrs = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    conn = None
    while now_us() < stop_us:
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SERVICE_MS * CLIENTS / 1000.0 + 30)
            conn.request("POST", "/v1/chat/completions", BODY, hdrs)
            resp = conn.getresponse()
            body = resp.read()
            rows.append((now_us(), resp.status, body[:200] if resp.status != 200 else b""))
            if resp.getheader("connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException) as e:
            rows.append((now_us(), 0, repr(e).encode()))
            if conn:
                conn.close()
            conn = None
    if conn:
        conn.close()


def handoff_gaps(spans, cap, lo_us, hi_us):
    """From the stand-in's spans [arrival, answered, finish]: the handoff gaps (ms) of the
    arrivals in [lo_us, hi_us); the most requests in flight at once (arrival to answered: the
    answer cannot reach sluice, and so free its place, before the stand-in starts writing it);
    how many arrivals found all cap places taken (an overload); and how many came after their
    place's answer but before its finish stamp (the stand-in's thread ran late after send(): its
    own in-flight counter then reads one more than the cap, the gateway did nothing wrong).
    Each arrival takes the place freed longest ago; the cap's places are free at the start."""
    events = []
    for a, answered, finish in spans:
        events.append((a, 1, 0))
        if answered:
            events.append((answered, 0, finish))   # at the same microsecond a freed place comes first
    events.sort()
    free = collections.deque([None] * cap)
    gaps, over, late, inflight, most = [], 0, 0, 0, 0
    for t, kind, finish in events:
        if kind == 0:
            inflight -= 1
            free.append((t, finish))
            continue
        inflight += 1
        most = max(most, inflight)
        if not free:
            over += 1
            continue
        place = free.popleft()
        if place is None:
            continue
        answered, finish = place
        late += finish > t
        if lo_us <= t < hi_us:
            gaps.append((t - answered) / 1000.0)
    return gaps, most, over, late


def metric_lines(gw, prefix):
    r = http_request(gw.port, "GET", "/metrics")
    return [ln for ln in r.body.decode(errors="replace").split("\n") if ln.startswith(prefix)]


def usage_settled(gw):
    """The last usage event's id once the writer has caught up (no new row for 0.5 s)."""
    last = -1
    while True:
        cur = gw.sql("SELECT MAX(id) FROM usage_events")[0][0] or 0
        if cur == last:
            return cur
        last = cur
        time.sleep(0.5)


def set_cap(gw, fake, cap):
    gw.ctl("replica", "set", "ep", fake.url, "--max-concurrency", cap)
    time.sleep(1.0)                          # every responder re-reads the configuration (250 ms)


def run_phase(gw, fake, key, cap):
    fake.reset()                             # counts, max_inflight, the timeline, the default directives
    fake.behavior("ttfb_ms=%d" % SERVICE_MS)
    last_id = usage_settled(gw)
    t0 = now_us()
    lo, hi = t0 + int(WARMUP * 1e6), t0 + int((WARMUP + DURATION) * 1e6)
    rows = [[] for _ in range(CLIENTS)]
    threads = [threading.Thread(target=client, args=(gw.port, key, hi, rows[i])) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WARMUP + DURATION + SERVICE_MS * CLIENTS / 1000.0 + 60)
    done = [r for rs in rows for r in rs]
    statuses = collections.Counter(r[1] for r in done)
    bad = [r for r in done if r[1] != 200]
    in_window = sum(1 for r in done if r[1] == 200 and lo <= r[0] < hi)
    stats = fake.stats()
    tl = http_request(fake.port, "GET", "/_fake/timeline").json()
    with open(os.path.join(os.environ["SLUICE_TEST_OUT"], "timeline-cap%d.json" % cap), "w") as f:
        json.dump({"cap": cap, "window_us": [lo, hi], "spans": tl["spans"]}, f)
    gaps, most, over, late = handoff_gaps(tl["spans"], cap, lo, hi)
    arrivals = sum(1 for sp in tl["spans"] if lo <= sp[0] < hi)
    service = [(sp[1] - sp[0]) / 1000.0 for sp in tl["spans"] if sp[1] and lo <= sp[0] < hi]
    # The usage writer may trail the answers a little.
    wait_for(lambda: gw.sql("SELECT COUNT(*) FROM usage_events WHERE id > ?", last_id)[0][0] >= len(done),
             10, what="the phase's usage events")
    qms = [r[0] for r in gw.sql("SELECT queue_ms FROM usage_events WHERE id > ?", last_id)]
    return {
        "cap": cap, "requests": len(done), "statuses": statuses, "bad": bad[:3],
        "throughput": in_window / DURATION, "stand_in_rate": arrivals / DURATION,
        "capacity": cap * 1000.0 / SERVICE_MS,
        "service_ms": sum(service) / len(service) if service else float("nan"), "max_inflight": stats["max_inflight"],
        "stand_in_requests": stats["requests"], "timeline_kept": tl["kept"], "most": most, "over": over, "late": late,
        "gaps": gaps, "queue_ms": qms, "queued": sum(1 for q in qms if q > 0),
    }


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def verdict(ok):
    return "PASS" if ok else "FAIL"


def report(ph, checks):
    cap, g, q = ph["cap"], ph["gaps"], ph["queue_ms"]
    dev = ph["throughput"] / ph["capacity"] - 1
    tp_ok = abs(dev) <= THROUGHPUT_TOL
    mi_ok = ph["most"] == cap and ph["over"] == 0 and ph["max_inflight"] <= cap
    st_ok = set(ph["statuses"]) == {200}
    ho_ok = bool(g) and pct(g, 99) <= HANDOFF_P99_MS
    print("-- cap %d: %d requests, %s" % (cap, ph["requests"],
                                        " ".join("%s=%d" % kv for kv in sorted(ph["statuses"].items()))))
    print("   throughput   %.1f req/s vs capacity %d/%d ms = %.1f req/s: %+.1f %% (target within %.0f %%)  %s"
          % (ph["throughput"], cap, SERVICE_MS, ph["capacity"], 100 * dev, 100 * THROUGHPUT_TOL, verdict(tp_ok)))
    print("                the stand-in took %.1f req/s; its service time (arrival to answer) averaged %.2f ms"
          % (ph["stand_in_rate"], ph["service_ms"]))
    print("   in flight    at most %d at the stand-in (timeline; arrivals finding no free place: %d), "
          "target %d  %s" % (ph["most"], ph["over"], cap, verdict(mi_ok)))
    print("                its max_inflight counter: %d (target at most %d)  %s"
          % (ph["max_inflight"], cap, verdict(ph["max_inflight"] <= cap)))
    print("   statuses     all 200  %s" % verdict(st_ok))
    for b in ph["bad"]:
        print("                e.g. %d %r" % (b[1], b[2]))
    print("   handoff gap  p50 %.2f ms, p99 %.2f ms, max %.2f ms (n=%d, %d over %.0f ms; target p99 <= %.0f ms)  %s"
          % (pct(g, 50), pct(g, 99), max(g) if g else float("nan"), len(g),
             sum(1 for x in g if x > HANDOFF_P99_MS), HANDOFF_P99_MS, HANDOFF_P99_MS, verdict(ho_ok)))
    print("   queue wait   p50 %d ms, p99 %d ms, max %d ms (usage_events.queue_ms; %d of %d queued)"
          % (pct(q, 50), pct(q, 99), max(q) if q else 0, ph["queued"], len(q)))
    checks += [("cap %d throughput" % cap, tp_ok), ("cap %d in flight" % cap, mi_ok),
               ("cap %d all 200" % cap, st_ok), ("cap %d handoff p99" % cap, ho_ok)]


def main():
    if CAP < 1 or CLIENTS <= CAP or SERVICE_MS < 1 or DURATION <= 0:
        sys.exit("queue.py: need BENCH_QUEUE_CAP >= 1, BENCH_QUEUE_CLIENTS > CAP, SERVICE_MS >= 1, DURATION > 0")
    fake = Fake("queuebench")
    gw = Gateway("bench-queue", procs=2, threads=CLIENTS + 16)
    try:
        key = setup_tenant(gw, "b", "u")
        gw.ctl("endpoint", "add", "ep", "--tenant", "b", "--algorithm", "least_connections")
        gw.ctl("replica", "add", "ep", fake.url, "--max-concurrency", CAP)
        gw.ctl("route", "add", "m", "ep", "--tenant", "b")
        # The queue must hold every client, and the longest wait (cap 1) fit in its timeout.
        wait_ms = CLIENTS * SERVICE_MS
        qmax, qtimeout = max(100, CLIENTS), max(10000, 3 * wait_ms)
        con = sqlite3.connect(gw.db, timeout=10)
        con.execute("UPDATE endpoints SET queue_max = ?, queue_timeout_ms = ? WHERE name = 'ep'", (qmax, qtimeout))
        con.commit()
        con.close()
        gw.start()
        wait_for(lambda: gw.chat(key).status == 200, 5, what="the route")
        print("sluice: 2 responder processes; one stand-in replica, service time ttfb_ms=%d; %d clients; "
              "%.0f s warm-up + %.0f s measured per phase; queue_max %d, queue_timeout_ms %d; load average %s"
              % (SERVICE_MS, CLIENTS, WARMUP, DURATION, qmax, qtimeout, loadavg()))
        phases = [run_phase(gw, fake, key, CAP)]
        if CAP1 and CAP != 1:
            set_cap(gw, fake, 1)
            phases.append(run_phase(gw, fake, key, 1))
        checks = []
        for ph in phases:
            report(ph, checks)
        print("-- /metrics (whole run)")
        for ln in metric_lines(gw, "sluice_queue_requests_total") + metric_lines(gw, "sluice_queue_length"):
            print("   " + ln)
        for ln in metric_lines(gw, "sluice_queue_wait_seconds_"):
            if "_count" in ln or "_sum" in ln:
                print("   " + ln)
        print("handoff gap: from the stand-in starting to write an answer to its arrival of the request given that "
              "place; it includes sluice reading the answer, the release, the waiter's wake-up and its new upstream "
              "request (forwarding overhead). Timelines: %s/timeline-cap*.json" % os.environ["SLUICE_TEST_OUT"])
        print("load average at the end: %s" % loadavg())
        failed = [name for name, ok in checks if not ok]
        print("RESULT: %s%s" % (verdict(not failed), (" (" + ", ".join(failed) + ")") if failed else ""))
        return 1 if failed else 0
    finally:
        gw.stop()
        fake.stop()


if __name__ == "__main__":
    sys.exit(main())
