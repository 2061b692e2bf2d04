#!/usr/bin/env python3
"""t0094-live: the views over the /metrics series (issue 12): `sluicectl stats` per model and
endpoint, and GET /api/v1/live (the /inference page's Live tab) with its R-ADM-2 scoping.

Known traffic goes through the gateway (two tenants, a model each, a model name both route,
an endpoint whose replica refuses connections); then the request counts must be exact, the
quantiles present and inside the histogram bucket the stand-in's delay puts them in, the
rates equal to count / window, and each caller must see only what it may: the operator the
pool, an admin its tenant's endpoints and the models only its routes route, a member 403."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Ctx, Fake, Gateway, add_endpoint, free_port, http_request, run_tests, setup_with, wait_for

PW = {"root": "root-pass-1", "adm_a": "adm-a-pass", "mem_a": "mem-a-pass", "adm_b": "adm-b-pass"}
DELAY_MS = 120          # the stand-in's first byte: latency and TTFT land in the (100, 250] ms bucket
OK_A, BAD_A, SHARED_A, DEAD_A, MB, SHARED_B = 7, 2, 2, 3, 3, 1


def login(gw, name):
    r = gw.request("POST", "/api/v1/auth/login", {"username": name, "password": PW[name]})
    assert r.status == 200, (name, r)
    return r.headers["set-cookie"].split(";")[0]


def get_live(c, who, query=""):
    hdrs = {"Authorization": "Bearer " + who} if who.startswith("sk-") else {"Cookie": c.cookies[who]}
    return http_request(c.gw.port, "GET", "/api/v1/live" + query, None, hdrs)


def build(c):
    c.fake = Fake("live")
    gw = c.gw = Gateway("t0094", procs=2, threads=8)
    gw.ctl("tenant", "add", "ta")
    gw.ctl("tenant", "add", "tb")
    for name, tenant, role in (("root", "default", "operator"), ("adm_a", "ta", "admin"),
                               ("mem_a", "ta", "member"), ("adm_b", "tb", "admin")):
        p = subprocess.run(gw.ctl_argv() + ["--json", "user", "add", name, "--tenant", tenant, "--role", role,
                            "--password-stdin"], input=PW[name] + "\n", capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
    c.key_a = gw.ctl("key", "add", "--user", "mem_a")["key"]
    c.key_b = gw.ctl("key", "add", "--user", "adm_b")["key"]
    gw.ctl("endpoint", "add", "ep-a", "--tenant", "ta")
    gw.ctl("replica", "add", "ep-a", c.fake.url, "--engine", "vllm")     # healthd scrapes its engine metrics
    add_endpoint(gw, "ep-b", "tb", [c.fake])
    gw.ctl("endpoint", "add", "ep-dead", "--tenant", "ta")
    gw.ctl("replica", "add", "ep-dead", "http://127.0.0.1:%d" % free_port())    # nothing listens there
    for model, ep, tenant in (("ma", "ep-a", "ta"), ("shared", "ep-a", "ta"), ("mdead", "ep-dead", "ta"),
                              ("mb", "ep-b", "tb"), ("shared", "ep-b", "tb")):
        gw.ctl("route", "add", model, ep, "--tenant", tenant)
    gw.start()
    c.cookies = {n: login(gw, n) for n in PW}
    send_traffic(c)
    return c


def teardown(c):
    if c:
        for p in (getattr(c, "gw", None), getattr(c, "fake", None)):
            if p:
                p.stop()


def chat(c, key, model, directives):
    return c.gw.chat(key, model=model, content="[[fake %s]] hello" % directives).status


def send_traffic(c):
    codes = [chat(c, c.key_a, "ma", "ttfb_ms=%d" % DELAY_MS) for _ in range(OK_A)]
    assert codes == [200] * OK_A, codes
    codes = [chat(c, c.key_a, "ma", "status=400") for _ in range(BAD_A)]
    assert codes == [400] * BAD_A, codes
    codes = [chat(c, c.key_a, "shared", "ttfb_ms=1") for _ in range(SHARED_A)]
    codes += [chat(c, c.key_b, "shared", "ttfb_ms=1") for _ in range(SHARED_B)]
    codes += [chat(c, c.key_b, "mb", "ttfb_ms=1") for _ in range(MB)]
    assert codes == [200] * (SHARED_A + SHARED_B + MB), codes
    codes = [chat(c, c.key_a, "mdead", "") for _ in range(DEAD_A)]
    assert all(s >= 500 for s in codes), codes
    # The series are written at the end of each request: wait until every request is in.
    wait_for(lambda: row(stats(c)["models"], "model", "mdead", {}).get("requests") == DEAD_A, 5,
             what="the last requests in sluice_requests_total")


def stats(c):
    return c.gw.ctl("stats")


def row(rows, key, name, default=None):
    got = [r for r in rows if r[key] == name]
    assert len(got) <= 1, rows
    if got:
        return got[0]
    if default is not None:
        return default
    raise AssertionError("no %s %r in %r" % (key, name, rows))


def check_quantiles(r, lo, hi, what):
    """p50 <= p95, both inside [lo, hi] ms (one histogram bucket, interpolated inside it)."""
    for k in ("latency", "ttft"):
        p50, p95 = r[k + "_p50_ms"], r[k + "_p95_ms"]
        assert isinstance(p50, (int, float)) and isinstance(p95, (int, float)), (what, r)
        assert lo <= p50 <= p95 <= hi, (what, k, r)


def test_stats_json_models_and_endpoints(c):
    """sluicectl stats --json: the old keys stay; models and endpoints with exact counts."""
    s = stats(c)
    for k in ("processes", "replicas", "session_affinity", "auto_routing", "models", "endpoints"):
        assert k in s, (k, sorted(s))
    keys = {"model", "requests", "errors", "latency_p50_ms", "latency_p95_ms", "ttft_p50_ms", "ttft_p95_ms"}
    for r in s["models"]:
        assert set(r) == keys, r
    for r in s["endpoints"]:
        assert set(r) == keys - {"model"} | {"endpoint", "active", "queue", "waiting"}, r
    ma = row(s["models"], "model", "ma")
    assert (ma["requests"], ma["errors"]) == (OK_A + BAD_A, BAD_A), ma
    # 7 of 9 took ~120 ms: the median and the 95th percentile are in the (100, 250] ms bucket.
    check_quantiles(ma, 100, 250, "ma")
    sh = row(s["models"], "model", "shared")
    assert (sh["requests"], sh["errors"]) == (SHARED_A + SHARED_B, 0), sh
    mb = row(s["models"], "model", "mb")
    assert (mb["requests"], mb["errors"]) == (MB, 0), mb
    md = row(s["models"], "model", "mdead")
    assert (md["requests"], md["errors"]) == (DEAD_A, DEAD_A), md
    epa = row(s["endpoints"], "endpoint", "ep-a")
    assert epa["requests"] == OK_A + BAD_A + SHARED_A, epa
    assert 0 <= epa["errors"] <= BAD_A, epa                # failed attempts: at most the upstream's 400s
    assert epa["active"] == 0 and epa["queue"] is None, epa   # nothing in flight, no engine scrape
    assert epa["waiting"] == 0, epa                            # nothing in sluice's queue (no caps)
    check_quantiles(epa, 0, 250, "ep-a")
    epb = row(s["endpoints"], "endpoint", "ep-b")
    assert epb["requests"] == MB + SHARED_B and epb["errors"] == 0, epb
    dead = row(s["endpoints"], "endpoint", "ep-dead")
    assert dead["errors"] >= 1, dead                        # failed upstream attempts


def test_stats_text_tables(c):
    """Without --json: a table per section, one line per model and endpoint."""
    p = subprocess.run(c.gw.ctl_argv() + ["stats", "--state", os.path.join(c.gw.dir, "sluice.state")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split("\n")
    i = lines.index("models:")
    assert lines[i + 1].split()[:3] == ["model", "requests", "errors"], lines[i + 1]
    ma = [l.split() for l in lines[i + 2:] if l.split()[:1] == ["ma"]]
    assert ma and ma[0][1:3] == [str(OK_A + BAD_A), str(BAD_A)], p.stdout
    j = lines.index("endpoints:")
    assert lines[j + 1].split()[-3:] == ["active", "queue", "waiting"], lines[j + 1]
    assert any(l.split()[:2] == ["ep-a", str(OK_A + BAD_A + SHARED_A)] for l in lines[j + 2:]), p.stdout


def check_rates(live):
    w = live["window_seconds"]
    assert live["minutes"] == 15 and 15 * 60 <= w <= 16 * 60, live
    for r in live["models"] + live["endpoints"]:
        for n, k in (("requests", "request_rate"), ("errors", "error_rate")):
            assert abs(r[k] * w - r[n]) <= 0.01 * r[n] + 0.01, (k, r, w)


def test_live_operator_sees_the_pool(c):
    r = get_live(c, "root")
    assert r.status == 200, r
    live = r.json()
    assert live["scope"] == "pool", live
    check_rates(live)
    assert {m["model"] for m in live["models"]} >= {"ma", "mb", "shared", "mdead"}, live["models"]
    # The live ring counts the service's failures (status >= 500, fcgi/metrics_record.c): the
    # upstream's own 400s are answers there, the dead endpoint's 5xx are errors.
    ma = row(live["models"], "model", "ma")
    assert (ma["requests"], ma["errors"]) == (OK_A + BAD_A, 0), ma
    check_quantiles(ma, 100, 250, "live ma")
    md = row(live["models"], "model", "mdead")
    assert (md["requests"], md["errors"]) == (DEAD_A, DEAD_A), md
    assert row(live["models"], "model", "shared")["requests"] == SHARED_A + SHARED_B, live["models"]
    assert [e["endpoint"] for e in live["endpoints"]] == ["ep-a", "ep-b", "ep-dead"], live["endpoints"]
    epa = row(live["endpoints"], "endpoint", "ep-a")
    assert epa["requests"] == OK_A + BAD_A + SHARED_A and epa["active"] == 0, epa
    assert epa["errors"] == 0, epa
    reps = live["replicas"]
    assert sorted(x["endpoint"] for x in reps) == ["ep-a", "ep-b", "ep-dead"], reps
    for x in reps:
        assert set(x) == {"replica_id", "endpoint", "url", "active", "queue", "kv_cache_ratio", "circuit"}, x
        assert x["circuit"] in ("closed", "open", "half_open"), x
        assert x["active"] == 0, x


def test_live_engine_metrics_per_replica(c):
    """Queue and KV cache come from sluice-healthd's scrape, written to the shared state."""
    from harness import Healthd
    c.fake.metrics(waiting=3, kv=0.42, running=1)
    h = Healthd(c.gw, round_ms=200)
    try:
        def scraped():
            reps = get_live(c, "root").json()["replicas"]
            return [x for x in reps if x["endpoint"] == "ep-a" and x["queue"] == 3]
        x = wait_for(scraped, 8, what="healthd's engine scrape in /api/v1/live")[0]
        assert x["kv_cache_ratio"] == 0.42, x
        epa = row(get_live(c, "root").json()["endpoints"], "endpoint", "ep-a")
        assert epa["queue"] == 3, epa
    finally:
        h.stop()


