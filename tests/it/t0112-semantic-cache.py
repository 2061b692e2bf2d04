#!/usr/bin/env python3
"""t0112-semantic-cache: the semantic answer cache (issue 15, R-CACHE-4).

A model whose policy says cache = semantic, with settings.semantic_cache_embedding_model
naming a routed embedding model: the last user turn of a greedy request is embedded through
sluice's own routes (a metered usage event of its own) and compared by cosine similarity with
the entries of the same scope (tenant, endpoint, model, parameters, earlier messages). The
stand-in's embedding is a 64-bucket bag of words, so reworded questions with the same words
have cosine 1 and one more word among nine gives ~0.953 (above 0.95). A near-duplicate is
served from the cache with X-Cache: hit-semantic and no upstream call; a different question,
another tenant, another max_tokens miss; hits are audited (percent 100 here) and listed by
`sluicectl cache hits` and GET /api/v1/cache/semantic-hits (members 403); the entry cap
evicts the oldest; the TTL ends entries; an embedding upstream that fails leaves a plain miss, a
refusal (4xx) is not failed over, one deadline covers every attempt, a 200 without a vector is
metered, a turn over cache.semantic_max_input_bytes is exact only, and no prompt is kept while
the audit is off."""
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (ApiSession, Fake, Gateway, add_endpoint, add_user_with_password, fcgi_request, fcgi_sockets,
                     run_tests, setup_with, stop_all, wait_for)

Q = "what is the capital city of France please tell me"
NEAR = "please tell me what is the capital city of France now"      # cosine ~0.953
OTHER = "how do I bake sourdough bread at home"                     # cosine 0
PW = {"root": "root-pass-1", "mem": "mem-pass-1", "adm": "adm-pass-1"}


def policy(gw, model, cache="semantic", ttl=60, threshold=None):
    gw.sql_write("INSERT INTO model_policies (model, cache, cache_ttl_s, semantic_threshold) VALUES (?, ?, ?, ?)"
                 " ON CONFLICT(model) DO UPDATE SET cache = excluded.cache, cache_ttl_s = excluded.cache_ttl_s,"
                 " semantic_threshold = excluded.semantic_threshold", model, cache, ttl, threshold)


def setup_gateway(gw, chat, emb, c=None):
    gw.ctl("tenant", "add", "acme")
    gw.ctl("tenant", "add", "beta")
    gw.ctl("user", "add", "op", "--tenant", "default", "--role", "operator")
    key = gw.ctl("key", "add", "--user", "op")["key"]
    ep = add_endpoint(gw, "ep", "default", [chat])["id"]
    eep = add_endpoint(gw, "embep", "default", [emb])["id"]
    for model in ("m", "t", "x"):
        gw.ctl("route", "add", model, "ep", "--tenant", "default")
    gw.ctl("route", "add", "emb", "embep", "--tenant", "default", "--target-model", "emb-v1")
    policy(gw, "m")
    policy(gw, "t", ttl=1)
    policy(gw, "x", threshold=0.99)         # the model's own threshold wins over the setting's
    gw.ctl("config", "set", "semantic_cache_embedding_model", "emb")
    gw.ctl("config", "set", "semantic_cache_audit_percent", "100")
    if c is not None:
        c.ep, c.eep = ep, eep
    return key


def build(c):
    c.chat, c.emb = Fake("semchat"), Fake("sememb")
    c.gw = Gateway("t0112", procs=2, threads=8)
    c.key = setup_gateway(c.gw, c.chat, c.emb, c)
    add_user_with_password(c.gw, "root", "default", "operator", PW["root"])
    add_user_with_password(c.gw, "mem", "acme", "member", PW["mem"])
    add_user_with_password(c.gw, "adm", "acme", "admin", PW["adm"])
    c.gw.start()
    wait_for(lambda: post(c, body("warm up " + uuid.uuid4().hex, model="x", temperature=0.5)).status == 200, 5,
             what="key live")
    time.sleep(0.8)
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw", "chat", "emb")


def body(content, model="m", system="be brief", **extra):
    b = {"model": model, "temperature": 0,
         "messages": [{"role": "system", "content": system}, {"role": "user", "content": content}]}
    b.update(extra)
    return b


