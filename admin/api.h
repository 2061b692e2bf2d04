/* api.h: what every API resource handler (admin/api_*.c) gets and the helpers they
 * share (admin/api_util.c). A handler reads the request, asks authz, calls one ops_*
 * operation and leaves the answer in ctx->status / ctx->out (R-ADM-1). */
#ifndef SLUICE_API_H
#define SLUICE_API_H

#include "authz.h"
#include "cgi.h"
#include "conf.h"
#include "ops.h"

#include <json-c/json.h>
#include "sdb.h"
#include <stdint.h>

#define API_MAX_PARAMS 4
#define API_NAME_MAX 256
#define API_PAGE_DEFAULT 50

enum api_auth { API_AUTH_NONE, API_AUTH_SESSION, API_AUTH_BEARER_SESSION, API_AUTH_KEY };

/* One request's state; lives in main() for the whole (single-request) process. */
struct api_ctx {
    struct sdb *db;
    struct cgi_req *req;
    const struct conf *conf;
    int64_t default_tenant_id;

    /* the caller, set by session.c before the handler runs */
    enum api_auth auth;
    struct authz_actor actor;
    char user_name[API_NAME_MAX];
    int64_t key_id;                     /* API_AUTH_KEY: the member key used */
    char session_hash[65];              /* session auth: SHA-256 of the token */
    char csrf_token[64];                /* session auth: the session's CSRF token */
    int64_t session_expires;

    /* path parameters of the matched route: {id} numbers and {name} segments */
    int64_t ids[API_MAX_PARAMS];
    char names[API_MAX_PARAMS][API_NAME_MAX];
    int nids, nnames;

    struct json_object *body;           /* the parsed JSON object of a write, else NULL */

    /* the answer */
    int status;
    struct json_object *out;
    char headers[4][512];               /* extra header lines (Set-Cookie, Retry-After) */
    int nheaders;
    char *text;                         /* set (malloc'd): sent instead of out, as text_type */
    size_t text_len;
    const char *text_type;
};

typedef void (*api_fn)(struct api_ctx *c);

