/* snapshot.h: the immutable in-memory configuration a responder routes from.
 *
 * Built from SQLite by snapshot_load, published by snapshot_publish and read
 * by requests through snapshot_acquire/snapshot_release: no SQL on the hot
 * path, and a new version is visible within config.poll_ms (R-CFG-1). A
 * snapshot is freed when the last request holding it releases it. */
#ifndef SLUICE_SNAPSHOT_H
#define SLUICE_SNAPSHOT_H

#include "arena.h"
#include "shm.h"

#include "sdb.h"
#include <stdatomic.h>
#include <stdint.h>

enum lb_algorithm { LB_ROUND_ROBIN, LB_RANDOM, LB_LEAST_CONNECTIONS, LB_ENGINE_AWARE };
enum upstream_protocol { PROTO_OPENAI, PROTO_ANTHROPIC };
enum replica_state { REPLICA_RUNNING, REPLICA_SLEEPING, REPLICA_DISABLED };
enum role { ROLE_NONE, ROLE_MEMBER, ROLE_ADMIN, ROLE_OPERATOR };
enum node_status { NODE_ONLINE, NODE_OFFLINE, NODE_BORROWED };
enum cache_mode { CACHE_INHERIT = -1, CACHE_OFF = 0, CACHE_EXACT, CACHE_SEMANTIC };

struct snap_tenant {
    int64_t id;
    const char *name;
    int weight;                   /* R-PRIO-2: share of a contended queue (1) */
};

/* R-KEY-6: one quota layer (a row of quotas); 0 = no limit of that kind. */
enum quota_scope { QSCOPE_TENANT, QSCOPE_USER, QSCOPE_ENDPOINT, QSCOPE_MODEL };
struct snap_quota {
    int64_t id;
    enum quota_scope scope;
    int64_t target_id;            /* tenant, user or endpoint id; 0 for a model */
    const char *model;            /* QSCOPE_MODEL: the public model name; else "" */
    int64_t concurrency, rpm, daily_tokens, monthly_tokens;
    int queue_max;                /* QSCOPE_MODEL: waiters at most; -1 = the endpoint's */
    int slot;                     /* shared-state quota slot, -1 if none */
};

/* A GPU host (R-HC-7, R-WAKE-2); its live temperature is in the shared state. */
struct snap_node {
    int64_t id;
    const char *name;
    enum node_status status;
    int slot;                     /* shared-state node slot, -1 if none */
};

struct snap_replica {
    int64_t id;
    int endpoint;                 /* index into endpoints */
    const char *url;              /* base URL without trailing slash */
    const char *engine;
    int weight, max_concurrency;
    enum replica_state state;
    int healthy;                  /* 0 once sluice-healthd removed it (R-HC-2) */
    int slot;                     /* shared-state slot, -1 if none */
    int node;                     /* index into nodes, -1 = no node */
};

struct snap_endpoint {
    int64_t id, tenant_id;
    const char *name;
    enum lb_algorithm algorithm;
    enum upstream_protocol protocol;
    int affinity, stream_guard;
    int connect_timeout_ms, first_byte_timeout_ms, idle_timeout_ms;
    const char *upstream_auth;    /* secret: never logged or returned */
    int first_replica, n_replicas; /* range in replicas[] */
    int slot;                     /* shared-state endpoint slot */
    const char *health_path;      /* R-HC-1, also the readiness check after a wake */
    int health_check;             /* 0: not probed (R-WAKE-1 waits 30 s then) */
    int start_period_seconds;     /* R-HC-3 start grace, R-WAKE-1 wait bound */
    const char *wake_url;         /* R-WAKE-1: POSTed instead of each replica's /wake_up; NULL = none */
    const char *anthropic_version;/* R-ANT: the anthropic-version header sent (2023-06-01) */
    int64_t default_max_tokens;   /* R-ANT-3: max_tokens when the caller gives none (4096) */
    /* R-PRIO-1: a cap over all replicas (0 = none) and the queue's bounds */
    int max_concurrency, queue_max, queue_timeout_ms;
    int capped;                   /* it or one of its replicas has a max_concurrency: places are counted */
};