def post(c, b, tenant="acme", rid=None, gw=None, key=None):
    h = {"X-Sluice-Tenant": tenant}
    if rid:
        h["X-Request-Id"] = rid
    return (gw or c.gw).request("POST", "/v1/chat/completions", b, key=key or c.key, headers=h)


def chat_calls(c):
    return c.chat.stats()["requests"]


def emb_calls(c):
    return c.emb.stats()["requests"]


def sem_entries(gw, where="1=1", *params):
    return gw.sql("SELECT id, key_hash, tenant_id, model, embed_model, dims, length(vector), prompt"
                  " FROM semantic_entries WHERE " + where, *params)


def newest(gw):
    return gw.sql("SELECT coalesce(max(id), 0) FROM semantic_entries")[0][0]


def last_id(gw):
    """The newest entry once the writer has stored what earlier tests left it (it writes
    in batches, after the answer went out)."""
    seen = newest(gw)
    while True:
        time.sleep(0.25)
        now = newest(gw)
        if now == seen:
            return now
        seen = now


def stored(gw, id_before):
    """Waits for the usage writer to store a semantic entry newer than id_before (expiry
    may take others out in the same batch: the count is no measure); the rows by id."""
    wait_for(lambda: newest(gw) > id_before, 5, what="a semantic entry stored")
    return sem_entries(gw, "1=1 ORDER BY id")


def system():
    """A scope of its own for each test (the system prompt is part of it)."""
    return "be brief " + uuid.uuid4().hex[:10]


def test_near_duplicate_hits_R_CACHE_4(c):
    s = system()
    c.emb.behavior("prompt_tokens=17")      # what the embedding upstream counts is what is billed
    n, up, eup = last_id(c.gw), chat_calls(c), emb_calls(c)
    r1 = post(c, body(Q, system=s), rid="sem-miss-1")
    assert r1.status == 200 and r1.headers.get("x-cache") == "miss", (r1, r1.headers)
    assert chat_calls(c) == up + 1 and emb_calls(c) == eup + 1
    row = stored(c.gw, n)[-1]
    assert row[4] == "emb" and row[5] == 64 and row[6] == 256 and row[7] == Q, row
    kind = c.gw.sql("SELECT kind FROM cache_entries WHERE key_hash = ?", row[1])
    assert kind == [("semantic",)], kind
    r2 = post(c, body(NEAR, system=s), rid="sem-hit-1")
    assert r2.status == 200 and r2.headers.get("x-cache") == "hit-semantic", (r2, r2.headers)
    assert r2.body == r1.body, (r1.body, r2.body)
    assert chat_calls(c) == up + 1, "a semantic hit called the chat upstream"
    assert emb_calls(c) == eup + 2
    # the very same question is an exact hit (no embedding needed)
    r3 = post(c, body(Q, system=s))
    assert r3.headers.get("x-cache") == "hit" and r3.body == r1.body, r3.headers
    assert emb_calls(c) == eup + 2 and chat_calls(c) == up + 1
    c.emb.behavior("")

    # metered: each embedding is a usage event of the embedding model; the hit is cached = 1
    def rows():
        got = c.gw.sql("SELECT request_id, model, routed_model, path, prompt_tokens, cached, status, tenant_id,"
                       " endpoint_id FROM usage_events WHERE request_id IN ('sem-miss-1', 'sem-hit-1')"
                       " ORDER BY id")
        return got if len(got) == 4 else None
    got = wait_for(rows, 5, what="four usage events")
    embeds = [g for g in got if g[3] == "/v1/embeddings"]
    chats = [g for g in got if g[3] == "/v1/chat/completions"]
    assert len(embeds) == 2 and len(chats) == 2, got
    for e in embeds:
        assert e[1] == "emb" and e[2] == "emb-v1" and e[4] == 17 and e[5] == 0 and e[6] == 200, e
        assert e[8] == c.eep, e
    miss, hit = sorted(chats, key=lambda g: g[0])[::-1]
    assert miss[0] == "sem-miss-1" and miss[5] == 0 and hit[5] == 1, chats
    assert miss[7] == hit[7] == embeds[0][7], got        # all the caller's tenant
    # the access log says which cache answered

    def lines():
        got = {}
        with open(os.path.join(c.gw.dir, "access.log")) as f:
            for line in f:
                j = json.loads(line)
                if j.get("request_id") in ("sem-miss-1", "sem-hit-1"):
                    got[j["request_id"]] = j.get("cache")
        return got if len(got) == 2 else None
    assert wait_for(lines, 5, what="access log lines") == {"sem-miss-1": "miss", "sem-hit-1": "hit-semantic"}


