/* ops.h: every management operation as a library call, shared by sluicectl and
 * the admin CGI (SPEC §20 R-ADM-1, R-ADM-4).
 *
 * Each operation takes an open database, plain C arguments and a struct
 * ops_error. It validates every input (R-SEC-2), runs its writes in one
 * transaction, and returns a new json-c object owned by the caller
 * (json_object_put), or NULL with *err filled in. Entities in results carry
 * names as well as ids. Secrets are never returned, except a new key once by
 * the call that creates it (R-SEC-1).
 *
 * Authorisation is not decided here: the caller (the admin CGI) checks the
 * caller's role and tenant first (admin/authz.c). The few rules that depend on
 * who acts and hold on every path (R-SEC-5, R-SEC-9, R-SEC-10: a user's key
 * ceiling never above its creator's, an operator's upstream credential only to
 * URLs an operator approved) are kept here, from the rights of
 * ops_set_actor_rights (the operator unless set). Every change writes an audit_log row in its own
 * transaction: actor (ops_set_actor), before and after, never a secret (R-ADM-5).
 *
 * Listings take a struct ops_list (filters and a page) and return
 * {"<things>":[...],"total":N,"limit":L,"offset":O}; total counts every match. */
#ifndef SLUICE_OPS_H
#define SLUICE_OPS_H

#include "authz.h"

#include <json-c/json.h>
#include "sdb.h"
#include <stdint.h>

enum ops_error_kind {
    OPS_ERR_NONE = 0,
    OPS_ERR_INVALID,    /* bad input: 400 invalid_request_error */
    OPS_ERR_NOT_FOUND,  /* a named or numbered object does not exist: 404 not_found */
    OPS_ERR_CONFLICT,   /* already exists, or clashes with another object: 409 conflict */
    OPS_ERR_INTERNAL,   /* database failure: 500 server_error */
    OPS_ERR_FORBIDDEN,  /* the caller may not do this: 403 permission_error (authz.c) */
};

/* Filled by a failing operation. The message never holds a secret or an input
 * that failed validation (it may name inputs that passed it). */
struct ops_error {
    enum ops_error_kind kind;
    char param[64];     /* the offending input ("url", "tenant", ...), or "" */
    char message[512];
};

void ops_error_clear(struct ops_error *err);
const char *ops_error_type(enum ops_error_kind kind);   /* "invalid_request_error", ... */
int ops_error_status(enum ops_error_kind kind);         /* HTTP status: 400, 403, 404, 409, 500 */
const char *ops_error_code(enum ops_error_kind kind);   /* "invalid_value", "not_found", ... */
/* {"error":{"message":...,"type":...,"param":...|null,"code":...}}, the data plane's shape */
struct json_object *ops_error_json(const struct ops_error *err);

/* An optional number: set == 0 means "not given" (keep the current or default value). */
struct ops_i64 {
    int set;
    int64_t v;
};

/* A listing's filters and page. Unset ids and NULL names do not filter; a name
 * that does not exist is NOT_FOUND; giving a name and an id of one kind is INVALID.
 * limit 0 = every row (sluicectl); the API always pages. */
struct ops_list {
    const char *tenant;      struct ops_i64 tenant_id;
    const char *user;        struct ops_i64 user_id;
    const char *endpoint;    struct ops_i64 endpoint_id;
    const char *model;       /* routes: exact public model name */
    const char *status;      /* alerts: ACTIVE | RECOVERED */
    const char *object_type; /* audit: tenant, user, endpoint, replica, route, key, ... */
    const char *scope;       /* quotas: tenant | user | endpoint | model */
    unsigned scopes;         /* quotas: only these scopes, a bit (1u << authz_quota_scope)
                              * each (what the caller may see); 0 = every one */
    int64_t limit, offset;
};
#define OPS_LIST_LIMIT_MAX 1000
/* Resolves l's names into ids (name and id of one kind: INVALID; unknown name:
 * NOT_FOUND). Any out pointer may be NULL. */
