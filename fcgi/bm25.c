/* bm25.c: tokeniser, per-snapshot index and scorer of the semantic router's
 * similarity layer (R-SEM-2; bm25.h documents the tokeniser). */
#include "bm25.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Common English function words: they occur in every description and say
 * nothing of what a model is for. */
static const char *const stop_words[] = {
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "for", "from", "how", "i", "in", "is",
    "it", "me", "my", "of", "on", "or", "our", "please", "so", "that", "the", "this", "to", "was", "we", "what",
    "with", "you", "your", NULL};

/* The stop words by term hash, sorted once: a token's hash is computed anyway,
 * so the check is a binary search instead of a string compare per word. */
static uint64_t stop_hash[64];
static int n_stop;
static pthread_once_t stop_once = PTHREAD_ONCE_INIT;

static int u64_cmp(const void *a, const void *b);

static void stop_init(void)
{
    for (n_stop = 0; stop_words[n_stop]; n_stop++)
        stop_hash[n_stop] = bm25_term(stop_words[n_stop], strlen(stop_words[n_stop]));
    qsort(stop_hash, (size_t)n_stop, sizeof *stop_hash, u64_cmp);
}

static int is_stop(uint64_t h)
{
    int lo = 0, hi = n_stop - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (stop_hash[mid] == h)
            return 1;
        if (stop_hash[mid] < h)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

static void *xzalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        abort();                    /* as every allocation failure */
    return p;
}

static int word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

/* The tokeniser (bm25.h); fn gets each kept token with its term hash. */
static int tokenise(const char *text, size_t len, void (*fn)(void *ctx, const char *tok, size_t n, uint64_t h),
                    void *ctx)
{
    pthread_once(&stop_once, stop_init);
    char tok[BM25_TOKEN_MAX + 1];
    int count = 0;
    size_t i = 0;
    while (i < len && count < BM25_MAX_TOKENS) {
        while (i < len && !word_byte((unsigned char)text[i]))
            i++;
        size_t n = 0;
        uint64_t h = 1469598103934665603ULL;     /* bm25_term's FNV-1a, as the bytes come */
        while (i < len && word_byte((unsigned char)text[i])) {
            unsigned char c = (unsigned char)text[i++];
            if (n < BM25_TOKEN_MAX) {
                c = (unsigned char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
                tok[n++] = (char)c;
                h = (h ^ c) * 1099511628211ULL;
            }
        }
        if (n < 2 || (n <= 7 && is_stop(h)))     /* no stop word is longer than 7 bytes */
            continue;
        tok[n] = '\0';
        fn(ctx, tok, n, h);
        count++;
    }
    return count;
}

struct plain {
    void (*fn)(void *ctx, const char *tok, size_t n);
    void *ctx;
};

static void plain_one(void *ctx, const char *tok, size_t n, uint64_t h)
{
    (void)h;
    struct plain *p = ctx;
    p->fn(p->ctx, tok, n);
}

int bm25_tokens(const char *text, size_t len, void (*fn)(void *ctx, const char *tok, size_t n), void *ctx)
{
    struct plain p = {fn, ctx};
    return tokenise(text, len, plain_one, &p);
}

uint64_t bm25_term(const char *tok, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)tok[i]) * 1099511628211ULL;
    return h;
}

struct collect {
    uint64_t *terms;
    int n;
};

