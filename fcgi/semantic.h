/* semantic.h: the semantic cache's pure vector arithmetic (R-CACHE-4): normalising an
 * embedding to unit length and picking the stored entry most similar to a query. No
 * I/O, so it is tested without sockets or SQLite. */
#ifndef SLUICE_SEMANTIC_H
#define SLUICE_SEMANTIC_H

#include <stddef.h>

/* Scales v to unit length in place; false (v untouched) when it is all zeros or holds
 * a non-finite value, which can't be compared. */
_Bool semantic_normalize(float *v, size_t dims);

/* Cosine similarity of two unit vectors: their dot product, clamped to [-1, 1]. */
double semantic_cosine(const float *a, const float *b, size_t dims);

/* A stored candidate: its vector (unit length) and its dimension count. */
struct semantic_cand {
    const float *vec;
    size_t dims;
};

/* Index of the candidate most similar to q (ties: the earliest, i.e. the newest when
 * the caller lists newest first) with its similarity in *best; candidates whose dims
 * differ from q's are skipped (another embedding model's vectors mean nothing here).
 * -1 when none is >= threshold. */
long semantic_best(const float *q, size_t dims, const struct semantic_cand *c, size_t n,
                   double threshold, double *best);

#endif
