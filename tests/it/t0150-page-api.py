#!/usr/bin/env python3
"""t0150-page-api: the admin API the /inference page is built on (issue 16, R-ADM-3).

Real requests through the gateway to a stand-in upstream, then, through the CGI API:
GET /api/v1/requests rows against the usage events in the database, each filter, keyset
pages, 404 and scoping by role; GET /api/v1/system/settings-schema against every row of
lib/settings.c."""
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (SRCDIR, ApiSession, Fake, Gateway, add_endpoint, add_user_with_password, expect, run_tests,
                     setup_with, stop_all, wait_for)

PW = {"root": "root-pass-1", "adm_a": "adm-a-pass", "mem_a": "mem-a-pass", "adm_b": "adm-b-pass"}
ROW_FIELDS = {"id", "ts_ms", "request_id", "status", "error_code", "model", "routed_model", "path", "tenant_id",
              "user_id", "user", "key_id", "key", "endpoint_id", "endpoint", "replica_id", "replica",
              "prompt_tokens", "completion_tokens", "cache_read_tokens", "reasoning_tokens", "ttft_ms",
              "latency_ms", "queue_ms", "retries", "stream", "cached", "cache", "affinity", "finish_reason",
              "content_rule", "estimated"}


def build(c):
    c.fake = Fake("t0150")
    gw = c.gw = Gateway("t0150", procs=1, threads=4)
    gw.ctl("tenant", "add", "ta")
    gw.ctl("tenant", "add", "tb")
    for name, tenant, role in (("root", "default", "operator"), ("adm_a", "ta", "admin"),
                               ("mem_a", "ta", "member"), ("adm_b", "tb", "admin")):
        add_user_with_password(gw, name, tenant, role, PW[name])
    gw.ctl("user", "add", "mem_a2", "--tenant", "ta")
    gw.ctl("user", "add", "mem_b", "--tenant", "tb")
    c.key_a = gw.ctl("key", "add", "--user", "mem_a", "--name", "ci-bot")["key"]
    c.key_a2 = gw.ctl("key", "add", "--user", "mem_a2")["key"]
    c.key_b = gw.ctl("key", "add", "--user", "mem_b")["key"]
    for t in ("ta", "tb"):
        add_endpoint(gw, "ep-" + t, t, [c.fake])
        gw.ctl("route", "add", "m", "ep-" + t, "--tenant", t)
    gw.ctl("route", "add", "m2", "ep-ta", "--tenant", "ta", "--target-model", "m2-upstream")
    c.ids = {r["name"]: r["id"] for r in gw.ctl("list", "users")["users"]}
    c.tid = {t["name"]: t["id"] for t in gw.ctl("list", "tenants")["tenants"]}
    c.eid = {e["name"]: e["id"] for e in gw.ctl("list", "endpoints")["endpoints"]}
    gw.start()
    c.root, c.adm_a, c.mem_a, c.adm_b = (ApiSession(gw, n, PW[n]) for n in ("root", "adm_a", "mem_a", "adm_b"))
    wait_for(lambda: chat(c, c.key_a, "warm up").status == 200, 5, what="key live")
    for i in range(4):
        assert chat(c, c.key_a, "hello %d" % i).status == 200
    assert chat(c, c.key_a, "bad [[fake status=400]]").status == 400
    assert chat(c, c.key_a, "routed", model="m2").status == 200
    assert chat(c, c.key_a, "unknown", model="no-such-model").status == 404
    for i in range(2):
        assert chat(c, c.key_a2, "a2 %d" % i).status == 200
        assert chat(c, c.key_b, "b %d" % i).status == 200
    wait_for(lambda: len(gw.usage_events()) == 12, 10, what="12 usage events written")
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


def chat(c, key, content, model="m"):
    b = {"model": model, "messages": [{"role": "user", "content": content}]}
    return c.gw.request("POST", "/v1/chat/completions", b, key=key)


def events(c, where="1=1", *params):
    """The usage events newest first, as the API orders them."""
    return sorted(c.gw.usage_events(where, *params), key=lambda e: (e["ts_ms"], e["id"]), reverse=True)


def ids(r):
    return [x["id"] for x in expect(r, 200)["data"]]


