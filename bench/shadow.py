#!/usr/bin/env python3
"""shadow.py: shadow traffic (issue 18, R-SHD-1): what a mirror costs the client.

One stand-in upstream for the route, another for its mirror, behind a 2-process sluice
pool. At one keep-alive connection, BENCH_SHADOW_N requests per run, p50 / p99 of the
client-visible latency (request sent to last byte read) of
    none        the route without a mirror (mirror_percent 0)
    mirror      the same route mirroring 100 % of its requests to the second stand-in
    slow        100 % to a mirror that answers after 200 ms (the mirror's time must not show)
for non-stream and stream chat completions, runs interleaved in rounds so drift of the
machine falls on all alike. Prints the figures and the added p50 / p99 of `mirror` and
`slow` over `none`; exits 1 when the added p50 is over BENCH_SHADOW_MAX_ADDED_MS (1 ms).

Environment (defaults): BENCH_SHADOW_N=400 BENCH_SHADOW_ROUNDS=3 BENCH_SHADOW_MAX_ADDED_MS=1
Everything runs on 127.0.0.1; what it starts (stand-ins, lighttpd, responders) is stopped
by PID at the end (tests/it/lib/harness.py)."""
import http.client
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("SLUICE_TEST_OUT", os.path.join(HERE, "out", "shadow"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "it", "lib"))
from harness import Fake, Gateway, add_endpoint, setup_tenant  # noqa: E402

os.makedirs(os.environ["SLUICE_TEST_OUT"], exist_ok=True)

N = int(os.environ.get("BENCH_SHADOW_N", "400"))
ROUNDS = int(os.environ.get("BENCH_SHADOW_ROUNDS", "3"))
MAX_ADDED_MS = float(os.environ.get("BENCH_SHADOW_MAX_ADDED_MS", "1"))


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))] if v else 0.0


def run(port, key, n, stream):
    body = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}
    if stream:
        body["stream"] = True
    data = json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json", "Authorization": "Bearer " + key}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body=data, headers=hdrs)
        resp = conn.getresponse()
        resp.read()
        out.append((time.perf_counter() - t0) * 1000)
        if resp.status != 200:
            raise RuntimeError("status %d" % resp.status)
    conn.close()
    return out


def main():
    main_fake, mirror, slow = Fake("shadow-main"), Fake("shadow-mirror"), Fake("shadow-slow")
    slow.behavior("ttfb_ms=200")
    gw = Gateway("bench-shadow", procs=2, threads=8, conf={"shadow": "timeout_ms = 30000; max_inflight = 64;"})
    failed = False
    try:
        key = setup_tenant(gw, "acme", "alice")
        add_endpoint(gw, "ep", "acme", [main_fake])
        add_endpoint(gw, "mirror", "acme", [mirror])
        add_endpoint(gw, "slow", "acme", [slow])
        rid = gw.ctl("route", "add", "m", "ep", "--tenant", "acme")["id"]
        gw.start()
        modes = {"none": ("mirror", 0), "mirror": ("mirror", 100), "slow": ("slow", 100)}
        results = {}
        for stream in (False, True):
            for _ in range(ROUNDS):
                for mode, (ep, percent) in modes.items():
                    gw.ctl("route", "set", rid, "--mirror", ep, "--mirror-percent", percent)
                    time.sleep(0.6)         # both responders have the new snapshot
                    run(gw.port, key, 20, stream)       # warm-up
                    results.setdefault((stream, mode), []).extend(run(gw.port, key, N, stream))
        print("client-visible latency at 1 connection, %d requests x %d rounds per row (ms)" % (N, ROUNDS))
        print("%-8s %-7s %8s %8s %10s %10s" % ("kind", "mirror", "p50", "p99", "+p50", "+p99"))
        for stream in (False, True):
            base = results[(stream, "none")]
            for mode in modes:
                v = results[(stream, mode)]
                add50, add99 = pct(v, 50) - pct(base, 50), pct(v, 99) - pct(base, 99)
                print("%-8s %-7s %8.3f %8.3f %10.3f %10.3f" % ("stream" if stream else "buffered", mode,
                                                              pct(v, 50), pct(v, 99), add50, add99))
                if mode != "none" and add50 > MAX_ADDED_MS:
                    failed = True
        print("mirrored: %d requests at the mirror, %d at the slow mirror" %
              (mirror.stats()["requests"], slow.stats()["requests"]))
        print("FAIL" if failed else "PASS", "(added p50 <= %.1f ms)" % MAX_ADDED_MS)
    finally:
        gw.stop()
        for f in (main_fake, mirror, slow):
            f.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
