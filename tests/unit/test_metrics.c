/* test_metrics.c: the shared-state series tables (lib/metrics.c), on a temp state file. */
#include "check.h"
#include "metrics.h"
#include "util.h"

#include <stdlib.h>
#include <unistd.h>

static void test_family_table(void)
{
    CHECK(metric_get(MET_REQUESTS) != NULL, "family table");
    CHECK_STR(metric_get(MET_REQUESTS)->name, "sluice_requests_total", "first row");
    CHECK(metric_get(MET__COUNT) == NULL, "past the end");
    for (int m = 0; m < MET__COUNT; m++) {
        const struct metric_def *d = metric_get((enum metric_id)m);
        size_t n = strlen(d->name);
        int total = n > 6 && strcmp(d->name + n - 6, "_total") == 0;
        /* promtool's lint: counters end in _total, nothing else does */
        CHECK(total == (d->type == COUNTER), "%s: _total iff counter", d->name);
        CHECK(strchr(d->help, '\\') == NULL && strchr(d->help, '\n') == NULL, "%s: help needs no escape", d->name);
    }
}

static void test_label(void)
{
    static const struct {
        const char *value;
        const char *want;           /* NULL: does not fit */
        size_t cap;
    } cases[] = {
        {"plain", "m=\"plain\"", 64},
        {"", "m=\"\"", 64},
        {"a\"b", "m=\"a\\\"b\"", 64},
        {"back\\slash", "m=\"back\\\\slash\"", 64},
        {"new\nline", "m=\"new\\nline\"", 64},
        {"exact", "m=\"exact\"", 10},             /* 9 characters and the NUL */
        {"exact", NULL, 9},
        {"ab\"", NULL, 7},                        /* the escape does not fit */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        const char *out = buf;
        int n = metrics_label(buf, cases[i].cap, 0, "m", cases[i].value);
        if (cases[i].want) {
            CHECK_STR(out, cases[i].want, cases[i].value);
            CHECK_INT(n, strlen(cases[i].want), cases[i].value);
        } else {
            CHECK_INT(n, -1, cases[i].value);
            CHECK_STR(out, "", "left as it was");
        }
    }
    char buf[64];
    const char *out = buf;
    int n = metrics_label(buf, sizeof buf, 0, "a", "1");
    n = metrics_label(buf, sizeof buf, (size_t)n, "b", "2");
    CHECK_STR(out, "a=\"1\",b=\"2\"", "second label");
    CHECK_INT(n, 11, "its length");
    CHECK_INT(metrics_label(buf, 12, (size_t)n, "c", "3"), -1, "a third does not fit");
    CHECK_STR(out, "a=\"1\",b=\"2\"", "the first two are kept");
}

/* One observation per row; the bucket it lands in (le is inclusive). */
static void test_buckets(struct shm *s)
{
    static const struct {
        int64_t us;
        int bucket;
    } cases[] = {
        {0, 0}, {-5, 0}, {5000, 0}, {5001, 1}, {10000, 1}, {999999, 7}, {1000000, 7},
        {600000000, 15}, {600000001, 16}, {INT64_C(86400000000), 16},
    };
    int64_t now = 1700000000000;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char labels[32];
        snprintf(labels, sizeof labels, "case=\"%zu\"", i);
        metrics_observe(s, MET_TTFT, labels, cases[i].us, 0, now);
        struct metric_window w;
        metrics_window(s, MET_TTFT, labels, 1, now, &w);
        CHECK_INT(w.count, 1, labels);
        CHECK_INT(w.buckets[cases[i].bucket], 1, labels);
    }
}

struct seen {
    int n;
    uint64_t sum;
    char last[SHM_MET_LABELS];
};

static void count_cb(void *ctx, const char *labels, uint64_t v)
{
    struct seen *s = ctx;
    s->n++;
    s->sum += v;
    snprintf(s->last, sizeof s->last, "%s", labels);
}

