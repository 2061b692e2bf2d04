/* test_semantic_route.c: the semantic strategy's pure parts (R-SEM-1..3): the
 * BM25 tokeniser and scores, the hybrid, thresholds and ties, and the rule
 * layer's precedence (forbid beats force), tenant allow-lists and labels. */
#include "check.h"

#include "bm25.h"
#include "buf.h"
#include "content_rules.h"
#include "semantic.h"
#include "semroute.h"

#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>

/* ---- tokeniser ---- */

struct toks {
    char out[512];
};

static void join_tok(void *ctx, const char *tok, size_t n)
{
    struct toks *t = ctx;
    size_t used = strlen(t->out);
    snprintf(t->out + used, sizeof t->out - used, "%s%.*s", used ? "|" : "", (int)n, tok);
}

static void test_tokens(void)
{
    static const struct {
        const char *in, *want;
        int count;
    } rows[] = {
        {"Write a Python function", "write|python|function", 3},
        {"SQL-query: JOIN  tables!", "sql|query|join|tables", 4},
        {"the a of to is", "", 0},                        /* stop words only */
        {"x y z 42 v2", "42|v2", 2},                      /* one-byte tokens dropped */
        {"Grüße aus Köln", "grüße|aus|köln", 3},          /* UTF-8 bytes stay in the word */
        {"", "", 0},
        {"C++ and C#", "", 0},
        {"GPU,gpu;Gpu", "gpu|gpu|gpu", 3},                /* lower-cased, not deduplicated */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct toks t = {{0}};
        int n = bm25_tokens(rows[i].in, strlen(rows[i].in), join_tok, &t);
        CHECK_STR(t.out, rows[i].want, rows[i].in);
        CHECK_INT(n, rows[i].count, rows[i].in);
    }
    /* a long token is cut at BM25_TOKEN_MAX; a text yields at most BM25_MAX_TOKENS */
    char longw[200];
    memset(longw, 'k', sizeof longw - 1);
    longw[sizeof longw - 1] = '\0';
    struct toks t = {{0}};
    bm25_tokens(longw, strlen(longw), join_tok, &t);
    CHECK_INT(strlen(t.out), BM25_TOKEN_MAX, "token cut");
    size_t big = (size_t)BM25_MAX_TOKENS * 3 + 100;
    char *many = malloc(big + 1);
    for (size_t i = 0; i < big; i += 3)
        memcpy(many + i, "ab ", 3 < big - i ? 3 : big - i);
    many[big] = '\0';
    struct toks sink = {{0}};
    (void)sink;
    int cnt = 0;
    struct bm25_query *q = malloc(sizeof *q);
    bm25_query_init(q, many, big);
    CHECK_INT(q->n, 1, "distinct query terms");
    cnt = bm25_tokens(many, big, join_tok, &(struct toks){{0}});
    CHECK_INT(cnt, BM25_MAX_TOKENS, "token cap");
    free(q);
    free(many);
    CHECK(bm25_term("gpu", 3) == bm25_term("gpu", 3) && bm25_term("gpu", 3) != bm25_term("cpu", 3), "term hash");
}

/* ---- BM25 ---- */

static const char *docs[] = {
    "Code generation: writes and reviews Python, C and SQL code, explains compiler errors",
    "Creative writing: poems, stories, marketing copy and translation of prose",
    NULL,                                                       /* a model without description */
    "Mathematics and statistics: proofs, equations, probability",
};

