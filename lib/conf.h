/* conf.h: sluice.conf (libconfig syntax, R-DEP-5). Every option has the spec's default. */
#ifndef SLUICE_CONF_H
#define SLUICE_CONF_H

#include <stdint.h>

/* Filled once at start-up, read-only afterwards; owned by main(). */
struct conf {
    char database[512];          /* database: SQLite file */
    char state_file[512];        /* state_file: pool-wide shared state (mmap) */
    char state[512];             /* state: "" = key limits in state_file; redis://... or redis+unix://... (lib/state_url.h) */
    char log_file[512];          /* log_file: diagnostics ("-" = stderr) */
    char log_level[8];           /* log_level: error, warn, info or debug (info); lib/log.h log_level_of */
    char access_log[512];        /* access_log: JSON lines, one per request ("" = off) */
    char trace_log[512];         /* trace_log: spans as JSON lines ("" = off; R-OBS-3) */
    char metrics_token[256];     /* metrics.token: bearer token GET /metrics requires ("" = open) */
    int metrics_tenant_labels;   /* metrics.tenant_labels: tenant label on series (true) */
    char otlp_endpoint[512];     /* otlp.endpoint: OTLP/HTTP JSON traces URL, e.g. http://127.0.0.1:4318/v1/traces ("" = off) */
    int otlp_flush_ms;           /* otlp.flush_ms: longest a span waits before export (1000) */
    int otlp_batch_max;          /* otlp.batch_max: spans per export request (512) */
    int otlp_queue_max;          /* otlp.queue_max: spans held for export; more are dropped and counted (10000) */
    int otlp_timeout_ms;         /* otlp.timeout_ms: one export request at most (2000) */
    char billing_tz[64];         /* billing_tz: time zone of usage days (SLUICE_BILLING_TZ wins) */
    int pool_processes;          /* pool.processes: responder processes the front server starts */
    int pool_threads;            /* pool.threads: worker threads a responder starts with and keeps (32) */
    int pool_park_streams;       /* pool.park_streams: a stream under way leaves its thread for the responder's stream loop (true) */
    int pool_max_threads;        /* pool.max_threads: the most it grows to while all are busy (1024) */
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
    int64_t default_max_output;  /* keys.default_max_output: tokens pre-deducted when max_tokens is absent (1024) */
    int quota_db_wait_ms;        /* limits.quota_db_wait_ms: longest wait on a locked database on the request path (20) */
    int64_t max_tokens_cap;      /* limits.max_tokens_cap: largest max_tokens accepted without a model max_output (1000000) */
    int db_connections;          /* keys.db_connections: SQLite connections per responder for quotas (4) */
    int64_t db_mmap_bytes;       /* keys.db_mmap_bytes: how much of the database those connections map (256 MiB; 0 = none) */
    int idem_ttl_minutes;        /* idempotency.ttl_minutes: record lifetime, 1-1440 (10; SLUICE_IDEMPOTENCY_TTL_MINUTES) */
    int idem_max_records;        /* idempotency.max_records: records kept at most (100000) */
    int64_t idem_max_bytes;      /* idempotency.max_bytes: stored responses at most (256 MiB) */
    int64_t cache_max_bytes;     /* cache.max_bytes: cached answers at most, oldest evicted first (256 MiB; R-CACHE-3) */
    int64_t max_n;               /* limits.max_n: the most answers (n) one request may ask for (8) */
    int64_t tokenize_timeout_ms; /* guard.tokenize_timeout_ms: the longest the context pre-check waits on vLLM /tokenize (200) */
    int64_t tokenize_margin_pct; /* guard.tokenize_margin_pct: an estimate this close to max_context (%) asks /tokenize (10) */
    int64_t rule_match_limit;    /* guard.rule_match_limit: PCRE2 match limit per rule and text (bounded matching, 100000) */
    int64_t semantic_max_entries;/* cache.semantic_max_entries: semantic entries kept at most, oldest evicted (10000) */
    int64_t semantic_embed_timeout_ms; /* cache.semantic_embed_timeout_ms: the longest one embedding of the semantic cache takes, failovers included (2000) */
    int64_t semantic_max_input_bytes; /* cache.semantic_max_input_bytes: a longer last user turn is exact-cached only (8192) */
    int64_t shadow_timeout_ms;   /* shadow.timeout_ms: the longest one mirrored request (R-SHD-1) may take (30000) */
    int64_t shadow_max_inflight; /* shadow.max_inflight: mirrored requests in flight at once, pool-wide; more are dropped (16) */
    int64_t cache_max_entry_bytes; /* cache.max_entry_bytes: one cached answer at most (4 MiB) */
    int64_t idem_max_record_bytes; /* idempotency.max_record_bytes: one stored response at most (8 MiB) */
    int affinity_max_entries;    /* affinity.max_entries: pool-wide session mappings (100000) */
    int affinity_abs_margin;     /* affinity.abs_margin: R-AFF-3 ABS margin on the load signal (4) */
    int affinity_rel_margin_pct; /* affinity.rel_margin_pct: R-AFF-3 REL margin in percent (150 = 1.5x) */
    int auth_fail_limit;         /* auth.fail_limit: failures per client address before 429 (20) */
    int auth_fail_window_ms;     /* auth.fail_window_ms: the window those failures count in (60000) */
    char trusted_proxies[512];   /* limits.trusted_proxies: fronts whose X-Forwarded-For names the client ("") */
    char secrets_key_file[512];  /* secrets.key_file: the key sealing upstream credentials ("": sluice.key beside database; R-SEC-9) */
    /* sluice-healthd (SPEC §8) and what the data plane reads of its results */
    char health_log_file[512];   /* health.log_file: sluice-healthd's diagnostics ("-" = stderr) */
    int health_round_ms;         /* health.round_ms: one probe round every (5000) */
    int health_timeout_ms;       /* health.timeout_ms: per probe and scrape (2000) */
    int health_run_s;            /* health.run_seconds: a cron-started healthd starts no round this long after its start (60) */
    int health_lock_wait_ms;     /* health.lock_wait_ms: wait for a previous instance's lock (10000) */
    int health_scrape_parallel;  /* health.scrape_parallel: engine metrics scrapes at once (10) */
    int metrics_stale_ms;        /* health.metrics_stale_ms: older engine metrics count as none (15000) */
    int temperature_stale_ms;    /* health.temperature_stale_ms: older GPU temperatures count as none (60000) */
    /* lazy wake (SPEC §9) */
    int wake_max_wait_ms;        /* wake.max_wait_ms: longest wait for readiness (60000) */
    int wake_no_health_wait_ms;  /* wake.no_health_wait_ms: the wait when health checks are off (30000) */
    int wake_poll_ms;            /* wake.poll_ms: readiness poll interval (250) */
    int wake_call_timeout_ms;    /* wake.call_timeout_ms: the wake call itself (5000) */
    int wake_retry_after_s;      /* wake.retry_after_s: Retry-After of service_waking (30) */
    int wake_node_retry_after_s; /* wake.node_retry_after_s: Retry-After of the node codes (60) */
    /* the management API, sluice-admin.cgi (SPEC §20) */
    int admin_session_ttl_s;     /* admin.session_ttl_s: a login session lives this long (43200) */
    int64_t admin_max_body_bytes; /* admin.max_body_bytes: API request body limit -> 413 (1 MiB) */
    int admin_login_max_failures; /* admin.login_max_failures: failed logins per user name before 429 (5; x10 per address) */
    int admin_login_window_s;    /* admin.login_window_s: the window those failures count in (300) */
    int admin_login_lockout_s;   /* admin.login_lockout_s: how long a name or address then waits (60) */
    int admin_test_timeout_ms;   /* admin.endpoint_test_timeout_ms: POST /endpoints/{id}/test timeout (60000) */
};