struct snap_route {
    int64_t id, tenant_id;
    const char *model;
    int endpoint;                 /* index into endpoints */
    int priority, weight;
    const char *target_model;     /* NULL: same as model */
    int64_t created_at;
    enum cache_mode cache;        /* R-CACHE-1: CACHE_INHERIT = the model policy's */
    int cache_ttl_s;              /* 0 = the model policy's */
    int mirror;                   /* R-SHD-1: endpoint index that gets copies, -1 = none */
    int mirror_percent;           /* ... of this many requests in a hundred */
};

struct snap_key {
    char hash[65];                /* SHA-256 hex of the presented key */
    int64_t id;                   /* api_keys.id, or 0 for an endpoint key */
    int64_t user_id, tenant_id;
    int endpoint;                 /* endpoint key: its endpoint index; member key: -1 */
    enum role role;
    const char *user_name;
    /* R-KEY-1 limits of a member key; all 0 = unlimited, no limit work at all. */
    int64_t qps_limit, concurrency_limit, daily_limit, monthly_quota, tpm_limit, monthly_token_quota;
    int has_limits;
    int slot;                     /* shared-state key slot when has_limits, else -1 */
    int auto_enabled;             /* R-AUTO-1 key policy: -1 inherit, 0 off, 1 on */
    const char *auto_strategy;    /* NULL: inherit */
    int priority, max_priority;   /* R-PRIO-2: 0 highest; X-Priority may ask up to max_priority */
    const char **require_labels; int n_require_labels;  /* R-SEM-1: labels every semantic pick must carry */
};

/* SPEC §0 model policy of one public model name (R-AUTO-2..4). */
struct snap_policy {
    const char *model;
    const char *purpose;          /* "chat", "completion", "embedding" or NULL */
    int routing_enabled;
    double quality;               /* < 0: unknown */
    double price_in, price_out;   /* per 1k tokens, < 0: unknown */
    int supports_tools, supports_vision;
    int64_t max_context, max_output;   /* 0: unknown */
    int shrink_max_tokens;        /* R-KEY-6: a token-layer refusal may shrink max_tokens instead */
    enum cache_mode cache;        /* R-CACHE-1/4: answers of this model are cached */
    int cache_ttl_s;
    int default_greedy;           /* R-CACHE-1: no temperature means greedy for this model */
    int clamp_max_tokens;         /* R-GUARD-1: a max_tokens above max_output is clamped, not refused */
    double semantic_threshold;    /* R-CACHE-4: least similarity of a hit; < 0: the setting's */
    const char *description;      /* R-SEM-2: capability description; NULL: none */
    const char **tenants; int n_tenants;   /* R-SEM-1: allow-list of tenant names; 0: every tenant */
    const char **labels; int n_labels;     /* R-SEM-1: compliance labels */
};

/* R-GUARD-3: one content rule (a row of content_rules). */
enum rule_kind { RULE_PATTERN, RULE_KEYWORD };
enum rule_action { RULE_BLOCK, RULE_FLAG };
enum rule_scope { RULE_INPUT, RULE_OUTPUT };
struct snap_rule {
    int64_t id;
    const char *name;
    int64_t tenant_id;            /* 0: every tenant */
    enum rule_kind kind;
    const char *pattern;
    enum rule_action action;
    enum rule_scope scope;
};

/* R-SEM-1: one semantic routing rule (a row of semantic_rules). */
enum semrule_action { SEMRULE_FORCE, SEMRULE_FORBID };
struct snap_semrule {
    int64_t id;
    const char *name;
    int64_t tenant_id;            /* 0: every tenant */
    const char *pattern;          /* PCRE2, compiled per snapshot by fcgi/semindex.c */
    enum semrule_action action;
    const char *model;
    const char *label;            /* NULL: none */
};