int ops_list_ids(struct sdb *db, const struct ops_list *l, struct ops_i64 *tenant_id,
                 struct ops_i64 *user_id, struct ops_i64 *endpoint_id, struct ops_error *err);

/* ---- who acts, the audit log and alerts (ops_audit.c) ----------------------- */

/* R-ADM-5: the actor recorded by this thread's later changes: a user name,
 * "sluicectl", ... (each sluicectl run and admin CGI request is one process). */
void ops_set_actor(const char *actor);
const char *ops_actor(void);
/* The rights of this thread's later changes: role, and for a non-operator its key ceiling
 * (its user's, tightened by the member key it called with; NULL = none). Until set, a
 * thread acts as the operator (sluicectl); the admin CGI sets AUTHZ_NOBODY before it
 * authenticates and the caller's rights after. AUTHZ_NOBODY makes the operations that
 * depend on who acts (users, keys, endpoints, replicas) fail with FORBIDDEN. */
void ops_set_actor_rights(enum authz_role role, const struct authz_limits *ceiling);

/* Audit record: {"id","ts","actor","tenant_id","action","object_type","object_id",
 * "before","after"} (before/after as JSON objects or null). Newest first. */
struct json_object *ops_audit_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);
/* Writes one audit row of its own (logins, logouts: no object change of ops). */
int ops_audit_event(struct sdb *db, const char *action, const char *object_type, int64_t object_id,
                    int64_t tenant_id, struct json_object *after, struct ops_error *err);

/* Alert: {"id","type","severity","status","tenant_id","endpoint_id","replica_id",
 * "message","created_at","resolved_at"}. Newest first. */
struct json_object *ops_alert_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);
struct json_object *ops_alert_get(struct sdb *db, int64_t id, struct ops_error *err);
/* Marks an ACTIVE alert RECOVERED by hand (healthd raises it again if still failing). */
struct json_object *ops_alert_resolve(struct sdb *db, int64_t id, struct ops_error *err);

/* ---- database and settings (ops.c) --------------------------------------- */

/* Ensures tenant "default" exists; R-SEC-9: sets the database files (path, -wal, -shm) to
 * mode 0640, creates the key file when missing (0600) and seals every clear upstream_auth.
 * {"ok":true,"database":path,"schema_version":N,"key_file":path,"credentials_sealed":N} */
struct json_object *ops_init(struct sdb *db, const char *path, struct ops_error *err);

/* {"key":...,"value":...}; list: {"settings":[{"key","value"}...]}. set takes the
 * settings of lib/settings.c only (unknown key: INVALID "key"; a value the schema refuses:
 * INVALID "value", naming the range or values) and stores the canonical text. */
struct json_object *ops_settings_set(struct sdb *db, const char *key, const char *value,
                                     struct ops_error *err);
struct json_object *ops_settings_get(struct sdb *db, const char *key, struct ops_error *err);
struct json_object *ops_settings_rm(struct sdb *db, const char *key, struct ops_error *err);
struct json_object *ops_settings_list(struct sdb *db, struct ops_error *err);

/* ---- tenants and users (ops_tenant.c) ------------------------------------ */

struct ops_key_limits;      /* the six R-KEY-1 limits, below with the member keys */

/* Tenant: {"id","name","weight","created_at"}. rm refuses "default" and tenants that
 * still own users, endpoints, routes or keys. List filters: NULL = all; a named
 * filter that does not exist is NOT_FOUND (in every ops_*_list). */
struct json_object *ops_tenant_add(struct sdb *db, const char *name, struct ops_error *err);
struct json_object *ops_tenant_rm(struct sdb *db, const char *name, struct ops_error *err);
/* R-PRIO-2: weight 1..1000, its share of a contended queue against the other tenants;
 * unset keeps it. */
struct json_object *ops_tenant_set(struct sdb *db, const char *name, struct ops_i64 weight,
                                   struct ops_error *err);
struct json_object *ops_tenant_get(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_tenant_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);