static void hist_cb(void *ctx, const char *labels, const struct metric_hist_read *h)
{
    struct seen *s = ctx;
    uint64_t t = 0;
    for (int b = 0; b <= MET_BUCKETS; b++)
        t += h->buckets[b];
    CHECK_INT(h->count, t, "count is the buckets' total");
    s->n++;
    s->sum += h->count;
}

static void test_series(struct shm *s)
{
    uint64_t dropped = metrics_dropped(s);
    metrics_add(s, MET_REQUESTS, "model=\"a\"", 1);
    metrics_add(s, MET_REQUESTS, "model=\"a\"", 2);
    metrics_add(s, MET_REQUESTS, "model=\"b\"", 5);
    metrics_add(s, MET_ROUTE_REQUESTS, "model=\"a\"", 7);     /* same labels, another family */
    metrics_add(s, MET_SPANS_DROPPED, NULL, 1);
    struct seen a = {0};
    metrics_each_counter(s, MET_REQUESTS, count_cb, &a);
    CHECK_INT(a.n, 2, "two series of requests");
    CHECK_INT(a.sum, 8, "their total");
    struct seen r = {0};
    metrics_each_counter(s, MET_ROUTE_REQUESTS, count_cb, &r);
    CHECK_INT(r.n, 1, "the other family's one series");
    CHECK_INT(r.sum, 7, "kept apart");
    struct seen sp = {0};
    metrics_each_counter(s, MET_SPANS_DROPPED, count_cb, &sp);
    CHECK(sp.n == 1 && sp.sum == 1 && sp.last[0] == '\0', "NULL labels are the empty label text");

    char longl[SHM_MET_LABELS + 10];
    memset(longl, 'x', sizeof longl - 1);
    longl[sizeof longl - 1] = '\0';
    metrics_add(s, MET_REQUESTS, longl, 1);
    CHECK_INT(metrics_dropped(s), dropped + 1, "too long a label text is dropped");
    metrics_drop(s);
    CHECK_INT(metrics_dropped(s), dropped + 2, "metrics_drop counts one");

    /* The index walks the same series as the per-family scans. */
    struct metric_index *ix = malloc(sizeof *ix);
    metrics_index(s, ix);
    struct seen ia = {0}, ih = {0}, eh = {0};
    metrics_index_counters(s, ix, MET_REQUESTS, count_cb, &ia);
    CHECK(ia.n == a.n && ia.sum == a.sum, "index: requests %d %llu", ia.n, (unsigned long long)ia.sum);
    metrics_index_hists(s, ix, MET_TTFT, hist_cb, &ih);
    metrics_each_hist(s, MET_TTFT, hist_cb, &eh);
    CHECK(ih.n == eh.n && ih.sum == eh.sum && ih.n > 0, "index: ttft %d vs %d", ih.n, eh.n);
    struct seen none = {0};
    metrics_index_hists(s, ix, MET_REQUESTS, hist_cb, &none);      /* a counter family: nothing */
    metrics_index_counters(s, ix, MET_TTFT, count_cb, &none);
    CHECK_INT(none.n, 0, "type mismatch walks nothing");
    free(ix);
}

/* Many series: every claim finds its own slot, and a re-add finds it again. */
static void test_claims(struct shm *s)
{
    char l[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(l, sizeof l, "k=\"%d\"", i);
        metrics_add(s, MET_TOKENS, l, (uint64_t)i);
    }
    for (int i = 0; i < 3000; i++) {
        snprintf(l, sizeof l, "k=\"%d\"", i);
        metrics_add(s, MET_TOKENS, l, 1);
    }
    struct seen t = {0};
    metrics_each_counter(s, MET_TOKENS, count_cb, &t);
    CHECK_INT(t.n, 3000, "series");
    CHECK_INT(t.sum, 3000 * 2999 / 2 + 3000, "values");
}

