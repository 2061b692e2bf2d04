#!/usr/bin/env python3
"""t0160-semantic: the `semantic` strategy of model auto (issue 18, R-SEM-1..3).

Tenants acme and beta each route three chat models (coder, writer, secret) and an
embedding model (emb, the stand-in's 64-bucket bag of words) to stand-ins. The policies
describe the chat models; secret is allowed to tenant beta only and writer and secret
carry compliance labels. Through the gateway: BM25 picks between two described models
(X-Routing-Reason bm25:SCORE); a text no description knows falls back to
semantic_default_model (fallback); semantic rules force and forbid (rule:NAME; forbid
beats force), from sluicectl and /api/v1/semantic-rules; the tenant allow-list and a
key's required labels filter the candidates; with semantic_embedding_model set the
score is the hybrid (hybrid:SCORE), description embeddings are fetched once and
metered; an embedding backend that fails mid-run degrades to BM25 (still answers,
logged); the access log has routing_reason and sluice_semantic_routing_total{layer}
counts each layer's decisions."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (ApiSession, Fake, Gateway, add_endpoint, add_user_with_password, ctl_fail, expect, run_tests,
                     setup_with, stop_all, wait_for)

CODE = "please debug my Python function, the compiler errors make no sense"
POEM = "write some poems and song lyrics about the sea"
LEGAL = "review this confidential legal contract for compliance"
NONE = "hello there, how are you today"
DESCRIPTIONS = {
    "coder": "Code generation: writes, reviews and debugs Python, C, Rust and SQL code; explains compiler errors",
    "writer": "Creative writing: poems, stories, song lyrics, marketing copy and translation of prose",
    "secret": "Confidential legal contracts and compliance review",
}
PW = "root-pass-1"


def build(c):
    c.fakes = {m: Fake("sem-" + m) for m in ("coder", "writer", "secret", "emb")}
    c.gw = Gateway("t0160", procs=1, threads=8)     # one responder: one description cache
    c.keys = {}
    for t, u in (("acme", "alice"), ("beta", "bob")):
        c.gw.ctl("tenant", "add", t)
        c.gw.ctl("user", "add", u, "--tenant", t, "--role", "member")
        k = c.gw.ctl("key", "add", "--user", u)
        c.keys[t] = k["key"]
        if t == "acme":
            c.kid = k["id"]
        for m, f in c.fakes.items():
            add_endpoint(c.gw, "%s-%s" % (t, m), t, [f])
            c.gw.ctl("route", "add", m, "%s-%s" % (t, m), "--tenant", t)
    c.gw.ctl("policy", "set", "coder", "--purpose", "chat", "--description", DESCRIPTIONS["coder"])
    c.gw.ctl("policy", "set", "writer", "--purpose", "chat", "--description", DESCRIPTIONS["writer"],
             "--labels", "eu-only")
    c.gw.ctl("policy", "set", "secret", "--purpose", "chat", "--description", DESCRIPTIONS["secret"],
             "--tenants", "beta", "--labels", "eu-only,pii-ok")
    c.gw.ctl("policy", "set", "emb", "--purpose", "embedding")
    for k, v in (("auto_routing_enabled", "true"), ("auto_routing_strategy", "semantic"),
                 ("semantic_default_model", "writer"), ("semantic_threshold", "0.1")):
        c.gw.ctl("config", "set", k, v)
    add_user_with_password(c.gw, "root", "default", "operator", PW)
    add_user_with_password(c.gw, "adm", "acme", "admin", PW)
    add_user_with_password(c.gw, "mem", "acme", "member", PW)
    c.gw.start()
    wait_for(lambda: ask(c, NONE).status == 200, 10, what="keys live")
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    stop_all(c, "gw")
    if c and getattr(c, "fakes", None):
        for f in c.fakes.values():
            f.stop()


def ask(c, text, tenant="acme", rid=None):
    h = {"X-Request-Id": rid} if rid else None
    return c.gw.request("POST", "/v1/chat/completions", {"model": "auto", "messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": text}]}, key=c.keys[tenant], headers=h)


def routed(r):
    assert r.status == 200, r
    return r.headers.get("x-routed-model"), r.headers.get("x-routing-reason")


def route_of(c, text, tenant="acme"):
    """(model, reason) of an answer, (None, "") while the gateway refuses (config in flight)."""
    r = ask(c, text, tenant)
    return (r.headers.get("x-routed-model"), r.headers.get("x-routing-reason") or "") if r.status == 200 else (None, "")


def applied(c, text, want, tenant="acme"):
    """Waits (config changes reach the responders within ~2 s) until text routes to want."""
    def check():
        got = route_of(c, text, tenant)
        return got[0] == want and got
    return wait_for(check, 10, what="%r routed to %s" % (text, want))


def layers(c):
    r = c.gw.request("GET", "/metrics")
    assert r.status == 200, r
    out = {}
    for line in r.body.decode().splitlines():
        if line.startswith('sluice_semantic_routing_total{layer="'):
            name = line.split('"')[1]
            out[name] = float(line.rsplit(" ", 1)[1])
    return out


def test_bm25_picks_the_described_model_R_SEM_2(c):
    model, reason = routed(ask(c, CODE))
    assert model == "coder" and reason.startswith("bm25:"), (model, reason)
    assert 0.1 <= float(reason[5:]) <= 1, reason
    model, reason = routed(ask(c, POEM))
    assert model == "writer" and reason.startswith("bm25:"), (model, reason)
    # the upstream got the model's real name
    assert json.loads(c.fakes["writer"].stats()["last"]["body"])["model"] == "writer"
    # a stream says the same in its head
    st, h, chunks = c.gw.stream_raw(c.keys["acme"], {"model": "auto", "stream": True,
                                                     "messages": [{"role": "user", "content": CODE}]})
    assert st == 200 and h.get("x-routed-model") == "coder", (st, h)
    assert h.get("x-routing-reason", "").startswith("bm25:"), h


def test_fallback_below_threshold_R_SEM_3(c):
    model, reason = routed(ask(c, NONE))
    assert (model, reason) == ("writer", "fallback"), (model, reason)
    c.gw.ctl("config", "set", "semantic_default_model", "coder")
    model, reason = applied(c, NONE, "coder")
    assert reason == "fallback", reason
    # a threshold above every score: even the code question falls back
    c.gw.ctl("config", "set", "semantic_threshold", "0.99")
    wait_for(lambda: route_of(c, POEM)[1] == "fallback", 10, what="threshold 0.99")
    assert routed(ask(c, POEM))[0] == "coder"
    c.gw.ctl("config", "set", "semantic_threshold", "0.1")
    c.gw.ctl("config", "set", "semantic_default_model", "writer")
    applied(c, NONE, "writer")
    wait_for(lambda: route_of(c, POEM)[1].startswith("bm25:"), 10, what="threshold back")


def test_tenant_allow_list_R_SEM_1(c):
    model, reason = routed(ask(c, LEGAL, tenant="beta"))
    assert model == "secret" and reason.startswith("bm25:"), (model, reason)
    model, _ = routed(ask(c, LEGAL, tenant="acme"))
    assert model != "secret", model
    # an allow-list names tenants that exist; labels are words
    _, e, _ = ctl_fail(c.gw, "policy", "set", "secret", "--tenants", "beta, nosuch")
    assert e and e["param"] == "tenants" and "nosuch" in e["message"], e
    _, e, _ = ctl_fail(c.gw, "policy", "set", "secret", "--labels", "eu only")
    assert e and e["param"] == "labels", e
    pol = c.gw.ctl("policy", "set", "secret", "--tenants", " beta ,acme")
    assert pol["tenants"] == " beta ,acme" and pol["labels"] == "eu-only,pii-ok", pol
    wait_for(lambda: route_of(c, LEGAL)[0] == "secret", 10, what="acme allowed")
    c.gw.ctl("policy", "set", "secret", "--tenants", "beta")
    wait_for(lambda: route_of(c, LEGAL)[0] not in ("secret", None), 10, what="acme not allowed again")


def test_rules_force_and_forbid_R_SEM_1(c):
    c.gw.ctl("semantic-rule", "add", "haiku-to-coder", "--pattern", "(?i)\\bhaiku\\b", "--force", "coder")
    c.gw.ctl("semantic-rule", "add", "no-coder-secrets", "--pattern", "(?i)password", "--forbid", "coder")
    c.gw.ctl("semantic-rule", "add", "beta-only", "--pattern", "(?i)haiku", "--force", "secret", "--tenant", "beta")
    rules = c.gw.ctl("list", "semantic-rules")["rules"]
    assert {r["name"]: (r["action"], r["model"]) for r in rules} == {
        "haiku-to-coder": ("force", "coder"), "no-coder-secrets": ("forbid", "coder"),
        "beta-only": ("force", "secret")}, rules
    # forbid: the code question is not served by coder (rules are added one by one: wait
    # for the second, which makes the first live too)
    wait_for(lambda: route_of(c, CODE + " and my password")[0] not in ("coder", None), 10, what="forbid live")
    model, reason = routed(ask(c, CODE + " and my password"))
    assert model != "coder" and not reason.startswith("rule:"), (model, reason)
    model, reason = applied(c, "write a haiku poem about the sea", "coder")
    assert reason == "rule:haiku-to-coder", reason
    # forbid beats force
    model, reason = routed(ask(c, "a haiku about my password"))
    assert model != "coder" and not reason.startswith("rule:"), (model, reason)
    # beta: its own rule comes after the global one (id order) -> coder; acme never sees beta-only
    model, reason = routed(ask(c, "haiku", tenant="beta"))
    assert (model, reason) == ("coder", "rule:haiku-to-coder"), (model, reason)
    c.gw.ctl("semantic-rule", "rm", "haiku-to-coder")
    model, reason = applied(c, "haiku", "secret", tenant="beta")
    assert reason == "rule:beta-only", reason
    assert routed(ask(c, "haiku"))[1] == "fallback"
    # a pattern that does not compile, or backtracks without bound, is refused
    ctl_fail(c.gw, "semantic-rule", "add", "bad", "--pattern", "(", "--force", "coder")
    ctl_fail(c.gw, "semantic-rule", "add", "slow", "--pattern", "(a+)+$", "--force", "coder")
    ctl_fail(c.gw, "semantic-rule", "add", "both", "--pattern", "x", "--force", "coder", "--forbid", "writer")
    c.gw.ctl("semantic-rule", "rm", "no-coder-secrets")
    c.gw.ctl("semantic-rule", "rm", "beta-only")
    # a matched rule's label admits only models carrying it: pii-ok is secret's, which is beta's
    c.gw.ctl("semantic-rule", "add", "ssn", "--pattern", "\\b\\d{3}-\\d{2}-\\d{4}\\b", "--forbid", "coder",
             "--label", "pii-ok")
    text = "my number is 123-45-6789, write poems"
    wait_for(lambda: ask(c, text).status == 503, 10, what="ssn rule live")
    assert ask(c, text).json()["error"]["code"] == "no_auto_candidates"
    model, reason = routed(ask(c, text, tenant="beta"))
    assert model == "secret", (model, reason)
    assert routed(ask(c, POEM, tenant="beta"))[0] == "writer"      # no number: no label required
    c.gw.ctl("semantic-rule", "rm", "ssn")


def test_rules_api_R_SEM_1(c):
    s = ApiSession(c.gw, "root", PW)
    made = expect(s.post("/api/v1/semantic-rules", {"name": "api-poems", "pattern": "(?i)sonnet", "force": "coder"}),
                  200)
    assert made["action"] == "force" and made["model"] == "coder" and made["tenant"] is None, made
    listed = expect(s.get("/api/v1/semantic-rules"), 200)["data"]
    assert [r["name"] for r in listed] == ["api-poems"], listed
    expect(s.post("/api/v1/semantic-rules", {"name": "api-poems", "pattern": "x", "forbid": "coder"}), 409)
    expect(s.post("/api/v1/semantic-rules", {"name": "api-bad", "pattern": "x"}), 400)
    model, reason = applied(c, "a sonnet please", "coder")
    assert reason == "rule:api-poems", reason
    expect(s.delete("/api/v1/semantic-rules/%d" % made["id"]), 200)
    expect(s.delete("/api/v1/semantic-rules/%d" % made["id"]), 404)
    wait_for(lambda: route_of(c, "a sonnet please")[1] == "fallback", 10, what="rule gone")
    # rights as content rules': a tenant admin its own tenant's (reads the global ones), members 403
    adm, mem = ApiSession(c.gw, "adm", PW), ApiSession(c.gw, "mem", PW)
    glob = expect(s.post("/api/v1/semantic-rules", {"name": "g", "pattern": "zzz", "forbid": "coder"}), 200)
    expect(adm.post("/api/v1/semantic-rules", {"name": "a-global", "pattern": "qqqq", "force": "coder"}), 403,
           code="permission_denied")
    own = expect(adm.post("/api/v1/semantic-rules", {"name": "a-own", "pattern": "qqqq", "force": "coder",
                                                      "tenant": "acme"}), 200)
    assert own["tenant"] == "acme", own
    expect(adm.post("/api/v1/semantic-rules", {"name": "a-beta", "pattern": "qqqq", "force": "coder",
                                                "tenant": "beta"}), 403, code="permission_denied")
    assert sorted(r["name"] for r in expect(adm.get("/api/v1/semantic-rules"), 200)["data"]) == ["a-own", "g"]
    expect(adm.delete("/api/v1/semantic-rules/%d" % glob["id"]), 403, code="permission_denied")
    for r in (mem.get("/api/v1/semantic-rules"), mem.delete("/api/v1/semantic-rules/%d" % own["id"]),
              mem.post("/api/v1/semantic-rules", {"name": "m", "pattern": "qqqq", "force": "coder"})):
        expect(r, 403, code="permission_denied")
    expect(adm.delete("/api/v1/semantic-rules/%d" % own["id"]), 200)
    expect(s.delete("/api/v1/semantic-rules/%d" % glob["id"]), 200)
    assert [a for a in c.gw.sql("SELECT action FROM audit_log WHERE object_type = 'semantic_rule'")].count(
        ("create",)) >= 3


def test_key_required_labels_R_SEM_1(c):
    c.gw.ctl("key", "set", c.kid, "--require-labels", "eu-only")
    keys = {k["id"]: k for k in c.gw.ctl("list", "keys")["keys"]}
    assert keys[c.kid]["require_labels"] == "eu-only", keys[c.kid]
    # coder has no eu-only: the code question goes to writer (which scores nothing: fallback)
    model, reason = applied(c, CODE, "writer")
    assert reason == "fallback", reason
    s = ApiSession(c.gw, "root", PW)
    got = expect(s.patch("/api/v1/tenant/api-keys/%d" % c.kid, {"require_labels": "pii-ok"}), 200)
    assert got["require_labels"] == "pii-ok", got
    expect(s.patch("/api/v1/tenant/api-keys/%d" % c.kid, {"require_labels": "no spaces"}), 400)
    # only secret carries pii-ok, and it is beta's: no candidate
    wait_for(lambda: ask(c, CODE).status == 503, 10, what="no candidate")
    assert ask(c, CODE).json()["error"]["code"] == "no_auto_candidates"
    c.gw.ctl("key", "set", c.kid, "--require-labels", "")
    applied(c, CODE, "coder")


def test_hybrid_with_embeddings_R_SEM_2(c):
    emb = c.fakes["emb"]
    c.gw.ctl("config", "set", "semantic_embedding_model", "emb")
    wait_for(lambda: route_of(c, CODE)[1].startswith("hybrid:"), 10, what="hybrid on")
    n = emb.stats()["requests"]
    model, reason = routed(ask(c, CODE, rid="sem-hybrid-1"))
    assert model == "coder" and reason.startswith("hybrid:"), (model, reason)
    assert 0.1 <= float(reason[7:]) <= 1, reason
    # descriptions are embedded once: the next request embeds its text only
    assert emb.stats()["requests"] == n + 1, (n, emb.stats()["requests"])
    model, reason = routed(ask(c, POEM))
    assert model == "writer" and reason.startswith("hybrid:"), (model, reason)
    # metered: a usage event of the caller for the embedding model
    rows = wait_for(lambda: c.gw.usage_events("request_id = 'sem-hybrid-1' AND model = 'emb'"), 5,
                    what="embedding usage")
    assert rows and rows[0]["status"] == 200 and str(rows[0]["key_id"]) == str(c.kid), rows
    # the descriptions' embeddings are the gateway's: metered, but billed to no caller
    mine = wait_for(lambda: c.gw.usage_events("model = 'emb' AND key_id = 0 AND tenant_id = 0 AND user_id = 0"), 5,
                    what="the descriptions' embedding usage")
    assert len(mine) >= 2 and all(r["status"] == 200 for r in mine), mine
    # a changed description is embedded again (its score moves), once
    old = route_of(c, POEM)[1]
    n = emb.stats()["requests"]
    c.gw.ctl("policy", "set", "writer", "--description", DESCRIPTIONS["writer"] + " and limericks")
    wait_for(lambda: route_of(c, POEM)[1] not in (old, ""), 10, what="the new description live")
    assert emb.stats()["requests"] >= n + 2, (n, emb.stats()["requests"])   # the text and the description
    n = emb.stats()["requests"]
    assert route_of(c, POEM)[0] == "writer" and emb.stats()["requests"] == n + 1, (n, emb.stats()["requests"])


def test_embedding_backend_failing_degrades_to_bm25_R_SEM_2(c):
    emb = c.fakes["emb"]
    emb.behavior("status=500")
    try:
        model, reason = routed(ask(c, CODE))
        assert model == "coder" and reason.startswith("bm25:"), (model, reason)
        model, reason = routed(ask(c, POEM))
        assert model == "writer" and reason.startswith("bm25:"), (model, reason)
        n = emb.stats()["requests"]
        assert routed(ask(c, POEM))[1].startswith("bm25:") and emb.stats()["requests"] == n, "tried again at once"
        wait_for(lambda: "scored by BM25 only" in c.gw.log_text(), 3, what="the degradation logged")
    finally:
        emb.behavior("")
    # BM25 without trying for 5 s after a failure, then embeddings again
    t = time.time()
    wait_for(lambda: route_of(c, CODE)[1].startswith("hybrid:"), 12, interval=0.25, what="hybrid again")
    assert time.time() - t >= 3, time.time() - t
    c.gw.ctl("config", "set", "semantic_embedding_model", "")
    wait_for(lambda: route_of(c, CODE)[1].startswith("bm25:"), 10, what="bm25 again")


def test_access_log_and_metric_R_SEM(c):
    before = layers(c)
    assert set(before) == {"rule", "bm25", "hybrid", "fallback"}, before
    c.gw.ctl("semantic-rule", "add", "m-rule", "--pattern", "(?i)\\bmetricword\\b", "--force", "writer")
    wait_for(lambda: route_of(c, "metricword")[1] == "rule:m-rule", 10, what="rule live")
    before = layers(c)
    rids = {"rule": "sem-log-rule", "bm25": "sem-log-bm25", "fallback": "sem-log-fb"}
    assert routed(ask(c, "metricword", rid=rids["rule"]))[1] == "rule:m-rule"
    assert routed(ask(c, CODE, rid=rids["bm25"]))[1].startswith("bm25:")
    assert route_of(c, CODE)[1].startswith("bm25:")
    assert routed(ask(c, NONE, rid=rids["fallback"]))[1] == "fallback"
    after = layers(c)
    assert after["rule"] - before["rule"] == 1, (before, after)
    assert after["bm25"] - before["bm25"] == 2, (before, after)
    assert after["fallback"] - before["fallback"] == 1, (before, after)
    assert after["hybrid"] == before["hybrid"], (before, after)
    assert before["hybrid"] >= 3, before       # the hybrid test's decisions
    st = {x["layer"]: x["count"] for x in c.gw.ctl("stats")["semantic_routing"]}
    assert st == {k: int(v) for k, v in after.items()}, (st, after)

    def lines():
        with open(os.path.join(c.gw.dir, "access.log")) as f:
            return {j.get("request_id"): j for j in map(json.loads, f) if j.get("request_id") in rids.values()}
    got = wait_for(lambda: len(lines()) == 3 and lines(), 10, what="access log lines")
    assert got[rids["rule"]]["routing_reason"] == "rule:m-rule", got
    assert got[rids["bm25"]]["routing_reason"].startswith("bm25:"), got
    assert got[rids["fallback"]]["routing_reason"] == "fallback", got
    assert got[rids["bm25"]]["routed_model"] == "coder", got
    c.gw.ctl("semantic-rule", "rm", "m-rule")


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