/* User: {"id","name","tenant","tenant_id","role","has_password","key_ceiling":{limits},
 * "created_at"}.
 * role: operator (tenant "default" only), admin, member. password may be NULL;
 * it is stored as a yescrypt hash (R-ADM-2). In ops_user_set, NULL arguments
 * leave the field unchanged.
 * R-SEC-5, R-SEC-10 (authz_ceiling_after): a user's key ceiling never exceeds the
 * ceiling of the non-operator who creates it, edits it or changes its role: limits
 * it gives above its own are FORBIDDEN, the ones it leaves out are its own (add) or
 * tightened to its own (ops_user_set with a role, ops_user_set_ceiling). The operator
 * sets what it likes; a user it creates without a ceiling has none.
 * ceiling: the new user's key ceiling, NULL (or unset members) = none given. */
struct json_object *ops_user_add(struct sdb *db, const char *name, const char *tenant,
                                 const char *role, const char *password,
                                 const struct ops_key_limits *ceiling, struct ops_error *err);
struct json_object *ops_user_set(struct sdb *db, const char *name, const char *role,
                                 const char *password, struct ops_error *err);
struct json_object *ops_user_rm(struct sdb *db, const char *name, struct ops_error *err);
struct json_object *ops_user_get(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_user_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);
/* 1 if password matches the stored crypt(3) hash, else 0 (constant-time compare). */
int ops_password_verify(const char *password, const char *hash);

/* ---- endpoints and replicas (ops_endpoint.c) ----------------------------- */

/* NULL strings and unset numbers keep the current value (set) or the default (add). */
struct ops_endpoint_opts {
    const char *algorithm;      /* round_robin | random | least_connections | engine_aware */
    const char *protocol;       /* openai | anthropic */
    const char *health_path;    /* "/..." */
    struct ops_i64 affinity;    /* 0 or 1 */
    struct ops_i64 stream_guard;/* 0 or 1 */
    struct ops_i64 connect_timeout_ms;
    struct ops_i64 first_byte_timeout_ms;
    struct ops_i64 idle_timeout_ms;
    const char *upstream_auth;  /* upstream credential (R-ANT-4), never returned; "" clears */
    const char *wake_url;       /* R-WAKE: an http(s) URL; "" clears */
    struct ops_i64 health_check;          /* 0 or 1 (R-HC-1) */
    struct ops_i64 failure_threshold;     /* R-HC-2 */
    struct ops_i64 start_period_seconds;  /* R-HC-3 */
    struct ops_i64 business_probe_rounds; /* R-HC-1, 0 = off */
    const char *anthropic_version;        /* R-ANT: anthropic-version sent upstream */
    struct ops_i64 default_max_tokens;    /* R-ANT-3: max_tokens when the caller gives none */
    struct ops_i64 max_concurrency;       /* R-PRIO-1: cap over all replicas, 0 = none */
    struct ops_i64 queue_max;             /* R-PRIO-1: waiters at most when full (100) */
    struct ops_i64 queue_timeout_ms;      /* R-PRIO-1: longest wait (10000) */
};

/* Endpoint: {"id","name","tenant","tenant_id","algorithm","protocol","affinity",
 * "stream_guard","health_path","connect_timeout_ms","first_byte_timeout_ms",
 * "idle_timeout_ms","key_prefix","upstream_auth_set","health_check","failure_threshold",
 * "start_period_seconds","business_probe_rounds","wake_url","anthropic_version",
 * "default_max_tokens","max_concurrency","queue_max","queue_timeout_ms","replicas","created_at",
 * "upstream_auth_by","wake_url_approved"};
 * add and rotate_key add "key" (sk- + 48 characters), shown this once.
 * R-ANT-4, R-SEC-9: upstream_auth_by is "operator" or "tenant" (who set the credential;
 * null: none). An operator's credential goes only to URLs an operator approved: a
 * non-operator setting a wake URL at a new origin on such an endpoint is FORBIDDEN (and
 * the refusal audited as "refuse"); the operator setting its credential while a replica
 * or the wake URL a tenant admin registered is not approved is a CONFLICT. */
