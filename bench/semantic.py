#!/usr/bin/env python3
"""semantic.py: what the `semantic` strategy of model auto costs a request (issue 18, R-SEM).

Two parts:
  1. bench/semroute_time (C, no sockets): the decision alone (fcgi/semroute.c) for 8 described
     models and 10 rules, BM25 only and hybrid with cached description embeddings (384 and
     1024 dims), at 60, ~530 and ~6000 bytes of user text; ns per decision, best of 5 rounds.
  2. Through the gateway (one responder, stand-ins on 127.0.0.1): BENCH_SEMANTIC_N sequential
     chat requests for model auto under `balanced` (the baseline), `semantic` with BM25 only,
     and `semantic` with an embedding model (descriptions embedded once and cached, so each
     request adds the embedding of its own text: one loopback call). Prints p50 / p99 of the
     gateway's own time (Server-Timing gw;dur, which leaves the chat upstream out but counts
     the embedding call) and the difference to the baseline.

Everything it starts is stopped by PID at the end (tests/it/lib/harness.py)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("SLUICE_TEST_OUT", os.path.join(HERE, "out", "semantic"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "it", "lib"))
from harness import BUILDDIR, Fake, Gateway, add_endpoint, setup_tenant, wait_for  # noqa: E402

os.makedirs(os.environ["SLUICE_TEST_OUT"], exist_ok=True)

N = int(os.environ.get("BENCH_SEMANTIC_N", "300"))
TEXT = "please debug my Python function, the compiler errors about the SQL query make no sense"
DESCRIPTIONS = [
    "Code generation: writes, reviews and debugs Python, C, Rust, Go and SQL code; explains compiler errors",
    "Creative writing: poems, stories, song lyrics, marketing copy and translation of prose",
    "Mathematics and statistics: proofs, equations, probability, linear algebra and calculus",
    "Legal and compliance: contracts, terms of service, privacy policies and GDPR questions",
    "Customer support: short answers about orders, shipping, refunds, accounts and passwords",
    "Medical information: symptoms, medications, dosages and general health questions",
    "Summarisation: long documents, meeting notes, emails and reports condensed into key points",
    "General chat: everyday questions, trivia, recommendations and small talk",
]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def gw_ms(r):
    st = r.headers.get("server-timing", "")
    for part in st.split(","):
        part = part.strip()
        if part.startswith("gw;dur="):
            return float(part[7:])
    raise AssertionError("no Server-Timing gw: %r" % r.headers)


def run(gw, key, expect, n=N):
    out = []
    body = {"model": "auto", "messages": [{"role": "user", "content": TEXT}]}
    for _ in range(n):
        r = gw.request("POST", "/v1/chat/completions", body, key=key)
        assert r.status == 200, r
        reason = r.headers.get("x-routing-reason") or ""
        assert reason.startswith(expect), (expect, reason)
        out.append(gw_ms(r))
    return out


def main():
    exe = os.path.join(BUILDDIR, "bench", "semroute_time")
    subprocess.run(["make", "-s", "-C", BUILDDIR, "bench/semroute_time"], check=True)
    print("== decision alone (bench/semroute_time): case models rules text_bytes dims ns")
    sys.stdout.flush()
    subprocess.run([exe, "20000"], check=True)
    fakes = [Fake("bench-m%d" % i) for i in range(len(DESCRIPTIONS))] + [Fake("bench-emb")]
    gw = Gateway("bench-semantic", procs=1, threads=4)
    try:
        key = setup_tenant(gw, "acme", "alice")
        for i, d in enumerate(DESCRIPTIONS):
            add_endpoint(gw, "ep%d" % i, "acme", [fakes[i]])
            gw.ctl("route", "add", "m%d" % i, "ep%d" % i, "--tenant", "acme")
            gw.ctl("policy", "set", "m%d" % i, "--purpose", "chat", "--description", d)
        add_endpoint(gw, "ep-emb", "acme", [fakes[-1]])
        gw.ctl("route", "add", "emb", "ep-emb", "--tenant", "acme")
        gw.ctl("policy", "set", "emb", "--purpose", "embedding")
        for i in range(10):
            gw.ctl("semantic-rule", "add", "r%d" % i, "--pattern", "(?i)\\bnever%d\\b" % i, "--forbid", "m7")
        gw.ctl("config", "set", "auto_routing_enabled", "true")
        gw.start()
        body = {"model": "auto", "messages": [{"role": "user", "content": "x"}]}
        wait_for(lambda: gw.request("POST", "/v1/chat/completions", body, key=key).status == 200, 5, what="live")
        rows = []
        for name, settings, expect in (
                ("balanced", [("auto_routing_strategy", "balanced")], ""),
                ("semantic bm25", [("auto_routing_strategy", "semantic")], "bm25:"),
                ("semantic hybrid", [("semantic_embedding_model", "emb")], "hybrid:")):
            for k, v in settings:
                gw.ctl("config", "set", k, v)
            wait_for(lambda: (gw.request("POST", "/v1/chat/completions",
                                         {"model": "auto", "messages": [{"role": "user", "content": TEXT}]},
                                         key=key).headers.get("x-routing-reason") or "").startswith(expect), 5,
                     what=name)
            run(gw, key, expect, 20)          # warm
            xs = run(gw, key, expect)
            rows.append((name, pct(xs, 50), pct(xs, 99)))
        base = rows[0][1]
        print("== through the gateway, %d sequential requests each: gw;dur ms" % N)
        for name, p50, p99 in rows:
            print("%-16s p50 %.3f  p99 %.3f  p50 over balanced %+.3f" % (name, p50, p99, p50 - base))
    finally:
        gw.stop()
        for f in fakes:
            f.stop()


if __name__ == "__main__":
    main()
