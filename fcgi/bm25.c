/* bm25.c: tokeniser, per-snapshot index and scorer of the semantic router's
 * similarity layer (R-SEM-2; bm25.h documents the tokeniser). */
#include "bm25.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Common English function words: they occur in every description and say
 * nothing of what a model is for. */
static const char *const stop_words[] = {
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "for", "from", "how", "i", "in", "is",
    "it", "me", "my", "of", "on", "or", "our", "please", "so", "that", "the", "this", "to", "was", "we", "what",
    "with", "you", "your", NULL};

static int is_stop(const char *t, size_t n)
{
    for (int i = 0; stop_words[i]; i++)
        if (strlen(stop_words[i]) == n && memcmp(stop_words[i], t, n) == 0)
            return 1;
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

int bm25_tokens(const char *text, size_t len, void (*fn)(void *ctx, const char *tok, size_t n), void *ctx)
{
    char tok[BM25_TOKEN_MAX + 1];
    int count = 0;
    size_t i = 0;
    while (i < len && count < BM25_MAX_TOKENS) {
        while (i < len && !word_byte((unsigned char)text[i]))
            i++;
        size_t n = 0;
        while (i < len && word_byte((unsigned char)text[i])) {
            unsigned char c = (unsigned char)text[i++];
            if (n < BM25_TOKEN_MAX)
                tok[n++] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
        }
        if (n < 2 || is_stop(tok, n))
            continue;
        tok[n] = '\0';
        fn(ctx, tok, n);
        count++;
    }
    return count;
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

static void collect_one(void *ctx, const char *tok, size_t n)
{
    struct collect *c = ctx;
    c->terms[c->n++] = bm25_term(tok, n);
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
    int tokens = text ? bm25_tokens(text, len, collect_one, &c) : 0;
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
