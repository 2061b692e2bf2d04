/* test_autoroute.c: purpose and capability filters, strategies, dedupe (R-AUTO-2..4). */
#include "autoroute.h"

#include "check.h"

static const struct auto_weights W = {0.5, 0.3, 0.2};

/* model, endpoint, purpose, enabled, available, tools, vision, ctx, out, quality, pin, pout, ttft */
static const struct auto_cand C[] = {
    {"big-chat", 1, PURPOSE_CHAT, 1, 1, 1, 1, 32768, 4096, 90, 10.0, 30.0, 400},
    {"small-chat", 2, PURPOSE_CHAT, 1, 1, 0, 0, 4096, 1024, 60, 0.5, 1.5, 80},
    {"mid-chat", 3, PURPOSE_CHAT, 1, 1, 1, 0, 8192, 2048, 75, 2.0, 6.0, 150},
    {"embedder", 4, PURPOSE_EMBEDDING, 1, 1, 0, 0, 8192, 0, 70, 0.1, 0.0, 20},
    {"plain", 5, PURPOSE_UNSET, 1, 1, 1, 1, 0, 0, -1, -1, -1, -1},
    {"off", 6, PURPOSE_CHAT, 0, 1, 1, 1, 0, 0, 99, 0.01, 0.01, 1},
    {"down", 7, PURPOSE_CHAT, 1, 0, 1, 1, 0, 0, 99, 0.01, 0.01, 1},
    {"same-ep-as-small", 2, PURPOSE_CHAT, 1, 1, 0, 0, 4096, 1024, 55, 0.4, 1.0, 90},
};
#define NC ((int)(sizeof C / sizeof C[0]))

static void expect(const char *name, const struct auto_request *rq, enum auto_strategy s, const char *want0,
                   int want_n, const char *err, int fallback, const struct auto_cand *c, int n)
{
    struct auto_result r;
    auto_choose(c, n, rq, s, &W, &r);
    if (err) {
        const char *got = r.error != ERR_NONE ? errors_get(r.error)->code : "(none)";
        CHECK(strcmp(got, err) == 0, "%s: error %s", name, got);
        return;
    }
    CHECK(r.error == ERR_NONE, "%s: unexpected error %s", name, r.error != ERR_NONE ? errors_get(r.error)->code : "");
    CHECK(r.n == want_n, "%s: %d candidates", name, r.n);
    if (r.n)
        CHECK_STR(c[r.order[0]].model, want0, name);
    CHECK(r.purpose_fallback == fallback, "%s: fallback %d", name, r.purpose_fallback);
    for (int i = 0; i < r.n; i++)
        for (int j = 0; j < i; j++)
            CHECK(c[r.order[i]].endpoint_id != c[r.order[j]].endpoint_id, "%s: endpoint repeated", name);
}

int main(void)
{
    struct auto_request chat = {PURPOSE_CHAT, 0, 0, 100, 100};
    expect("cost picks the cheapest", &chat, AUTO_COST, "same-ep-as-small", 3, NULL, 0, C, NC);
    expect("latency picks the fastest", &chat, AUTO_LATENCY, "small-chat", 3, NULL, 0, C, NC);
    expect("balanced: quality, price and latency together", &chat, AUTO_BALANCED, "small-chat", 3, NULL, 0, C, NC);
    struct auto_request tools = {PURPOSE_CHAT, 1, 0, 100, 100};
    expect("tools need supports_tools", &tools, AUTO_COST, "mid-chat", 2, NULL, 0, C, NC);
    struct auto_request vision = {PURPOSE_CHAT, 0, 1, 100, 100};
    expect("images need supports_vision", &vision, AUTO_COST, "big-chat", 1, NULL, 0, C, NC);
    struct auto_request longctx = {PURPOSE_CHAT, 0, 0, 7000, 1000};
    expect("context must fit", &longctx, AUTO_COST, "mid-chat", 2, NULL, 0, C, NC);
    struct auto_request huge = {PURPOSE_CHAT, 0, 1, 40000, 1000};
    expect("nothing fits", &huge, AUTO_COST, NULL, 0, "no_auto_candidates", 0, C, NC);
    struct auto_request emb = {PURPOSE_EMBEDDING, 0, 0, 10, 0};
    expect("embeddings only to embedding models", &emb, AUTO_COST, "embedder", 1, NULL, 0, C, NC);
    struct auto_request comp = {PURPOSE_COMPLETION, 0, 0, 10, 10};
    expect("unlabelled as fallback", &comp, AUTO_COST, "plain", 1, NULL, 1, C, NC);
    /* Without unlabelled models, an unmatched purpose has no candidate. */
    expect("no model for the purpose", &comp, AUTO_COST, NULL, 0, "no_auto_candidates_for_purpose", 0, C, 4);
    expect("embedding never falls to chat", &emb, AUTO_COST, NULL, 0, "no_auto_candidates_for_purpose", 0, C + 5, 3);
    expect("none live", &chat, AUTO_COST, NULL, 0, "no_auto_candidates", 0, C + 5, 2);
    CHECK(auto_ewma(-1, 100, 0.2) == 100, "first sample");
    CHECK(auto_ewma(100, 200, 0.2) == 120, "ewma");
    CHECK(auto_strategy_parse("cost", AUTO_BALANCED) == AUTO_COST && auto_strategy_parse("x", AUTO_LATENCY) == AUTO_LATENCY,
          "parse");
    return check_done();
}