static void test_bm25(void)
{
    struct bm25_index *ix = bm25_index_new(docs, 4);
    CHECK_INT(ix->n_docs, 4, "docs");
    CHECK_INT(ix->docs[2].n_terms, 0, "empty doc");
    struct bm25_query q;
    static const struct {
        const char *query;
        int best;
    } rows[] = {
        {"Please fix this Python code, the compiler errors", 0},
        {"write me some poems about autumn", 1},
        {"what is the probability of two sixes", 3},
        {"translate this prose", 1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        bm25_query_init(&q, rows[i].query, strlen(rows[i].query));
        int best = -1;
        double bs = -1;
        for (int d = 0; d < 4; d++) {
            double s = bm25_score(ix, &q, d);
            CHECK(s >= 0 && s <= 1, "score in 0..1: %g", s);
            if (s > bs)
                bs = s, best = d;
        }
        CHECK_INT(best, rows[i].best, rows[i].query);
        CHECK(bm25_score(ix, &q, 2) == 0, "no description scores 0");
    }
    /* no query term known to the index: 0 everywhere */
    bm25_query_init(&q, "zebra xylophone", 15);
    for (int d = 0; d < 4; d++)
        CHECK(bm25_score(ix, &q, d) == 0, "unknown terms score 0");
    /* raw score by hand: one doc "gpu gpu cpu", one "cpu"; query "gpu" */
    const char *two[] = {"gpu gpu cpu", "cpu"};
    struct bm25_index *t = bm25_index_new(two, 2);
    bm25_query_init(&q, "gpu", 3);
    double idf = log(1 + (2 - 1 + 0.5) / (1 + 0.5));
    double avgdl = 2.0, norm = 1 - BM25_B + BM25_B * 3 / avgdl;
    double want = idf * 2 * (BM25_K1 + 1) / (2 + BM25_K1 * norm);
    CHECK(fabs(bm25_raw(t, &q, 0) - want) < 1e-9, "raw %g want %g", bm25_raw(t, &q, 0), want);
    CHECK(fabs(bm25_score(t, &q, 0) - want / (idf * (BM25_K1 + 1))) < 1e-9, "normalised");
    CHECK(bm25_raw(t, &q, 1) == 0, "doc without the term");
    CHECK(bm25_raw(t, &q, 7) == 0, "out of range");
    bm25_index_free(t);
    bm25_index_free(ix);
}

/* ---- the decision ---- */

static void *compile(const char *p)
{
    char err[256];
    void *c = content_rules_compile(RULE_PATTERN, p, err, sizeof err);
    CHECK(c != NULL, "compile %s: %s", p, err);
    return c;
}

static const char *eu[] = {"eu-only"};
static const char *eupii[] = {"eu-only", "pii-ok"};
static const char *acme[] = {"acme"};

static void base(struct sem_cand *c, struct sem_input *in, struct bm25_index *ix, const char *text)
{
    /* four candidates on four endpoints, docs as above */
    static const char *names[] = {"coder", "writer", "plain", "math"};
    for (int i = 0; i < 4; i++)
        c[i] = (struct sem_cand){.model = names[i], .endpoint_id = i + 1, .doc = i};
    memset(in, 0, sizeof *in);
    in->text = text;
    in->len = strlen(text);
    in->tenant = "default";
    in->tenant_id = 1;
    in->match_limit = 100000;
    in->bm25 = ix;
    in->w_bm25 = 0.5;
    in->w_embedding = 0.5;
    in->threshold = 0.1;
}

static void test_decide(void)
{
    struct bm25_index *ix = bm25_index_new(docs, 4);
    struct sem_cand c[4];
    struct sem_input in;
    struct sem_result res;

    /* bm25 layer */
    base(c, &in, ix, "fix my Python code");
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.layer, SEM_LAYER_BM25, "bm25 layer");
    CHECK_INT(res.order[0], 0, "coder first");
    CHECK_INT(res.n, 3, "three tries");
    CHECK(strncmp(res.reason, "bm25:0.", 7) == 0, "reason %s", res.reason);
    /* ties (all 0 but one): by model name after the best */
    CHECK_INT(res.order[1], 3, "math (m) before plain (p) among zeros");
    CHECK_INT(res.order[2], 2, "then plain");

    /* threshold: nothing known -> fallback, the default model first */
    base(c, &in, ix, "hello there");
    in.default_model = "writer";
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.layer, SEM_LAYER_FALLBACK, "fallback layer");
    CHECK_STR(res.reason, "fallback", "fallback reason");
    CHECK_INT(res.order[0], 1, "default model first");
    /* the threshold is inclusive of its value; above the best score falls back */
    base(c, &in, ix, "fix my Python code");
    semroute_decide(c, 4, &in, &res);
    double best = res.score;
    in.threshold = best;
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.layer, SEM_LAYER_BM25, "score == threshold routes");
    in.threshold = best + 0.001;
    in.default_model = "math";
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.layer, SEM_LAYER_FALLBACK, "score below threshold falls back");
    CHECK_INT(res.order[0], 3, "default math first");
    CHECK_INT(res.order[1], 0, "then by score: coder");
    /* a default model that is no candidate: score order */
    in.default_model = "nope";
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.order[0], 0, "unknown default: score order");

    /* rule layer: force */
    struct sem_rule rules[4] = {
        {.name = "poems-to-math", .action = SEM_FORCE, .model = "math", .code = compile("(?i)\\bpoem")},
        {.name = "no-math-poems", .action = SEM_FORBID, .model = "math", .code = compile("(?i)autumn")},
        {.name = "acme-only", .tenant_id = 2, .action = SEM_FORCE, .model = "plain", .code = compile("poem")},
        {.name = "ssn", .action = SEM_FORBID, .model = "nothing", .label = "pii-ok",
         .code = compile("\\b\\d{3}-\\d{2}-\\d{4}\\b")},
    };
    base(c, &in, ix, "write poems");
    in.rules = rules;
    in.n_rules = 4;
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.layer, SEM_LAYER_RULE, "forced");
    CHECK_STR(res.reason, "rule:poems-to-math", "rule reason");
    CHECK_INT(res.order[0], 3, "math forced first");
    CHECK_INT(res.order[1], 1, "then the best score: writer");
    /* forbid beats force */
    base(c, &in, ix, "write poems about autumn");
    in.rules = rules;
    in.n_rules = 4;
    semroute_decide(c, 4, &in, &res);
    CHECK(res.layer != SEM_LAYER_RULE, "forbidden force is no force");
    for (int i = 0; i < res.n; i++)
        CHECK(res.order[i] != 3, "math forbidden");
    CHECK_INT(res.order[0], 1, "writer by score");
    /* a name with a line break (written around sluicectl) cannot break the header */
    struct sem_rule crlf = {.name = "a\r\nX-Evil: 1", .action = SEM_FORCE, .model = "coder", .code = compile("poem")};
    base(c, &in, ix, "poems");
    in.rules = &crlf;
    in.n_rules = 1;
    semroute_decide(c, 4, &in, &res);
    CHECK_STR(res.reason, "rule:a??X-Evil: 1", "control bytes replaced");
    content_rules_code_free(crlf.code);
    /* a rule of another tenant does not apply; it does for its tenant */
    base(c, &in, ix, "poem");
    in.rules = rules + 2;
    in.n_rules = 1;
    semroute_decide(c, 4, &in, &res);
    CHECK(res.layer != SEM_LAYER_RULE, "tenant 2's rule not for tenant 1");
    in.tenant_id = 2;
    semroute_decide(c, 4, &in, &res);
    CHECK_STR(res.reason, "rule:acme-only", "tenant 2's rule");
    /* a matched rule's label: only candidates with it */
    base(c, &in, ix, "my SSN is 123-45-6789, write a poem");
    in.rules = rules + 3;
    in.n_rules = 1;
    c[1].labels = eupii;
    c[1].n_labels = 2;
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.n, 1, "only the pii-ok model");
    CHECK_INT(res.order[0], 1, "writer has pii-ok");

    /* key's required labels and tenant allow-lists */
    base(c, &in, ix, "fix my Python code");
    const char *need[] = {"eu-only"};
    in.require_labels = need;
    in.n_require = 1;
    c[3].labels = eu;
    c[3].n_labels = 1;
    c[2].labels = eupii;
    c[2].n_labels = 2;
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.n, 2, "two carry eu-only");
    CHECK_INT(res.order[0], 3, "math (0 score, name) first");
    CHECK_INT(res.layer, SEM_LAYER_FALLBACK, "coder filtered: nothing scores");
    base(c, &in, ix, "fix my Python code");
    c[0].tenants = acme;
    c[0].n_tenants = 1;
    semroute_decide(c, 4, &in, &res);
    CHECK(res.order[0] != 0, "coder only for acme");
    in.tenant = "acme";
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.order[0], 0, "acme gets coder");
    /* everything filtered */
    in.require_labels = need;
    in.n_require = 1;
    c[1].labels = NULL, c[1].n_labels = 0;
    c[2].labels = NULL, c[2].n_labels = 0;
    c[3].labels = NULL, c[3].n_labels = 0;
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.n, 0, "no candidate left");

    /* endpoint deduplication */
    base(c, &in, ix, "fix my Python code");
    c[3].endpoint_id = c[0].endpoint_id;
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.n, 3, "three endpoints");
    for (int i = 0; i < res.n; i++)
        CHECK(res.order[i] != 3, "math shares coder's endpoint");

    for (int i = 0; i < 4; i++)
        content_rules_code_free(rules[i].code);
    bm25_index_free(ix);
}

