/* semindex.h: what the semantic strategy (R-SEM-1..2) keeps per snapshot version in
 * a responder process: the semantic rules compiled once (PCRE2, JIT, the guard's
 * match limit, as content rules), the BM25 index of the model policies'
 * descriptions, and the descriptions' embeddings (fetched by fcgi/semvec.c) carried
 * over to the next version while the description and the embedding model stay the
 * same. It calls nothing of route: fcgi/auto.c reads it inside the route stage. */
#ifndef SLUICE_SEMINDEX_H
#define SLUICE_SEMINDEX_H

#include "bm25.h"
#include "request.h"
#include "semroute.h"

/* One policy's description embedding; heap, owned by its index. */
struct semindex_vec {
    float *vec;                   /* NULL: not fetched yet */
    size_t dims;
    uint64_t key;                 /* hash of the embedding model and the description */
};

/* Heap object of one snapshot version; readers hold a reference. */
struct semindex {
    int64_t version;
    struct sem_rule *rules; int n_rules;
    struct bm25_index *bm25;      /* document i = the snapshot's policy i (its description) */
    struct semindex_vec *vecs; int n_vecs;   /* by policy index, for the embedding model below */
    char *embed_model;            /* settings.semantic_embedding_model it was built for */
    int refs;                     /* under the module's mutex */
};

struct semindex *semindex_acquire(const struct request *r);
void semindex_release(struct semindex *ix);

/* R-SEM-2: policy p's description embedding (valid while ix is held): 1 with *vec
 * set, 0 when not fetched yet, -1 when the policy has no description (or no
 * embedding model is set). */
int semindex_vec_get(struct semindex *ix, int policy, const float **vec, size_t *dims);
/* Keeps a copy of a fetched description embedding (the first stored stays). */
void semindex_vec_put(struct semindex *ix, int policy, const float *vec, size_t dims);

/* A key for a text under an embedding model (the cache's identity of a vector). */
uint64_t semindex_vec_key(const char *model, const char *text);

#endif
