/* healthd.h: the pieces of sluice-healthd (SPEC §8, R-HC-1..4, R-HC-6, R-HC-7, R-HC-9):
 * what one round knows (from SQLite), the parallel HTTP runner, the pure parsers
 * of vLLM and DCGM metrics, and the database writes. */
#ifndef SLUICE_HEALTHD_H
#define SLUICE_HEALTHD_H

#include "arena.h"
#include "conf.h"
#include "shm.h"

#include <curl/curl.h>
#include "sdb.h"
#include <stddef.h>
#include <stdint.h>

/* ---- what a round works on (record.c loads it; all strings in the round's arena) ---- */

struct hd_endpoint {
    int64_t id, tenant_id;
    const char *name, *health_path, *protocol;
    const char *anthropic_version;   /* sent to anthropic endpoints (R-ANT-5) */
    const char *upstream_auth;    /* secret: sent upstream only, never logged */
    const char *probe_model;      /* model name for the business probe, NULL = no route */
    int health_check, failure_threshold, start_period_seconds, business_probe_rounds;
    int slot;                     /* shared-state endpoint slot, -1 if none */
};

struct hd_replica {
    int64_t id;
    int ep;                       /* index into endpoints */
    const char *url, *engine, *state;
    int healthy, failures;        /* replicas.healthy, replicas.consecutive_failures */
    int64_t started_s;            /* start of the start grace (R-HC-3) */
    int has_alert;                /* an ACTIVE ENDPOINT_UNHEALTHY alert exists */
    int slot;                     /* shared-state replica slot, -1 if none */
};

struct hd_node {
    int64_t id;
    const char *name, *metrics_url;
    int has_pushed;               /* a temperature pushed through the admin API */
    int pushed_deci;
    int64_t pushed_at_s;
    int slot;
};

struct hd_config {
    struct hd_endpoint *eps; int n_eps;
    struct hd_replica *reps; int n_reps;
    struct hd_node *nodes; int n_nodes;
};

/* ---- record.c: every database read and write of sluice-healthd ---- */

/* Reads endpoints, replicas, nodes and active alerts into cfg (strings in a). */
int record_load(struct sdb *db, struct arena *a, struct hd_config *cfg);
int record_begin(struct sdb *db);                  /* BEGIN IMMEDIATE */
int record_commit(struct sdb *db);                 /* COMMIT, ROLLBACK on failure */
void record_rollback(struct sdb *db);
int record_failures(struct sdb *db, int64_t replica_id, int failures);
/* R-HC-2: healthy = 0, audit record, ENDPOINT_UNHEALTHY alert (once per replica). */
int record_removed(struct sdb *db, const struct hd_replica *r, const struct hd_endpoint *e, int failures,
                   const char *reason);
/* R-HC-2: healthy = 1, failures 0, alert RECOVERED, audit record (how: probe, data plane, ...). */
int record_recovered(struct sdb *db, const struct hd_replica *r, const struct hd_endpoint *e, const char *how);
/* R-HC-4: resolves the replica's stale ACTIVE alert (it is healthy already). */
int record_resolve_alert(struct sdb *db, int64_t replica_id);
/* R-HC-4: resolves alerts of replicas that no longer exist. */
int record_resolve_orphans(struct sdb *db);
/* R-WAKE-1: a woken sleeping replica becomes `running`, with an audit record. */
int record_woken(struct sdb *db, const struct hd_replica *r, const struct hd_endpoint *e);
/* R-HC-7: the node's last GPU temperature (not a configuration change). */
int record_temperature(struct sdb *db, int64_t node_id, int deci_celsius, int64_t at_s);

/* ---- round.c: one round ---- */

struct round {
    struct sdb *db;
    struct shm *shm;
    const struct conf *conf;
    int64_t seq;                  /* round number since the epoch (now / round_ms): business probes every N */
};

/* Probes, scrapes, records and publishes; 0, or -1 when the database failed. */
int round_run(struct round *rd);

/* ---- probe.c: HTTP requests of one round, in parallel (curl multi) ---- */

#define PROBE_CLASSES 4           /* concurrency classes, each with its own limit */
#define PROBE_BODY_MAX (8 << 20)  /* kept of an answer */

struct probe_job {
    /* in */
    const char *url;
    const char *body;             /* POST body, NULL = GET */
    struct curl_slist *headers;   /* may be NULL; probe_free frees it */
    int cls;                      /* 0..PROBE_CLASSES-1 */
    int keep_body;                /* store the answer's body */
    int kind, index;              /* the caller's: what this is about */
    /* out */
    long status;                  /* HTTP status, 0 = no answer */
    char error[128];              /* why there was no answer */
    char *resp;                   /* body (NUL-terminated) when keep_body, else NULL */
    size_t resp_len;
    /* private */
    CURL *easy;
    size_t cap;
    int started;
};

/* Runs every job, at most limits[cls] of a class at once (0 = no limit), each
 * with the given timeouts. Returns when all are done. */
void probe_run(struct probe_job *jobs, int n, const int limits[PROBE_CLASSES], long timeout_ms,
               long connect_ms);
void probe_free(struct probe_job *jobs, int n);

/* ---- metrics.c: vLLM's Prometheus text (pure) ---- */

struct vllm_metrics {
    int waiting, running;         /* summed over the label sets */
    int kv_permille;              /* 1000 x the kv cache usage fraction (max over label sets) */
    int has_waiting, has_kv, legacy_kv;
};

/* Calls fn for every sample line "name{labels} value [ts]" (comments skipped):
 * the name and the value text, neither NUL-terminated. */
void metrics_each_sample(const char *text, size_t len,
                         void (*fn)(void *arg, const char *name, size_t nlen, const char *value, size_t vlen),
                         void *arg);
/* R-LB-2: 0 when num_requests_waiting and a kv cache gauge were found
 * (vllm:kv_cache_usage_perc, else the older vllm:gpu_cache_usage_perc), else -1. */
int metrics_parse_vllm(const char *text, size_t len, struct vllm_metrics *m);

/* ---- dcgm.c: DCGM exporter's GPU temperatures (pure) ---- */

/* R-HC-7: max DCGM_FI_DEV_GPU_TEMP over the GPUs, in tenths of a degree.
 * Blank sentinels (>= 0x7FFFFFFFFFFFFFF0, and the 32-bit >= 0x7FFFFFF0) are no
 * data. Returns how many GPUs had a reading; *deci is set when > 0. */
int dcgm_parse_temp(const char *text, size_t len, int *deci);

#endif
