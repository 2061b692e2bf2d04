#!/usr/bin/env python3
"""t0110-cache: the exact answer cache (issue 15, R-CACHE-1..3).

A greedy request of a model whose policy (or route) says cache = exact is answered once by
the upstream and then from SQLite, on any responder of the pool: X-Cache miss then hit, the
same bytes, a stream replayed write for write (with and without the usage chunk), a usage
row with cached = 1 and the stored tokens. Never across tenants, never for a sampled
request, never past the TTL; cut streams and errors are not stored; cache.max_bytes evicts
the oldest; the metrics count hits, misses, stores, evictions and bytes."""
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (Fake, Gateway, add_endpoint, fcgi_request, fcgi_sockets, run_tests, setup_tenant,
                     setup_with, stop_all, wait_for)


def policy(gw, model, cache="exact", ttl=60, greedy=0):
    gw.sql_write("INSERT INTO model_policies (model, cache, cache_ttl_s, default_greedy) VALUES (?, ?, ?, ?)"
                 " ON CONFLICT(model) DO UPDATE SET cache = excluded.cache, cache_ttl_s = excluded.cache_ttl_s,"
                 " default_greedy = excluded.default_greedy", model, cache, ttl, greedy)


def build(c):
    c.fake = Fake("cache")
    c.gw = Gateway("t0110", procs=2, threads=16)
    # The endpoint and its routes are the platform's (tenant default), used by an operator
    # acting for tenant acme or beta (R-AUTH-3): the very same endpoint and model, so only
    # the tenant tells their keys apart.
    c.gw.ctl("tenant", "add", "acme")
    c.gw.ctl("tenant", "add", "beta")
    c.gw.ctl("user", "add", "op", "--tenant", "default", "--role", "operator")
    c.key = c.gw.ctl("key", "add", "--user", "op")["key"]
    c.ep = add_endpoint(c.gw, "ep", "default", [c.fake])["id"]
    for model in ("m", "g", "t", "r", "o"):
        c.gw.ctl("route", "add", model, "ep", "--tenant", "default")
    policy(c.gw, "m")                       # exact, greedy only with temperature 0
    policy(c.gw, "g", greedy=1)             # exact, no temperature counts as greedy
    policy(c.gw, "t", ttl=1)                # exact, one second
    # r: the route says exact, no policy; o: the policy says exact, its route says off
    c.gw.sql_write("UPDATE routes SET cache = 'exact', cache_ttl_s = 30 WHERE model = 'r'")
    policy(c.gw, "o")
    c.gw.sql_write("UPDATE routes SET cache = 'off' WHERE model = 'o'")
    c.gw.start()
    wait_for(lambda: post(c, body("hello", model="o")).status == 200, 5, what="key live")
    time.sleep(0.8)     # every responder's poll
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "fake")


def unique(what):
    return "%s %s" % (what, uuid.uuid4().hex[:12])


def body(content, model="m", **extra):
    b = {"model": model, "messages": [{"role": "system", "content": "be brief"},
                                      {"role": "user", "content": content}], "temperature": 0}
    b.update(extra)
    return b


def post(c, b, tenant="acme", headers=None, path="/v1/chat/completions"):
    return c.gw.request("POST", path, b, key=c.key, headers=dict(headers or {}, **{"X-Sluice-Tenant": tenant}))


def stream(c, b, headers=None):
    return c.gw.stream_raw(c.key, b, headers=dict(headers or {}, **{"X-Sluice-Tenant": "acme"}))


def as_acme(c):
    return {"Authorization": "Bearer " + c.key, "X-Sluice-Tenant": "acme"}


def upstream(c):
    return c.fake.stats()["requests"]


def entries(c, where="1=1", *params):
    return c.gw.sql("SELECT key_hash, tenant_id, stream, bytes, prompt_tokens, completion_tokens, length(chunks)"
                    " FROM cache_entries WHERE " + where, *params)


def stored(c, n_before):
    """Waits for the usage writer to store one more entry (it writes in batches)."""
    return wait_for(lambda: len(entries(c)) > n_before, 5, what="an entry stored")