def test_different_question_misses_R_CACHE_4(c):
    s = system()
    n, up = last_id(c.gw), chat_calls(c)
    assert post(c, body(Q, system=s)).headers.get("x-cache") == "miss"
    stored(c.gw, n)
    r = post(c, body(OTHER, system=s))
    assert r.status == 200 and r.headers.get("x-cache") == "miss", r.headers
    assert chat_calls(c) == up + 2
    # below the model's own threshold (0.99): ~0.953 misses there
    s2 = system()
    n = last_id(c.gw)
    assert post(c, body(Q, model="x", system=s2)).headers.get("x-cache") == "miss"
    stored(c.gw, n)
    assert post(c, body(NEAR, model="x", system=s2)).headers.get("x-cache") == "miss"
    # reordered words are cosine 1: above any threshold
    assert post(c, body("please tell me what is the capital city of France", model="x",
                        system=s2)).headers.get("x-cache") == "hit-semantic"
    assert chat_calls(c) == up + 4


def test_match_among_many_candidates_R_CACHE_4(c):
    """The scope's newest entries are compared a batch at a time: a match older than the
    first batch (64) is still found."""
    s = system()
    n, up = last_id(c.gw), chat_calls(c)
    assert post(c, body(Q, system=s)).headers.get("x-cache") == "miss"
    for i in range(70):
        words = " ".join("w%s" % uuid.uuid4().hex[:8] for _ in range(4))
        r = post(c, body(words, system=s))
        assert r.status == 200 and r.headers.get("x-cache") == "miss", (i, r.headers)
    wait_for(lambda: len(sem_entries(c.gw, "id > ?", n)) == 71, 10, what="71 entries")
    r = post(c, body(NEAR, system=s), rid="sem-many-1")
    assert r.headers.get("x-cache") == "hit-semantic", r.headers
    assert chat_calls(c) == up + 71


def test_other_tenant_misses_R_CACHE_4(c):
    s = system()
    n, up = last_id(c.gw), chat_calls(c)
    assert post(c, body(Q, system=s), tenant="acme").headers.get("x-cache") == "miss"
    stored(c.gw, n)
    r = post(c, body(NEAR, system=s), tenant="beta")
    assert r.status == 200 and r.headers.get("x-cache") == "miss", r.headers
    assert chat_calls(c) == up + 2
    # beta's answer is an entry of its own; beta's near-duplicate hits it, acme's stays acme's
    beta = c.gw.sql("SELECT id FROM tenants WHERE name = 'beta'")[0][0]
    rows = wait_for(lambda: sem_entries(c.gw, "id > ? AND tenant_id = ?", n, beta), 5, what="beta's entry")
    assert rows[0][7] == NEAR, rows
    assert post(c, body(Q, system=s), tenant="beta").headers.get("x-cache") == "hit-semantic"
    assert chat_calls(c) == up + 2


def test_changed_parameter_misses_R_CACHE_4(c):
    s = system()
    n, up = last_id(c.gw), chat_calls(c)
    assert post(c, body(Q, system=s, max_tokens=50)).headers.get("x-cache") == "miss"
    stored(c.gw, n)
    assert post(c, body(NEAR, system=s, max_tokens=51)).headers.get("x-cache") == "miss"
    # an earlier message differs: another scope as well
    b = body(NEAR, system=s, max_tokens=50)
    b["messages"][1:1] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert post(c, b).headers.get("x-cache") == "miss"
    assert post(c, body(NEAR, system=s, max_tokens=50)).headers.get("x-cache") == "hit-semantic"
    assert chat_calls(c) == up + 3
    # a sampled request is never looked up (nor embedded)
    eup = emb_calls(c)
    r = post(c, body(NEAR, system=s, max_tokens=50, temperature=0.7))
    assert r.status == 200 and "x-cache" not in r.headers and emb_calls(c) == eup, r.headers


