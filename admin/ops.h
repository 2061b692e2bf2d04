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
 * Authorisation is not decided here: these calls act with operator rights,
 * and the caller (the admin CGI) checks the caller's role and tenant first. */
#ifndef SLUICE_OPS_H
#define SLUICE_OPS_H

#include <json-c/json.h>
#include <sqlite3.h>
#include <stdint.h>

enum ops_error_kind {
    OPS_ERR_NONE = 0,
    OPS_ERR_INVALID,    /* bad input: 400 invalid_request_error */
    OPS_ERR_NOT_FOUND,  /* a named or numbered object does not exist: 404 not_found */
    OPS_ERR_CONFLICT,   /* already exists, or clashes with another object: 409 conflict */
    OPS_ERR_INTERNAL,   /* database failure: 500 server_error */
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
int ops_error_status(enum ops_error_kind kind);         /* HTTP status: 400, 404, 409, 500 */
/* {"error":{"message":...,"type":...}} */
struct json_object *ops_error_json(const struct ops_error *err);

/* An optional number: set == 0 means "not given" (keep the current or default value). */
struct ops_i64 {
    int set;
    int64_t v;
};

/* ---- database and settings (ops.c) --------------------------------------- */

/* Ensures tenant "default" exists. {"ok":true,"database":path,"schema_version":N} */
struct json_object *ops_init(sqlite3 *db, const char *path, struct ops_error *err);

/* {"key":...,"value":...}; list: {"settings":[{"key","value"}...]} */
struct json_object *ops_settings_set(sqlite3 *db, const char *key, const char *value,
                                     struct ops_error *err);
struct json_object *ops_settings_get(sqlite3 *db, const char *key, struct ops_error *err);
struct json_object *ops_settings_rm(sqlite3 *db, const char *key, struct ops_error *err);
struct json_object *ops_settings_list(sqlite3 *db, struct ops_error *err);

/* ---- tenants and users (ops_tenant.c) ------------------------------------ */

/* Tenant: {"id","name","created_at"}. rm refuses "default" and tenants that
 * still own users, endpoints, routes or keys. List filters: NULL = all; a named
 * filter that does not exist is NOT_FOUND (in every ops_*_list). */
struct json_object *ops_tenant_add(sqlite3 *db, const char *name, struct ops_error *err);
struct json_object *ops_tenant_rm(sqlite3 *db, const char *name, struct ops_error *err);
struct json_object *ops_tenant_list(sqlite3 *db, const char *tenant, struct ops_error *err);

/* User: {"id","name","tenant","tenant_id","role","has_password","created_at"}.
 * role: operator (tenant "default" only), admin, member. password may be NULL;
 * it is stored as a yescrypt hash (R-ADM-2). In ops_user_set, NULL arguments
 * leave the field unchanged. */
struct json_object *ops_user_add(sqlite3 *db, const char *name, const char *tenant,
                                 const char *role, const char *password, struct ops_error *err);
struct json_object *ops_user_set(sqlite3 *db, const char *name, const char *role,
                                 const char *password, struct ops_error *err);
struct json_object *ops_user_rm(sqlite3 *db, const char *name, struct ops_error *err);
struct json_object *ops_user_list(sqlite3 *db, const char *tenant, struct ops_error *err);
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
};

/* Endpoint: {"id","name","tenant","tenant_id","algorithm","protocol","affinity",
 * "stream_guard","health_path","connect_timeout_ms","first_byte_timeout_ms",
 * "idle_timeout_ms","key_prefix","upstream_auth_set","replicas","created_at"};
 * add and rotate_key add "key" (sk- + 48 characters), shown this once. */
struct json_object *ops_endpoint_add(sqlite3 *db, const char *name, const char *tenant,
                                     const struct ops_endpoint_opts *o, struct ops_error *err);
struct json_object *ops_endpoint_set(sqlite3 *db, const char *name,
                                     const struct ops_endpoint_opts *o, struct ops_error *err);
struct json_object *ops_endpoint_rotate_key(sqlite3 *db, const char *name, struct ops_error *err);
struct json_object *ops_endpoint_rm(sqlite3 *db, const char *name, struct ops_error *err);
struct json_object *ops_endpoint_list(sqlite3 *db, const char *tenant, struct ops_error *err);