def test_miss_then_hit_upstream_once_R_CACHE_2(c):
    b = body(unique("capital of France?"))
    n, up = len(entries(c)), upstream(c)
    r1 = post(c, b, headers={"X-Request-Id": "cache-miss-1"})
    assert r1.status == 200 and r1.headers.get("x-cache") == "miss", (r1, r1.headers)
    assert upstream(c) == up + 1
    stored(c, n)
    r2 = post(c, b, headers={"X-Request-Id": "cache-hit-1"})
    assert r2.status == 200 and r2.headers.get("x-cache") == "hit", (r2, r2.headers)
    assert r2.body == r1.body, (r1.body, r2.body)
    assert r2.headers.get("content-type") == r1.headers.get("content-type")
    assert r2.headers.get("x-routed-endpoint") == "ep"
    assert upstream(c) == up + 1, "a hit called the upstream"
    # R-CACHE-2: recorded as a cached usage event with the stored tokens, no replica.
    rows = wait_for(lambda: c.gw.usage_events("request_id IN ('cache-miss-1', 'cache-hit-1')")
                    if len(c.gw.usage_events("request_id IN ('cache-miss-1', 'cache-hit-1')")) == 2 else None,
                    5, what="both usage rows")
    miss, hit = rows
    usage = r1.json()["usage"]
    assert miss["cached"] == 0 and hit["cached"] == 1, rows
    assert hit["status"] == 200 and hit["replica_id"] == 0 and hit["endpoint_id"] == c.ep, hit
    assert (hit["prompt_tokens"], hit["completion_tokens"]) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert (miss["prompt_tokens"], miss["completion_tokens"]) == (hit["prompt_tokens"], hit["completion_tokens"])
    assert hit["routed_model"] == miss["routed_model"] == "m" and hit["model"] == "m"
    # the entry counts its hit (the writer adds them up per batch)
    wait_for(lambda: c.gw.sql("SELECT hits FROM cache_entries WHERE tenant_id = (SELECT tenant_id FROM"
                              " usage_events WHERE request_id = 'cache-hit-1') AND hits > 0"), 5, what="hits")


def test_access_log_says_hit_and_the_lookup_time(c):
    b = body(unique("log me"))
    n = len(entries(c))
    post(c, b, headers={"X-Request-Id": "cache-log-miss"})
    stored(c, n)
    post(c, b, headers={"X-Request-Id": "cache-log-hit"})

    def lines():
        with open(os.path.join(c.gw.dir, "access.log")) as f:
            got = {}
            for line in f:
                j = json.loads(line)
                if j.get("request_id") in ("cache-log-miss", "cache-log-hit"):
                    got[j["request_id"]] = j
            return got if len(got) == 2 else None
    got = wait_for(lines, 5, what="access log lines")
    assert got["cache-log-miss"]["cache"] == "miss" and got["cache-log-hit"]["cache"] == "hit", got
    assert got["cache-log-hit"]["cache_lookup_us"] >= 0


def test_hit_on_the_other_responder_R_CACHE_3(c):
    """SQLite is shared by the pool: stored by one process, served by the other."""
    socks = fcgi_sockets(c.gw)
    assert len(socks) == 2, socks
    b = body(unique("pool-wide"))
    hdr = as_acme(c)
    n, up = len(entries(c)), upstream(c)
    r1 = fcgi_request(socks[0], "POST", "/v1/chat/completions", b, hdr)
    assert r1.status == 200 and r1.headers.get("x-cache") == "miss", r1
    stored(c, n)
    r2 = fcgi_request(socks[1], "POST", "/v1/chat/completions", b, hdr)
    assert r2.status == 200 and r2.headers.get("x-cache") == "hit", (r2, r2.headers)
    assert r2.body == r1.body and upstream(c) == up + 1


