/* cache_store.h: the answer cache's writes (R-CACHE-1..4), done by the usage
 * writer thread inside its batch transaction, so storing an answer never
 * delays one: new entries (a semantic one with its vector), hit counts, the
 * semantic hit audit, expiry, the cache.max_bytes cap and the
 * cache.semantic_max_entries cap (oldest evicted first). Every write of
 * cache_entries, semantic_entries and semantic_hits is here; the lookups are
 * fcgi/cache.c's and fcgi/cache_semantic.c's. */
#ifndef SLUICE_CACHE_STORE_H
#define SLUICE_CACHE_STORE_H

#include "conf.h"
#include "shm.h"

#include "sdb.h"
#include <stddef.h>
#include <stdint.h>

enum cache_kind { CACHE_KIND_EXACT, CACHE_KIND_SEMANTIC };

/* R-CACHE-4: what makes a stored answer a semantic entry; heap, owned by its
 * entry (freed with it). */
struct semantic_part {
    char scope_hash[65];
    char embed_model[257];
    char prompt[1001];            /* the last user turn, cut to 1000 bytes on a character boundary */
    size_t dims;
    float vec[];                  /* unit length */
};

/* R-CACHE-4: one sampled semantic hit for the audit; heap, owned by the usage
 * record that carries it. */
struct semantic_audit {
    int64_t ts_ms, tenant_id, entry_id;
    double similarity;
    char request_id[80], key_hash[65];
    char model[160];
    char prompt[1001], matched[1001];
};

/* One answer to store; one heap block (the strings and bytes follow it), owned
 * by the usage record that carries it until the writer frees the record. */
struct cache_entry {
    char key_hash[65];
    enum cache_kind kind;
    int64_t tenant_id, endpoint_id;
    const char *model;            /* the public name asked for */
    const char *routed_model;
    const char *content_type;
    int stream;
    const char *body;             /* what the client got (a stream: its events, keep-alives left out) */
    size_t body_len;
    const unsigned char *chunks;  /* a stream: each write's length, 4 bytes little-endian; else NULL */
    size_t chunks_len;
    int64_t prompt_tokens, completion_tokens;
    int64_t created_ms, expires_ms;
    size_t held;                  /* bytes it counts in the pending budget (cache_store_hold) */
    struct semantic_part *sem;    /* R-CACHE-4: kind semantic: its vector and scope, else NULL */
};

/* Entries handed to the writer but not yet written hold heap memory; while the
 * database is down they pile up with the usage records. The budget (per
 * process: 4 x cache.max_entry_bytes, at least 16 MiB) is taken here: 1 held,
 * 0 over it (the answer is served but not stored). */
int cache_store_hold(size_t bytes, int64_t max_entry_bytes);
/* Frees an entry and gives its bytes back to the budget. */
void cache_store_entry_free(struct cache_entry *e);

/* The writer's connection and what it counts into (metrics and the bytes
 * gauge). 0, or -1 (logged). */
int cache_store_open(struct sdb *db, const struct conf *c, struct shm *s);
void cache_store_close(void);

/* Inside the writer's transaction. Each returns 0, or -1 for a failure a
 * retry of the batch may cure (the batch is rolled back). */
int cache_store_put(const struct cache_entry *e);
int cache_store_hit(const char *key_hash);
/* R-CACHE-4: one row of the semantic hit audit. */
int cache_store_audit(const struct semantic_audit *a);
/* After the batch's puts: expired entries out (at most once a minute), then
 * the oldest until the total fits cache.max_bytes, and the oldest semantic
 * entries past cache.semantic_max_entries (R-CACHE-4). */
int cache_store_trim(int64_t now_ms);
/* The batch committed (1) or was rolled back (0): its counts are published,
 * or its changes to the running total undone. */
void cache_store_done(int committed);

#endif