static void collect_one(void *ctx, const char *tok, size_t n, uint64_t h)
{
    (void)tok, (void)n;
    struct collect *c = ctx;
    c->terms[c->n++] = h;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The sorted terms of text into terms (BM25_MAX_TOKENS); returns the token count. */
static int sorted_terms(const char *text, size_t len, uint64_t *terms, int *n)
{
    struct collect c = {terms, 0};
    int tokens = text ? tokenise(text, len, collect_one, &c) : 0;
    qsort(terms, (size_t)c.n, sizeof *terms, u64_cmp);
    *n = c.n;
    return tokens;
}

static int find(const uint64_t *terms, int n, uint64_t t)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (terms[mid] == t)
            return mid;
        if (terms[mid] < t)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

struct bm25_index *bm25_index_new(const char *const *texts, int n)
{
    struct bm25_index *ix = xzalloc(sizeof *ix);
    ix->docs = xzalloc(sizeof *ix->docs * (size_t)(n > 0 ? n : 1));
    ix->n_docs = n;
    uint64_t *tmp = xzalloc(sizeof *tmp * BM25_MAX_TOKENS);
    int total_distinct = 0;
    long total_len = 0;
    for (int d = 0; d < n; d++) {
        int m;
        struct bm25_doc *doc = &ix->docs[d];
        doc->length = sorted_terms(texts[d], texts[d] ? strlen(texts[d]) : 0, tmp, &m);
        total_len += doc->length;
        doc->terms = xzalloc(sizeof *doc->terms * (size_t)(m ? m : 1));
        doc->tf = xzalloc(sizeof *doc->tf * (size_t)(m ? m : 1));
        for (int i = 0; i < m; i++) {
            if (doc->n_terms > 0 && doc->terms[doc->n_terms - 1] == tmp[i]) {
                doc->tf[doc->n_terms - 1]++;
                continue;
            }
            doc->terms[doc->n_terms] = tmp[i];
            doc->tf[doc->n_terms++] = 1;
        }
        total_distinct += doc->n_terms;
    }
    ix->avgdl = n > 0 ? (double)total_len / n : 0;
    /* document frequencies: every document's distinct terms, sorted, counted */
    uint64_t *all = xzalloc(sizeof *all * (size_t)(total_distinct ? total_distinct : 1));
    int k = 0;
    for (int d = 0; d < n; d++)
        for (int i = 0; i < ix->docs[d].n_terms; i++)
            all[k++] = ix->docs[d].terms[i];
    qsort(all, (size_t)k, sizeof *all, u64_cmp);
    ix->df_terms = xzalloc(sizeof *ix->df_terms * (size_t)(k ? k : 1));
    ix->df = xzalloc(sizeof *ix->df * (size_t)(k ? k : 1));
    for (int i = 0; i < k; i++) {
        if (ix->n_df > 0 && ix->df_terms[ix->n_df - 1] == all[i]) {
            ix->df[ix->n_df - 1]++;
            continue;
        }
        ix->df_terms[ix->n_df] = all[i];
        ix->df[ix->n_df++] = 1;
    }
    free(all);
    free(tmp);
    return ix;
}

void bm25_index_free(struct bm25_index *ix)
{
    if (!ix)
        return;
    for (int d = 0; d < ix->n_docs; d++) {
        free(ix->docs[d].terms);
        free(ix->docs[d].tf);
    }
    free(ix->docs);
    free(ix->df_terms);
    free(ix->df);
    free(ix);
}

void bm25_query_init(struct bm25_query *q, const char *text, size_t len)
{
    int n;
    sorted_terms(text, len, q->terms, &n);
    /* distinct: a word said twice in a question is not twice the evidence */
    q->n = 0;
    for (int i = 0; i < n; i++)
        if (q->n == 0 || q->terms[q->n - 1] != q->terms[i])
            q->terms[q->n++] = q->terms[i];
}

static double idf(const struct bm25_index *ix, uint32_t df)
{
    return log(1.0 + ((double)ix->n_docs - df + 0.5) / (df + 0.5));
}

double bm25_raw(const struct bm25_index *ix, const struct bm25_query *q, int d)
{
    if (d < 0 || d >= ix->n_docs)
        return 0;
    const struct bm25_doc *doc = &ix->docs[d];
    double s = 0;
    double norm = ix->avgdl > 0 ? 1 - BM25_B + BM25_B * doc->length / ix->avgdl : 1;
    for (int i = 0; i < q->n; i++) {
        int at = find(doc->terms, doc->n_terms, q->terms[i]);
        if (at < 0)
            continue;
        int dfi = find(ix->df_terms, ix->n_df, q->terms[i]);
        double tf = doc->tf[at];
        s += idf(ix, ix->df[dfi]) * tf * (BM25_K1 + 1) / (tf + BM25_K1 * norm);
    }
    return s;
}

double bm25_score(const struct bm25_index *ix, const struct bm25_query *q, int d)
{
    double most = 0;
    for (int i = 0; i < q->n; i++) {
        int dfi = find(ix->df_terms, ix->n_df, q->terms[i]);
        if (dfi >= 0)
            most += idf(ix, ix->df[dfi]) * (BM25_K1 + 1);
    }
    if (most <= 0)
        return 0;
    double s = bm25_raw(ix, q, d) / most;
    return s < 0 ? 0 : s > 1 ? 1 : s;
}
