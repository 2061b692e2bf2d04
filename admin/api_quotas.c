/* api_quotas.c: /api/v1/quotas — the quota layers of tenants, users, endpoints and models
 * (R-KEY-6). The operator sets every layer; a tenant admin those of its own tenant's users
 * and endpoints, and never raises its own user's (R-SEC-5, authz_quota). */
#include "api.h"

#include <string.h>

#define QUOTA_LIMIT_FIELDS "concurrency rpm daily_tokens monthly_tokens queue_max"

/* The limits of the body; queue_max null goes back to the endpoint's (-1). -1: answer set. */
static int quota_body(struct api_ctx *c, struct ops_quota_opts *o)
{
    struct json_object *v = NULL;
    memset(o, 0, sizeof *o);
    if (api_body_int(c, "concurrency", &o->concurrency) != 0 || api_body_int(c, "rpm", &o->rpm) != 0 ||
        api_body_int(c, "daily_tokens", &o->daily_tokens) != 0 ||
        api_body_int(c, "monthly_tokens", &o->monthly_tokens) != 0 ||
        api_body_int(c, "queue_max", &o->queue_max) != 0)
        return -1;
    if (o->queue_max.set && o->queue_max.v < 0) {
        api_error(c, 400, "invalid_value", "queue_max", "queue_max must not be negative (null: the endpoint's)");
        return -1;
    }
    if (json_object_object_get_ex(c->body, "queue_max", &v) && !v) {
        o->queue_max.set = 1;
        o->queue_max.v = -1;
    }
    return 0;
}

/* Whether the change raises or clears a limit the layer has now (before NULL: a new
 * layer, which only tightens). A delete passes o NULL. */
static int quota_loosens(struct json_object *before, const struct ops_quota_opts *o)
{
    const char *names[] = {"concurrency", "rpm", "daily_tokens", "monthly_tokens", "queue_max"};
    const struct ops_i64 none = {0, 0};
    const struct ops_i64 *want[] = {o ? &o->concurrency : &none, o ? &o->rpm : &none,
                                    o ? &o->daily_tokens : &none, o ? &o->monthly_tokens : &none,
                                    o ? &o->queue_max : &none};
    if (!before)
        return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int64_t old = api_json_i64(before, names[i]);
        if (old == 0)
            continue;                       /* no limit now: anything is tighter */
        if (!o || (want[i]->set && (want[i]->v <= 0 || want[i]->v > old)))
            return 1;
    }
    return 0;
}

/* What a layer limits, as authz sees it: its tenant, and for a user layer the user and its
 * role. -1: answer set. */
static int quota_facts(struct api_ctx *c, enum authz_quota_scope scope, int64_t tenant_id, int64_t user_id,
                       struct authz_target *t)
{
    t->tenant_id = tenant_id;
    t->user_id = 0;
    t->owner_role = AUTHZ_NOBODY;
    if (scope != AUTHZ_QSCOPE_USER)
        return 0;
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *u = ops_user_get(c->db, user_id, &err);
    if (!u) {
        api_ops_error(c, &err);
        return -1;
    }
    t->tenant_id = api_json_i64(u, "tenant_id");
    t->user_id = user_id;
    t->owner_role = authz_role_parse(api_json_str(u, "role"));
    json_object_put(u);
    return 0;
}

static int quota_allow(struct api_ctx *c, enum authz_op op, enum authz_quota_scope scope,
                       const struct authz_target *t, int loosens)
{
    char why[256];
    if (authz_quota(&c->actor, op, scope, t, loosens, why, sizeof why) == 0)
        return 0;
    api_forbidden(c, why);
    return -1;
}

/* The layer by path id after the rights check for op (o: the change, for R-SEC-5). */
static struct json_object *quota_target(struct api_ctx *c, enum authz_op op, const struct ops_quota_opts *o)
{
    struct ops_error err;
    struct authz_target t;
    ops_error_clear(&err);
    struct json_object *q = ops_quota_get(c->db, c->ids[0], &err);
    if (!q) {
        api_ops_error(c, &err);
        return NULL;
    }
    int scope = authz_quota_scope_parse(api_json_str(q, "scope"));
    if (quota_facts(c, (enum authz_quota_scope)scope, api_json_i64(q, "tenant_id"), api_json_i64(q, "user_id"),
                    &t) != 0 ||
        quota_allow(c, op, (enum authz_quota_scope)scope, &t,
                    op == AUTHZ_DELETE ? quota_loosens(q, NULL) : op == AUTHZ_UPDATE && quota_loosens(q, o)) != 0) {
        json_object_put(q);
        return NULL;
    }
    return q;
}

