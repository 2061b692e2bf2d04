/* semroute.h: the `semantic` strategy of model "auto" (R-SEM-1..3) as a pure
 * decision: the candidates that passed R-AUTO-2/3, the snapshot's semantic rules,
 * the last user text, the caller's tenant and required labels, the BM25 index of
 * the descriptions and, when there are, embeddings: in, the ordered candidates
 * and the reason (X-Routing-Reason) out. No I/O: tests/unit/test_semantic_route.c. */
#ifndef SLUICE_SEMROUTE_H
#define SLUICE_SEMROUTE_H

#include "autoroute.h"
#include "bm25.h"

#include <stddef.h>
#include <stdint.h>

enum sem_layer { SEM_LAYER_RULE, SEM_LAYER_BM25, SEM_LAYER_HYBRID, SEM_LAYER_FALLBACK, SEM_LAYERS };
enum sem_action { SEM_FORCE, SEM_FORBID };

/* One operator rule (a row of semantic_rules), its pattern compiled by
 * lib/content_rules.c; owned by the caller. */
struct sem_rule {
    const char *name;
    int64_t tenant_id;            /* 0: every tenant */
    enum sem_action action;
    const char *model;            /* the model it forces or forbids */
    const char *label;            /* NULL: none; matched, every candidate must carry it */
    void *code;                   /* pcre2_code_8 * */
};

/* One candidate model (R-AUTO-2/3 already passed). */
struct sem_cand {
    const char *model;
    int64_t endpoint_id;
    const char *const *tenants; int n_tenants;   /* policy allow-list (tenant names); 0: every tenant */
    const char *const *labels; int n_labels;     /* policy compliance labels */
    int doc;                      /* its description in the BM25 index; -1: none */
    const float *vec; size_t dims;               /* the description's unit embedding; NULL: none */
};

struct sem_input {
    const char *text; size_t len;                /* the last user message */
    const char *tenant;                          /* the caller's tenant name (allow-lists) */
    int64_t tenant_id;                           /* ... and id (rules) */
    const char *const *require_labels; int n_require;   /* the key's */
    const struct sem_rule *rules; int n_rules;   /* in id order */
    uint32_t match_limit;
    const struct bm25_index *bm25;               /* NULL: no descriptions */
    const float *qvec; size_t dims;              /* the text's unit embedding; NULL: BM25 only */
    double w_bm25, w_embedding;                  /* semantic_weight_*: the hybrid's, normalised to sum 1 */
    double threshold;                            /* semantic_threshold */
    const char *default_model;                   /* semantic_default_model; NULL or "": none */
};

struct sem_result {
    int order[AUTO_MAX_TRIES];    /* indexes into the candidates, best first, one per endpoint */
    int n;                        /* 0: every candidate was filtered out */
    enum sem_layer layer;
    const char *rule;             /* SEM_LAYER_RULE: the forcing rule's name */
    double score;                 /* the best candidate's score (bm25 or hybrid) */
    char reason[96];              /* rule:NAME | bm25:SCORE | hybrid:SCORE | fallback */
};

const char *semroute_layer_name(enum sem_layer l);

/* The text the layers read, appended to out: the last user message of "messages"
 * (a string, or its text parts joined by a newline; image, audio and other parts are
 * skipped, so adding one does not hide the text from a rule), else "prompt" (a
 * string, or the last of an array), else the Responses API's "input" (a string, or
 * the last user item's content). 0, or -1 when the body holds no such text. */
struct buf;
struct json_object;
int semroute_last_user(struct json_object *body, struct buf *out);

/* Filters (tenant allow-lists, required labels of the key and of matched
 * rules), forbid rules, then force (forbid beats force), else the scores; below
 * the threshold the default model first. The rest follow in score order (ties:
 * by model name), which is the degradation chain of R-AUTO-5. */
void semroute_decide(const struct sem_cand *c, int n, const struct sem_input *in, struct sem_result *out);

/* The hybrid of one candidate: w_bm25 x bm25 + w_embedding x max(0, cosine),
 * weights normalised; bm25 alone when either vector is missing. */
double semroute_hybrid(double bm25, double cosine, double w_bm25, double w_embedding);

#endif
