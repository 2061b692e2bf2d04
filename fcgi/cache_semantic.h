/* cache_semantic.h: the semantic answer cache on the request path (R-CACHE-4).
 * In a model's (or route's) semantic mode, after the exact lookup missed, the
 * request's last user turn is embedded (embed.c) and compared by cosine
 * similarity with the stored entries of its scope (cache_key_scope_hash: the
 * same tenant, endpoint, model and everything but that turn); the best at or
 * above the threshold answers. cache.c calls the lookup, account.c takes the
 * store's and the audit's parts; cache_store.c writes them. */
#ifndef SLUICE_CACHE_SEMANTIC_H
#define SLUICE_CACHE_SEMANTIC_H

#include "cache_key.h"
#include "cache_store.h"
#include "request.h"

/* Is the semantic cache on at all (settings.semantic_cache_embedding_model
 * names a model)? Without it the semantic mode is the exact one. */
int cache_semantic_enabled(const struct request *r);

/* The exact key in missed: embed the last user turn, look for the scope's most
 * similar entry. 1: a match at or above the threshold, its answer's key in
 * matched; 0: none (the embedding is kept, so the answer is stored as a
 * semantic entry); -1: not semantic-cacheable (no text-only last user turn) or
 * the embedding failed: a plain exact miss. Never replies. */
int cache_semantic_match(struct request *r, const struct snap_policy *policy, const struct cache_key_in *in,
                         char matched[65]);

/* The matched entry's answer is gone since (evicted, expired): a miss after all. */
void cache_semantic_unmatch(struct request *r);

/* account, storing a miss's answer: its semantic part (heap, the entry owns
 * it), or NULL (no embedding, or over the pending budget: stored as exact).
 * *bytes is what it holds of the budget. */
struct semantic_part *cache_semantic_part(const struct request *r, size_t *bytes);

/* account, after a semantic hit: the audit row when the hit is sampled
 * (settings.semantic_cache_audit_percent, by the request id's hash), heap, or NULL. */
struct semantic_audit *cache_semantic_audit_take(const struct request *r);

#endif