void api_quotas_list(struct api_ctx *c)
{
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    char tenant[256], user[256], endpoint[256], model[256], scope[16];
    if (api_page(c, &l) != 0 || api_query_str(c, "tenant", tenant, sizeof tenant, &l.tenant) != 0 ||
        api_query_id(c, "tenant_id", &l.tenant_id) != 0 ||
        api_query_str(c, "user", user, sizeof user, &l.user) != 0 ||
        api_query_id(c, "user_id", &l.user_id) != 0 ||
        api_query_str(c, "endpoint", endpoint, sizeof endpoint, &l.endpoint) != 0 ||
        api_query_id(c, "endpoint_id", &l.endpoint_id) != 0 ||
        api_query_str(c, "model", model, sizeof model, &l.model) != 0 ||
        api_query_str(c, "scope", scope, sizeof scope, &l.scope) != 0 || api_scope(c, AUTHZ_QUOTA, &l) != 0)
        return;
    /* api_scope narrowed the tenant; the layers an admin may not see go too. */
    l.scopes = authz_quota_scopes(c->actor.role);
    api_list_result(c, ops_quota_list(c->db, &l, &err), "quotas", &err);
}

/* {"scope", the one target member the scope names, limits}: the layer is created, or its
 * given limits changed. */
void api_quotas_create(struct api_ctx *c)
{
    const char *scope_name, *target = NULL, *given[AUTHZ_NQSCOPES];
    struct ops_quota_opts o;
    struct authz_target t;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "scope tenant user endpoint model " QUOTA_LIMIT_FIELDS) != 0 ||
        api_body_str(c, "scope", &scope_name, 1) != 0)
        return;
    int scope = authz_quota_scope_parse(scope_name);
    if (scope < 0) {
        api_error(c, 400, "invalid_value", "scope", "scope must be tenant, user, endpoint or model");
        return;
    }
    for (int i = 0; i < AUTHZ_NQSCOPES; i++) {
        if (api_body_str(c, authz_quota_scope_names[i], &given[i], i == scope) != 0)
            return;
        if (i != scope && given[i]) {
            api_error(c, 400, "invalid_value", authz_quota_scope_names[i],
                      "a %s quota names its %s only (not a %s)", scope_name, scope_name, authz_quota_scope_names[i]);
            return;
        }
    }
    target = given[scope];
    if (quota_body(c, &o) != 0)
        return;
    /* The target's tenant (and user) for the rights check; a missing one is 404 here. */
    struct ops_list l = {0};
    struct ops_i64 tid, uid, eid;
    int64_t tenant_id = 0;
    l.tenant = scope == AUTHZ_QSCOPE_TENANT ? target : NULL;
    l.user = scope == AUTHZ_QSCOPE_USER ? target : NULL;
    l.endpoint = scope == AUTHZ_QSCOPE_ENDPOINT ? target : NULL;
    if (ops_list_ids(c->db, &l, &tid, &uid, &eid, &err) != 0) {
        api_ops_error(c, &err);
        return;
    }
    if (tid.set)
        tenant_id = tid.v;
    if (eid.set) {
        struct json_object *e = ops_endpoint_get(c->db, eid.v, &err);
        if (!e) {
            api_ops_error(c, &err);
            return;
        }
        tenant_id = api_json_i64(e, "tenant_id");
        json_object_put(e);
    }
    if (quota_facts(c, (enum authz_quota_scope)scope, tenant_id, uid.set ? uid.v : 0, &t) != 0)
        return;
    struct json_object *before = ops_quota_find(c->db, scope_name, target, &err);
    if (!before && err.kind != OPS_ERR_NOT_FOUND) {
        api_ops_error(c, &err);
        return;
    }
    ops_error_clear(&err);
    if (quota_allow(c, before ? AUTHZ_UPDATE : AUTHZ_CREATE, (enum authz_quota_scope)scope, &t,
                    quota_loosens(before, &o)) == 0)
        api_result(c, ops_quota_set(c->db, scope_name, target, &o, &err), &err);
    json_object_put(before);
}

void api_quotas_get(struct api_ctx *c)
{
    struct json_object *q = quota_target(c, AUTHZ_READ, NULL);
    if (q)
        api_result(c, q, NULL);
}

void api_quotas_update(struct api_ctx *c)
{
    struct ops_quota_opts o;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, QUOTA_LIMIT_FIELDS) != 0 || quota_body(c, &o) != 0)
        return;
    struct json_object *q = quota_target(c, AUTHZ_UPDATE, &o);
    if (!q)
        return;
    json_object_put(q);
    api_result(c, ops_quota_update(c->db, c->ids[0], &o, &err), &err);
}

void api_quotas_delete(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *q = quota_target(c, AUTHZ_DELETE, NULL);
    if (!q)
        return;
    json_object_put(q);
    api_result(c, ops_quota_rm_id(c->db, c->ids[0], &err), &err);
}