def stream_records(c, sock, b, headers=None):
    """(status, headers, [body write, ...]): the FastCGI records after the head, one per flush."""
    recs = []
    hdr = as_acme(c)
    hdr.update(headers or {})
    r = fcgi_request(sock, "POST", "/v1/chat/completions", b, hdr, records=recs)
    joined = b"".join(recs)
    head_len = joined.index(b"\r\n\r\n") + 4
    # the head went out with the first write: cut it off that record
    out, skipped = [], 0
    for rec in recs:
        if skipped + len(rec) <= head_len:
            skipped += len(rec)
            continue
        out.append(rec[max(0, head_len - skipped):])
        skipped = head_len
    return r, out


def test_stream_replayed_event_for_event_R_CACHE_2(c):
    """A stream's hit is the same events with the same write boundaries, with and without
    the usage chunk as the client asked (two keys: two answers)."""
    socks = fcgi_sockets(c.gw)
    for usage in (False, True):
        extra = {"stream": True}
        if usage:
            extra["stream_options"] = {"include_usage": True}
        b = body(unique("stream usage=%s" % usage), **extra)
        n, up = len(entries(c)), upstream(c)
        r1, w1 = stream_records(c, socks[0], b, {"X-Fake-Behavior": "chunks=5;gap_ms=30"})
        assert r1.status == 200 and r1.headers.get("x-cache") == "miss", r1
        assert r1.headers.get("content-type", "").startswith("text/event-stream")
        stored(c, n)
        r2, w2 = stream_records(c, socks[1], b)
        assert r2.status == 200 and r2.headers.get("x-cache") == "hit", (r2, r2.headers)
        assert r2.headers.get("content-type") == r1.headers.get("content-type")
        assert upstream(c) == up + 1
        assert w1 == w2, "replay differs:\n%r\n%r" % (w1, w2)
        assert len(w2) >= 6, w2           # role+first content, 4 more, finish, [DONE]
        assert w2[-1] == b"data: [DONE]\n\n", w2[-1]
        has_usage = any(b'"usage":{' in w for w in w2)
        assert has_usage == usage, (usage, w2)
        row = entries(c, "stream = 1 ORDER BY created_ms DESC LIMIT 1")[0]
        assert row[6] == 4 * len(w1), (row, len(w1))     # one length per write
    # and through lighttpd, as a client sees it
    b = body(unique("stream via lighttpd"), stream=True)
    n = len(entries(c))
    s1, h1, ch1 = stream(c, b)
    stored(c, n)
    s2, h2, ch2 = stream(c, b)
    assert (h1.get("x-cache"), h2.get("x-cache")) == ("miss", "hit"), (h1, h2)
    assert h2.get("cache-control") == "no-cache"
    assert b"".join(x for _, x in ch1) == b"".join(x for _, x in ch2)


def test_another_tenant_misses_R_CACHE_2(c):
    b = body(unique("tenant scoped"))
    n, up = len(entries(c)), upstream(c)
    r1 = post(c, b, tenant="acme")
    stored(c, n)
    assert post(c, b, tenant="acme").headers.get("x-cache") == "hit"
    r2 = post(c, b, tenant="beta")
    assert r2.status == 200 and r2.headers.get("x-cache") == "miss", r2.headers
    assert upstream(c) == up + 2
    stored(c, n + 1)
    assert post(c, b, tenant="beta").headers.get("x-cache") == "hit"
    tenants = {row[1] for row in entries(c)}
    assert len(tenants) >= 2, tenants
    assert r1.status == 200


def test_sampled_never_cached_R_CACHE_1(c):
    b = body(unique("be creative"), temperature=0.7)
    n, up = len(entries(c)), upstream(c)
    for _ in range(3):
        r = post(c, b)
        assert r.status == 200 and "x-cache" not in r.headers, r.headers
    assert upstream(c) == up + 3
    time.sleep(0.5)
    assert len(entries(c)) == n


def test_no_temperature_cached_only_where_the_default_is_greedy_R_CACHE_1(c):
    up = upstream(c)
    b = body(unique("no temperature"))
    del b["temperature"]
    for _ in range(2):
        r = post(c, b)
        assert r.status == 200 and "x-cache" not in r.headers, r.headers
    assert upstream(c) == up + 2
    b["model"] = "g"
    n = len(entries(c))
    assert post(c, b).headers.get("x-cache") == "miss"
    stored(c, n)
    assert post(c, b).headers.get("x-cache") == "hit"
    assert upstream(c) == up + 3


