#!/usr/bin/env python3
"""affinity.py: the time-to-first-token gain of session affinity (R-AFF) on a multi-turn workload.

Four stand-ins are four replicas of one least_connections endpoint; each simulates an
engine's prefix cache (prefix_cache=1: first byte after prefix_miss_ms when it has not seen
the conversation so far, prefix_hit_ms when it has). The same workload runs with affinity
off, then on (content levels l1/l2 only: no X-Session-Id), then on with the client echoing
the X-Session-Id it was given. Workload: CLIENTS threads x CONVS conversations x TURNS
turns, each thread taking its conversations turn by turn in rotation, every turn a stream
that appends the previous answer and a new user message. Prints per mode the client TTFT
(first content event) for turns 2..TURNS, the stand-ins' prefix hit rate and the
X-Session-Affinity outcomes, then the difference off - on. Without affinity about half the
later turns find their prefix by chance (least_connections over 4 replicas), so the "off"
median flips between a hit and a miss from run to run: the mean and p90 are the stable figures.

Environment (defaults): CLIENTS=8 CONVS=5 TURNS=6 MISS_MS=150 HIT_MS=10 CHUNKS=8 GAP_MS=5"""
import collections
import http.client
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("SLUICE_TEST_OUT", os.path.join(HERE, "out", "affinity"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "it", "lib"))
from harness import Fake, Gateway, add_endpoint, setup_tenant, wait_for  # noqa: E402

os.makedirs(os.environ["SLUICE_TEST_OUT"], exist_ok=True)

CLIENTS = int(os.environ.get("CLIENTS", "8"))
CONVS = int(os.environ.get("CONVS", "5"))
TURNS = int(os.environ.get("TURNS", "6"))
MISS_MS = int(os.environ.get("MISS_MS", "150"))
HIT_MS = int(os.environ.get("HIT_MS", "10"))
CHUNKS = int(os.environ.get("CHUNKS", "8"))
GAP_MS = int(os.environ.get("GAP_MS", "5"))
BEHAVIOR = "prefix_cache=1 prefix_miss_ms=%d prefix_hit_ms=%d chunks=%d gap_ms=%d" % (MISS_MS, HIT_MS, CHUNKS,
                                                                                      GAP_MS)


def stream_turn(conn, key, messages, session_id):
    """One streamed turn on a kept-alive connection: (ttft ms, answer text, response headers)."""
    hdrs = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    if session_id:
        hdrs["X-Session-Id"] = session_id
    body = json.dumps({"model": "m", "messages": messages, "stream": True, "max_tokens": 64}).encode()
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, hdrs)
    resp = conn.getresponse()
    if resp.status != 200:
        raise AssertionError("turn answered %d: %r" % (resp.status, resp.read()[:300]))
    ttft, answer, pending = None, [], b""
    while True:
        data = resp.read1(65536)
        if not data:
            break
        pending += data
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            if not event.startswith(b"data: ") or event == b"data: [DONE]":
                continue
            for ch in json.loads(event[6:]).get("choices", []):
                text = (ch.get("delta") or {}).get("content")
                if text:
                    if ttft is None:
                        ttft = (time.perf_counter() - t0) * 1000
                    answer.append(text)
    if ttft is None:
        raise AssertionError("a stream without content")
    return ttft, "".join(answer), {k.lower(): v for k, v in resp.getheaders()}