def test_rows_match_the_usage_events(c):
    body = expect(c.root.get("/api/v1/requests"), 200)
    assert body["next"] is None, body
    ev = events(c)
    assert [x["id"] for x in body["data"]] == [e["id"] for e in ev], (body, ev)
    by_id = {e["id"]: e for e in ev}
    names = {v: k for k, v in c.ids.items()}
    for row in body["data"]:
        assert set(row) == ROW_FIELDS, set(row) ^ ROW_FIELDS
        e = by_id[row["id"]]
        for f in ("ts_ms", "request_id", "status", "error_code", "model", "routed_model", "path", "tenant_id",
                  "user_id", "key_id", "endpoint_id", "replica_id", "prompt_tokens", "completion_tokens",
                  "cache_read_tokens", "reasoning_tokens", "ttft_ms", "latency_ms", "queue_ms", "retries",
                  "finish_reason", "content_rule"):
            assert row[f] == e[f], (f, row, e)
        assert row["stream"] is bool(e["stream"]) and row["cached"] is bool(e["cached"]), row
        assert row["estimated"] is bool(e["usage_estimated"]), row
        assert row["user"] == names[e["user_id"]], row
        if e["endpoint_id"]:
            assert row["endpoint"] == ("ep-ta" if e["tenant_id"] == c.tid["ta"] else "ep-tb"), row
            assert row["replica"] == c.fake.url, row
        else:   # refused before routing (unknown model)
            assert row["endpoint"] is None and row["replica"] is None and row["status"] == 404, row
        assert row["affinity"] is None and row["cache"] is None, row   # neither applied here
    ok = [x for x in body["data"] if x["status"] == 200]
    assert all(x["prompt_tokens"] > 0 and x["completion_tokens"] > 0 for x in ok), ok
    assert {x["key"] for x in body["data"] if x["user"] == "mem_a"} == {"ci-bot"}, body
    routed = [x for x in body["data"] if x["model"] == "m2"]
    assert len(routed) == 1 and routed[0]["routed_model"] == "m2-upstream", routed


def test_one_request_and_404(c):
    e = events(c)[3]
    row = expect(c.root.get("/api/v1/requests/%d" % e["id"]), 200)
    assert row["id"] == e["id"] and row["request_id"] == e["request_id"] and set(row) == ROW_FIELDS, row
    expect(c.root.get("/api/v1/requests/999999"), 404, "not_found")


def test_keyset_pages(c):
    all_ids = [e["id"] for e in events(c)]
    seen, before, pages = [], None, 0
    while True:
        q = "/api/v1/requests?limit=3" + ("&before=%d" % before if before else "")
        body = expect(c.root.get(q), 200)
        assert len(body["data"]) <= 3 and body["limit"] == 3, body
        seen += [x["id"] for x in body["data"]]
        pages += 1
        if body["next"] is None:
            break
        assert body["next"] == body["data"][-1]["id"], body
        before = body["next"]
    assert seen == all_ids and pages == 4, (seen, all_ids, pages)
    expect(c.root.get("/api/v1/requests?limit=501"), 400, "invalid_value")
    expect(c.root.get("/api/v1/requests?limit=0"), 400, "invalid_value")
    expect(c.root.get("/api/v1/requests?before=999999"), 400, "invalid_value")


