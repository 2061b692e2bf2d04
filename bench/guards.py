#!/usr/bin/env python3
"""guards.py: what the guards cost a request (issue 15, R-GUARD-1..3).

The guards are parameter validation (fcgi/guard.c), the content rules (fcgi/screen.c) and the
context pre-check (fcgi/fit.c, the token estimate of fcgi/estimate.c and, near the limit on a
vLLM replica, its /tokenize). Their own time is in the access log (guard_us); with wrk at one
connection (bench/guards.lua), BENCH_GUARDS_SECONDS each, the scenarios are:
  short           a short chat, no content rules
  short+rules     the same with BENCH_GUARDS_RULES rules of the tenant (half keywords, half
                  patterns) and the built-in injection set on
  long            a ~BENCH_GUARDS_LONG_KB KiB prompt (English), no rules
  long+rules      the same with the rules
  near-limit      a prompt within guard.tokenize_margin_pct of max_context on a vLLM replica:
                  the exact count from the stand-in's /tokenize (one more loopback call)
It prints p50 / p99 of guard_us and the request latency per scenario, and the guards' share
of sluice's latency for the short chat. Exits 1 when the short chat's guard p99 is above
BENCH_GUARDS_P99_US (default 200 us) or a request was refused.

Everything runs on 127.0.0.1; what it starts (stand-ins, lighttpd, responders) is stopped by
PID at the end (tests/it/lib/harness.py)."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("SLUICE_TEST_OUT", os.path.join(HERE, "out", "guards"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "it", "lib"))
from harness import Fake, Gateway, add_endpoint, setup_tenant, wait_for  # noqa: E402

OUT = os.environ["SLUICE_TEST_OUT"]
os.makedirs(OUT, exist_ok=True)
SECONDS = float(os.environ.get("BENCH_GUARDS_SECONDS", "4"))
RULES = int(os.environ.get("BENCH_GUARDS_RULES", "20"))
LONG_KB = int(os.environ.get("BENCH_GUARDS_LONG_KB", "32"))
P99_US = int(os.environ.get("BENCH_GUARDS_P99_US", "200"))
LUA = os.path.join(HERE, "guards.lua")
WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing "
         "matches near the old harbour and every sailor writes a short letter home").split()


def text(nbytes):
    out, i = [], 0
    while sum(len(w) + 1 for w in out) < nbytes:
        out.append(WORDS[i % len(WORDS)])
        i += 1
    return " ".join(out)


def wrk(port, key, body, seconds):
    path = os.path.join(OUT, "body-%d.json" % abs(hash(json.dumps(body))))
    with open(path, "w") as f:
        json.dump(body, f)
    env = dict(os.environ, BENCH_KEY=key, BENCH_BODY_FILE=path)
    t0 = time.time()
    p = subprocess.run(["wrk", "-t1", "-c1", "-d%ds" % max(1, int(seconds)), "-s", LUA,
                        "http://127.0.0.1:%d/v1/chat/completions" % port],
                       env=env, capture_output=True, text=True, timeout=seconds + 60)
    m = re.search(r"requests=(\d+) p50_us=(\d+) p99_us=(\d+) max_us=(\d+) non2xx=(\d+) errors=(\d+)", p.stdout)
    if not m:
        raise RuntimeError("wrk said: %s %s" % (p.stdout, p.stderr))
    n, p50, p99, mx, bad, err = (int(x) for x in m.groups())
    return {"requests": n, "p50_us": p50, "p99_us": p99, "bad": bad + err, "window": (t0, time.time())}


def pct(values, p):
    if not values:
        return 0
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def guard_times(path, window, model):
    a, b = window
    out = []
    with open(path) as f:
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("model") != model or "guard_us" not in j:
                continue
            ts = time.mktime(time.strptime(j["ts"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone + \
                float("0" + j["ts"][19:-1])
            if a <= ts <= b:
                out.append(j["guard_us"])
    return out


def chat(model, content, **extra):
    b = {"model": model, "messages": [{"role": "system", "content": "You are terse."},
                                      {"role": "user", "content": content}], "max_tokens": 16,
         "temperature": 0.7}
    b.update(extra)
    return b


def main():
    if not shutil.which("wrk"):
        print("guards.py needs wrk (apt-get install wrk)")
        return 2
    fake, vllm, gw = Fake("guards-bench"), Fake("guards-vllm"), None
    results = {}
    try:
        gw = Gateway("guards-bench", procs=2, threads=16, keepalive_ms=5000, conf={"trace_log": '""'})
        key = setup_tenant(gw, "bench", "bencher")
        add_endpoint(gw, "ep", "bench", [fake])
        gw.ctl("route", "add", "m", "ep", "--tenant", "bench")
        gw.ctl("endpoint", "add", "epv", "--tenant", "bench")
        gw.ctl("replica", "add", "epv", vllm.url, "--engine", "vllm")
        gw.ctl("route", "add", "mv", "epv", "--tenant", "bench")
        gw.sql_write("INSERT INTO model_policies (model, max_context, max_output) VALUES ('m', 131072, 4096)")
        gw.sql_write("INSERT INTO model_policies (model, max_context, max_output) VALUES ('mv', 1000, 100)")
        gw.start()
        wait_for(lambda: gw.request("POST", "/v1/chat/completions", chat("m", "hi"), key=key).status == 200, 5,
                 what="key live")
        log = os.path.join(gw.dir, "access.log")
        short = chat("m", "What is the capital of France, and why is it there?")
        long_ = chat("m", text(LONG_KB * 1024))
        # within 10 % of mv's 1000 tokens: the estimate asks the replica's /tokenize
        near = chat("mv", "[[fake tokenize_count=900]] " + "hello " * 890, max_tokens=20)

        def run(name, body, model):
            r = wrk(gw.port, key, body, SECONDS)
            time.sleep(0.3)
            r["guard"] = guard_times(log, r["window"], model)
            results[name] = r

        run("short", short, "m")
        run("long", long_, "m")
        run("near-limit", near, "mv")
        for i in range(RULES):
            if i % 2:
                gw.ctl("rule", "add", "kw%d" % i, "--keyword", "zebra%d" % i, "--tenant", "bench",
                       "--action", "flag")
            else:
                gw.ctl("rule", "add", "re%d" % i, "--pattern", r"(?i)secret[-_ ]?code\s*%d\b" % i, "--tenant",
                       "bench", "--action", "block")
        gw.ctl("settings", "set", "builtin_injection_rules", "on")
        time.sleep(1.5)                 # the snapshot with the rules
        run("short+rules", short, "m")
        run("long+rules", long_, "m")
    finally:
        if gw:
            gw.stop()
        fake.stop()
        vllm.stop()

    print("guards per request (2 responders, lighttpd, stand-in upstream; 1 connection, %g s each; 127.0.0.1)"
          % SECONDS)
    print("  %-14s %8s  %10s %10s  %10s %10s" % ("scenario", "requests", "guard p50", "guard p99", "req p50",
                                                "req p99"))
    bad = 0
    for name in ("short", "short+rules", "long", "long+rules", "near-limit"):
        r = results[name]
        bad += r["bad"]
        print("  %-14s %8d  %7d us %7d us  %7d us %7d us%s" % (name, r["requests"], pct(r["guard"], 50),
                                                            pct(r["guard"], 99), r["p50_us"], r["p99_us"],
                                                            "  (%d refused/errors)" % r["bad"] if r["bad"] else ""))
    s = results["short"]
    print("  rules: %d of the tenant + the built-in injection set; long prompt %d KiB" % (RULES, LONG_KB))
    print("  guards' share of a short chat's latency: %.1f %%" % (100.0 * pct(s["guard"], 50) / max(1, s["p50_us"])))
    p99 = pct(results["short+rules"]["guard"], 99)
    ok = p99 <= P99_US and bad == 0 and all(results[n]["guard"] for n in results)
    print("%s guard p99 of a short chat with rules %d us (target <= %d us)" % ("PASS" if ok else "FAIL", p99, P99_US))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