def test_route_mode_wins_over_the_policy_R_CACHE_1(c):
    n, up = len(entries(c)), upstream(c)
    b = body(unique("route says exact"), model="r")
    assert post(c, b).headers.get("x-cache") == "miss"
    stored(c, n)
    assert post(c, b).headers.get("x-cache") == "hit"
    b = body(unique("route says off"), model="o")
    for _ in range(2):
        assert "x-cache" not in post(c, b).headers
    assert upstream(c) == up + 3


def test_ttl_expiry_R_CACHE_3(c):
    b = body(unique("short lived"), model="t")
    n, up = len(entries(c)), upstream(c)
    assert post(c, b).headers.get("x-cache") == "miss"
    stored(c, n)
    assert post(c, b).headers.get("x-cache") == "hit"
    time.sleep(1.2)
    assert post(c, b).headers.get("x-cache") == "miss"
    assert upstream(c) == up + 2


def test_cut_streams_and_errors_not_stored_R_CACHE_3(c):
    n, up = len(entries(c)), upstream(c)
    b = body(unique("cut"), stream=True)
    # the stream dies after two content chunks: the client has a cut answer, the cache nothing
    s, h, ch = stream(c, b, headers={"X-Fake-Behavior": "chunks=5;die_after=2"})
    assert s == 200 and h.get("x-cache") == "miss"
    assert b"[DONE]" not in b"".join(x for _, x in ch)
    # an error event in the middle of the stream
    b2 = body(unique("error event"), stream=True)
    s, h, ch = stream(c, b2, headers={"X-Fake-Behavior": "chunks=5;error_after=2"})
    assert s == 200 and b'"error"' in b"".join(x for _, x in ch)
    # an upstream error
    b3 = body(unique("upstream 500"))
    r = post(c, b3, headers={"X-Fake-Behavior": "status=500"})
    assert r.status >= 500, r
    # an answer without usage cannot be recorded as a cached event: not stored either
    b4 = body(unique("no usage"))
    assert post(c, b4, headers={"X-Fake-Behavior": "no_usage=1"}).status == 200
    time.sleep(0.8)       # several usage-writer batches
    assert len(entries(c)) == n, entries(c)
    # the next asking of each goes upstream again, and that complete answer is stored
    ups = upstream(c)
    for x in (b, b2, b3, b4):
        r = post(c, x) if not x.get("stream") else None
        if r is None:
            s, h, ch = stream(c, x)
            assert s == 200 and h.get("x-cache") == "miss", h
        else:
            assert r.status == 200 and r.headers.get("x-cache") == "miss", r.headers
    assert upstream(c) == ups + 4
    wait_for(lambda: len(entries(c)) == n + 4, 5, what="the four complete answers stored")


def test_idempotency_replays_stay_separate(c):
    """An Idempotency-Key replay is the idempotency record's, not a cache hit."""
    b = body(unique("idempotent"))
    n, up = len(entries(c)), upstream(c)
    h = {"Idempotency-Key": uuid.uuid4().hex}
    r1 = post(c, b, headers=h)
    assert r1.status == 200 and r1.headers.get("x-cache") == "miss"
    stored(c, n)
    r2 = post(c, b, headers=h)
    assert r2.headers.get("x-idempotent-replay") == "true" and "x-cache" not in r2.headers, r2.headers
    # a new key for the same question: its owner is served from the cache
    r3 = post(c, b, headers={"Idempotency-Key": uuid.uuid4().hex})
    assert r3.headers.get("x-cache") == "hit" and r3.body == r1.body
    assert upstream(c) == up + 1