static void test_hybrid(void)
{
    CHECK(fabs(semroute_hybrid(0.4, 0.8, 0.5, 0.5) - 0.6) < 1e-12, "even weights");
    CHECK(fabs(semroute_hybrid(0.4, 0.8, 1, 3) - 0.7) < 1e-12, "weights normalised");
    CHECK(fabs(semroute_hybrid(0.4, -0.5, 0.5, 0.5) - 0.2) < 1e-12, "negative cosine counts 0");
    CHECK(semroute_hybrid(0.4, 0.9, 0, 0) == 0.4, "no weights: bm25");

    struct bm25_index *ix = bm25_index_new(docs, 4);
    struct sem_cand c[4];
    struct sem_input in;
    struct sem_result res;
    float q[2] = {1, 0}, near[2] = {0.6f, 0.8f}, far[2] = {0, 1}, same[2] = {1, 0};
    /* embeddings move a text BM25 cannot place */
    base(c, &in, ix, "hello there");
    in.qvec = q;
    in.dims = 2;
    c[0].vec = far, c[0].dims = 2;
    c[1].vec = near, c[1].dims = 2;
    c[3].vec = same, c[3].dims = 2;
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.layer, SEM_LAYER_HYBRID, "hybrid layer");
    CHECK_INT(res.order[0], 3, "math: cosine 1");
    CHECK_INT(res.order[1], 1, "writer: 0.6");
    CHECK_STR(res.reason, "hybrid:0.500", "hybrid reason");
    /* other dims are not compared */
    c[3].dims = 3;
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.order[0], 1, "dims mismatch counts 0");
    /* embedding weight 0: bm25 alone, but still named hybrid */
    in.w_embedding = 0;
    semroute_decide(c, 4, &in, &res);
    CHECK_INT(res.layer, SEM_LAYER_FALLBACK, "0 weight, no bm25: fallback");
    bm25_index_free(ix);
}

