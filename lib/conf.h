/* conf.h: sluice.conf (libconfig syntax, R-DEP-5). Every option has the spec's default. */
#ifndef SLUICE_CONF_H
#define SLUICE_CONF_H

#include <stdint.h>

/* Filled once at start-up, read-only afterwards; owned by main(). */
struct conf {
    char database[512];          /* database: SQLite file */
    char state_file[512];        /* state_file: pool-wide shared state (mmap) */
    char log_file[512];          /* log_file: diagnostics ("-" = stderr) */
    char access_log[512];        /* access_log: JSON lines, one per request ("" = off) */
    char billing_tz[64];         /* billing_tz: time zone of usage days (SLUICE_BILLING_TZ wins) */
    int pool_processes;          /* pool.processes: responder processes the front server starts */
    int pool_threads;            /* pool.threads: worker threads per responder process */
    int64_t max_body_bytes;      /* limits.max_body_bytes: request body limit -> 413 (8 MiB) */
    int64_t max_response_bytes;  /* limits.max_response_bytes: buffered upstream body cap (64 MiB) */
    int64_t max_sse_event_bytes; /* limits.max_sse_event_bytes: one SSE event cap (4 MiB) */
    int keepalive_ms;            /* stream.keepalive_ms: SSE comment after this much silence (5000, >= 1000) */
    int shutdown_grace_ms;       /* shutdown.grace_ms: in-flight requests may finish this long (10000) */
    int config_poll_ms;          /* config.poll_ms: how often responders check for changes (250) */
    int key_cache_ms;            /* auth.key_cache_ms: longest a key check is cached (30000) */
    int ban_ms;                  /* passive.ban_ms: replica ban after one failure (15000) */
    int circuit_failures;        /* passive.circuit_failures: consecutive failures that open it (3) */
    int circuit_open_ms;         /* passive.circuit_open_ms: open circuit duration (30000) */
    int half_open_trials;        /* passive.half_open_trials: trial requests while half-open (2) */
    int retry_after_s;           /* errors.retry_after_s: Retry-After on 503 no_backends (5) */
    int usage_flush_ms;          /* usage.flush_ms: batched writer interval (200) */
    int usage_batch_max;         /* usage.batch_max: most events per transaction (500) */
    int usage_queue_max;         /* usage.queue_max: events held in memory before blocking (100000) */
};

void conf_defaults(struct conf *c);
/* Reads path over the defaults. On error prints "FATAL CONFIG FILE ERROR" with
 * file, line and text to stderr and returns -1. */
int conf_load(struct conf *c, const char *path);

#endif
