#!/usr/bin/env python3
"""t0095-grafana: conf/grafana-sluice.json is an importable dashboard whose every query asks
for series GET /metrics really serves (issue 12).

The dashboard: Grafana's import shape (a ${DS_PROMETHEUS} input that every panel and query
uses, unique panel ids, grid positions) and a panel for each subject the issue names. The
series: every metric name in every `expr` (and the template variable's query), with
_bucket/_sum/_count taken off where the family is a histogram of lib/metrics.def, must be a
family of that file and appear in a real scrape of GET /metrics after traffic (plain,
streamed, an upstream error, session affinity, model auto, sluice-healthd rounds); and
promtool parses every query."""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import SRCDIR, Ctx, Fake, Gateway, Healthd, add_endpoint, run_tests, setup_with, setup_tenant, wait_for

DASHBOARD = os.path.join(SRCDIR, "conf", "grafana-sluice.json")
DS_UID = "${DS_PROMETHEUS}"
# Each subject of the issue and a family its panel must query.
SUBJECTS = {
    "request rate by model": "sluice_requests_total",
    "p50/p95 latency": "sluice_request_duration_seconds",
    "p50/p95 TTFT": "sluice_ttft_seconds",
    "tokens by direction": "sluice_tokens_total",
    "upstream attempts by outcome": "sluice_upstream_attempts_total",
    "active requests": "sluice_active_requests",
    "replica up": "sluice_replica_up",
    "replica circuit": "sluice_replica_circuit_open",
    "replica queue": "sluice_replica_queue_depth",
    "replica KV cache": "sluice_replica_kv_cache_usage_ratio",
    "session affinity": "sluice_session_affinity_total",
    "auto routing": "sluice_auto_routing_total",
    "usage writer backlog": "sluice_usage_writer_backlog",
    "healthd last round age": "sluice_healthd_last_round_timestamp_seconds",
    "queue length": "sluice_queue_length",
    "queue wait": "sluice_queue_wait_seconds",
    "queue outcomes": "sluice_queue_requests_total",
}


def families():
    """name -> type (COUNTER, GAUGE, HISTOGRAM) from lib/metrics.def."""
    with open(os.path.join(SRCDIR, "lib", "metrics.def")) as f:
        text = f.read()
    return {m.group(1): m.group(2) for m in re.finditer(r'METRIC\(\s*\w+,\s*"([a-z0-9_]+)",\s*(\w+),', text)}


def load():
    with open(DASHBOARD) as f:
        return json.load(f)


def all_panels(d):
    for p in d["panels"]:
        yield p
        for sub in p.get("panels", []):
            yield sub


def queries(d):
    """(where, PromQL) for every panel target and template variable."""
    out = []
    for p in all_panels(d):
        for t in p.get("targets", []):
            out.append(("panel %r %s" % (p.get("title"), t.get("refId")), t["expr"]))
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        out.append(("variable %s" % v["name"], q["query"] if isinstance(q, dict) else q))
    return out


def wanted(d, fams):
    """The families the queries name: {family: [where]}."""
    names = {}
    for where, expr in queries(d):
        for n in re.findall(r"sluice_[a-z0-9_]+", expr):
            base = re.sub(r"_(bucket|sum|count)$", "", n)
            fam = base if base != n and fams.get(base) == "HISTOGRAM" else n
            assert fam in fams, "%s queries %s, which is no family of lib/metrics.def" % (where, n)
            if fam != n:
                assert n.endswith("_bucket") or n.endswith("_sum") or n.endswith("_count"), (where, n)
            names.setdefault(fam, []).append(where)
    return names


def build(c):
    c.fakes = [Fake("graf-a"), Fake("graf-b")]
    gw = c.gw = Gateway("t0095", procs=2, threads=8)
    c.key = setup_tenant(gw, "acme", "alice")
    gw.ctl("endpoint", "add", "ep", "--tenant", "acme", "--algorithm", "least_connections", "--affinity", "on")
    for f in c.fakes:
        gw.ctl("replica", "add", "ep", f.url, "--engine", "vllm")
        f.metrics(waiting=1, kv=0.25, running=1)
    gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    gw.ctl("policy", "set", "m", "--purpose", "chat", "--quality", 60)
    gw.ctl("settings", "set", "auto_routing_enabled", "true")
    gw.start()
    c.hd = Healthd(gw, round_ms=200)
    traffic(c)
    return c


def teardown(c):
    if c:
        for p in [getattr(c, "hd", None), getattr(c, "gw", None)] + list(getattr(c, "fakes", [])):
            if p:
                p.stop()


