#!/usr/bin/env python3
"""t0091-access-log: one JSON line per data-plane request, refusals included, with typed
fields and never the key; SIGHUP reopens the file after a rotation (R-OBS-2, issue 12)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (SRCDIR, Fake, Gateway, add_endpoint, http_request, run_tests, setup_tenant, setup_with,
                     stop_all, wait_for)

MAX_BODY = 65536
UA = "sluice-t0091/1.0 (\"quoted\" \\ back)"
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
STR_OR_NULL = ("tenant", "model", "routed_model", "endpoint", "replica", "code", "affinity", "cache", "user_agent")
INT_OR_NULL = ("user_id", "key_id")
INTS = ("status", "prompt_tokens", "completion_tokens", "retries", "bytes_out")


def build(c):
    c.fake = Fake("t0091")
    c.gw = Gateway("t0091", procs=2, threads=8,
                   conf={"limits": "max_body_bytes = %d; max_response_bytes = 67108864; max_sse_event_bytes = 4194304;"
                         % MAX_BODY})
    c.key = setup_tenant(c.gw, "acme", "alice")
    add_endpoint(c.gw, "ep", "acme", [c.fake])
    c.gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.limited = c.gw.ctl("key", "add", "--user", "alice", "--qps", 1)
    c.log = os.path.join(c.gw.dir, "access.log")
    c.gw.start()
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


# ---- helpers ----

def lines_of(path):
    """Every line of the access log, each parsed (a line that is not one JSON object fails)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return []
    text = raw.decode("utf-8")          # strict: every line must be valid UTF-8
    out = []
    for line in text.splitlines():
        obj = json.loads(line)
        assert isinstance(obj, dict), line
        out.append(obj)
    return out


def logged(c, rid, path=None, timeout=5):
    """The access log line of request rid; exactly one must exist."""
    p = path or c.log
    found = wait_for(lambda: [l for l in lines_of(p) if l.get("request_id") == rid], timeout,
                     what="access log line of %s" % rid)
    time.sleep(0.3)                      # a duplicate would be written by now
    found = [l for l in lines_of(p) if l.get("request_id") == rid]
    assert len(found) == 1, "R-OBS-2: request %s must have ONE access log line, got %d: %r" % (rid, len(found), found)
    return found[0]


def check_types(line):
    assert TS_RE.match(line["ts"]), line
    for k in ("request_id", "method", "path", "client"):
        assert isinstance(line[k], str) and line[k], (k, line)
    for k in STR_OR_NULL:
        assert k in line and (line[k] is None or isinstance(line[k], str)), (k, line)
    for k in INT_OR_NULL:
        assert k in line and (line[k] is None or (isinstance(line[k], int) and line[k] > 0)), (k, line)
    for k in INTS:
        assert isinstance(line[k], int) and not isinstance(line[k], bool) and line[k] >= 0, (k, line)
    assert isinstance(line["latency_ms"], (int, float)) and line["latency_ms"] >= 0, line
    assert line["ttft_ms"] is None or (isinstance(line["ttft_ms"], (int, float)) and line["ttft_ms"] > 0), line
    if "trace_id" in line:
        assert re.match(r"^[0-9a-f]{32}$", line["trace_id"]), line


def send(c, rid, method="POST", path="/v1/chat/completions", body=None, key=None):
    r = c.gw.request(method, path, body, key=key, headers={"X-Request-Id": rid, "User-Agent": UA})
    assert r.headers.get("x-request-id") == rid, "the gateway must echo the client's X-Request-Id: %r" % r
    return r


def chat_body(model="m", content="hello", **extra):
    b = {"model": model, "messages": [{"role": "user", "content": content}]}
    b.update(extra)
    return b


# ---- tests ----