static void test_window(struct shm *s)
{
    int64_t t0 = 1700000040000 / 60000 * 60000;  /* a minute's start */
    metrics_observe(s, MET_QUEUE_WAIT, "w=\"1\"", 1000, 0, t0);
    metrics_observe(s, MET_QUEUE_WAIT, "w=\"1\"", 1000, 1, t0 + 30000);
    metrics_observe(s, MET_QUEUE_WAIT, "w=\"1\"", 1000, 0, t0 + 60000);
    metrics_observe(s, MET_QUEUE_WAIT, "w=\"2\"", 1000, 1, t0 + 60000);
    struct metric_window w;
    metrics_window(s, MET_QUEUE_WAIT, "", 1, t0 + 60000, &w);
    CHECK(w.count == 4 && w.errors == 2, "this and the last minute: %llu %llu", (unsigned long long)w.count,
          (unsigned long long)w.errors);
    metrics_window(s, MET_QUEUE_WAIT, "w=\"1\"", 1, t0 + 60000, &w);
    CHECK_INT(w.count, 3, "matching labels only");
    metrics_window(s, MET_QUEUE_WAIT, "", 1, t0 + 120000, &w);
    CHECK_INT(w.count, 2, "a minute later the first minute is out");
    /* SHM_MET_MINUTES later the slot of t0 is reused: the old counts are gone. */
    int64_t later = t0 + (int64_t)SHM_MET_MINUTES * 60000;
    metrics_observe(s, MET_QUEUE_WAIT, "w=\"1\"", 1000, 0, later);
    metrics_window(s, MET_QUEUE_WAIT, "w=\"1\"", 0, later, &w);
    CHECK_INT(w.count, 1, "a recycled minute starts at zero");
    struct seen h = {0};
    metrics_each_hist(s, MET_QUEUE_WAIT, hist_cb, &h);
    CHECK_INT(h.sum, 5, "the totals keep every observation");
}

static void test_quantiles(void)
{
    uint64_t b[MET_BUCKETS + 1];
    memset(b, 0, sizeof b);
    CHECK_INT(metrics_quantile_us(b, 0.5), -1, "empty");
    b[1] = 10;                                  /* ten in (5 ms, 10 ms] */
    CHECK_INT(metrics_quantile_us(b, 0.5), 7500, "median interpolated in the bucket");
    CHECK_INT(metrics_quantile_us(b, 1.0), 10000, "the top is the bound");
    memset(b, 0, sizeof b);
    b[0] = 50;
    b[7] = 50;                                  /* half under 5 ms, half in (0.5 s, 1 s] */
    CHECK_INT(metrics_quantile_us(b, 0.5), 5000, "p50 at the first bucket's bound");
    CHECK_INT(metrics_quantile_us(b, 0.95), 500000 + 500000 * 45 / 50, "p95");
    memset(b, 0, sizeof b);
    b[MET_BUCKETS] = 3;
    CHECK_INT(metrics_quantile_us(b, 0.5), metric_bucket_us[MET_BUCKETS - 1], "above every bound: the last bound");
}

/* Indexing a full scrape's tables (every counter and histogram slot) costs
 * well under the 5 ms a whole rendering may take. */
static void test_index_time(struct shm *s)
{
    struct metric_index *ix = malloc(sizeof *ix);
    int64_t best = INT64_MAX;
    for (int k = 0; k < 5; k++) {
        int64_t t0 = mono_us();
        metrics_index(s, ix);
        int64_t dt = mono_us() - t0;
        best = dt < best ? dt : best;
    }
    printf("metrics_index over %d + %d slots: %lld us\n", SHM_MET_COUNTERS, SHM_MET_HISTS, (long long)best);
    CHECK(best < 2000, "indexing took %lld us", (long long)best);
    free(ix);
}

/* What metrics_record does per request (two counters, four histograms, an
 * attempt and two token counters) stays a few microseconds: the throughput
 * benchmark allows metrics 5 %. */