def traffic(c):
    gw = c.gw
    sid = None
    for i in range(6):
        h = {"X-Session-Id": sid} if sid else None
        r = gw.chat(c.key, content="turn %d" % i, headers=h)
        assert r.status == 200, r
        sid = r.headers.get("x-session-id") or sid
    st, _, chunks = gw.stream_raw(c.key, {"model": "m", "stream": True,
                                          "messages": [{"role": "user", "content": "stream please"}]})
    assert st == 200 and b"[DONE]" in b"".join(b for _, b in chunks), chunks
    r = gw.chat(c.key, content="[[fake status=400]] bad")
    assert r.status == 400, r
    wait_for(lambda: gw.chat(c.key, model="auto").status == 200, 5, what="model auto on")
    # Two requests at once on an endpoint capped at 1: one waits, so the queue's series exist.
    gw.ctl("endpoint", "set", "ep", "--max-concurrency", 1)
    time.sleep(0.8)
    ts = [threading.Thread(target=gw.chat, args=(c.key,), kwargs={"headers": {"X-Fake-Behavior": "ttfb_ms=300"}})
          for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)


def scrape(c):
    r = c.gw.request("GET", "/metrics")
    assert r.status == 200, r
    assert r.headers.get("content-type", "").startswith("text/plain"), r.headers
    return r.body.decode()


def exposed(text):
    """Family names in a Prometheus text exposition: # TYPE lines and sample names."""
    names = set()
    for line in text.split("\n"):
        m = re.match(r"# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) ", line)
        if m:
            names.add(m.group(1))
        elif line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def test_dashboard_is_importable(c):
    d = load()
    inputs = {i["name"]: i for i in d["__inputs"]}
    assert inputs["DS_PROMETHEUS"]["type"] == "datasource" and inputs["DS_PROMETHEUS"]["pluginId"] == "prometheus", inputs
    assert d["title"] and d["uid"] and isinstance(d["schemaVersion"], int), d.get("title")
    assert "id" not in d or d["id"] is None, "an exported dashboard has no database id"
    ids = [p["id"] for p in all_panels(d)]
    assert len(ids) == len(set(ids)), ids
    for p in all_panels(d):
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, (p["title"], g)
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == DS_UID, (p["title"], p["datasource"])
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == DS_UID and t["expr"].strip(), (p["title"], t)
    assert "${DS_PROMETHEUS}" in json.dumps(d["templating"]), d["templating"]


def test_dashboard_covers_the_subjects(c):
    d, fams = load(), families()
    names = wanted(d, fams)
    for subject, fam in SUBJECTS.items():
        assert fam in names, "no panel for %s (%s)" % (subject, fam)
    exprs = [e for _, e in queries(d)]
    for fam in ("sluice_request_duration_seconds", "sluice_ttft_seconds"):
        for qv in ("0.5", "0.95"):
            assert any(re.search(r"histogram_quantile\(%s, .*%s_bucket" % (re.escape(qv), fam), e) for e in exprs), (fam, qv)
    assert any("sluice_tokens_total" in e and "direction" in e for e in exprs), "tokens by direction"
    assert any("sluice_upstream_attempts_total" in e and "outcome" in e for e in exprs), "attempts by outcome"
    assert any("time()" in e and "sluice_healthd_last_round_timestamp_seconds" in e for e in exprs), "healthd age"


def test_every_query_is_valid_promql(c):
    """promtool parses every panel query (as a recording rule; Grafana's $__rate_interval and
    $model filled in as Grafana would)."""
    rules = []
    for i, (where, expr) in enumerate(queries(load())):
        if where.startswith("variable"):
            continue                        # label_values() is Grafana's, not PromQL
        e = expr.replace("$__rate_interval", "5m").replace("$model", ".*")
        rules.append("      - record: sluice:dashboard_check_%d\n        expr: %s" % (i, json.dumps(e)))
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n" + "\n".join(rules) + "\n")
    try:
        p = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True, timeout=30)
    finally:
        os.unlink(f.name)
    assert p.returncode == 0 and ("SUCCESS: %d rules" % len(rules)) in p.stdout, (p.stdout, p.stderr)


def test_every_queried_metric_is_served(c):
    d, fams = load(), families()
    names = wanted(d, fams)
    # healthd's rounds and scrapes land in the shared state; wait for one, then scrape.
    wait_for(lambda: "sluice_healthd_last_round_timestamp_seconds" in exposed(scrape(c)), 8,
             what="a healthd round in /metrics")
    got = exposed(scrape(c))
    missing = {fam: where for fam, where in names.items() if fam not in got}
    assert not missing, "queried but not in GET /metrics: %s" % json.dumps(missing, indent=1)
    # The histograms are exposed as histograms: the suffixed samples the queries use exist.
    text = scrape(c)
    for fam in names:
        if fams[fam] == "HISTOGRAM":
            assert re.search(r"^%s_bucket\{.*le=\"\+Inf\"" % fam, text, re.M), fam


if __name__ == "__main__":
    run_tests(globals(), lambda: setup_with(build, teardown), teardown)