def test_live_admin_sees_its_tenant_R_ADM_2(c):
    """An admin: its endpoints and replicas, and only the models no other tenant routes."""
    for who, models, eps in (("adm_a", ["ma", "mdead"], ["ep-a", "ep-dead"]), ("adm_b", ["mb"], ["ep-b"])):
        r = get_live(c, who)
        assert r.status == 200, (who, r)
        live = r.json()
        assert live["scope"] == "tenant", live
        check_rates(live)
        assert [m["model"] for m in live["models"]] == models, (who, live["models"])
        assert [e["endpoint"] for e in live["endpoints"]] == eps, (who, live["endpoints"])
        assert sorted({x["endpoint"] for x in live["replicas"]}) == eps, (who, live["replicas"])
    ma = row(get_live(c, "adm_a").json()["models"], "model", "ma")
    assert (ma["requests"], ma["errors"]) == (OK_A + BAD_A, 0), ma


def test_live_member_refused_R_ADM_2(c):
    """The series carry no user or key label: a member (session or key) gets 403."""
    for who in ("mem_a", c.key_a):
        r = get_live(c, who)
        assert r.status == 403 and r.json()["error"]["code"] == "permission_denied", r
        assert "models" not in r.json(), r


def test_live_minutes_and_methods(c):
    r = get_live(c, "root", "?minutes=5")
    assert r.status == 200 and r.json()["minutes"] == 5, r
    assert 5 * 60 <= r.json()["window_seconds"] <= 6 * 60, r.json()
    for bad in ("?minutes=0", "?minutes=16", "?minutes=x"):
        r = get_live(c, "root", bad)
        assert r.status == 400 and r.json()["error"]["param"] == "minutes", (bad, r)
    r = http_request(c.gw.port, "POST", "/api/v1/live", {}, {"Cookie": c.cookies["root"]})
    assert r.status == 405, r
    r = http_request(c.gw.port, "GET", "/api/v1/live", None, {})
    assert r.status == 401, r


if __name__ == "__main__":
    run_tests(globals(), lambda: setup_with(build, teardown), teardown)