def test_filters(c):
    def check(query, where, *params):
        got = ids(c.root.get("/api/v1/requests?" + query))
        want = [e["id"] for e in events(c, where, *params)]
        assert got == want and want, (query, got, want)

    check("status=200", "status = 200")
    check("status=2xx", "status BETWEEN 200 AND 299")
    check("status=4xx", "status BETWEEN 400 AND 499")
    check("status=404", "status = 404")
    code = events(c, "status = 404")[0]["error_code"]
    assert code, "the refused request has an error code"
    check("code=" + code, "error_code = ?", code)
    check("model=m2", "model = 'm2' OR routed_model = 'm2'")
    check("model=m2-upstream", "model = 'm2-upstream' OR routed_model = 'm2-upstream'")
    check("model=m", "model = 'm' OR routed_model = 'm'")
    kid = events(c, "user_id = ?", c.ids["mem_a2"])[0]["key_id"]
    check("key_id=%d" % kid, "key_id = ?", kid)
    check("user_id=%d" % c.ids["mem_a"], "user_id = ?", c.ids["mem_a"])
    check("endpoint_id=%d" % c.eid["ep-tb"], "endpoint_id = ?", c.eid["ep-tb"])
    check("tenant_id=%d" % c.tid["tb"], "tenant_id = ?", c.tid["tb"])
    mid = events(c)[5]["ts_ms"]
    check("to=%d" % mid, "ts_ms <= ?", mid)
    check("from=%d" % mid, "ts_ms >= ?", mid)
    check("from=%d&to=%d&status=200&user_id=%d" % (mid - 60000, mid + 60000, c.ids["mem_a"]),
          "ts_ms BETWEEN ? AND ? AND status = 200 AND user_id = ?", mid - 60000, mid + 60000, c.ids["mem_a"])
    today = time.strftime("%Y-%m-%d", time.gmtime(mid / 1000))
    check("from=%s&to=%s" % (today, today), "1=1")
    assert ids(c.root.get("/api/v1/requests?from=2000-01-01&to=2000-01-02")) == []
    assert ids(c.root.get("/api/v1/requests?status=503")) == []
    for bad in ("status=6xx", "status=abc", "from=2024-13-01", "from=yesterday", "key_id=-1"):
        expect(c.root.get("/api/v1/requests?" + bad), 400, "invalid_value")


def test_scoping_by_role(c):
    mine = [e["id"] for e in events(c, "user_id = ?", c.ids["mem_a"])]
    assert ids(c.mem_a.get("/api/v1/requests")) == mine
    assert ids(c.mem_a.get("/api/v1/requests?status=2xx")) == [
        e["id"] for e in events(c, "user_id = ? AND status < 300", c.ids["mem_a"])]
    expect(c.mem_a.get("/api/v1/requests?user_id=%d" % c.ids["mem_a2"]), 403)
    other = events(c, "user_id = ?", c.ids["mem_a2"])[0]["id"]
    expect(c.mem_a.get("/api/v1/requests/%d" % other), 404, "not_found")
    expect(c.mem_a.get("/api/v1/requests/%d" % mine[0]), 200)
    ta = [e["id"] for e in events(c, "tenant_id = ?", c.tid["ta"])]
    assert ids(c.adm_a.get("/api/v1/requests")) == ta and len(ta) == 10
    assert ids(c.adm_a.get("/api/v1/requests?user_id=%d" % c.ids["mem_a2"])) == [
        e["id"] for e in events(c, "user_id = ?", c.ids["mem_a2"])]
    tb_one = events(c, "tenant_id = ?", c.tid["tb"])[0]["id"]
    expect(c.adm_a.get("/api/v1/requests/%d" % tb_one), 404, "not_found")
    expect(c.adm_b.get("/api/v1/requests/%d" % tb_one), 200)
    expect(c.adm_a.get("/api/v1/requests?tenant_id=%d" % c.tid["tb"]), 403)
    # the cursor tells nothing of others' events: one of another tenant or user is
    # refused like an id that does not exist (no 200 / 400 difference to probe with)
    nothing = max(e["id"] for e in events(c)) + 1000
    none = expect(c.adm_a.get("/api/v1/requests?before=%d" % nothing), 400)
    assert expect(c.adm_a.get("/api/v1/requests?before=%d" % tb_one), 400) == none
    assert expect(c.mem_a.get("/api/v1/requests?before=%d" % other), 400) == \
        expect(c.mem_a.get("/api/v1/requests?before=%d" % nothing), 400)
    assert ids(c.adm_b.get("/api/v1/requests?before=%d" % tb_one)) == [
        e["id"] for e in events(c, "tenant_id = ?", c.tid["tb"])[1:]]
    r = c.gw.request("GET", "/api/v1/requests")
    expect(r, 401)
    # a member key calling the API sees its own user's requests too
    r = c.gw.request("GET", "/api/v1/requests", key=c.key_a)
    assert ids(r) == mine


