#!/usr/bin/env python3
"""t0090-metrics: GET /metrics (issue 12, R-OBS-1).

The exposition passes `promtool check metrics` without a lint warning; counters move
by exactly the known request mix (ok, unknown model, upstream 500, daily limit);
histograms' _count are the requests; counters survive a SIGKILLed responder; the
metrics token guards the page; tenant_labels = false drops the tenant label; an
unknown model is model="_unknown", never the client's string; and rendering 50
models x 20 endpoints takes under 5 ms (the responder's Server-Timing)."""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import Fake, Gateway, Healthd, add_endpoint, run_tests, setup_tenant, setup_with, stop_all, wait_for

CT = "text/plain; version=0.0.4; charset=utf-8"
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
DAILY = 2


def parse(text):
    """{(name, frozenset(labels)): value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        key = (m.group(1), labels)
        assert key not in out, "duplicate series %r" % (key,)
        out[key] = float(m.group(4))
    return out


def val(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples, name, **match):
    """The sum over the series of name whose labels include match."""
    want = set(match.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def scrape(gw, token=None, retries=20):
    """GET /metrics; retries past lighttpd's own 500 for a socket whose responder was just killed."""
    hdrs = {"Authorization": "Bearer " + token} if token else {}
    for _ in range(retries):
        r = gw.request("GET", "/metrics", headers=hdrs)
        if r.status == 200:
            assert r.headers.get("content-type") == CT, r.headers
            return r
        if r.status != 500:
            return r
        time.sleep(0.1)
    return r


def metrics(gw, token=None):
    r = scrape(gw, token)
    assert r.status == 200, r
    return parse(r.body.decode())


def build(c):
    c.ok, c.bad = Fake("m-ok"), Fake("m-bad")
    c.bad.behavior("status=500")
    c.gw = Gateway("t0090", procs=2, threads=8,
                   conf={"passive": "ban_ms = 100; circuit_failures = 1000; circuit_open_ms = 100; half_open_trials = 2;"})
    c.key = setup_tenant(c.gw, "acme", "alice")
    c.limited = c.gw.ctl("key", "add", "--user", "alice", "--daily", DAILY)["key"]
    add_endpoint(c.gw, "ep", "acme", [c.ok])
    add_endpoint(c.gw, "ep-bad", "acme", [c.bad])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.gw.ctl("route", "add", "m-bad", "ep-bad", "--tenant", "acme")
    c.gw.start()
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw2", "gw", "ok", "bad")


# ---- the known mix ----

N_OK, M_404, K_500, J_429 = 5, 3, 2, 3


def mix(c):
    """N ok, M unknown model (404), K upstream 500, DAILY ok + J refused with the limited key.
    Returns the prompt and completion tokens the ok answers reported."""
    prompt = completion = 0
    for i in range(N_OK):
        r = c.gw.chat(c.key, model="m", content="hello %d" % i)
        assert r.status == 200, r
        prompt += r.json()["usage"]["prompt_tokens"]
        completion += r.json()["usage"]["completion_tokens"]
    for i in range(M_404):
        r = c.gw.chat(c.key, model="no-such-model-%d" % i)
        assert r.status == 404 and r.json()["error"]["code"] == "model_not_found", r
    for i in range(K_500):
        r = c.gw.chat(c.key, model="m-bad")
        assert r.status == 500, r
    for i in range(DAILY + J_429):
        r = c.gw.chat(c.limited, model="m")
        if i < DAILY:
            assert r.status == 200, r
            prompt += r.json()["usage"]["prompt_tokens"]
            completion += r.json()["usage"]["completion_tokens"]
        else:
            assert r.status == 429 and r.json()["error"]["code"] == "DAILY_LIMIT_EXCEEDED", r
    return prompt, completion


