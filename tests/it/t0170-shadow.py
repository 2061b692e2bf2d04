#!/usr/bin/env python3
"""t0170-shadow: shadow traffic of issue 18 (R-SHD-1). A route mirrors a share of its
requests to another endpoint (OpenAI or Anthropic protocol, its own adapter and replica):
the client's bytes and timing do not change whether the mirror is fast, slow, hangs,
fails or dies mid-stream; mirrors are never billed nor counted against the caller
(usage_events.shadow = 1 rows, out of /api/v1/tenant/usage and the key's counters); the
pool-wide cap shadow.max_inflight drops the excess (counted); metrics and one comparison
log line per mirrored request."""
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (ApiSession, add_endpoint, add_user_with_password, ctl_fail, expect, Fake, fcgi_request,
                     fcgi_sockets, Gateway, run_tests, setup_with, stop_all, wait_for)

PW = "alice-pass-1"
ROOT_PW = "root-pass-1"
TIMEOUT_MS = 1500      # shadow.timeout_ms of this gateway
CAP = 2                # shadow.max_inflight of this gateway


def setup():
    return setup_with(build, teardown)


def build(c):
    c.main, c.mo, c.ma = Fake("main"), Fake("mirror-oa"), Fake("mirror-ant")
    c.gw = Gateway("t0170", procs=2, threads=8,
                   conf={"shadow": "timeout_ms = %d; max_inflight = %d;" % (TIMEOUT_MS, CAP)})
    c.gw.ctl("tenant", "add", "acme")
    add_user_with_password(c.gw, "alice", "acme", "member", PW)
    add_user_with_password(c.gw, "root", "default", "operator", ROOT_PW)
    k = c.gw.ctl("key", "add", "--user", "alice", "--daily-limit", "100000", "--monthly-token-quota", "100000000")
    c.key, c.key_id = k["key"], k["id"]
    add_endpoint(c.gw, "ep", "acme", [c.main])
    add_endpoint(c.gw, "mo", "acme", [c.mo])
    c.gw.ctl_secret("sk-ant-test", "endpoint", "add", "ma", "--tenant", "acme", "--protocol", "anthropic")
    c.gw.ctl("replica", "add", "ma", c.ma.url)
    c.route = c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme", "--mirror", "mo", "--mirror-percent", "100")
    # A standby route of the same model on the Anthropic endpoint: never chosen while ep
    # answers (weight 0), it names the model the mirror gets there.
    c.gw.ctl("route", "add", "m", "ma", "--tenant", "acme", "--priority", "100", "--weight", "0",
             "--target-model", "claude-shadow")
    c.gw.ctl("endpoint", "add", "other", "--tenant", "default")
    c.gw.start()
    c.rid = c.route["id"]
    return c


def teardown(c):
    stop_all(c, "gw", "main", "mo", "ma")


def set_mirror(c, ep, percent=100):
    c.gw.ctl("route", "set", c.rid, "--mirror", ep, "--mirror-percent", percent)
    time.sleep(0.6)           # config.poll_ms 250: both responders have the new snapshot


def shadow_lines(c, rid=None):
    lines = [l for l in c.gw.log_text().split("\n") if " shadow route=" in l]
    return [l for l in lines if rid is None or ("request %s:" % rid) in l]


def wait_line(c, request_id, timeout=5.0):
    wait_for(lambda: shadow_lines(c, request_id), timeout=timeout, what="shadow line of %s" % request_id)
    return shadow_lines(c, request_id)[0]


def metrics(c):
    return c.gw.request("GET", "/metrics").body.decode()


