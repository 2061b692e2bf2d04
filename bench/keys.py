#!/usr/bin/env python3
"""keys.py: added cost of member-key limits (R-KEY-1..5): the same load with a key without
limits and with a key that has every limit set (high enough never to refuse), through the
same gateway and stand-in. Prints p50/p99 at one connection and wrk req/s at 64."""
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("SLUICE_TEST_OUT", os.path.join(HERE, "out", "keys"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "it", "lib"))
from harness import Fake, Gateway, add_endpoint, wait_for  # noqa: E402

os.makedirs(os.environ["SLUICE_TEST_OUT"], exist_ok=True)

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}).encode()


def latency(port, key, n):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    hdr = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", BODY, hdr)
        r = conn.getresponse()
        r.read()
        out.append((time.perf_counter() - t0) * 1000)
        assert r.status == 200, r.status
    conn.close()
    out.sort()
    return statistics.median(out), out[int(len(out) * 0.99)]


def wrk(port, key, seconds):
    env = dict(os.environ, BENCH_KEY=key)
    p = subprocess.run(["wrk", "-t2", "-c64", "-d%ds" % seconds, "-s", os.path.join(HERE, "post.lua"),
                        "http://127.0.0.1:%d/v1/chat/completions" % port], capture_output=True, text=True, env=env)
    m = re.search(r"Requests/sec:\s+([\d.]+)", p.stdout)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", p.stdout)
    return float(m.group(1)) if m else 0.0, int(non2xx.group(1)) if non2xx else 0


def main():
    n = int(os.environ.get("N", "2000"))
    fake = Fake("keysbench")
    gw = Gateway("bench-keys", procs=2, threads=64)
    try:
        gw.ctl("tenant", "add", "b")
        gw.ctl("user", "add", "u", "--tenant", "b", "--role", "member")
        add_endpoint(gw, "ep", "b", [fake])
        gw.ctl("route", "add", "m", "ep", "--tenant", "b")
        plain = gw.ctl("key", "add", "--user", "u")["key"]
        limited = gw.ctl("key", "add", "--user", "u", "--qps", 100000, "--concurrency", 10000, "--daily", 10**9,
                         "--monthly", 10**10, "--tpm", 10**9, "--monthly-tokens", 10**12)["key"]
        gw.start()
        for k in (plain, limited):
            wait_for(lambda: gw.chat(k).status == 200, 5)
        rows = []
        for name, key in (("no limits", plain), ("all limits", limited), ("no limits again", plain)):
            p50, p99 = latency(gw.port, key, n)
            rps, bad = wrk(gw.port, key, 5)
            rows.append((name, p50, p99, rps, bad))
        print("%-18s %10s %10s %12s %8s" % ("key", "p50 ms", "p99 ms", "req/s @64", "non-2xx"))
        for r in rows:
            print("%-18s %10.3f %10.3f %12.0f %8d" % r)
        base = (rows[0][1] + rows[2][1]) / 2
        print("added p50 latency of a key with every limit: %.3f ms (%.0f %%); throughput %.0f %% of no limits"
              % (rows[1][1] - base, 100 * (rows[1][1] - base) / base, 100 * rows[1][3] / ((rows[0][3] + rows[2][3]) / 2)))
    finally:
        gw.stop()
        fake.stop()


if __name__ == "__main__":
    main()