def test_settings_schema_has_every_row(c):
    src = open(os.path.join(SRCDIR, "lib", "settings.c")).read()
    rows = re.findall(r'SETTING_([A-Z]+)\("([a-z_0-9]+)",.*?"([^"]*)",\s*"([^"]*)"\),', src, re.S)
    assert len(rows) >= 16, rows
    c.gw.ctl("settings", "set", "usage_retention_days", "30")
    for who in (c.root, c.adm_a, c.mem_a):
        body = expect(who.get("/api/v1/system/settings-schema"), 200)
        got = {s["name"]: s for s in body["data"]}
        assert [s["name"] for s in body["data"]] == [r[1] for r in rows], body
        for kind, name, default, meaning in rows:
            s = got[name]
            assert s["type"] == kind.lower(), s
            assert s["meaning"] == meaning, s
            assert {"name", "type", "min", "max", "decimals", "default", "meaning"} <= set(s), s
            # R-ADM-2: the values are for the roles that may read the settings
            assert ("value" in s) == (who is not c.mem_a), (who, s)
            assert ("values" in s) == (kind == "ENUM"), s
            shown = {True: "true", False: "false"}.get(s["default"], str(s["default"]))
            assert shown == default, (s, default)
    expect(c.mem_a.get("/api/v1/system/inference-config"), 403)
    s = {x["name"]: x for x in expect(c.adm_a.get("/api/v1/system/settings-schema"), 200)["data"]}
    assert s["usage_retention_days"]["value"] == 30 and s["usage_retention_days"]["default"] == 90, s
    assert s["usage_retention_days"]["min"] == 1 and s["usage_retention_days"]["max"] == 36500, s
    assert s["auto_routing_strategy"]["values"] == ["balanced", "cost", "latency", "semantic"], s
    assert s["semantic_cache_threshold"]["decimals"] == 3 and s["semantic_cache_threshold"]["value"] == 0.95, s
    assert s["recovery_hint_failures"]["default"] == 5 and s["usage_currency"]["value"] == "USD", s
    assert s["auto_routing_enabled"]["value"] is False and s["auto_routing_enabled"]["min"] is None, s
    # writes stay the operator's
    expect(c.mem_a.put("/api/v1/system/inference-config", {"usage_currency": "EUR"}), 403)
    c.gw.ctl("settings", "rm", "usage_retention_days")


def test_recovery_hint_after_failures_and_cleared_by_a_success(c):
    gw = c.gw
    expect(c.root.put("/api/v1/system/inference-config", {"recovery_hint_failures": 3}), 200)
    dead = Fake("t0150-dead")
    dead_url = dead.url
    dead.stop()   # a replica nobody answers at
    gw.ctl("tenant", "add", "tc")
    gw.ctl("user", "add", "mem_c", "--tenant", "tc")
    key = gw.ctl("key", "add", "--user", "mem_c")["key"]
    ep = gw.ctl("endpoint", "add", "ep-dead", "--tenant", "tc")["id"]
    gw.ctl("replica", "add", "ep-dead", dead_url)
    gw.ctl("route", "add", "m", "ep-dead", "--tenant", "tc")
    wait_for(lambda: chat(c, key, "first").status >= 500, 5, what="route live and failing")
    wait_for(lambda: len(events(c, "endpoint_id = ?", ep)) == 1, 10, what="the failure written")
    e = expect(c.root.get("/api/v1/endpoints/%d" % ep), 200)
    assert e["failure_streak"] == 1 and e["recovery_hint"] is None and e["last_error"], e
    for i in range(2):
        assert chat(c, key, "again %d" % i).status >= 500
    wait_for(lambda: len(events(c, "endpoint_id = ?", ep)) == 3, 10, what="3 failures written")
    fails = events(c, "endpoint_id = ?", ep)
    assert len(fails) == 3 and all(f["status"] >= 500 for f in fails), fails
    e = expect(c.root.get("/api/v1/endpoints/%d" % ep), 200)
    assert e["failure_streak"] == 3 and e["recovery_hint"], e
    assert e["last_error"] == "%s (%d)" % (fails[0]["error_code"] or "server_error", fails[0]["status"]), (e, fails[0])
    assert e["last_error_ms"] == fails[0]["ts_ms"], e
    listed = {x["id"]: x for x in expect(c.root.get("/api/v1/endpoints"), 200)["data"]}
    assert listed[ep]["recovery_hint"] == e["recovery_hint"] and listed[ep]["failure_streak"] == 3, listed[ep]
    ok = listed[c.eid["ep-ta"]]
    assert ok["failure_streak"] == 0 and ok["recovery_hint"] is None and ok["last_error"] is None, ok
    assert ok["last_error_ms"] is None, ok
    # the threshold is the setting's
    expect(c.root.put("/api/v1/system/inference-config", {"recovery_hint_failures": 4}), 200)
    assert expect(c.root.get("/api/v1/endpoints/%d" % ep), 200)["recovery_hint"] is None
    expect(c.root.put("/api/v1/system/inference-config", {"recovery_hint_failures": 3}), 200)
    # recovery: a replica that answers; one success ends the streak
    gw.ctl("replica", "add", "ep-dead", c.fake.url)
    gw.ctl("replica", "rm", "ep-dead", dead_url)
    wait_for(lambda: chat(c, key, "back").status == 200, 10, what="endpoint recovered")
    wait_for(lambda: events(c, "endpoint_id = ?", ep)[0]["status"] == 200, 10, what="the success written")
    e = expect(c.root.get("/api/v1/endpoints/%d" % ep), 200)
    assert e["failure_streak"] == 0 and e["recovery_hint"] is None, e
    assert e["last_error"], e   # the last failure is still told
    expect(c.root.put("/api/v1/system/inference-config", {"recovery_hint_failures": None}), 200)