def test_audit_rows_and_listing_R_CACHE_4(c):
    s = system()
    n = last_id(c.gw)
    post(c, body(Q, system=s))
    entry = stored(c.gw, n)[-1]
    r = post(c, body(NEAR, system=s), rid="sem-audit-1")
    assert r.headers.get("x-cache") == "hit-semantic"
    got = wait_for(lambda: c.gw.sql("SELECT request_id, similarity, entry_id, key_hash, prompt, matched, model,"
                                    " tenant_id FROM semantic_hits WHERE request_id = 'sem-audit-1'"), 5,
                   what="the audit row")
    row = got[0]
    assert 0.95 <= row[1] < 0.96, row
    assert row[2] == entry[0] and row[3] == entry[1] and row[4] == NEAR and row[5] == Q and row[6] == "m", (row, entry)
    listed = c.gw.ctl("cache", "hits", "--model", "m", "--limit", "5")["hits"]
    assert listed and listed[0]["request_id"] == "sem-audit-1", listed
    assert listed[0]["prompt"] == NEAR and listed[0]["matched"] == Q and listed[0]["tenant"] == "acme", listed[0]
    assert len(c.gw.ctl("cache", "hits", "--limit", "1")["hits"]) == 1
    assert c.gw.ctl("cache", "hits", "--tenant", "beta")["hits"] == [] or all(
        h["tenant"] == "beta" for h in c.gw.ctl("cache", "hits", "--tenant", "beta")["hits"])
    root = ApiSession(c.gw, "root", PW["root"])
    res = root.get("/api/v1/cache/semantic-hits?model=m&limit=3")
    assert res.status == 200 and res.json()["data"][0]["request_id"] == "sem-audit-1", res
    # a tenant admin sees its own tenant's hits only (beta's near-duplicate hit is audited too)
    every = root.get("/api/v1/cache/semantic-hits?limit=1000").json()["data"]
    assert {h["tenant"] for h in every} >= {"acme", "beta"}, every
    adm = ApiSession(c.gw, "adm", PW["adm"])
    own = adm.get("/api/v1/cache/semantic-hits?limit=1000")
    assert own.status == 200 and own.json()["data"] and {h["tenant"] for h in own.json()["data"]} == {"acme"}, own
    assert adm.get("/api/v1/cache/semantic-hits?tenant=beta").status == 403
    mem = ApiSession(c.gw, "mem", PW["mem"])
    assert mem.get("/api/v1/cache/semantic-hits").status == 403
    bad = root.get("/api/v1/cache/semantic-hits?limit=zero")
    assert bad.status == 400, bad
    # usage prune takes audit rows past the retention with the events they sample
    c.gw.sql_write("INSERT INTO semantic_hits (ts_ms, request_id, tenant_id, model, similarity, entry_id, key_hash,"
                   " prompt, matched) VALUES (1000, 'sem-ancient', 2, 'm', 0.97, 1, 'k', 'a', 'b')")
    pruned = c.gw.ctl("usage", "prune", "--days", "30")
    assert pruned["semantic_hits_deleted"] == 1, pruned
    assert not c.gw.sql("SELECT 1 FROM semantic_hits WHERE request_id = 'sem-ancient'")
    assert c.gw.sql("SELECT 1 FROM semantic_hits WHERE request_id = 'sem-audit-1'")
    # stats count the semantic entries by kind
    stats = c.gw.ctl("cache", "stats", "--model", "m")
    assert stats["semantic_entries"] >= 1 and stats["models"][0]["semantic_entries"] >= 1, stats
    # audit percent 0: hits are served, none recorded
    c.gw.ctl("config", "set", "semantic_cache_audit_percent", "0")
    try:
        time.sleep(0.8)     # every responder's poll
        before = c.gw.sql("SELECT count(*) FROM semantic_hits")[0][0]
        for i in range(3):
            r = post(c, body(NEAR, system=s), rid="sem-audit-off-%d" % i)
            assert r.headers.get("x-cache") == "hit-semantic", r.headers
        wait_for(lambda: c.gw.usage_events("request_id = 'sem-audit-off-2' AND cached = 1"), 5,
                 what="the hits' events")
        time.sleep(0.3)
        assert c.gw.sql("SELECT count(*) FROM semantic_hits")[0][0] == before
    finally:
        c.gw.ctl("config", "set", "semantic_cache_audit_percent", "100")
        time.sleep(0.8)