/* ---- the text the layers read ---- */

static void test_last_user(void)
{
    static const struct {
        const char *body, *want;         /* want NULL: -1 */
    } rows[] = {
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"first\"},{\"role\":\"assistant\",\"content\":\"a\"},"
         "{\"role\":\"user\",\"content\":\"second\"}]}", "second"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"a\"}]}", "q"},
        /* an image part does not hide the text parts from the rules */
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}},"
         "{\"type\":\"text\",\"text\":\"my password\"},{\"type\":\"text\",\"text\":\"two\"}]}]}", "my password\ntwo"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", NULL},
        {"{\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}", NULL},
        {"{\"messages\":\"x\"}", NULL},
        {"{\"prompt\":\"complete me\"}", "complete me"},
        {"{\"prompt\":[\"a\",\"b\"]}", "b"},
        {"{\"prompt\":[1,2,3]}", NULL},
        {"{\"input\":\"responses text\"}", "responses text"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}]}", "hi"},
        {"[1]", NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct json_object *o = json_tokener_parse(rows[i].body);
        struct buf b;
        buf_init(&b, 0);
        int rc = semroute_last_user(o, &b);
        if (rows[i].want) {
            CHECK_INT(rc, 0, rows[i].body);
            CHECK(rc == 0 && b.len == strlen(rows[i].want) && memcmp(b.data, rows[i].want, b.len) == 0, "%s: got %.*s",
                  rows[i].body, (int)b.len, b.data ? b.data : "");
        } else {
            CHECK_INT(rc, -1, rows[i].body);
        }
        buf_free(&b);
        json_object_put(o);
    }
    CHECK_INT(semroute_last_user(NULL, NULL), -1, "no body");
}

int main(void)
{
    test_last_user();
    test_tokens();
    test_bm25();
    test_decide();
    test_hybrid();
    CHECK_STR(semroute_layer_name(SEM_LAYER_HYBRID), "hybrid", "layer name");
    return check_done();
}