def test_key_counters_are_the_quota_counters(c):
    gw = c.gw
    gw.ctl("user", "add", "mem_d", "--tenant", "ta")
    k = gw.ctl("key", "add", "--user", "mem_d", "--name", "limited", "--daily-limit", "3",
               "--monthly-token-quota", "1000000")
    key, kid = k["key"], k["id"]
    wait_for(lambda: gw.request("GET", "/v1/models", key=key).status == 200, 5, what="key live")
    codes = [chat(c, key, "q %d" % i).status for i in range(5)]
    # the models listing that showed the key live spent one call of the three
    assert codes == [200, 200, 429, 429, 429], codes
    day = time.strftime("d:%Y-%m-%d", time.localtime())
    month = time.strftime("m:%Y-%m", time.localtime())

    def counters(period):
        rows = gw.sql("SELECT calls, tokens FROM quota_counters WHERE key_id = ? AND period = ?", kid, period)
        return {"requests": rows[0][0], "tokens": rows[0][1]} if rows else {"requests": 0, "tokens": 0}
    wait_for(lambda: counters(day)["requests"] >= 3 and counters(month)["tokens"] > 0, 10, what="counters written")
    time.sleep(0.5)
    got = expect(c.root.get("/api/v1/tenant/api-keys/%d" % kid), 200)
    tokens = sum(e["prompt_tokens"] + e["completion_tokens"] for e in events(c, "key_id = ? AND status = 200", kid))
    # calls: the enforced counters (refusals not counted); tokens: the month's enforced
    # token counter, today's billed tokens (the day counter keeps none)
    assert got["today"]["requests"] == counters(day)["requests"] == 3, (got, counters(day))
    assert got["month"] == counters(month), (got, counters(month))
    assert got["month"]["tokens"] == tokens and got["today"]["tokens"] == tokens, (got, tokens)
    listed = {x["id"]: x for x in expect(c.adm_a.get("/api/v1/tenant/api-keys"), 200)["data"]}
    assert listed[kid]["today"] == got["today"], listed[kid]
    # a key without limits keeps no counters: its calls and tokens are the billed ones
    free = gw.ctl("key", "add", "--user", "mem_d", "--name", "free")
    wait_for(lambda: chat(c, free["key"], "free 0").status == 200, 5, what="free key live")
    assert chat(c, free["key"], "free 1").status == 200
    assert not gw.sql("SELECT 1 FROM quota_counters WHERE key_id = ?", free["id"])
    billed = lambda: sum(e["prompt_tokens"] + e["completion_tokens"]
                         for e in events(c, "key_id = ? AND status = 200", free["id"]))
    wait_for(lambda: expect(c.root.get("/api/v1/tenant/api-keys/%d" % free["id"]), 200)["today"]["requests"] >= 2,
             10, what="usage of the free key written")
    fg = expect(c.root.get("/api/v1/tenant/api-keys/%d" % free["id"]), 200)
    n = len(events(c, "key_id = ?", free["id"]))
    assert fg["today"] == fg["month"] == {"requests": n, "tokens": billed()} and billed() > 0, (fg, n, billed())