def test_ttl_expiry_R_CACHE_4(c):
    s = system()
    n, up = last_id(c.gw), chat_calls(c)
    assert post(c, body(Q, model="t", system=s)).headers.get("x-cache") == "miss"
    stored(c.gw, n)
    assert post(c, body(NEAR, model="t", system=s)).headers.get("x-cache") == "hit-semantic"
    time.sleep(1.2)
    assert post(c, body(NEAR, model="t", system=s)).headers.get("x-cache") == "miss"
    assert chat_calls(c) == up + 2


def test_embedding_down_is_a_plain_miss_R_CACHE_4(c):
    s = system()
    up = chat_calls(c)
    c.emb.behavior("status=500")
    try:
        for _ in range(2):
            r = post(c, body(Q, system=s))
            assert r.status == 200 and r.headers.get("x-cache") == "miss", (r, r.headers)
    finally:
        c.emb.behavior("")
    assert chat_calls(c) == up + 2
    # without an embedding the answer is still stored under its exact key (no vector)
    wait_for(lambda: post(c, body(Q, system=s)).headers.get("x-cache") == "hit", 5, what="an exact hit")
    assert "semantic cache could not embed" in c.gw.log_text()


def test_embedding_fails_over_to_the_next_replica_R_CACHE_4(c):
    """The embedding model is routed like any request: a dead replica is passed over."""
    dead = Fake("semdead")
    dead_url = dead.url
    dead.stop()
    if not c.gw.sql("SELECT 1 FROM endpoints WHERE name = 'embep2'"):
        c.gw.ctl("endpoint", "add", "embep2", "--tenant", "default", "--algorithm", "round_robin")
        c.gw.ctl("replica", "add", "embep2", dead_url)
        c.gw.ctl("replica", "add", "embep2", c.emb.url)
        c.gw.ctl("route", "add", "emb2", "embep2", "--tenant", "default")
    c.gw.ctl("config", "set", "semantic_cache_embedding_model", "emb2")
    try:
        time.sleep(0.8)
        s = system()
        n, eup = last_id(c.gw), emb_calls(c)
        for i in range(3):       # round robin: the dead one comes first at least once
            q = "question number %s about failover" % ("one two three".split()[i])
            r = post(c, body(q, system=s))
            assert r.status == 200 and r.headers.get("x-cache") == "miss", r.headers
        assert emb_calls(c) == eup + 3
        rows = stored(c.gw, n)
        wait_for(lambda: len(sem_entries(c.gw, "id > ? AND embed_model = 'emb2'", n)) == 3, 5, what="three entries")
        # another embedding model's vectors are never compared with these
        assert post(c, body("question number one about failover", system=s)).headers.get("x-cache") == "hit"
        assert rows
    finally:
        c.gw.ctl("config", "set", "semantic_cache_embedding_model", "emb")
        time.sleep(0.8)


def embed_events(c, rid):
    return c.gw.sql("SELECT prompt_tokens, usage_estimated, status, model FROM usage_events"
                    " WHERE request_id = ? AND path = '/v1/embeddings'", rid)


def chat_event(c, rid):
    return wait_for(lambda: c.gw.usage_events("request_id = ? AND path = '/v1/chat/completions'", rid), 5,
                    what="the chat's usage event of %s" % rid)


def embed_model(c, name, fakes):
    """An embedding model of its own, on an endpoint of its own with these replicas, made
    the semantic cache's (the test sets it back to emb)."""
    if not c.gw.sql("SELECT 1 FROM endpoints WHERE name = ?", name + "ep"):
        add_endpoint(c.gw, name + "ep", "default", fakes)
        c.gw.ctl("route", "add", name, name + "ep", "--tenant", "default")
    c.gw.ctl("config", "set", "semantic_cache_embedding_model", name)
    time.sleep(0.8)         # every responder's poll


def test_embedding_refusal_is_final_R_CACHE_4(c):
    """A 4xx of the embedding upstream (the turn too long for its context, say) is asked of
    one replica once per request, not failed over, not metered (nothing was billed): a
    plain miss, the request served."""
    a, b = Fake("sem400a"), Fake("sem400b")
    try:
        for f in (a, b):
            f.behavior("status=400")
        embed_model(c, "emb400", [a, b])
        s, up = system(), chat_calls(c)
        for i in range(2):
            rid = "sem-refused-%d" % i
            r = post(c, body("refused question number %d" % i, system=s), rid=rid)
            assert r.status == 200 and r.headers.get("x-cache") == "miss", (r, r.headers)
            calls = a.stats()["requests"] + b.stats()["requests"]
            assert calls == i + 1, "the refusal was failed over: %d embedding calls for %d requests" % (calls, i + 1)
            chat_event(c, rid)
            time.sleep(0.3)     # the writer's batch holds both events
            assert embed_events(c, rid) == [], embed_events(c, rid)
        assert chat_calls(c) == up + 2
    finally:
        c.gw.ctl("config", "set", "semantic_cache_embedding_model", "emb")
        time.sleep(0.8)
        a.stop()
        b.stop()