def test_one_line_per_request_with_its_fields_R_OBS_2(c):
    """A 200, a stream, a 401, a 404 (unknown model and unknown path), a 413 and a 429:
    each is one line carrying the client's request id, its status and code, typed fields."""
    ok = send(c, "al-ok", body=chat_body(), key=c.key)
    assert ok.status == 200, ok
    stream = send(c, "al-stream", body=chat_body(stream=True), key=c.key)
    assert stream.status == 200, stream
    bad = send(c, "al-401", body=chat_body(), key="sk-not-a-real-key-0091")
    assert bad.status == 401, bad
    nomodel = send(c, "al-404-model", body=chat_body(model="no-such-model"), key=c.key)
    assert nomodel.status == 404, nomodel
    nopath = send(c, "al-404-path", method="GET", path="/v1/nothing-here", key=c.key)
    assert nopath.status == 404, nopath
    big = send(c, "al-413", body=chat_body(content="x" * (MAX_BODY + 1000)), key=c.key)
    assert big.status == 413, big
    # A key of one call a second: a burst of three has a 429 in it.
    statuses = [send(c, "al-qps-%d" % i, body=chat_body(), key=c.limited["key"]).status for i in range(3)]
    assert 429 in statuses, statuses
    qps_rid = "al-qps-%d" % statuses.index(429)

    line = logged(c, "al-ok")
    check_types(line)
    assert (line["status"], line["code"], line["method"], line["path"]) == (200, None, "POST", "/v1/chat/completions"), line
    assert (line["tenant"], line["model"], line["endpoint"], line["replica"]) == ("acme", "m", "ep", c.fake.url), line
    assert line["routed_model"] and line["user_id"] and line["key_id"], line
    assert line["prompt_tokens"] > 0 and line["completion_tokens"] > 0, line
    assert line["bytes_out"] == len(ok.body), (line, len(ok.body))
    assert line["user_agent"] == UA and line["client"] == "127.0.0.1" and line["retries"] == 0, line
    # the guards ran (validation, rules, context pre-check) and say how long they took
    assert isinstance(line["guard_us"], int) and 0 <= line["guard_us"] < line["latency_ms"] * 1000 + 1000, line
    row = wait_for(lambda: c.gw.usage_events("request_id = 'al-ok'"), 3)[0]
    assert (row["prompt_tokens"], row["completion_tokens"], row["key_id"]) == (
        line["prompt_tokens"], line["completion_tokens"], line["key_id"]), (row, line)

    s = logged(c, "al-stream")
    check_types(s)
    assert s["status"] == 200 and s["ttft_ms"] is not None and s["ttft_ms"] <= s["latency_ms"], s
    assert s["bytes_out"] == len(stream.body), (s, len(stream.body))

    u = logged(c, "al-401")
    check_types(u)
    assert (u["status"], u["code"], u["tenant"], u["key_id"], u["endpoint"]) == (401, "invalid_api_key", None, None, None), u
    assert "guard_us" not in u, u                  # refused before the guards

    m = logged(c, "al-404-model")
    check_types(m)
    assert (m["status"], m["code"], m["model"], m["tenant"]) == (404, "model_not_found", "no-such-model", "acme"), m
    assert m["endpoint"] is None and m["prompt_tokens"] == 0, m

    p = logged(c, "al-404-path")
    check_types(p)
    assert (p["status"], p["code"], p["method"], p["path"]) == (404, "not_found", "GET", "/v1/nothing-here"), p

    b = logged(c, "al-413")
    check_types(b)
    assert (b["status"], b["code"]) == (413, "request_too_large") and b["key_id"] == line["key_id"], (b, line)

    q = logged(c, qps_rid)
    check_types(q)
    assert q["status"] == 429 and q["code"] and q["key_id"] == c.limited["id"], q
    print("   e.g. %s" % json.dumps(line))


def test_never_the_key_and_metrics_not_logged_R_OBS_2(c):
    """The key text is in no line (key_id only); GET /metrics is not a logged request."""
    r = c.gw.request("GET", "/metrics", headers={"X-Request-Id": "al-metrics"})
    send(c, "al-after-metrics", body=chat_body(), key=c.key)
    logged(c, "al-after-metrics")
    with open(c.log, "rb") as f:
        raw = f.read()
    for k in (c.key, c.limited["key"], "sk-not-a-real-key-0091"):
        assert k.encode() not in raw, "R-OBS-2: a key is written in the access log"
    assert b"al-metrics" not in raw, "GET /metrics (%d) must not be in the access log" % r.status