def counters_of(c, kid, period):
    rows = c.gw.sql("SELECT calls, tokens FROM quota_counters WHERE key_id = ? AND period = ?", kid, period)
    return {"requests": rows[0][0], "tokens": rows[0][1]} if rows else {"requests": 0, "tokens": 0}


def test_audit_target_labels(c):
    gw = c.gw
    rows = expect(c.root.get("/api/v1/audit-log?limit=1000"), 200)["data"]
    assert all("target_label" in r for r in rows), rows[0]
    by = {(r["object_type"], r["object_id"], r["action"]): r for r in rows}
    kid = [k for k in gw.ctl("list", "keys")["keys"] if k.get("name") == "ci-bot"][0]["id"]
    assert by[("key", kid, "create")]["target_label"] == "key ci-bot (#%d)" % kid, by[("key", kid, "create")]
    assert by[("endpoint", c.eid["ep-ta"], "create")]["target_label"] == "endpoint ep-ta (#%d)" % c.eid["ep-ta"]
    uid = c.ids["mem_a"]
    assert by[("user", uid, "create")]["target_label"] == "user mem_a (#%d)" % uid
    # an object that is gone keeps the name its record holds
    gw.ctl("user", "add", "leaver", "--tenant", "tb")
    lid = [u for u in gw.ctl("list", "users")["users"] if u["name"] == "leaver"][0]["id"]
    gw.ctl("user", "rm", "leaver")
    rows = expect(c.root.get("/api/v1/audit-log?object_type=user"), 200)["data"]
    rm = [r for r in rows if r["object_id"] == lid and r["action"] in ("delete", "remove", "rm")]
    assert rm and rm[0]["target_label"] == "user leaver (#%d)" % lid, rows[:3]
    # a record without a name: "<type> #id"
    gw.sql_write("INSERT INTO audit_log (actor, action, object_type, object_id) VALUES ('t', 'x', 'quota', 4242)")
    rows = expect(c.root.get("/api/v1/audit-log?object_type=quota"), 200)["data"]
    assert [r["target_label"] for r in rows if r["object_id"] == 4242] == ["quota #4242"], rows


def nearest_rank(values, p):
    v = sorted(values)
    if not v:
        return None
    rank = (len(v) * p + 99) // 100
    return v[max(rank, 1) - 1]


def test_usage_cost_latency_and_new_groups(c):
    expect(c.root.post("/api/v1/models/routing-policies",
                       {"model": "m", "price_input_per_1k": 0.5, "price_output_per_1k": 2.0}), 200)
    expect(c.root.put("/api/v1/system/inference-config", {"usage_currency": "EUR"}), 200)
    ta = c.tid["ta"]
    ev = c.gw.usage_events("tenant_id = ?", ta)
    groups = {"model": lambda e: e["model"], "user": lambda e: e["user_id"], "key": lambda e: e["key_id"],
              "endpoint": lambda e: e["endpoint_id"], "replica": lambda e: e["replica_id"],
              "day": lambda e: time.strftime("%Y-%m-%d", time.gmtime(e["ts_ms"] / 1000))}
    label = {"model": "model", "user": "user_id", "key": "key_id", "endpoint": "endpoint_id",
             "replica": "replica_id", "day": "day"}
    for g, keyf in groups.items():
        body = expect(c.adm_a.get("/api/v1/tenant/usage?group_by=%s&limit=1000" % g), 200)
        assert body["group_by"] == g, body
        want = {}
        for e in ev:
            want.setdefault(keyf(e), []).append(e)
        got = {r[label[g]]: r for r in body["data"]}
        assert set(got) == set(want), (g, set(got), set(want))
        for k, es in want.items():
            r = got[k]
            assert r["requests"] == len(es) and r["errors"] == sum(e["status"] >= 400 for e in es), (g, r)
            p, q = sum(e["prompt_tokens"] for e in es), sum(e["completion_tokens"] for e in es)
            assert r["prompt_tokens"] == p and r["completion_tokens"] == q, (g, r)
            cost = sum((e["prompt_tokens"] * 0.5 + e["completion_tokens"] * 2.0) / 1000 for e in es if e["model"] == "m")
            assert abs(r["cost"] - cost) < 1e-6 and r["currency"] == "EUR", (g, r, cost)
            ok = [e for e in es if e["status"] < 400]
            assert r["latency_p50_ms"] == nearest_rank([e["latency_ms"] for e in ok], 50), (g, r, ok)
            assert r["latency_p95_ms"] == nearest_rank([e["latency_ms"] for e in ok], 95), (g, r)
            tt = [e["ttft_ms"] for e in ok if e["ttft_ms"] > 0]
            assert r["ttft_p50_ms"] == nearest_rank(tt, 50) and r["ttft_p95_ms"] == nearest_rank(tt, 95), (g, r)
        assert abs(body["totals"]["cost"] - sum(r["cost"] for r in body["data"])) < 1e-6, body["totals"]
        if g == "endpoint":
            assert got[c.eid["ep-ta"]]["endpoint"] == "ep-ta" and got[0]["endpoint"] is None, got
            assert got[0]["latency_p50_ms"] is None, got[0]   # only a refusal: no successful event
        if g == "replica":
            rid = [k for k in got if k][0]
            assert got[rid]["replica"] == c.fake.url and got[rid]["endpoint"] == "ep-ta", got
        if g == "model":
            assert got["m"]["cost"] > 0 and got["m2"]["cost"] == 0, got
    # a member sees its own only, by endpoint too
    mine = expect(c.mem_a.get("/api/v1/tenant/usage?group_by=endpoint"), 200)
    assert sum(r["requests"] for r in mine["data"]) == len(c.gw.usage_events("user_id = ?", c.ids["mem_a"])), mine
    expect(c.adm_a.get("/api/v1/tenant/usage?group_by=planet"), 400)
    expect(c.adm_a.get("/api/v1/tenant/usage?format=xml"), 400, "invalid_value")