/* ---- answers ------------------------------------------------------------------ */
/* {"error":{"message","type","param","code"}}, the data plane's shape (R-API-2). */
void api_error(struct api_ctx *c, int status, const char *code, const char *param,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void api_ops_error(struct api_ctx *c, const struct ops_error *err);
void api_forbidden(struct api_ctx *c, const char *why);
/* Takes res; NULL means the operation failed with err. */
void api_result(struct api_ctx *c, struct json_object *res, const struct ops_error *err);
/* A listing: {"<field>":[...],"total",...} becomes {"data":[...],"total","limit","offset"}. */
void api_list_result(struct api_ctx *c, struct json_object *res, const char *field,
                     const struct ops_error *err);
void api_header(struct api_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- request body (R-SEC-2: type, length and range checked here and in ops) ------
 * allowed: space-separated member names; any other member is a 400. */
int api_body_fields(struct api_ctx *c, const char *allowed);
/* A string member into *out (NULL when absent or null when nullable). -1: error sent. */
int api_body_str(struct api_ctx *c, const char *name, const char **out, int required);
/* An integer member; a boolean member as 0/1; a number (0..10^9) times scale, null as
 * -1 (clear). -1: error sent. */
int api_body_int(struct api_ctx *c, const char *name, struct ops_i64 *out);
int api_body_bool(struct api_ctx *c, const char *name, struct ops_i64 *out);
int api_body_scaled(struct api_ctx *c, const char *name, double scale, struct ops_i64 *out);
/* The six R-KEY-1 limits from object members (or from the member object named in). */
int api_body_limits(struct api_ctx *c, struct json_object *obj, struct ops_key_limits *l);
void api_limits_to_authz(const struct ops_key_limits *l, struct authz_limits *a);
/* The limits stored in an entity's members (a key, or a user's "key_ceiling"). */
void api_limits_from_json(struct json_object *o, struct authz_limits *a);

/* ---- query string ---------------------------------------------------------------- */
/* ?name= into buf; *out NULL when absent. -1: error sent. */
int api_query_str(struct api_ctx *c, const char *name, char *buf, size_t cap, const char **out);
int api_query_id(struct api_ctx *c, const char *name, struct ops_i64 *out);
/* ?limit= (1..1000, default 50) and ?offset= (>= 0) into l. -1: error sent. */
int api_page(struct api_ctx *c, struct ops_list *l);

/* ---- rights ------------------------------------------------------------------------ */
/* authz_check on the object; -1: 403 sent. */
int api_allow(struct api_ctx *c, enum authz_res r, enum authz_op op, int64_t tenant_id,
              int64_t user_id, enum authz_role owner_role);
/* A listing's filters narrowed to what the caller may see; -1: 403 sent. */
int api_scope(struct api_ctx *c, enum authz_res r, struct ops_list *l);
/* Integer member of an entity (0 when absent or null). */
int64_t api_json_i64(struct json_object *o, const char *name);
const char *api_json_str(struct json_object *o, const char *name);

/* ---- handlers, one file per resource --------------------------------------------- */
void api_login(struct api_ctx *c);          /* api_auth.c */
void api_logout(struct api_ctx *c);
void api_me(struct api_ctx *c);
void api_tenants_list(struct api_ctx *c);   /* api_tenants.c */
void api_tenants_create(struct api_ctx *c);
void api_tenants_get(struct api_ctx *c);
void api_tenants_update(struct api_ctx *c);
void api_tenants_delete(struct api_ctx *c);
void api_users_list(struct api_ctx *c);     /* api_users.c */
void api_users_create(struct api_ctx *c);
void api_users_get(struct api_ctx *c);
void api_users_update(struct api_ctx *c);
void api_users_delete(struct api_ctx *c);
void api_endpoints_list(struct api_ctx *c); /* api_endpoints.c */
void api_endpoints_create(struct api_ctx *c);
void api_endpoints_get(struct api_ctx *c);
void api_endpoints_update(struct api_ctx *c);
void api_endpoints_delete(struct api_ctx *c);
void api_endpoints_rotate(struct api_ctx *c);
void api_endpoints_test(struct api_ctx *c);
void api_replicas_list(struct api_ctx *c);
void api_replicas_create(struct api_ctx *c);
void api_replicas_get(struct api_ctx *c);
void api_replicas_update(struct api_ctx *c);
void api_replicas_delete(struct api_ctx *c);
void api_routes_list(struct api_ctx *c);    /* api_routes.c */
void api_routes_create(struct api_ctx *c);
void api_routes_get(struct api_ctx *c);
void api_routes_update(struct api_ctx *c);
void api_routes_delete(struct api_ctx *c);
void api_keys_list(struct api_ctx *c);      /* api_keys.c */
void api_keys_create(struct api_ctx *c);
void api_keys_get(struct api_ctx *c);
void api_keys_update(struct api_ctx *c);
void api_keys_delete(struct api_ctx *c);
void api_keys_policy_get(struct api_ctx *c);
void api_keys_policy_set(struct api_ctx *c);
void api_policies_list(struct api_ctx *c);  /* api_policies.c */
void api_policies_get(struct api_ctx *c);
void api_policies_set(struct api_ctx *c);
void api_policies_delete(struct api_ctx *c);
void api_config_get(struct api_ctx *c);     /* api_system.c: settings and nodes */
void api_config_set(struct api_ctx *c);
void api_settings_schema(struct api_ctx *c);
void api_nodes_list(struct api_ctx *c);
void api_nodes_create(struct api_ctx *c);
void api_nodes_get(struct api_ctx *c);
void api_nodes_update(struct api_ctx *c);
void api_nodes_delete(struct api_ctx *c);
void api_nodes_temperature(struct api_ctx *c);
void api_usage(struct api_ctx *c);          /* api_usage.c */
void api_requests_list(struct api_ctx *c);  /* api_requests.c */
void api_requests_get(struct api_ctx *c);
void api_audit_list(struct api_ctx *c);     /* api_audit.c: audit log and alerts */
void api_alerts_list(struct api_ctx *c);
void api_alerts_get(struct api_ctx *c);
void api_alerts_resolve(struct api_ctx *c);
void api_quotas_list(struct api_ctx *c);    /* api_quotas.c */
void api_quotas_create(struct api_ctx *c);
void api_quotas_get(struct api_ctx *c);
void api_quotas_update(struct api_ctx *c);
void api_quotas_delete(struct api_ctx *c);
void api_cache_stats(struct api_ctx *c);    /* api_cache.c */
void api_cache_clear(struct api_ctx *c);
void api_cache_hits(struct api_ctx *c);     /* R-CACHE-4 */
void api_rules_list(struct api_ctx *c);     /* api_rules.c */
void api_rules_create(struct api_ctx *c);
void api_rules_get(struct api_ctx *c);
void api_rules_delete(struct api_ctx *c);
void api_semrules_list(struct api_ctx *c);  /* api_semrules.c */
void api_semrules_create(struct api_ctx *c);
void api_semrules_delete(struct api_ctx *c);

#endif