struct snapshot {
    _Atomic int refs;
    int64_t version;
    int64_t default_tenant_id;
    struct snap_tenant *tenants; int n_tenants;
    struct snap_endpoint *endpoints; int n_endpoints;
    struct snap_replica *replicas; int n_replicas;     /* grouped by endpoint */
    struct snap_route *routes; int n_routes;           /* active only, by (tenant, model, priority, id) */
    struct snap_key *keys; int n_keys;                 /* live keys, sorted by hash */
    struct snap_key *session_limits; int n_session_limits; /* R-SEC-5: per user with a ceiling, by user_id */
    struct snap_node *nodes; int n_nodes;              /* by id */
    int gpu_temp_threshold_deci;                       /* R-LB-6: settings.gpu_temperature_threshold x 10 (850) */
    const char **internal_fields; int n_internal_fields; /* settings.internal_fields */
    int rewrite_response_model;                        /* settings.response_model: client|upstream */
    const char *cors_origins;                          /* settings.cors_allowed_origins ("" = off) */
    struct snap_policy *policies; int n_policies;      /* by model name */
    struct snap_quota *quotas; int n_quotas;           /* by (scope, target_id, model) */
    int auto_enabled;                                  /* settings.auto_routing_enabled */
    const char *auto_strategy;                         /* settings.auto_routing_strategy */
    int auto_w_quality, auto_w_price, auto_w_latency;  /* settings.auto_routing_weight_* (50/30/20) */
    struct snap_rule *rules; int n_rules;              /* R-GUARD-3: content rules, by id */
    int builtin_injection_rules;                       /* settings.builtin_injection_rules */
    const char *semantic_embed_model;                  /* settings.semantic_cache_embedding_model ("" = off) */
    double semantic_threshold;                         /* settings.semantic_cache_threshold (0.95) */
    int semantic_audit_percent;                        /* settings.semantic_cache_audit_percent (10) */
    struct snap_semrule *semrules; int n_semrules;     /* R-SEM-1: by id */
    const char *sem_default_model;                     /* settings.semantic_default_model ("" = none) */
    const char *sem_embed_model;                       /* settings.semantic_embedding_model ("" = BM25 only) */
    double sem_threshold;                              /* settings.semantic_threshold (0.1) */
    double sem_w_bm25, sem_w_embedding;                /* settings.semantic_weight_* (0.4 / 0.6) */
    int state_fail_closed;                             /* settings.state_fail_policy == fail_closed */
    int state_lease_ms;                                /* settings.state_lease_seconds x 1000 (10000) */
    int state_timeout_ms;                              /* settings.state_timeout_ms (200) */
    struct arena mem;                                   /* every string above */
};

/* Reads the configuration version counter; -1 on error. */
int64_t snapshot_db_version(struct sdb *db);
/* Builds a snapshot from the database; NULL on error (logged). */
struct snapshot *snapshot_load(struct sdb *db, struct shm *shm);
void snapshot_free(struct snapshot *s);

/* Process-wide current snapshot. publish takes ownership of s. */
void snapshot_publish(struct snapshot *s);
struct snapshot *snapshot_acquire(void);
void snapshot_release(struct snapshot *s);

const struct snap_key *snapshot_find_key(const struct snapshot *s, const char hash[65]);
/* The limits a login session of this user runs under on the data plane: its key
 * ceiling as a key of its own (id SNAP_SESSION_KEY_BASE + user id, with its own
 * shared-state slot and quota counters), or NULL when the user has no ceiling. */
#define SNAP_SESSION_KEY_BASE (1LL << 62)
const struct snap_key *snapshot_session_limits(const struct snapshot *s, int64_t user_id);
const struct snap_policy *snapshot_policy(const struct snapshot *s, const char *model);
/* Active routes of (tenant, model) in priority order; returns count, *first set. */
int snapshot_routes(const struct snapshot *s, int64_t tenant_id, const char *model,
                    const struct snap_route **first);
const struct snap_endpoint *snapshot_endpoint_by_name(const struct snapshot *s, const char *name);
const struct snap_tenant *snapshot_tenant(const struct snapshot *s, int64_t id);
const struct snap_tenant *snapshot_tenant_by_name(const struct snapshot *s, const char *name);
/* R-KEY-6: the quota layer of (scope, id) or of a model (id 0); NULL = none. */
const struct snap_quota *snapshot_quota(const struct snapshot *s, enum quota_scope scope, int64_t id,
                                        const char *model);

#endif