def test_usage_csv_download(c):
    for g in ("model", "key", "replica"):
        q = "/api/v1/tenant/usage?group_by=%s&limit=1000" % g
        js = expect(c.adm_a.get(q), 200)
        r = c.adm_a.get(q + "&format=csv")
        assert r.status == 200 and r.headers["content-type"].startswith("text/csv"), r.headers
        assert "attachment" in r.headers.get("content-disposition", ""), r.headers
        import csv
        import io
        lines = list(csv.reader(io.StringIO(r.body.decode())))
        header, rows = lines[0], lines[1:]
        assert header == js["columns"] and header[0] == {"model": "model", "key": "key", "replica": "replica"}[g], header
        assert set(js["data"][0]) == set(header), (set(js["data"][0]) ^ set(header))
        assert len(rows) == len(js["data"]), (rows, js["data"])
        for row, obj in zip(rows, js["data"]):
            for name, cell in zip(header, row):
                v = obj[name]
                want = "" if v is None else (("true" if v else "false") if isinstance(v, bool) else str(v))
                if isinstance(v, float):
                    assert abs(float(cell) - v) < 1e-9, (name, cell, v)
                else:
                    assert cell == want, (g, name, cell, v)
    # a name a spreadsheet would run stays text
    c.gw.ctl("key", "add", "--user", "mem_a", "--name", "=HYPERLINK(1)")
    kid = [k for k in c.gw.ctl("list", "keys")["keys"] if k.get("name") == "=HYPERLINK(1)"][0]["id"]
    c.gw.sql_write("INSERT INTO usage_daily VALUES (date('now'), ?, ?, ?, 'm', 1, 0, 1, 1)", c.tid["ta"],
                   c.ids["mem_a"], kid)
    body = c.adm_a.get("/api/v1/tenant/usage?group_by=key&limit=1000&format=csv").body.decode()
    assert "'=HYPERLINK(1)" in body and ",=HYPERLINK" not in body, body
    expect(c.root.put("/api/v1/system/inference-config", {"usage_currency": None}), 200)