def client(port, key, mode, cid, echo_sid, rows, errors):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    convs = []
    for k in range(CONVS):
        tag = "%s-%d-%d" % (mode, cid, k)
        convs.append({"messages": [{"role": "system", "content": "You answer conversation %s." % tag},
                                   {"role": "user", "content": "Question 1 of %s: what is a cache?" % tag}],
                      "sid": None})
    try:
        for turn in range(1, TURNS + 1):
            for k, cv in enumerate(convs):
                ttft, answer, h = stream_turn(conn, key, cv["messages"], cv["sid"] if echo_sid else None)
                rows.append((turn, ttft, h.get("x-session-affinity", "-"), h.get("x-fake-upstream")))
                cv["sid"] = cv["sid"] or h.get("x-session-id")
                cv["messages"] += [{"role": "assistant", "content": answer},
                                   {"role": "user", "content": "Question %d: and then?" % (turn + 1)}]
    except Exception as e:  # reported by the caller: a bench must not hide a failed turn
        errors.append(repr(e))
    finally:
        conn.close()


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def run_mode(gw, fakes, key, mode, echo_sid):
    for f in fakes:
        f.reset()                      # empties each prefix cache, and the directives with it
        f.behavior(BEHAVIOR)
    rows, errors, threads = [], [], []
    t0 = time.time()
    for cid in range(CLIENTS):
        t = threading.Thread(target=client, args=(gw.port, key, mode, cid, echo_sid, rows, errors))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(120)
    wall = time.time() - t0
    if errors:
        raise AssertionError("%s: %d client(s) failed: %s" % (mode, len(errors), errors[0]))
    stats = [f.stats() for f in fakes]
    hits = sum(s["prefix_hits"] for s in stats)
    misses = sum(s["prefix_misses"] for s in stats)
    later = [r[1] for r in rows if r[0] >= 2]
    first = [r[1] for r in rows if r[0] == 1]
    n_first = len(first)
    return {
        "mode": mode, "wall": wall, "turns": len(rows),
        "p50": statistics.median(later), "p90": pct(later, 90), "mean": statistics.mean(later),
        "first_p50": statistics.median(first),
        "hit_rate": hits / max(1, hits + misses),
        # every first turn is a new conversation, a certain miss: the rate of turns 2.. alone
        "later_hit_rate": hits / max(1, hits + misses - n_first),
        "hits": hits, "misses": misses,
        "outcomes": collections.Counter(r[2] for r in rows if r[0] >= 2),
        "per_replica": [s["requests"] for s in stats],
    }


def main():
    fakes = [Fake("affbench%d" % i) for i in range(4)]
    gw = Gateway("bench-affinity", procs=2, threads=64)
    try:
        key = setup_tenant(gw, "b", "u")
        add_endpoint(gw, "ep", "b", fakes, algorithm="least_connections")
        gw.ctl("route", "add", "m", "ep", "--tenant", "b")
        gw.start()
        wait_for(lambda: gw.chat(key).status == 200, 5, what="the route")
        print("workload: %d clients x %d conversations x %d turns, streamed; stand-ins: %s"
              % (CLIENTS, CONVS, TURNS, BEHAVIOR))
        results = [run_mode(gw, fakes, key, "off", False)]
        gw.ctl("endpoint", "set", "ep", "--affinity", "on")
        wait_for(lambda: "x-session-affinity" in gw.chat(key, content="probe %f" % time.time()).headers, 5,
                 what="affinity on in every responder")
        time.sleep(2.5)                # the other responder process picks up the snapshot too
        results.append(run_mode(gw, fakes, key, "on", False))
        results.append(run_mode(gw, fakes, key, "on+sid", True))
        print("%-8s %6s %9s %9s %9s %10s %9s %7s  %-28s %s" % (
            "affinity", "turns", "p50 ms", "p90 ms", "mean ms", "turn1 p50", "hit rate", "wall s",
            "X-Session-Affinity (turns>=2)", "requests per replica"))
        for r in results:
            print("%-8s %6d %9.1f %9.1f %9.1f %10.1f %8.1f%% %7.1f  %-28s %s" % (
                r["mode"], r["turns"], r["p50"], r["p90"], r["mean"], r["first_p50"], 100 * r["later_hit_rate"],
                r["wall"], " ".join("%s=%d" % kv for kv in sorted(r["outcomes"].items())), r["per_replica"]))
        print("hit rate = the stand-ins' prefix hits / (hits + misses) of turns 2..%d (all turns: %s)"
              % (TURNS, ", ".join("%s %.1f%%" % (r["mode"], 100 * r["hit_rate"]) for r in results)))
        off = results[0]
        for on in results[1:]:
            print("TTFT turns 2-%d, off - %s: p50 %.1f ms (%.1fx), p90 %.1f ms (%.1fx), mean %.1f ms (%.1fx)" % (
                TURNS, on["mode"], off["p50"] - on["p50"], off["p50"] / on["p50"], off["p90"] - on["p90"],
                off["p90"] / on["p90"], off["mean"] - on["mean"], off["mean"] / on["mean"]))
    finally:
        gw.stop()
        for f in fakes:
            f.stop()


if __name__ == "__main__":
    main()