def metric(c, name, **labels):
    text = metrics(c)
    total = 0.0
    for line in text.split("\n"):
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(('%s="%s"' % kv) in line for kv in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def chat(c, stream=False, content="hello"):
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    if stream:
        body["stream"] = True
        t0 = time.time()
        st, h, chunks = c.gw.stream_raw(c.key, body)
        return st, h, b"".join(b for _, b in chunks), time.time() - t0
    t0 = time.time()
    r = c.gw.request("POST", "/v1/chat/completions", body, key=c.key)
    return r.status, r.headers, r.body, time.time() - t0


def stable(body):
    """A client answer without what differs between any two answers (ids, times)."""
    return re.sub(rb'"(id|created)":("[^"]*"|\d+)', b'"\\1":_', body)


# ---- configuration ---------------------------------------------------------------------------

def test_route_flags_api_and_checks(c):
    assert c.route["mirror"] == "mo" and c.route["mirror_percent"] == 100, c.route
    r = c.gw.ctl("route", "set", c.rid, "--mirror-percent", 40)
    assert r["mirror"] == "mo" and r["mirror_percent"] == 40, r
    code, err, _ = ctl_fail(c.gw, "route", "set", c.rid, "--mirror-percent", 101)
    assert err["param"] == "mirror_percent", err
    code, err, _ = ctl_fail(c.gw, "route", "set", c.rid, "--mirror", "ep")
    assert err["param"] == "mirror" and "own endpoint" in err["message"], err
    code, err, _ = ctl_fail(c.gw, "route", "set", c.rid, "--mirror", "other")
    assert err["param"] == "mirror" and "another tenant" in err["message"], err
    code, err, _ = ctl_fail(c.gw, "route", "set", c.rid, "--mirror", "nope")
    assert err["param"] in ("endpoint", "mirror"), err
    r = c.gw.ctl("route", "set", c.rid, "--mirror", "none")
    assert r["mirror"] is None and r["mirror_percent"] == 0, r
    # the API: route objects carry mirror and mirror_percent; PATCH and POST accept them
    root = ApiSession(c.gw, "root", ROOT_PW)
    got = expect(root.patch("/api/v1/model-routes/%d" % c.rid, {"mirror": "ma", "mirror_percent": 25}), 200)
    assert got["mirror"] == "ma" and got["mirror_percent"] == 25, got
    got = expect(root.get("/api/v1/model-routes/%d" % c.rid), 200)
    assert got["mirror"] == "ma" and got["mirror_percent"] == 25, got
    expect(root.patch("/api/v1/model-routes/%d" % c.rid, {"mirror_percent": -1}), 400, param="mirror_percent")
    got = expect(root.patch("/api/v1/model-routes/%d" % c.rid, {"mirror": None}), 200)
    assert got["mirror"] is None and got["mirror_percent"] == 0, got
    made = expect(root.post("/api/v1/model-routes", {"model": "m2", "endpoint": "ep", "tenant": "acme",
                                                      "mirror": "mo", "mirror_percent": 7}), 200)
    assert made["mirror"] == "mo" and made["mirror_percent"] == 7, made
    listed = expect(root.get("/api/v1/model-routes?model=m2"), 200)
    assert listed["data"][0]["mirror"] == "mo", listed
    expect(root.delete("/api/v1/model-routes/%d" % made["id"]), 200)
    set_mirror(c, "mo")
    assert c.gw.sql("SELECT mirror_endpoint_id, mirror_percent FROM routes WHERE id = ?", c.rid)[0][1] == 100


# ---- the mirror gets the request, the client gets its own answer ---------------------------

def test_openai_mirror_copy_and_comparison(c):
    c.mo.behavior("")
    c.mo.reset()
    st, h, body, _ = chat(c)
    assert st == 200 and h.get("x-routed-endpoint") == "ep", (st, h)
    rid = h["x-request-id"]
    line = wait_line(c, rid)
    assert "mirror=mo outcome=ok" in line and "status_match=1" in line and "exact_match=1" in line, line
    assert "completion_tokens=3/3" in line and "token_ratio=1.000" in line, line
    assert re.search(r"ttft_delta_ms=-?\d+ latency_delta_ms=-?\d+", line), line
    last = c.mo.stats()["last"]
    assert last["path"] == "/v1/chat/completions", last
    sent = json.loads(last["body"])
    assert sent["model"] == "m" and sent["messages"][0]["content"] == "hello", sent
    # the mirror's own usage event, apart from the client's
    wait_for(lambda: c.gw.usage_events("request_id = ? AND shadow = 1", rid), what="the shadow event")
    ev = c.gw.usage_events("request_id = ?", rid)
    assert sorted(e["shadow"] for e in ev) == [0, 1], ev
    sh = [e for e in ev if e["shadow"] == 1][0]
    assert sh["endpoint_id"] != [e for e in ev if e["shadow"] == 0][0]["endpoint_id"], ev
    assert sh["completion_tokens"] == 3 and sh["status"] == 200, sh


def test_anthropic_mirror_of_an_openai_request(c):
    set_mirror(c, "ma")
    c.ma.behavior("")
    c.ma.reset()
    st, h, body, _ = chat(c, stream=True)
    assert st == 200 and b"data: [DONE]" in body, body
    rid = h["x-request-id"]
    line = wait_line(c, rid)
    assert "mirror=ma outcome=ok" in line and "status_match=1" in line and "exact_match=na" in line, line
    last = c.ma.stats()["last"]
    assert last["path"] == "/v1/messages", last
    sent = json.loads(last["body"])
    assert sent["model"] == "claude-shadow" and sent["stream"] is True, sent
    assert last["headers"].get("x-api-key") == "sk-ant-test", last["headers"]
    m = re.search(r"completion_tokens=(\d+)/(\d+)", line)
    assert m and int(m.group(2)) > 0, line
    # non-stream: the answers' texts compared across protocols
    st, h, body, _ = chat(c)
    line = wait_line(c, h["x-request-id"])
    assert "mirror=ma outcome=ok" in line and re.search(r"exact_match=[01]", line), line
    # an Anthropic caller (/v1/messages) on the OpenAI main endpoint, mirrored natively
    c.ma.reset()
    r = c.gw.request("POST", "/v1/messages", {"model": "m", "max_tokens": 50,
                                              "messages": [{"role": "user", "content": "hello"}]}, key=c.key)
    assert r.status == 200 and r.json()["type"] == "message", r
    line = wait_line(c, r.headers["x-request-id"])
    assert "mirror=ma outcome=ok" in line and "status_match=1" in line, line
    last = c.ma.stats()["last"]
    assert last["path"] == "/v1/messages" and json.loads(last["body"])["model"] == "claude-shadow", last
    set_mirror(c, "mo")


# ---- the client's bytes and timing do not depend on the mirror -----------------------------

def baseline(c, stream, n=5):
    set_mirror(c, "mo", 0)
    runs = [chat(c, stream=stream) for _ in range(n)]
    set_mirror(c, "mo", 100)
    assert all(r[0] == 200 for r in runs), runs
    return stable(runs[0][2]), statistics.median(r[3] for r in runs)


def check_unchanged(c, behavior, stream, outcome, line_within):
    want, t_base = baseline(c, stream)
    c.mo.behavior(behavior)
    try:
        results = []
        for _ in range(2):
            st, h, body, took = chat(c, stream=stream)
            assert st == 200, (st, body)
            assert stable(body) == want, (behavior, body, want)
            assert took < t_base + 0.3, "mirror %s delayed the client: %.3fs vs %.3fs" % (behavior, took, t_base)
            results.append((h["x-request-id"], time.time()))
        for rid, done in results:
            line = wait_line(c, rid, timeout=line_within + 3)
            assert "outcome=%s" % outcome in line, (behavior, line)
    finally:
        c.mo.behavior("")
    return results


def test_slow_mirror_does_not_delay(c):
    for stream in (False, True):
        check_unchanged(c, "ttfb_ms=800", stream, "ok", 1)


def test_hanging_mirror_is_cut_by_its_timeout(c):
    before = metric(c, "sluice_shadow_requests_total", route=str(c.rid), outcome="timeout")
    rid, done = check_unchanged(c, "hang=1", True, "timeout", TIMEOUT_MS / 1000)[0]
    assert metric(c, "sluice_shadow_requests_total", route=str(c.rid), outcome="timeout") >= before + 2
    time.sleep(TIMEOUT_MS / 1000 + 0.5)      # the hung mirrors gave their places back


def test_failing_mirror(c):
    check_unchanged(c, "status=503", False, "error", 1)
    rid = check_unchanged(c, "status=500", True, "error", 1)[0][0]
    assert "status_match=0" in wait_line(c, rid), wait_line(c, rid)


def test_mirror_dying_mid_stream_reports_promptly(c):
    results = check_unchanged(c, "die_after=1 gap_ms=50", True, "error", 1)
    for rid, done in results:
        assert "status_match=1" in wait_line(c, rid)    # it answered 200, then died
    # promptly: the line is there as soon as both are done, not at a timeout
    c.mo.behavior("die_after=1 gap_ms=50")
    try:
        st, h, body, _ = chat(c, stream=True)
        t0 = time.time()
        line = wait_line(c, h["x-request-id"], timeout=3)
        assert "outcome=error" in line and time.time() - t0 < 1.0, (line, time.time() - t0)
    finally:
        c.mo.behavior("")
    # the Anthropic mirror dying mid-stream, too
    set_mirror(c, "ma")
    c.ma.behavior("die_after=1")
    try:
        st, h, body, _ = chat(c, stream=True)
        assert st == 200 and b"data: [DONE]" in body, body
        t0 = time.time()
        line = wait_line(c, h["x-request-id"], timeout=2)
        assert "mirror=ma outcome=error" in line and time.time() - t0 < 2, line
    finally:
        c.ma.behavior("")
        set_mirror(c, "mo")


# ---- never billed, never counted ------------------------------------------------------------

def test_no_usage_or_quota_for_the_caller(c):
    time.sleep(1.0)           # the usage writers have flushed everything so far
    events = c.gw.usage_events("key_id = ?", c.key_id)
    client = [e for e in events if e["shadow"] == 0]
    shadow = [e for e in events if e["shadow"] == 1]
    assert shadow and client, (len(client), len(shadow))
    # the key's counters: calls and tokens of the client's requests only
    day_calls = c.gw.sql("SELECT calls FROM quota_counters WHERE key_id = ? AND period LIKE 'd:%'", c.key_id)
    assert day_calls and day_calls[0][0] == len(client), (day_calls, len(client), len(shadow))
    month = c.gw.sql("SELECT calls, tokens FROM quota_counters WHERE key_id = ? AND period LIKE 'm:%'", c.key_id)
    billed = sum(e["prompt_tokens"] + e["completion_tokens"] for e in client)
    assert month and month[0][1] == billed, (month, billed)
    # the daily aggregates and the usage report
    daily = c.gw.sql("SELECT SUM(requests), SUM(prompt_tokens), SUM(completion_tokens) FROM usage_daily WHERE key_id = ?",
                     c.key_id)[0]
    assert daily[0] == len(client), (daily, len(client))
    assert daily[1] + daily[2] == billed, (daily, billed)
    alice = ApiSession(c.gw, "alice", PW)
    rep = expect(alice.get("/api/v1/tenant/usage?group_by=model"), 200)
    assert rep["totals"]["requests"] == len(client), (rep, len(client))
    assert rep["totals"]["prompt_tokens"] + rep["totals"]["completion_tokens"] == billed, rep
    # the Requests view, its single rows and the key's counters: the client's only
    listed = [x["id"] for x in expect(alice.get("/api/v1/requests?limit=500"), 200)["data"]]
    assert not set(listed) & {e["id"] for e in shadow} and set(listed) >= {e["id"] for e in client}, listed
    expect(alice.get("/api/v1/requests/%d" % shadow[0]["id"]), 404, "not_found")
    expect(alice.get("/api/v1/requests/%d" % client[0]["id"]), 200)
    key = expect(alice.get("/api/v1/tenant/api-keys/%d" % c.key_id), 200)
    assert key["today"]["requests"] == len(client) and key["month"]["tokens"] == billed, (key, len(client), billed)
    # the billed-tokens metric counts the client's tokens only
    billed_metric = metric(c, "sluice_tokens_total", model="m", direction="completion")
    assert billed_metric == sum(e["completion_tokens"] for e in client), (billed_metric, client)


# ---- the pool-wide cap -----------------------------------------------------------------------

def test_cap_drops_excess_mirrors(c):
    time.sleep(TIMEOUT_MS / 1000 + 0.5)
    c.mo.reset()
    c.mo.behavior("hang=1")
    dropped = metric(c, "sluice_shadow_requests_total", route=str(c.rid), outcome="dropped")
    try:
        # alternately to each responder process: a cap per process would let 2 x CAP through
        socks = fcgi_sockets(c.gw)
        assert len(socks) == 2, socks
        n = 6
        rids = []
        body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        for i in range(n):
            t0 = time.time()
            r = fcgi_request(socks[i % 2], "POST", "/v1/chat/completions", body,
                             {"Authorization": "Bearer " + c.key, "Content-Type": "application/json"})
            assert r.status == 200 and time.time() - t0 < 1.0, (r, time.time() - t0)
            rids.append(r.headers["x-request-id"])
        pids = set()
        for rid in rids:
            line = wait_line(c, rid, timeout=TIMEOUT_MS / 1000 + 3)
            pids.add(re.search(r"sluice-fcgi\[(\d+)\]", line).group(1))
        assert len(pids) == 2, pids
        lines = [shadow_lines(c, rid)[0] for rid in rids]
        timed_out = [l for l in lines if "outcome=timeout" in l]
        refused = [l for l in lines if "outcome=dropped" in l]
        assert len(timed_out) == CAP and len(refused) == n - CAP, lines
        # the first request of each process took a place: the cap is the pool's
        assert "outcome=timeout" in lines[0] and "outcome=timeout" in lines[1], lines
        assert metric(c, "sluice_shadow_requests_total", route=str(c.rid), outcome="dropped") == dropped + n - CAP
        assert c.mo.stats()["requests"] == CAP
    finally:
        c.mo.behavior("")
    time.sleep(TIMEOUT_MS / 1000 + 0.5)


def test_percent_share(c):
    set_mirror(c, "mo", 0)
    c.mo.reset()
    for _ in range(3):
        assert chat(c)[0] == 200
    time.sleep(0.5)
    assert c.mo.stats()["requests"] == 0
    set_mirror(c, "mo", 50)
    rids = [chat(c)[1]["x-request-id"] for _ in range(20)]
    time.sleep(1.0)
    got = c.mo.stats()["requests"]
    assert 2 <= got <= 18, got
    assert got == sum(1 for r in rids if shadow_lines(c, r)), (got, rids)
    set_mirror(c, "mo", 100)


def test_metrics(c):
    text = metrics(c)
    r = 'route="%d"' % c.rid
    for family in ("sluice_shadow_requests_total", "sluice_shadow_request_duration_seconds_bucket",
                   "sluice_shadow_ttft_seconds_bucket", "sluice_shadow_tokens_total", "sluice_shadow_comparisons_total"):
        assert re.search(r"^%s\{[^}]*%s" % (family, r), text, re.M), family
    for outcome in ("ok", "error", "timeout", "dropped"):
        assert metric(c, "sluice_shadow_requests_total", route=str(c.rid), outcome=outcome) > 0, outcome
    assert metric(c, "sluice_shadow_tokens_total", route=str(c.rid), direction="completion") > 0
    assert metric(c, "sluice_shadow_comparisons_total", route=str(c.rid), status_match="false") > 0
    assert metric(c, "sluice_shadow_comparisons_total", route=str(c.rid), exact_match="true") > 0


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