void conf_defaults(struct conf *c);
/* Reads path over the defaults. On error prints "FATAL CONFIG FILE ERROR" with
 * file, line and text to stderr and returns -1. */
int conf_load(struct conf *c, const char *path);
/* The same over a text held in memory (tests, tests/fuzz/fuzz_conf.c); name stands
 * for the file in messages (NULL: "<string>"). */
int conf_load_string(struct conf *c, const char *text, const char *name);

/* SIGHUP (R-DEP-5): how a changed option was taken. */
enum conf_change {
    CONF_CHANGE_APPLIED,        /* the new value holds from now on */
    CONF_CHANGE_RESTART,        /* read once at start: the next start takes it */
    CONF_CHANGE_LOG,            /* a log's new path: return 0 when the log moved there, else -1 */
};
typedef int (*conf_changed_fn)(void *arg, const char *name, const char *was, const char *now,
                               enum conf_change how, const void *value);

/* Re-reads path. file holds what the file said last time (before environment
 * overrides); every option whose value in the file changed is reported to
 * changed, and the live ones (and the logs that moved) take their new value in
 * live. 0; -1 when the file is refused (the errors are printed, nothing changes). */
int conf_reload(struct conf *live, struct conf *file, const char *path, conf_changed_fn changed, void *arg);

#endif
