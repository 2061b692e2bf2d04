/* bm25.h: BM25 over the capability descriptions of model policies (R-SEM-2), pure:
 * a tokeniser, an index built once per snapshot and a scorer for one query.
 *
 * Tokeniser (the README's "Semantic routing" says the same):
 *   - a token is a run of ASCII letters and digits, or of bytes >= 0x80 (so UTF-8
 *     words of other scripts stay whole); everything else separates tokens;
 *   - ASCII letters are lower-cased; nothing else is folded, no stemming;
 *   - tokens of one byte and the stop words below are dropped;
 *   - a token longer than BM25_TOKEN_MAX bytes is cut there; a text yields at most
 *     BM25_MAX_TOKENS tokens (the rest is not read), so scoring is bounded.
 * A term is the 64-bit FNV-1a hash of its token. */
#ifndef SLUICE_BM25_H
#define SLUICE_BM25_H

#include <stddef.h>
#include <stdint.h>

#define BM25_TOKEN_MAX 64
#define BM25_MAX_TOKENS 4096
#define BM25_K1 1.2
#define BM25_B 0.75

/* Calls fn for each token of text (lower-cased, NUL-terminated, at most
 * BM25_TOKEN_MAX bytes); returns the number of tokens. */
int bm25_tokens(const char *text, size_t len, void (*fn)(void *ctx, const char *tok, size_t n), void *ctx);
uint64_t bm25_term(const char *tok, size_t n);

/* One document: its distinct terms, sorted, with their counts. */
struct bm25_doc {
    uint64_t *terms;
    uint32_t *tf;
    int n_terms;
    int length;                   /* tokens */
};

/* Heap object, built once per snapshot; the owner frees it with bm25_index_free. */
struct bm25_index {
    struct bm25_doc *docs; int n_docs;
    uint64_t *df_terms; uint32_t *df; int n_df;   /* sorted: in how many documents each term is */
    double avgdl;
};

/* texts[i] may be NULL or empty: a document without terms (scores 0). */
struct bm25_index *bm25_index_new(const char *const *texts, int n);
void bm25_index_free(struct bm25_index *ix);

/* A query's distinct terms (sorted); caller-owned memory of BM25_MAX_TOKENS. */
struct bm25_query {
    uint64_t terms[BM25_MAX_TOKENS];
    int n;
};
void bm25_query_init(struct bm25_query *q, const char *text, size_t len);

/* The normalised score of document d for q, in 0..1: its BM25 (idf =
 * ln(1 + (N - df + 0.5) / (df + 0.5))) divided by the most any document could
 * score for the query's terms that occur in the index (each such term's idf x
 * (k1 + 1)). 0 when no query term occurs in any document. */
double bm25_score(const struct bm25_index *ix, const struct bm25_query *q, int d);
/* The raw BM25 of document d. */
double bm25_raw(const struct bm25_index *ix, const struct bm25_query *q, int d);

#endif