def test_messages_api_cached(c):
    """/v1/messages (translated for the OpenAI stand-in) is cached as well."""
    b = {"model": "m", "max_tokens": 32, "temperature": 0,
         "messages": [{"role": "user", "content": unique("anthropic caller")}]}
    h = {"anthropic-version": "2023-06-01"}
    n, up = len(entries(c)), upstream(c)
    r1 = post(c, b, headers=h, path="/v1/messages")
    assert r1.status == 200 and r1.headers.get("x-cache") == "miss", (r1, r1.headers)
    stored(c, n)
    r2 = post(c, b, headers=h, path="/v1/messages")
    assert r2.headers.get("x-cache") == "hit" and r2.body == r1.body, r2
    # another anthropic-beta header is another question
    r3 = post(c, b, headers=dict(h, **{"anthropic-beta": "some-beta"}), path="/v1/messages")
    assert r3.headers.get("x-cache") == "miss", r3.headers
    # a query string travels upstream too (the native path passes ?beta=true on): another question
    r3q = post(c, b, headers=h, path="/v1/messages?beta=true")
    assert r3q.status == 200 and r3q.headers.get("x-cache") == "miss", (r3q, r3q.headers)
    b["stream"] = True
    r4 = post(c, b, headers=h, path="/v1/messages")
    assert r4.headers.get("x-cache") == "miss"
    wait_for(lambda: len(entries(c)) == n + 4, 5, what="four stored")
    r5 = post(c, b, headers=h, path="/v1/messages")
    assert r5.headers.get("x-cache") == "hit" and r5.body == r4.body
    assert upstream(c) == up + 4


def metric(text, name, kind):
    for line in text.splitlines():
        if line.startswith('%s{kind="%s"} ' % (name, kind)):
            return float(line.split()[-1])
    return None


def test_metrics_move_R_CACHE_3(c):
    before = c.gw.request("GET", "/metrics").body.decode()
    b = body(unique("metrics"))
    n = len(entries(c))
    post(c, b)
    stored(c, n)
    post(c, b)
    post(c, b)
    after = wait_for(lambda: c.gw.request("GET", "/metrics").body.decode(), 2)
    for name, want in (("sluice_cache_hits_total", 2), ("sluice_cache_misses_total", 1),
                       ("sluice_cache_stores_total", 1)):
        got = metric(after, name, "exact") - metric(before, name, "exact")
        assert got >= want, (name, got, want)
    total = c.gw.sql("SELECT total(bytes) FROM cache_entries")[0][0]
    assert metric(after, "sluice_cache_bytes", "exact") == total, (metric(after, "sluice_cache_bytes", "exact"), total)
    assert metric(after, "sluice_cache_hits_total", "semantic") == 0


def test_size_cap_evicts_the_oldest_R_CACHE_3(c):
    """cache.max_bytes: after each batch the oldest entries go until the rest fits."""
    gw = Gateway("t0110cap", procs=1, threads=4,
                 conf={"cache": "max_bytes = 1500; max_entry_bytes = 4194304;"})
    try:
        key = setup_tenant(gw, "acme", "alice")
        add_endpoint(gw, "ep", "acme", [c.fake])
        gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
        policy(gw, "m")
        gw.start()
        wait_for(lambda: gw.chat(key).status == 200, 5, what="key live")
        bodies = [body("question %d %s" % (i, uuid.uuid4().hex)) for i in range(12)]
        for i, b in enumerate(bodies):
            r = gw.request("POST", "/v1/chat/completions", b, key=key)
            assert r.status == 200 and r.headers.get("x-cache") == "miss", r.headers
            # one entry per batch: their ages are in order
            wait_for(lambda: metric(gw.request("GET", "/metrics").body.decode(), "sluice_cache_stores_total",
                                    "exact") == i + 1, 5, what="entry %d stored" % i)
        rows = gw.sql("SELECT count(*), total(bytes) FROM cache_entries")[0]
        assert 0 < rows[0] < 12 and rows[1] <= 1500, rows
        # what is left is the newest, and it is as much as fits (one more would not)
        one = rows[1] / rows[0]
        assert rows[1] + one > 1500, rows
        # the newest is there, the oldest is gone
        assert gw.request("POST", "/v1/chat/completions", bodies[-1], key=key).headers.get("x-cache") == "hit"
        assert gw.request("POST", "/v1/chat/completions", bodies[0], key=key).headers.get("x-cache") == "miss"
        text = gw.request("GET", "/metrics").body.decode()
        assert metric(text, "sluice_cache_evictions_total", "exact") >= 12 - rows[0], text
        total = gw.sql("SELECT total(bytes) FROM cache_entries")[0][0]
        wait_for(lambda: metric(gw.request("GET", "/metrics").body.decode(), "sluice_cache_bytes", "exact") ==
                 gw.sql("SELECT total(bytes) FROM cache_entries")[0][0], 3, what="bytes gauge = table")
        assert total <= 1500
    finally:
        gw.stop()