def test_exact_counts_after_a_known_mix(c):
    """Every counter moves by exactly the mix: requests by model/tenant/status/code, routes,
    upstream attempts, the 429s by code, tokens billed; histograms' _count = requests."""
    before = metrics(c.gw)
    prompt, completion = mix(c)
    after = metrics(c.gw)

    def d(name, **labels):
        return val(after, name, **labels) - val(before, name, **labels)

    def dt(name, **match):
        return total(after, name, **match) - total(before, name, **match)

    n_requests = N_OK + M_404 + K_500 + DAILY + J_429
    assert d("sluice_requests_total", model="m", tenant="acme", status="200", code="") == N_OK + DAILY
    assert d("sluice_requests_total", model="_unknown", tenant="acme", status="404",
             code="model_not_found") == M_404
    assert d("sluice_requests_total", model="m-bad", tenant="acme", status="500", code="") == K_500
    assert dt("sluice_requests_total", status="429", code="DAILY_LIMIT_EXCEEDED") == J_429
    assert dt("sluice_requests_total") == n_requests, dt("sluice_requests_total")
    assert d("sluice_rate_limited_total", code="DAILY_LIMIT_EXCEEDED") == J_429
    assert dt("sluice_rate_limited_total") == J_429
    assert d("sluice_route_requests_total", route="/v1/chat/completions", status="200") == N_OK + DAILY
    assert dt("sluice_route_requests_total") == n_requests
    assert d("sluice_upstream_attempts_total", endpoint="ep", outcome="success") == N_OK + DAILY
    assert dt("sluice_upstream_attempts_total", endpoint="ep-bad") == K_500
    assert d("sluice_tokens_total", model="m", tenant="acme", direction="prompt") == prompt
    assert d("sluice_tokens_total", model="m", tenant="acme", direction="completion") == completion
    # Histograms: one observation per request, cumulative buckets, +Inf = _count.
    assert dt("sluice_request_duration_seconds_count") == n_requests
    assert dt("sluice_request_duration_seconds_bucket", le="+Inf") == n_requests
    # The refused requests named model m too: they are m's requests, answered by sluice.
    assert d("sluice_request_duration_seconds_count", model="m", prompt_bucket="lt256") == N_OK + DAILY + J_429
    assert d("sluice_endpoint_request_duration_seconds_count", endpoint="ep") == N_OK + DAILY
    assert d("sluice_endpoint_request_duration_seconds_count", endpoint="ep-bad") == K_500
    assert d("sluice_ttft_seconds_count", model="m", prompt_bucket="lt256") == N_OK + DAILY
    assert dt("sluice_request_duration_seconds_sum") > 0
    for (name, ls), v in after.items():
        if name.endswith("_count"):
            base = name[:-6]
            assert val(after, base + "_bucket", le="+Inf", **dict(ls)) == v, (name, ls)
    print("   %d requests, %d prompt + %d completion tokens counted exactly" % (n_requests, prompt, completion))


def test_promtool_check_metrics_clean(c):
    """`promtool check metrics` on the real page after mixed traffic: exit 0, prints nothing."""
    c.gw.chat(c.key, model="m", stream=True)
    c.gw.request("GET", "/v1/models", key=c.key)
    c.gw.request("GET", "/v1/nowhere", key=c.key)
    body = scrape(c.gw).body
    p = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, timeout=30)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), (
        "promtool: rc %d %r %r" % (p.returncode, p.stdout, p.stderr))
    text = body.decode()
    for fam in ("sluice_requests_total", "sluice_request_duration_seconds", "sluice_ttft_seconds",
                "sluice_tokens_total", "sluice_upstream_attempts_total", "sluice_active_requests",
                "sluice_replica_up", "sluice_replica_circuit_open", "sluice_replica_queue_depth",
                "sluice_replica_kv_cache_usage_ratio", "sluice_session_affinity_total", "sluice_auto_routing_total",
                "sluice_rate_limited_total", "sluice_cache_hits_total", "sluice_queue_wait_seconds",
                "sluice_usage_writer_backlog", "sluice_usage_write_failures_total",
                "sluice_healthd_last_round_timestamp_seconds", "sluice_build_info", "sluice_route_requests_total",
                "sluice_endpoint_request_duration_seconds", "sluice_endpoint_ttft_seconds",
                "sluice_access_log_dropped_total", "sluice_trace_spans_dropped_total", "sluice_queue_length",
                "sluice_queue_requests_total", "sluice_cache_misses_total", "sluice_cache_stores_total",
                "sluice_cache_evictions_total", "sluice_cache_bytes"):
        assert "# TYPE %s " % fam in text, "family %s missing" % fam
    s = parse(text)
    assert ("sluice_cache_hits_total", frozenset({("kind", "exact")})) in s
    assert ("sluice_cache_hits_total", frozenset({("kind", "semantic")})) in s
    for fam in ("sluice_cache_misses_total", "sluice_cache_stores_total", "sluice_cache_evictions_total",
                "sluice_cache_bytes"):
        for kind in ("exact", "semantic"):
            assert (fam, frozenset({("kind", kind)})) in s, (fam, kind)
    # nothing queued here (no caps): the family is there, with no series yet (they are by endpoint)
    assert not [k for k in s if k[0] == "sluice_queue_wait_seconds_count"], s
    assert all(v == 0 for k, v in s.items() if k[0] == "sluice_queue_length"), s
    assert ("sluice_usage_write_failures_total", frozenset()) in s
    assert ("sluice_access_log_dropped_total", frozenset()) in s
    assert ("sluice_trace_spans_dropped_total", frozenset()) in s
    assert val(s, "sluice_replica_up", endpoint="ep", replica=c.ok.url) == 1
    assert val(s, "sluice_replica_circuit_open", endpoint="ep", replica=c.ok.url) == 0
    assert ("sluice_active_requests", frozenset({("endpoint", "ep")})) in s
    assert d_build(s)
    assert total(s, "sluice_route_requests_total", route="_unknown") >= 1
    assert total(s, "sluice_requests_total", model="_none") >= 1      # the models listing names no model
    print("   %d lines, %d bytes: promtool silent" % (text.count("\n"), len(body)))