struct json_object *ops_endpoint_add(struct sdb *db, const char *name, const char *tenant,
                                     const struct ops_endpoint_opts *o, struct ops_error *err);
struct json_object *ops_endpoint_set(struct sdb *db, const char *name,
                                     const struct ops_endpoint_opts *o, struct ops_error *err);
struct json_object *ops_endpoint_rotate_key(struct sdb *db, const char *name, struct ops_error *err);
struct json_object *ops_endpoint_rm(struct sdb *db, const char *name, struct ops_error *err);
struct json_object *ops_endpoint_get(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_endpoint_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);
/* R-ANT-5: one minimal real request (max_tokens=1) in the endpoint's protocol to one
 * healthy running replica, timeout_ms (60 s by default). Never fails for an upstream
 * reason: {"ok","status","latency_ms","error","replica","replica_id","model"}
 * (ops_probe.c). */
struct json_object *ops_endpoint_test(struct sdb *db, const char *name, int64_t timeout_ms,
                                      struct ops_error *err);

struct ops_replica_opts {
    const char *engine;         /* vllm | ollama | openai | anthropic | other */
    const char *state;          /* running | sleeping | disabled */
    struct ops_i64 weight;
    struct ops_i64 max_concurrency;
    const char *node;           /* node name; "" clears */
    struct ops_i64 approved;    /* set only, operator only: R-SEC-9 approval, 0 or 1 */
};

/* Replica: {"id","endpoint","endpoint_id","tenant","tenant_id","url","engine",
 * "weight","max_concurrency","state","healthy","node","node_id","created_at","approved"}.
 * R-SEC-9: approved is 1 when an operator registered or approved the URL, or it has the
 * origin of a replica an operator approved. A non-operator adding a replica at a new
 * origin to an endpoint with the operator's credential is FORBIDDEN (audited as
 * "refuse"); a replica URL never changes (remove it and add another). */
struct json_object *ops_replica_add(struct sdb *db, const char *endpoint, const char *url,
                                    const struct ops_replica_opts *o, struct ops_error *err);
struct json_object *ops_replica_set(struct sdb *db, const char *endpoint, const char *url,
                                    const struct ops_replica_opts *o, struct ops_error *err);
struct json_object *ops_replica_rm(struct sdb *db, const char *endpoint, const char *url,
                                   struct ops_error *err);
struct json_object *ops_replica_get(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_replica_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);
/* R-SEC-3: 0 if url may be a replica base URL, else -1 with err set. */
int ops_check_replica_url(const char *url, struct ops_error *err);

/* ---- routes (ops_route.c) ------------------------------------------------ */

struct ops_route_opts {
    struct ops_i64 priority;
    struct ops_i64 weight;
    const char *target_model;   /* "" clears it */
    const char *status;         /* active | inactive */
    const char *endpoint;       /* set only: move the route to this endpoint */
    const char *cache;          /* R-CACHE-2: off | exact | semantic; "" = inherit (NULL) */
    struct ops_i64 cache_ttl_s; /* 1..31536000; v < 0 = inherit (NULL) */
    const char *mirror;         /* R-SHD-1: the endpoint that gets copies; "" = none (NULL keeps) */
    struct ops_i64 mirror_percent; /* 0..100 */
};

/* Route: {"id","model","tenant","tenant_id","endpoint","endpoint_id","priority",
 * "weight","target_model","status","cache","cache_ttl_s","mirror","mirror_percent",
 * "created_at"} (cache and cache_ttl_s null: the model policy's; mirror null: none). tenant NULL = the endpoint's.
 * The endpoint must belong to the route's tenant, and a tenant other than
 * "default" may not add a model name that "default" routes (R-AUTH-4, R-ADM-2). */
struct json_object *ops_route_add(struct sdb *db, const char *model, const char *endpoint,
                                  const char *tenant, const struct ops_route_opts *o,
                                  struct ops_error *err);