def test_a_hit_gives_a_half_open_trial_back_R_HC_5(c):
    """A hit was routed first (the key names the endpoint), so it may have been handed a
    half-open circuit's trial; served from the cache it never tries the replica, and the
    trial goes back: the next requests may be the trial, not turned away for circuit_open_ms."""
    a, b = Fake("cache-trial-a"), Fake("cache-trial-b")
    gw = Gateway("t0110trial", procs=1, threads=4,
                 conf={"passive": "ban_ms = 0; circuit_failures = 1; circuit_open_ms = 1500; half_open_trials = 1;"})
    try:
        key = setup_tenant(gw, "acme", "alice")
        add_endpoint(gw, "ep", "acme", [a, b])        # round robin
        gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
        policy(gw, "m")
        gw.start()
        wait_for(lambda: gw.chat(key).status == 200, 5, what="key live")
        cached = body(unique("trial"))
        assert gw.request("POST", "/v1/chat/completions", cached, key=key).headers.get("x-cache") == "miss"
        wait_for(lambda: gw.request("POST", "/v1/chat/completions", cached, key=key).headers.get("x-cache") == "hit",
                 5, what="the entry stored")
        a.behavior("status=503")
        n = a.stats()["requests"]
        for i in range(4):                              # A fails once (retried on B): its circuit opens
            assert gw.request("POST", "/v1/chat/completions", body(unique("fail")), key=key).status == 200
            if a.stats()["requests"] > n:
                break
        assert a.stats()["requests"] == n + 1, a.stats()
        a.behavior("")
        time.sleep(1.7)                                 # past the open time: A's next pick is the trial
        for i in range(2):                              # round robin: one of the two hits is routed to A
            hit = gw.request("POST", "/v1/chat/completions", cached, key=key)
            assert hit.status == 200 and hit.headers.get("x-cache") == "hit", hit
        n = a.stats()["requests"]
        for i in range(2):                              # well inside the trial window
            r = gw.request("POST", "/v1/chat/completions", body(unique("after")), key=key)
            assert r.status == 200 and r.headers.get("x-cache") == "miss", r
        assert a.stats()["requests"] == n + 1, "the hit kept A's trial: %r" % a.stats()
    finally:
        gw.stop()
        a.stop()
        b.stop()


def test_a_hit_keeps_the_content_flag_R_GUARD_3(c):
    """A flag rule matched the request, so its answer says so whether the upstream or the
    cache gave it: X-Content-Flag on the miss and on the hit."""
    gw = Gateway("t0110flag", procs=1, threads=4)
    try:
        key = setup_tenant(gw, "acme", "alice")
        add_endpoint(gw, "ep", "acme", [c.fake])
        gw.ctl("route", "add", "m", "ep", "--tenant", "acme")
        policy(gw, "m")
        gw.ctl("rule", "add", "pii", "--keyword", "passport", "--action", "flag")
        gw.start()
        wait_for(lambda: gw.chat(key).status == 200, 5, what="key live")
        b = body(unique("my passport number"))
        miss = gw.request("POST", "/v1/chat/completions", b, key=key)
        assert miss.headers.get("x-cache") == "miss" and miss.headers.get("x-content-flag") == "pii", miss.headers
        hit = wait_for(lambda: (lambda r: r if r.headers.get("x-cache") == "hit" else None)(
            gw.request("POST", "/v1/chat/completions", b, key=key)), 5, what="the hit")
        assert hit.headers.get("x-content-flag") == "pii", hit.headers
    finally:
        gw.stop()


run_tests(globals(), setup, teardown)