struct ops_replica_opts {
    const char *engine;         /* vllm | ollama | openai | anthropic | other */
    const char *state;          /* running | sleeping | disabled */
    struct ops_i64 weight;
    struct ops_i64 max_concurrency;
};

/* Replica: {"id","endpoint","endpoint_id","tenant","tenant_id","url","engine",
 * "weight","max_concurrency","state","healthy","created_at"}. */
struct json_object *ops_replica_add(sqlite3 *db, const char *endpoint, const char *url,
                                    const struct ops_replica_opts *o, struct ops_error *err);
struct json_object *ops_replica_set(sqlite3 *db, const char *endpoint, const char *url,
                                    const struct ops_replica_opts *o, struct ops_error *err);
struct json_object *ops_replica_rm(sqlite3 *db, const char *endpoint, const char *url,
                                   struct ops_error *err);
struct json_object *ops_replica_list(sqlite3 *db, const char *tenant, const char *endpoint,
                                     struct ops_error *err);
/* R-SEC-3: 0 if url may be a replica base URL, else -1 with err set. */
int ops_check_replica_url(const char *url, struct ops_error *err);

/* ---- routes (ops_route.c) ------------------------------------------------ */

struct ops_route_opts {
    struct ops_i64 priority;
    struct ops_i64 weight;
    const char *target_model;   /* "" clears it */
    const char *status;         /* active | inactive */
    const char *endpoint;       /* set only: move the route to this endpoint */
};

/* Route: {"id","model","tenant","tenant_id","endpoint","endpoint_id","priority",
 * "weight","target_model","status","created_at"}. tenant NULL = the endpoint's.
 * The endpoint must belong to the route's tenant, and a tenant other than
 * "default" may not add a model name that "default" routes (R-AUTH-4, R-ADM-2). */
struct json_object *ops_route_add(sqlite3 *db, const char *model, const char *endpoint,
                                  const char *tenant, const struct ops_route_opts *o,
                                  struct ops_error *err);
struct json_object *ops_route_set(sqlite3 *db, int64_t id, const struct ops_route_opts *o,
                                  struct ops_error *err);
struct json_object *ops_route_rm(sqlite3 *db, int64_t id, struct ops_error *err);
struct json_object *ops_route_list(sqlite3 *db, const char *tenant, const char *endpoint,
                                   struct ops_error *err);

/* ---- member keys (ops_key.c) --------------------------------------------- */

/* R-KEY-1: 0 = unlimited. */
struct ops_key_limits {
    struct ops_i64 qps_limit, concurrency_limit, daily_limit, monthly_quota,
        tpm_limit, monthly_token_quota;
};

/* Key: {"id","prefix","name","user","user_id","tenant","tenant_id","revoked",
 * "revoked_at","qps_limit","concurrency_limit","daily_limit","monthly_quota",
 * "tpm_limit","monthly_token_quota","created_at"}; add adds "key"
 * (sk-tenant- + 40 characters), shown this once. Only its SHA-256 and its
 * first 12 characters are stored. name NULL or "" = no label (set: unchanged). */
struct json_object *ops_key_add(sqlite3 *db, const char *user, const char *name,
                                const struct ops_key_limits *lim, struct ops_error *err);
struct json_object *ops_key_set(sqlite3 *db, int64_t id, const char *name,
                                const struct ops_key_limits *lim, struct ops_error *err);
struct json_object *ops_key_revoke(sqlite3 *db, int64_t id, struct ops_error *err);
struct json_object *ops_key_list(sqlite3 *db, const char *tenant, const char *user,
                                 struct ops_error *err);

/* ---- usage (ops_usage.c) ------------------------------------------------- */

/* From usage_daily (R-USE-7). group_by: model (default) | user | key | day;
 * from/to: YYYY-MM-DD, inclusive, NULL = open. */
struct json_object *ops_usage(sqlite3 *db, const char *tenant, const char *group_by,
                              const char *from, const char *to, struct ops_error *err);

#endif