struct json_object *ops_route_set(struct sdb *db, int64_t id, const struct ops_route_opts *o,
                                  struct ops_error *err);
struct json_object *ops_route_rm(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_route_get(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_route_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);

/* ---- member keys (ops_key.c) --------------------------------------------- */

/* R-KEY-1: 0 = unlimited. */
struct ops_key_limits {
    struct ops_i64 qps_limit, concurrency_limit, daily_limit, monthly_quota,
        tpm_limit, monthly_token_quota;
};

/* R-PRIO-2: a key's place in the wait queue, 0 the highest. priority 0..9 (5 when new);
 * max_priority 0..9, the highest an X-Priority header may ask, v < 0 clears it (null: no
 * higher than priority). Unset keeps. */
struct ops_key_priority {
    struct ops_i64 priority, max_priority;
};

/* Key: {"id","prefix","name","user","user_id","tenant","tenant_id","revoked",
 * "revoked_at","qps_limit","concurrency_limit","daily_limit","monthly_quota",
 * "tpm_limit","monthly_token_quota","priority","max_priority","created_at"}; add adds "key"
 * (sk-tenant- + 40 characters), shown this once. Only its SHA-256 and its
 * first 12 characters are stored. name NULL or "" = no label (set: unchanged).
 * prio NULL: the default (add) or unchanged (set). */
struct json_object *ops_key_add(struct sdb *db, const char *user, const char *name,
                                const struct ops_key_limits *lim, const struct ops_key_priority *prio,
                                struct ops_error *err);
struct json_object *ops_key_set(struct sdb *db, int64_t id, const char *name,
                                const struct ops_key_limits *lim, const struct ops_key_priority *prio,
                                struct ops_error *err);
struct json_object *ops_key_revoke(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_key_get(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_key_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);
/* R-SEC-5: the ceiling of a user's keys: {"user","user_id",limits...}; unset limits keep
 * theirs (0 = no ceiling). In ops_tenant.c with the users. */
struct json_object *ops_user_set_ceiling(struct sdb *db, const char *user,
                                         const struct ops_key_limits *lim, struct ops_error *err);

/* R-AUTO-1 per-key routing policy (member keys): {"key_id","auto_routing_enabled":
 * bool|null,"auto_routing_strategy":str|null} (null = the global setting decides).
 * enabled: unset keeps, v < 0 clears; strategy NULL keeps, "" clears (ops_policy.c). */
struct json_object *ops_key_policy_get(struct sdb *db, int64_t key_id, struct ops_error *err);
struct json_object *ops_key_policy_set(struct sdb *db, int64_t key_id, struct ops_i64 enabled,
                                       const char *strategy, struct ops_error *err);

/* ---- model policies (ops_policy.c) ------------------------------------------ */

/* Unset / NULL keep (or default); "" clears a text, v < 0 clears a number.
 * Quality is given in thousandths (0..100000 = 0..100), prices in millionths. */
struct ops_policy_opts {
    const char *purpose;             /* chat | completion | embedding; "" = unset */
    struct ops_i64 routing_enabled;  /* 0 or 1 */
    struct ops_i64 quality_milli;    /* quality_score x 1000 */
    struct ops_i64 price_input_micro, price_output_micro; /* per 1k tokens x 10^6 */
    struct ops_i64 supports_tools, supports_vision;       /* 0 or 1 */
    struct ops_i64 max_context, max_output;
    const char *description;         /* R-SEM-2 */
    struct ops_i64 shrink_max_tokens;/* R-KEY-6: 0 or 1 */
    const char *cache;               /* R-CACHE-2: off | exact | semantic (default off) */
    struct ops_i64 cache_ttl_s;      /* 1..31536000 (default 3600) */
    struct ops_i64 default_greedy;   /* R-CACHE-1: 0 or 1, no temperature counts as greedy */
    struct ops_i64 clamp_max_tokens; /* R-GUARD-1: 0 or 1, a max_tokens above max_output is clamped */
    struct ops_i64 semantic_threshold_milli; /* R-CACHE-4: x 1000, 1..1000; -1 = the setting's */
    const char *tenants;             /* R-SEM-1: allow-list of tenant names, comma-separated; "" clears */
    const char *labels;              /* R-SEM-1: compliance labels, comma-separated; "" clears */
};
/* Policy: {"model","purpose","routing_enabled","quality_score","price_input_per_1k",
 * "price_output_per_1k","supports_tools","supports_vision","max_context","max_output",
 * "description","shrink_max_tokens","cache","cache_ttl_s","default_greedy","clamp_max_tokens",
 * "semantic_threshold","updated_at"}.
 * set creates the policy when missing. */
struct json_object *ops_policy_set(struct sdb *db, const char *model, const struct ops_policy_opts *o,
                                   struct ops_error *err);
struct json_object *ops_policy_get(struct sdb *db, const char *model, struct ops_error *err);
struct json_object *ops_policy_rm(struct sdb *db, const char *model, struct ops_error *err);
struct json_object *ops_policy_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);

/* ---- content rules (ops_rule.c, R-GUARD-3) ------------------------------------ */

struct ops_rule_opts {
    const char *pattern, *keyword;   /* exactly one: a PCRE2 expression, or a whole word */
    const char *tenant;              /* NULL: every tenant */
    struct ops_i64 tenant_id;        /* the tenant by id instead of tenant (the API's tenant_id) */
    const char *action;              /* block | flag */
    const char *scope;               /* input | output; NULL: input */
};
/* Rule: {"id","name","tenant","tenant_id","kind","pattern","action","scope","created_at"}.
 * add refuses a pattern that does not compile or that backtracks without bound on
 * crafted texts; list with l->tenant shows that tenant's rules and the global ones. */
struct json_object *ops_rule_add(struct sdb *db, const char *name, const struct ops_rule_opts *o, struct ops_error *err);
struct json_object *ops_rule_rm(struct sdb *db, const char *name, struct ops_error *err);
struct json_object *ops_rule_get_id(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_rule_rm_id(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_rule_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);

/* ---- semantic routing rules (ops_semrule.c, R-SEM-1) ----------------------------- */

struct ops_semrule_opts {
    const char *pattern;             /* PCRE2 over the last user message */
    const char *tenant;              /* NULL: every tenant */
    struct ops_i64 tenant_id;        /* the tenant by id instead (the API's tenant_id) */
    const char *force, *forbid;      /* exactly one: the model */
    const char *label;               /* NULL: none; matched, candidates must carry it */
};
/* Rule: {"id","name","tenant","tenant_id","pattern","action","model","label","created_at"}. */
struct json_object *ops_semrule_add(struct sdb *db, const char *name, const struct ops_semrule_opts *o,
                                    struct ops_error *err);
struct json_object *ops_semrule_rm(struct sdb *db, const char *name, struct ops_error *err);
struct json_object *ops_semrule_get_id(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_semrule_rm_id(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_semrule_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);
/* R-SEM-1: a comma-separated label list is words of [a-z0-9._-], 1..64 bytes each. */
int ops_check_labels(const char *param, const char *list, struct ops_error *err);
/* R-SEM-1: the labels (comma-separated; "" clears) every semantic pick for key id must carry. */
struct json_object *ops_key_labels_set(struct sdb *db, int64_t id, const char *labels, struct ops_error *err);

/* ---- the answer cache (ops_cache.c) ------------------------------------------ */

/* R-CACHE-3: the cache's TTL bounds, as sql/010_cache.sql checks them. */
#define OPS_CACHE_TTL_MAX 31536000
/* Filters of both: l->tenant / tenant_id (one tenant), l->model (the public name); NULL
 * and unset = every one. Stats: {"models":[{"model","entries","bytes","hits","expired"}],
 * "entries","bytes","hits","expired"} (expired: past expires_ms, not yet evicted), by
 * model. Clear deletes the matching cache_entries rows and answers {"deleted":N,"model",
 * "tenant","tenant_id"} (null: every one), with an audit row "clear" of object type
 * "cache" (its tenant the one filtered on). */
struct json_object *ops_cache_stats(struct sdb *db, const struct ops_list *l, struct ops_error *err);
struct json_object *ops_cache_clear(struct sdb *db, const struct ops_list *l, struct ops_error *err);
/* R-CACHE-4: the sampled semantic hits, newest first, by l's tenant and model, l's
 * limit (default 50) and offset: {"hits":[{"id","ts_ms","request_id","tenant_id",
 * "tenant","model","similarity","entry_id","entry_key","prompt","matched"}],"total",...}. */
struct json_object *ops_cache_hits(struct sdb *db, const struct ops_list *l, struct ops_error *err);

/* ---- quota layers (ops_quota.c) ------------------------------------------------ */

/* R-KEY-6: the limits of one layer; unset keeps (or 0, a new layer's). 0 = no limit.
 * queue_max: the model's queue length, v < 0 clears it (null: the endpoint's). */
struct ops_quota_opts {
    struct ops_i64 concurrency, rpm, daily_tokens, monthly_tokens, queue_max;
};

/* Which limits a layer of each scope takes (R-KEY-6): tenant concurrency and
 * monthly_tokens, user rpm and daily_tokens, endpoint concurrency, model concurrency and
 * queue_max. 1 if scope takes field, 0 if not (also for an unknown scope or field). */
int ops_quota_takes(const char *scope, const char *field);

/* Quota: {"id","scope","tenant","tenant_id","user","user_id","endpoint","endpoint_id",
 * "model","concurrency","rpm","daily_tokens","monthly_tokens","queue_max","updated_at"}:
 * the target named by its scope (tenant, user, endpoint: names; model: a public model name),
 * the others null but tenant, which for a user or endpoint layer is the one they belong
 * to (null for a model). A limit the scope does not take is INVALID, also when 0.
 * set: the layer of (scope, target), created when missing; only given limits change.
 * update: the same by id. rm by (scope, target) or by id. */
struct json_object *ops_quota_set(struct sdb *db, const char *scope, const char *target,
                                  const struct ops_quota_opts *o, struct ops_error *err);
struct json_object *ops_quota_update(struct sdb *db, int64_t id, const struct ops_quota_opts *o,
                                     struct ops_error *err);
struct json_object *ops_quota_rm(struct sdb *db, const char *scope, const char *target,
                                 struct ops_error *err);
struct json_object *ops_quota_rm_id(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_quota_get(struct sdb *db, int64_t id, struct ops_error *err);
/* The layer of (scope, target), NOT_FOUND when there is none (or the target does not exist). */
struct json_object *ops_quota_find(struct sdb *db, const char *scope, const char *target,
                                   struct ops_error *err);
/* Filters: tenant (the layers of the tenant, its users and its endpoints), user, endpoint,
 * model, scope, scopes. By scope, then target. */
struct json_object *ops_quota_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);

/* ---- run-time settings with a schema (ops_config.c) --------------------------- */

/* Every setting of lib/settings.c with its value or default: {"<name>":value,...};
 * BOOL true|false, INT and whole NUMBERs integers, other NUMBERs doubles, else strings. */
struct json_object *ops_config_get(struct sdb *db, struct ops_error *err);
/* Validates every member of changes against the schema (unknown names INVALID);
 * null resets a setting to its default. Returns the whole config. */
struct json_object *ops_config_set(struct sdb *db, struct json_object *changes, struct ops_error *err);
/* The schema itself for forms: {"settings":[{"name","type","values" (enum),"min","max",
 * "decimals","default","meaning","value"}...]} in lib/settings.c's order. */
struct json_object *ops_settings_schema(struct sdb *db, struct ops_error *err);

/* ---- nodes (ops_node.c) ------------------------------------------------------ */

/* Node: {"id","name","status","metrics_url","gpu_temperature","temperature_at",
 * "replicas","created_at"}. status online | offline | borrowed. */
struct json_object *ops_node_add(struct sdb *db, const char *name, const char *status,
                                 const char *metrics_url, struct ops_error *err);
/* NULL keeps; metrics_url "" clears. */
struct json_object *ops_node_set(struct sdb *db, const char *name, const char *status,
                                 const char *metrics_url, struct ops_error *err);
struct json_object *ops_node_rm(struct sdb *db, const char *name, struct ops_error *err);
struct json_object *ops_node_get(struct sdb *db, int64_t id, struct ops_error *err);
struct json_object *ops_node_list(struct sdb *db, const struct ops_list *l, struct ops_error *err);
/* R-HC-7: a pushed GPU temperature in tenths of a degree (a reading, not audited),
 * also written to the shared state at state_path (if it exists) for the serving view. */
struct json_object *ops_node_temperature(struct sdb *db, const char *name, int64_t deci_celsius,
                                         const char *state_path, struct ops_error *err);

/* ---- usage (ops_usage.c) ------------------------------------------------- */

/* From usage_daily, never the events (R-USE-7). group_by: model (default) | user |
 * key | day; from/to: YYYY-MM-DD, inclusive, NULL = open; l filters tenant and user
 * and pages the groups. {"group_by","tenant","from","to","rows":[...],"total":groups,
 * "limit","offset","totals":{"requests","errors","prompt_tokens","completion_tokens",
 * "total_tokens"}} (totals over every group, not just the page). */
struct json_object *ops_usage(struct sdb *db, const struct ops_list *l, const char *group_by,
                              const char *from, const char *to, struct ops_error *err);
/* ---- traffic state beside objects (ops_status.c), for the API's answers only ---- */

/* Adds to an endpoint object "failure_streak" (its newest events that are 5xx in a row,
 * read from at most 1000), "last_error" ("<error_code> (<status>)" of its newest 5xx
 * among them, or null), "last_error_ms" and "recovery_hint" (a sentence once the streak
 * reaches setting recovery_hint_failures, else null). */
int ops_endpoint_status(struct sdb *db, struct json_object *endpoint, struct ops_error *err);
/* Adds to a key object "today" and "month": {"requests","tokens"} from quota_counters. */
int ops_key_counters(struct sdb *db, struct json_object *key, struct ops_error *err);
/* fn on every object of res's array field (a listing); 0 or -1 with err set. */
int ops_list_status(struct sdb *db, struct json_object *res, const char *field,
                    int (*fn)(struct sdb *, struct json_object *, struct ops_error *), struct ops_error *err);

/* ---- the Requests view (ops_request.c) ------------------------------------ */

/* Unset numbers and NULL strings do not filter. status exact, status_class 2 for 2xx;
 * model matches the asked or the routed name; from_ms/to_ms inclusive; before: the id
 * of the last row of the previous page. */
struct ops_request_filter {
    struct ops_i64 tenant_id, user_id, key_id, endpoint_id, status, status_class;
    const char *code, *model;
    struct ops_i64 from_ms, to_ms, before;
    int64_t limit;               /* 1..OPS_REQUEST_LIMIT_MAX */
};
#define OPS_REQUEST_LIMIT_MAX 500
/* Request: {"id","ts_ms","request_id","status","error_code","model","routed_model","path",
 * "tenant_id","user_id","user","key_id","key","endpoint_id","endpoint","replica_id",
 * "replica","prompt_tokens","completion_tokens","cache_read_tokens","reasoning_tokens",
 * "ttft_ms","latency_ms","queue_ms","retries","stream","cached","cache","affinity",
 * "finish_reason","content_rule","estimated"}. Newest first (ts_ms, then id):
 * {"requests":[...],"next":id|null,"limit"}. */
struct json_object *ops_request_list(struct sdb *db, const struct ops_request_filter *f, struct ops_error *err);
struct json_object *ops_request_get(struct sdb *db, int64_t id, struct ops_error *err);

/* R-USE-7 retention: deletes events older than days (aggregates stay). {"deleted":N} */
struct json_object *ops_usage_prune(struct sdb *db, int64_t days, struct ops_error *err);

#endif
