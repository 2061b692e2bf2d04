/* embed.h: an embedding of a text through sluice's own routes (R-CACHE-4): the
 * semantic cache's one upstream call of its own. The embedding model is routed
 * as any request for it would be (the caller's routes, the serving view, a
 * place under caps, failover to the next replica or endpoint), and metered: a
 * usage event of its own for the caller. */
#ifndef SLUICE_EMBED_H
#define SLUICE_EMBED_H

#include "request.h"

#include <stddef.h>

struct embedding {
    float *vec;                   /* unit length (semantic_normalize), request arena */
    size_t dims;
};

/* POSTs {"model": ROUTED, "input": text} to a replica of model's routes and
 * reads data[0].embedding. No answer, a 5xx or a 429 fails over to the next
 * replica; any other answer is final (a 4xx: the input is too long for the
 * embedder, the model unknown; a 200 without an embedding), and every 200 is
 * metered (to the caller, or with no tenant, user or key for EMBED_GATEWAY).
 * cache.semantic_embed_timeout_ms bounds the whole call, failovers
 * included. 0, or -1 for any failure (no route, every replica down or failing,
 * the deadline passed, a refusal, an answer that is no embedding): logged at
 * most once a minute; the caller's request goes on as a plain miss. Nothing is
 * ever replied to the client. */
enum embed_payer {
    EMBED_CALLER,       /* the caller's text (the semantic cache, the routed request's turn) */
    EMBED_GATEWAY,      /* sluice's own (a model description): metered, billed to no caller */
};
int embed_text(struct request *r, const char *model, const char *text, size_t len, struct embedding *out,
               enum embed_payer payer);

#endif