def test_embedding_deadline_covers_failover_R_CACHE_4(c):
    """cache.semantic_embed_timeout_ms (2000) bounds the embedding as a whole: two replicas
    slower than it add about 2 s to the request, not 2 s each, and the one cut short by
    the deadline is not failed over to the next."""
    a, b = Fake("semslowa"), Fake("semslowb")
    try:
        for f in (a, b):
            f.behavior("ttfb_ms=3000")
        embed_model(c, "embslow", [a, b])
        s = system()
        for i in range(2):      # round robin: each replica comes first once
            t0 = time.monotonic()
            r = post(c, body("slow question number %d" % i, system=s))
            took = time.monotonic() - t0
            assert r.status == 200 and r.headers.get("x-cache") == "miss", (r, r.headers)
            assert 1.9 <= took < 2.8, "the request took %.2f s with a 2 s embedding deadline" % took
        calls = a.stats()["requests"] + b.stats()["requests"]
        assert calls == 2, "%d embedding calls for 2 requests" % calls
    finally:
        c.gw.ctl("config", "set", "semantic_cache_embedding_model", "emb")
        time.sleep(0.8)
        a.stop()
        b.stop()


def test_long_turn_is_exact_only_R_CACHE_4(c):
    """A last user turn longer than cache.semantic_max_input_bytes (8192) is never embedded
    (nor cut to fit): the exact cache alone answers it. One of exactly 8192 bytes is."""
    s = system()
    eup = emb_calls(c)
    words = " ".join("word%d" % i for i in range(2000))
    long_turn = (Q + " " + words)[:8193]
    assert len(long_turn.encode()) == 8193
    r = post(c, body(long_turn, system=s))
    assert r.status == 200 and r.headers.get("x-cache") == "miss", r.headers
    assert emb_calls(c) == eup, "a turn over the bound was embedded"
    wait_for(lambda: post(c, body(long_turn, system=s)).headers.get("x-cache") == "hit", 5, what="an exact hit")
    # another long turn beginning the same way is no match (no cut turn to compare)
    other = long_turn[:-1] + "Z"
    r = post(c, body(other, system=s))
    assert r.status == 200 and r.headers.get("x-cache") == "miss", r.headers
    assert emb_calls(c) == eup
    # at the bound: embedded as any other
    r = post(c, body(long_turn[:8192], system=s))
    assert r.status == 200 and r.headers.get("x-cache") == "miss", r.headers
    assert emb_calls(c) == eup + 1


