/* usage_writer.h: the batched usage writer thread (R-USE-3): events and daily
 * aggregates in one transaction, off the response path. */
#ifndef SLUICE_USAGE_WRITER_H
#define SLUICE_USAGE_WRITER_H

#include "cache_store.h"
#include "conf.h"
#include "shm.h"

#include <stdint.h>

/* One usage event; fixed-size so enqueueing is one allocation. */
struct usage_record {
    int64_t ts_ms;
    char request_id[80];
    int64_t tenant_id, user_id, key_id, endpoint_id, replica_id, route_id;
    char model[160], routed_model[160], path[96];
    int64_t prompt_tokens, completion_tokens, latency_ms, ttft_ms;
    int64_t cache_read_tokens, cache_creation_tokens, reasoning_tokens;   /* parts of the two above */
    int64_t queue_ms;             /* R-PRIO-1: time it waited in the queue */
    int status, retries, stream;
    int usage_estimated;          /* R-USE-1: tokens counted by sluice, not reported upstream */
    char error_code[48], finish_reason[32];
    char affinity[8], cache_outcome[8];   /* "hit" | "miss" | "" (did not apply) */
    char content_rule[520];       /* R-GUARD-3: the block rule, or the flag rules ("a, b"); "" = none */
    /* R-KEY-5 settlement of a monthly token pre-deduction, written with the event. */
    int64_t settle_key_id, settle_tokens;
    char settle_period[16];
    /* R-KEY-4: the net effect on the key's quota counters of a request counted in
     * the shared state: one call in each period, its tokens in the month. */
    int64_t quota_key_id, quota_tokens;
    int quota_calls;              /* 1 in the admission's record, 0 in the settlement's */
    char quota_day[16], quota_month[16];
    int no_event;                 /* only the quota counters (a models listing) */
    int shadow;                   /* R-SHD-1: a mirrored request's record: no aggregate, no quota, no report */
    /* R-CACHE-1..3: the event of an answer served from the cache (cached = 1,
     * and its entry's hit count), or an answer to store (written in the same
     * transaction as the event; owned by the record). */
    int cached;
    char cache_hit_key[65];
    struct cache_entry *cache;
    struct semantic_audit *sem_audit;   /* R-CACHE-4: a sampled semantic hit's audit row (owned), or NULL */
    struct usage_record *next;
};

int usage_writer_start(const struct conf *c);
/* The shared state where the writer counts its failed batches and keeps its
 * backlog (R-OBS-1); without it neither is published. */
void usage_writer_set_shm(struct shm *s);
/* Takes ownership of rec (heap-allocated). Never blocks on SQLite. */
void usage_writer_enqueue(struct usage_record *rec);
/* The same without waiting: -1 (the record is the caller's still) while the queue is
 * half full or the writer stops; for records no client waits on (mirrors). */
int usage_writer_offer(struct usage_record *rec);
/* Writes everything queued and stops the thread (SIGTERM path, R-DEP-6). */
void usage_writer_stop(void);

#endif