def test_affinity_and_cache_outcomes_are_recorded(c):
    gw = c.gw
    gw.ctl("tenant", "add", "te")
    gw.ctl("user", "add", "mem_e", "--tenant", "te")
    key = gw.ctl("key", "add", "--user", "mem_e")["key"]
    add_endpoint(gw, "ep-sticky", "te", [c.fake], affinity="on")
    gw.ctl("route", "add", "ms", "ep-sticky", "--tenant", "te")
    gw.ctl("route", "add", "mc", "ep-sticky", "--tenant", "te")
    gw.sql_write("INSERT INTO model_policies (model, cache, cache_ttl_s) VALUES ('mc', 'exact', 60)")
    sess = {"X-Session-Id": "t0150-session"}
    wait_for(lambda: c.gw.request("GET", "/v1/models", key=key).status == 200, 5, what="key live")
    # the policy live on every responder (each answers with x-cache), not only the routes
    def warm(i):
        return gw.request("POST", "/v1/chat/completions", {"model": "mc", "temperature": 0, "messages": [
            {"role": "user", "content": "warm %d %f" % (i, time.time())}]}, key=key).headers.get("x-cache")
    wait_for(lambda: all(warm(i) for i in range(4)), 5, what="routes and the cache policy live")
    r1 = gw.request("POST", "/v1/chat/completions", {"model": "ms", "messages": [{"role": "user", "content": "s"}]},
                    key=key, headers=sess)
    r2 = gw.request("POST", "/v1/chat/completions", {"model": "ms", "messages": [{"role": "user", "content": "s"}]},
                    key=key, headers=sess)
    assert r1.headers.get("x-session-affinity") == "miss" and r2.headers.get("x-session-affinity", "").startswith("hit"), \
        (r1.headers, r2.headers)
    body = {"model": "mc", "temperature": 0, "messages": [{"role": "user", "content": "cache me"}]}
    x1 = gw.request("POST", "/v1/chat/completions", body, key=key)
    wait_for(lambda: gw.request("POST", "/v1/chat/completions", body, key=key).headers.get("x-cache") == "hit", 10,
             what="a cache hit")
    assert x1.headers.get("x-cache") == "miss", x1.headers
    uid = [u for u in gw.ctl("list", "users")["users"] if u["name"] == "mem_e"][0]["id"]
    wait_for(lambda: any(e["cached"] for e in events(c, "user_id = ?", uid)), 10, what="the hit written")
    rows = expect(c.root.get("/api/v1/requests?user_id=%d&limit=500" % uid), 200)["data"]
    sticky = [r for r in rows if r["model"] == "ms"]
    assert [r["affinity"] for r in reversed(sticky)] == ["miss", "hit"], sticky
    cached = [r for r in rows if r["model"] == "mc" and r["cache"] is not None]
    assert "miss" in [r["cache"] for r in cached] and cached[0]["cache"] == "hit" and cached[0]["cached"] is True, cached
    assert all(r["cached"] is (r["cache"] == "hit") for r in cached), cached
    assert expect(c.root.get("/api/v1/requests/%d" % cached[0]["id"]), 200)["cache"] == "hit"


def test_a_rare_combination_pages_in_bounded_windows(c):
    """Two filters that each match more than a page's window (10 000 events) and together
    one event, the oldest: the first page examines a window and comes back empty with a
    next; following it finds the event, then next is null."""
    gw = c.gw
    t0 = int(time.time() * 1000) - 86400000 * 3
    gw.sql_write("""WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 24000)
                    INSERT INTO usage_events (ts_ms, request_id, tenant_id, model, routed_model, status)
                    SELECT ?1 + i, 'bulk-' || i, 999, CASE WHEN i % 2 = 1 THEN 'mz' ELSE 'other' END,
                           CASE WHEN i % 2 = 1 THEN 'mz' ELSE 'other' END, CASE WHEN i % 2 = 1 THEN 200 ELSE 599 END
                    FROM s""", t0)
    gw.sql_write("INSERT INTO usage_events (ts_ms, request_id, tenant_id, model, routed_model, status)"
                 " VALUES (?, 'the-one', 999, 'mz', 'mz', 599)", t0)
    q = "/api/v1/requests?model=mz&status=599&limit=5"
    first = expect(c.root.get(q), 200)
    assert first["data"] == [] and first["next"], first
    got, nxt, pages = [], first["next"], 1
    while nxt:
        page = expect(c.root.get(q + "&before=%d" % nxt), 200)
        got += [r["request_id"] for r in page["data"]]
        nxt, pages = page["next"], pages + 1
        assert pages < 10, page
    assert got == ["the-one"], got
    # one filter alone is read in page order: full pages
    assert len(expect(c.root.get("/api/v1/requests?status=599&limit=5"), 200)["data"]) == 5


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
