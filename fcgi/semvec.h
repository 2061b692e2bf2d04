/* semvec.h: the embeddings of the semantic strategy (R-SEM-2), fetched between admit
 * and route: for a request for model "auto" under the `semantic` strategy with
 * settings.semantic_embedding_model set, the last user turn and every routed
 * description not yet cached are embedded through sluice's own routes (fcgi/embed.c:
 * failover, metered). Done before route because the embedding is itself routed: the
 * route stage (fcgi/auto.c) only reads what this left in the request. */
#ifndef SLUICE_SEMVEC_H
#define SLUICE_SEMVEC_H

#include "request.h"

/* Sets r->semindex (held) and, when every embedding came, r->sem_qvec; a failure
 * leaves r->sem_qvec NULL (BM25 only, logged once a minute), and so do the next
 * 5 s of requests without trying; a turn over cache.semantic_max_input_bytes is
 * not embedded. Never replies. */
void semvec_prepare(struct request *r);
/* Gives back what prepare held. */
void semvec_end(struct request *r);

#endif