def d_build(s):
    return any(n == "sluice_build_info" and dict(ls).get("version") and v == 1 for (n, ls), v in s.items())


def test_unknown_model_is_never_a_label(c):
    """A model the snapshot does not know is counted as model="_unknown"; the client's string
    appears nowhere on the page."""
    odd = "client-made-up-name-4711"
    r = c.gw.chat(c.key, model=odd)
    assert r.status == 404, r
    text = scrape(c.gw).body.decode()
    assert odd not in text, "the client's model name became a label"
    assert 'model="_unknown"' in text
    assert c.key not in text and "alice" not in text, "a key or user name on the page"


def test_cached_tokens_and_healthd_round(c):
    """direction="cached" counts the usage's cache reads (a Responses call here: its stand-in
    reports input_tokens_details.cached_tokens); sluice-healthd stamps each finished round."""
    before = metrics(c.gw)
    r = c.gw.request("POST", "/v1/responses", {"model": "m", "input": "hi"}, key=c.key,
                     headers={"X-Fake-Behavior": "cache_read_tokens=7"})
    assert r.status == 200, r
    after = metrics(c.gw)
    cached = (val(after, "sluice_tokens_total", model="m", tenant="acme", direction="cached") -
              val(before, "sluice_tokens_total", model="m", tenant="acme", direction="cached"))
    assert cached == 7, cached
    assert d_route(before, after, "/v1/responses", "200") == 1
    assert val(after, "sluice_healthd_last_round_timestamp_seconds") == 0, "no healthd ran yet"
    t0 = time.time()
    hd = Healthd(c.gw, round_ms=300)
    try:
        wait_for(lambda: val(metrics(c.gw), "sluice_healthd_last_round_timestamp_seconds") >= t0 - 1, 10,
                 what="healthd's round on /metrics")
    finally:
        hd.stop()
    stamp = val(metrics(c.gw), "sluice_healthd_last_round_timestamp_seconds")
    assert t0 - 1 <= stamp <= time.time() + 1, (t0, stamp)


def d_route(before, after, route, status):
    return (val(after, "sluice_route_requests_total", route=route, status=status) -
            val(before, "sluice_route_requests_total", route=route, status=status))


def test_counters_survive_kill_9(c):
    """The stored series live in the shared state: a SIGKILLed responder loses nothing and
    its replacement keeps counting (no counter decreases)."""
    for _ in range(4):
        assert c.gw.chat(c.key, model="m").status == 200
    before = metrics(c.gw)
    pids = c.gw.responder_pids()
    os.kill(pids[0], signal.SIGKILL)
    wait_for(lambda: len(c.gw.responder_pids()) >= 2 and pids[0] not in c.gw.responder_pids(), 10,
             what="the killed responder respawned")
    time.sleep(1.2)      # lighttpd's own 500 for the dead socket's first second (issue 13)
    after = metrics(c.gw)
    counters = [k for k in before if k[0].endswith("_total") or k[0].endswith("_count") or k[0].endswith("_bucket")]
    dropped = [k for k in counters if after.get(k, 0.0) < before[k]]
    assert not dropped, "counters decreased after kill -9: %r" % [(k, before[k], after.get(k)) for k in dropped]
    ok = ("sluice_requests_total", frozenset({("model", "m"), ("tenant", "acme"), ("status", "200"), ("code", "")}))
    for _ in range(3):
        r = c.gw.chat(c.key, model="m")
        assert r.status in (200, 500), r
    later = metrics(c.gw)
    assert later[ok] >= before[ok] + 1, (before[ok], later[ok])
    print("   %d counter series kept across the kill; ok requests %d -> %d" % (len(counters), before[ok], later[ok]))