static void test_record_cost(struct shm *s)
{
    int64_t now = 1700000000000, t0 = mono_us();
    enum { N = 20000 };
    for (int i = 0; i < N; i++) {
        metrics_add(s, MET_REQUESTS, "model=\"llama-3-70b\",tenant=\"acme\",status=\"200\",code=\"\"", 1);
        metrics_add(s, MET_ROUTE_REQUESTS, "route=\"/v1/chat/completions\",status=\"200\"", 1);
        metrics_observe(s, MET_REQUEST_DURATION, "model=\"llama-3-70b\",prompt_bucket=\"lt256\"", 120000, 0, now);
        metrics_observe(s, MET_TTFT, "model=\"llama-3-70b\",prompt_bucket=\"lt256\"", 40000, 0, now);
        metrics_observe(s, MET_ENDPOINT_DURATION, "endpoint=\"gpu-pool-a\"", 120000, 0, now);
        metrics_observe(s, MET_ENDPOINT_TTFT, "endpoint=\"gpu-pool-a\"", 40000, 0, now);
        metrics_add(s, MET_UPSTREAM_ATTEMPTS, "endpoint=\"gpu-pool-a\",outcome=\"success\"", 1);
        metrics_add(s, MET_TOKENS, "model=\"llama-3-70b\",tenant=\"acme\",direction=\"prompt\"", 12);
        metrics_add(s, MET_TOKENS, "model=\"llama-3-70b\",tenant=\"acme\",direction=\"completion\"", 30);
    }
    double per = (double)(mono_us() - t0) / N;
    printf("one request's series: %.2f us\n", per);
    CHECK(per < 20, "%.2f us per request", per);
}

/* R-GUARD-3: per-rule match counters: one per key, a full table hands out the slot
 * used longest ago (its count restarts), the others keep theirs. */
static void test_rule_counters(struct shm *s)
{
    CHECK(metrics_rule_value(s, 12345) == 0, "an unknown rule has 0");
    metrics_rule_add(s, 12345, 1000);
    metrics_rule_add(s, 12345, 1001);
    metrics_rule_add(s, 999, 1002);
    CHECK(metrics_rule_value(s, 12345) == 2 && metrics_rule_value(s, 999) == 1, "counted by key: %llu %llu",
          (unsigned long long)metrics_rule_value(s, 12345), (unsigned long long)metrics_rule_value(s, 999));
    metrics_rule_add(s, 0, 1003);
    CHECK(metrics_rule_value(s, 0) == 0, "key 0 is never counted");
    /* fill the table: keys 1..SHM_RULE_COUNTERS-2 more, then one too many */
    for (uint64_t k = 1; k <= SHM_RULE_COUNTERS - 2; k++)
        metrics_rule_add(s, 5000000 + k, 2000 + (int64_t)k);
    metrics_rule_add(s, 12345, 9000);            /* 999 is now the one used longest ago */
    metrics_rule_add(s, 777777, 9001);
    CHECK(metrics_rule_value(s, 777777) == 1, "a new rule finds a place in a full table");
    CHECK(metrics_rule_value(s, 999) == 0, "the least recently matched gave its place");
    CHECK(metrics_rule_value(s, 12345) == 3, "the others keep their counts: %llu",
          (unsigned long long)metrics_rule_value(s, 12345));
    CHECK(metrics_rule_value(s, 5000001) == 1 && metrics_rule_value(s, 5000000 + SHM_RULE_COUNTERS - 2) == 1,
          "the rest untouched");
}

int main(void)
{
    char path[] = "/tmp/test_metrics.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "temp file");
    close(fd);
    unlink(path);                  /* shm_attach creates and initialises it */
    struct shm s;
    if (shm_attach(&s, path) != 0) {
        CHECK(0, "shm_attach %s", path);
        return check_done();
    }
    test_family_table();
    test_rule_counters(&s);
    test_label();
    test_buckets(&s);
    test_series(&s);
    test_claims(&s);
    test_window(&s);
    test_quantiles();
    test_index_time(&s);
    test_record_cost(&s);
    unlink(path);
    return check_done();
}