def test_embedding_without_vector_is_metered_R_CACHE_4(c):
    """A 200 that holds no usable embedding was paid for: its usage event (the upstream's
    count when the answer has one, else estimated), still a plain miss, not failed over."""
    s = system()
    eup = emb_calls(c)
    c.emb.behavior("bad_json=1")
    try:
        r = post(c, body(Q, system=s), rid="sem-novec-1")
        assert r.status == 200 and r.headers.get("x-cache") == "miss", r.headers
        assert emb_calls(c) == eup + 1
    finally:
        c.emb.behavior("")
    got = wait_for(lambda: embed_events(c, "sem-novec-1"), 5, what="the embedding's usage event")
    assert got == [((len(Q) + 3) // 4, 1, 200, "emb")], got


def test_no_prompt_kept_without_audit_R_CACHE_4(c):
    """With semantic_cache_audit_percent = 0 a semantic entry keeps no prompt ('');
    an audit row that matches it later shows '' as the matched turn."""
    s = system()
    c.gw.ctl("config", "set", "semantic_cache_audit_percent", "0")
    try:
        time.sleep(0.8)
        n = last_id(c.gw)
        assert post(c, body(Q, system=s)).headers.get("x-cache") == "miss"
        row = stored(c.gw, n)[-1]
        assert row[7] == "" and row[5] == 64, row
    finally:
        c.gw.ctl("config", "set", "semantic_cache_audit_percent", "100")
        time.sleep(0.8)
    r = post(c, body(NEAR, system=s), rid="sem-noprompt-1")
    assert r.headers.get("x-cache") == "hit-semantic", r.headers
    got = wait_for(lambda: c.gw.sql("SELECT prompt, matched, entry_id FROM semantic_hits"
                                    " WHERE request_id = 'sem-noprompt-1'"), 5, what="the audit row")
    assert got == [(NEAR, "", row[0])], got


def stream_records(c, sock, b):
    recs = []
    r = fcgi_request(sock, "POST", "/v1/chat/completions", b,
                     {"Authorization": "Bearer " + c.key, "X-Sluice-Tenant": "acme"}, records=recs)
    joined = b"".join(recs)
    head_len = joined.index(b"\r\n\r\n") + 4
    out, skipped = [], 0
    for rec in recs:
        if skipped + len(rec) <= head_len:
            skipped += len(rec)
            continue
        out.append(rec[max(0, head_len - skipped):])
        skipped = head_len
    return r, out


def test_stream_replayed_event_for_event_R_CACHE_4(c):
    socks = fcgi_sockets(c.gw)
    s = system()
    n, up = last_id(c.gw), chat_calls(c)
    r1, w1 = stream_records(c, socks[0], body(Q, system=s, stream=True))
    assert r1.status == 200 and r1.headers.get("x-cache") == "miss", r1
    stored(c.gw, n)
    r2, w2 = stream_records(c, socks[1], body(NEAR, system=s, stream=True))
    assert r2.status == 200 and r2.headers.get("x-cache") == "hit-semantic", r2.headers
    assert w1 == w2 and len(w2) >= 3 and w2[-1] == b"data: [DONE]\n\n", (w1, w2)
    assert chat_calls(c) == up + 1
    # a stream and a JSON answer are different scopes
    assert post(c, body(NEAR, system=s)).headers.get("x-cache") == "miss"


def metric(text, name, kind):
    for line in text.splitlines():
        if line.startswith('%s{kind="%s"} ' % (name, kind)):
            return float(line.split()[-1])
    return None


def test_metrics_and_entry_cap_R_CACHE_4(c):
    text = c.gw.request("GET", "/metrics").body.decode()
    assert metric(text, "sluice_cache_hits_total", "semantic") >= 1, text
    assert metric(text, "sluice_cache_misses_total", "semantic") >= 1
    # cache.semantic_max_entries = 3: the oldest semantic entries (and their answers) go
    chat, emb = Fake("semchat2"), Fake("sememb2")
    gw = Gateway("t0112cap", procs=1, threads=4,
                 conf={"cache": "max_bytes = 268435456; max_entry_bytes = 4194304; semantic_max_entries = 3;"})
    try:
        key = setup_gateway(gw, chat, emb)
        gw.start()
        wait_for(lambda: post(c, body("warm " + uuid.uuid4().hex, model="x", temperature=0.5), gw=gw,
                              key=key).status == 200, 5, what="key live")
        time.sleep(0.8)
        words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
        for i, w in enumerate(words):
            r = post(c, body("tell me about %s %s" % (w, w), system="cap"), gw=gw, key=key)
            assert r.status == 200 and r.headers.get("x-cache") == "miss", r.headers
            wait_for(lambda: metric(gw.request("GET", "/metrics").body.decode(), "sluice_cache_stores_total",
                                    "semantic") == i + 1, 5, what="entry %d stored" % i)
        got = sorted(row[7] for row in sem_entries(gw))
        assert got == sorted("tell me about %s %s" % (w, w) for w in words[3:]), got
        assert gw.sql("SELECT count(*) FROM cache_entries")[0][0] == 3
        text = gw.request("GET", "/metrics").body.decode()
        assert metric(text, "sluice_cache_evictions_total", "semantic") == 3, text
        assert post(c, body("tell me about foxtrot foxtrot", system="cap"), gw=gw, key=key).headers.get(
            "x-cache") == "hit"
        assert post(c, body("tell me about alpha alpha", system="cap"), gw=gw, key=key).headers.get(
            "x-cache") == "miss"
    finally:
        gw.stop()
        chat.stop()
        emb.stop()


run_tests(globals(), setup, teardown)