def test_strings_escaped_lines_stay_json_R_OBS_2(c):
    """What a client sends (its model name, invalid UTF-8 included) is escaped: every line
    parses, strictly as UTF-8, and the value reads back as sent."""
    weird = 'we"ird\\mo/del \u00e9\u2603'
    r = send(c, "al-weird", body=chat_body(model=weird), key=c.key)
    assert r.status == 404, r
    assert logged(c, "al-weird")["model"] == weird
    # A model with control characters is refused (400); its line still parses.
    r = send(c, "al-ctl", body=chat_body(model="a\nb\tc\x01d"), key=c.key)
    line = logged(c, "al-ctl")
    assert line["status"] == r.status == 400 and line["model"] in (None, "a\nb\tc\x01d"), (line, r)
    # A header's bytes are the client's too: Latin-1 \xe9 and \xff are no UTF-8.
    r = c.gw.request("POST", "/v1/chat/completions", chat_body(), key=c.key,
                     headers={"X-Request-Id": "al-ua", "User-Agent": "t0091 caf\xe9 \xff\"x"})
    assert r.status == 200, r
    assert logged(c, "al-ua")["user_agent"] == 't0091 caf\ufffd \ufffd"x', logged(c, "al-ua")
    raw = b'{"model": "bad\xffutf\xc3", "messages": [{"role": "user", "content": "x"}]}'
    r = send(c, "al-badutf", body=raw, key=c.key)
    line = logged(c, "al-badutf")      # lines_of decodes strictly: invalid bytes were replaced
    assert line["status"] == r.status, (line, r)
    if r.status == 404:
        assert line["model"].startswith("bad\ufffdutf"), line


def test_sighup_reopens_after_rotation_R_OBS_2(c):
    """logrotate's way: the file is moved, each responder gets SIGHUP, the next lines go to
    a new file by the configured name (none to the moved one)."""
    before = c.gw.log_text().count("SIGHUP: configuration re-read, log files reopened")
    rotated = c.log + ".1"
    os.rename(c.log, rotated)
    pids = c.gw.responder_pids()
    assert len(pids) == c.gw.procs, pids
    for pid in pids:
        os.kill(pid, signal.SIGHUP)
    wait_for(lambda: c.gw.log_text().count("SIGHUP: configuration re-read, log files reopened") >= before + len(pids), 3,
             what="every responder to reopen its logs")
    assert c.gw.responder_pids() == pids, "SIGHUP must not end a responder"
    rids = ["al-rot-%d" % i for i in range(8)]      # several, so both responders write
    for rid in rids:
        assert send(c, rid, body=chat_body(), key=c.key).status == 200
    for rid in rids:
        logged(c, rid, timeout=3)
    old = [l["request_id"] for l in lines_of(rotated)]
    assert not set(rids) & set(old), "lines after SIGHUP went to the rotated file: %r" % old
    assert "al-ok" in old, "the rotated file keeps the lines before the rotation"


def test_logrotate_config(c):
    """conf/sluice.logrotate has the rotation the issue asks for, and logrotate itself
    accepts it (/usr/sbin/logrotate: the package logrotate, which ./quickstart test installs)."""
    path = os.path.join(SRCDIR, "conf", "sluice.logrotate")
    with open(path) as f:
        text = f.read()
    for word in ("daily", "rotate 14", "compress", "delaycompress", "missingok", "notifempty", "postrotate",
                 "pkill -HUP -x sluice-fcgi", "endscript"):
        assert word in text, "sluice.logrotate lacks %r" % word
    lr = "/usr/sbin/logrotate"
    assert os.path.exists(lr), "no %s: apt-get install logrotate (./quickstart test does)" % lr
    d = tempfile.mkdtemp(prefix="t0091-lr-")
    try:
        conf = os.path.join(d, "sluice")
        with open(conf, "w") as f:
            f.write(text.replace("/var/lib/sluice", d))
        for name in ("access.log", "sluice-fcgi.log", "trace.log", "sluice-healthd.log"):
            open(os.path.join(d, name), "w").write("{}\n")
        p = subprocess.run([lr, "-d", "-s", os.path.join(d, "state"), conf], capture_output=True, text=True,
                           timeout=30)
        out = p.stdout + p.stderr
        assert p.returncode == 0 and "error" not in out.lower(), out
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