# ---- a second gateway: the token, no tenant labels, 50 models x 20 endpoints ----

N_MODELS, N_ENDPOINTS = 50, 20


def test_token_and_no_tenant_labels_and_render_time(c):
    """metrics.token: 401 without or with a wrong bearer, 200 with it; tenant_labels = false:
    no tenant label anywhere; 50 models x 20 endpoints render in under 5 ms."""
    c.gw2 = Gateway("t0090b", procs=1, threads=8, conf={"metrics": 'token = "s3cret"; tenant_labels = false;'})
    key = setup_tenant(c.gw2, "beta", "bob")
    for e in range(N_ENDPOINTS):
        add_endpoint(c.gw2, "ep%02d" % e, "beta", [c.ok])
    tid = c.gw2.sql("SELECT id FROM tenants WHERE name = 'beta'")[0][0]
    eps = [row[0] for row in c.gw2.sql("SELECT id FROM endpoints ORDER BY id")]
    c.gw2.sql_write_many("INSERT INTO routes (tenant_id, model, endpoint_id) VALUES (?, ?, ?)",
                         [(tid, "model-%02d" % m, e) for m in range(N_MODELS) for e in eps])
    c.gw2.start()

    r = scrape(c.gw2)
    assert r.status == 401 and r.json()["error"]["code"] == "invalid_api_key", r
    r = scrape(c.gw2, token="wrong")
    assert r.status == 401, r
    r = scrape(c.gw2, token="s3cret-and-more")
    assert r.status == 401, r
    # Traffic over every model and (round robin) every endpoint, with all four prompt buckets.
    sizes = [10, 300, 1500, 5000]
    for m in range(N_MODELS):
        for rep in range(2):
            r = c.gw2.chat(key, model="model-%02d" % m, content="w " * sizes[(m + rep) % 4])
            assert r.status == 200, r
    r = scrape(c.gw2, token="s3cret")
    assert r.status == 200, r
    text = r.body.decode()
    assert "tenant=" not in text, "tenant_labels = false, yet: %r" % [l for l in text.splitlines() if "tenant=" in l][:3]
    s = parse(text)
    assert total(s, "sluice_requests_total") == 2 * N_MODELS
    assert len([k for k in s if k[0] == "sluice_replica_up"]) == N_ENDPOINTS
    buckets = {dict(ls)["prompt_bucket"] for (n, ls) in s if n == "sluice_request_duration_seconds_count"}
    assert buckets == {"lt256", "256_1k", "1k_4k", "gt4k"}, buckets
    p = subprocess.run(["promtool", "check", "metrics"], input=r.body, capture_output=True, timeout=30)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), (p.stdout, p.stderr)

    renders, walls = [], []
    for _ in range(20):
        t0 = time.time()
        r = scrape(c.gw2, token="s3cret")
        walls.append((time.time() - t0) * 1000)
        assert r.status == 200, r
        m = re.match(r"render;dur=([0-9.]+)", r.headers.get("server-timing", ""))
        assert m, r.headers
        renders.append(float(m.group(1)))
    renders.sort()
    walls.sort()
    med, worst = renders[len(renders) // 2], renders[-1]
    print("   %d series lines, %d bytes; render median %.3f ms, max %.3f ms; GET over loopback median %.1f ms" % (
        text.count("\n"), len(r.body), med, worst, walls[len(walls) // 2]))
    assert med < 5.0, "rendering took %.3f ms (median of 20), the bound is 5 ms" % med
    assert walls[len(walls) // 2] < 100, "GET /metrics over loopback: %.1f ms" % walls[len(walls) // 2]


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
