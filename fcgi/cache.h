/* cache.h: the exact answer cache on the request path (R-CACHE-1..3): which
 * requests it serves, the lookup, the replay of a stored answer, the capture
 * of a miss's answer and its hand-off to the usage writer (fcgi/cache_store.c
 * writes it). drive.c looks up before the first attempt, account.c hands the
 * answer over. */
#ifndef SLUICE_CACHE_H
#define SLUICE_CACHE_H

#include "cache_store.h"
#include "request.h"

enum cache_result {
    CACHE_NONE,       /* not cacheable: nothing is looked up or kept */
    CACHE_MISS,       /* cacheable, nothing stored: the answer is captured from now on */
    CACHE_HIT,        /* a stored answer (exact, or R-CACHE-4 the scope's most similar): cache_replay sends it */
};

/* The drive stage, before the first attempt: the route chose the endpoint and
 * the model name it knows, which the key needs. A database error is a miss. */
enum cache_result cache_lookup(struct request *r);
/* A hit: the stored answer to the client (X-Cache: hit or hit-semantic, the original chunk
 * boundaries of a stream), the request filled for account as a cached event
 * with the stored tokens. The caller released the place route took. */
void cache_replay(struct request *r);
/* drive: the last attempt ended; complete = its answer was delivered as it
 * ended (nothing cut, no error event of sluice's own). */
void cache_answer_end(struct request *r, int complete);
/* account: the entry to store for a complete 200 answer of a cacheable miss
 * (heap, the caller owns it), or NULL. */
struct cache_entry *cache_entry_take(struct request *r);
/* End of the request: the capture buffers go. */
void cache_end(struct request *r);

#endif
