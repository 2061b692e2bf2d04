/* api_routes.c: /api/v1/model-routes — (tenant, public model name) -> endpoint, with the
 * non-operator rules of R-ADM-2 (priority, `default` names, foreign endpoints). */
#include "api.h"

#include <string.h>

#define ROUTE_FIELDS "priority weight target_model status endpoint endpoint_id cache cache_ttl_s mirror mirror_percent"

/* R-CACHE-2: cache and cache_ttl_s, null = inherit the model policy's ("" and -1 for ops).
 * -1: answer set. */
static int route_cache(struct api_ctx *c, struct ops_route_opts *o)
{
    struct json_object *v = NULL;
    if (api_body_str(c, "cache", &o->cache, 0) != 0 || api_body_int(c, "cache_ttl_s", &o->cache_ttl_s) != 0)
        return -1;
    if (o->cache && !*o->cache) {
        api_error(c, 400, "invalid_value", "cache", "cache must be off, exact or semantic (null: inherit)");
        return -1;
    }
    if (o->cache_ttl_s.set && o->cache_ttl_s.v < 1) {
        api_error(c, 400, "invalid_value", "cache_ttl_s",
                  "cache_ttl_s must be between 1 and %d (null: inherit)", OPS_CACHE_TTL_MAX);
        return -1;
    }
    if (json_object_object_get_ex(c->body, "cache", &v) && !v)
        o->cache = "";
    if (json_object_object_get_ex(c->body, "cache_ttl_s", &v) && !v) {
        o->cache_ttl_s.set = 1;
        o->cache_ttl_s.v = -1;
    }
    return 0;
}

/* Reads the optional route members; the endpoint (by name or id) into *ep (NULL when
 * not given). -1: answer set. */
static int route_body(struct api_ctx *c, struct ops_route_opts *o, struct json_object **ep)
{
    const char *endpoint;
    struct ops_i64 endpoint_id;
    struct ops_error err;
    ops_error_clear(&err);
    memset(o, 0, sizeof *o);
    *ep = NULL;
    if (api_body_int(c, "priority", &o->priority) != 0 || api_body_int(c, "weight", &o->weight) != 0 ||
        api_body_str(c, "target_model", &o->target_model, 0) != 0 ||
        api_body_str(c, "status", &o->status, 0) != 0 ||
        api_body_str(c, "endpoint", &endpoint, 0) != 0 ||
        api_body_int(c, "endpoint_id", &endpoint_id) != 0 || route_cache(c, o) != 0 ||
        api_body_str(c, "mirror", &o->mirror, 0) != 0 || api_body_int(c, "mirror_percent", &o->mirror_percent) != 0)
        return -1;
    /* R-SHD-1: mirror null (or "") = no mirror. */
    struct json_object *mv = NULL;
    if (json_object_object_get_ex(c->body, "mirror", &mv) && !mv)
        o->mirror = "";
    if (!endpoint && !endpoint_id.set)
        return 0;
    struct ops_list l = {0};
    struct ops_i64 eid;
    l.endpoint = endpoint;
    l.endpoint_id = endpoint_id;
    if (ops_list_ids(c->db, &l, NULL, NULL, &eid, &err) != 0 ||
        !(*ep = ops_endpoint_get(c->db, eid.v, &err))) {
        api_ops_error(c, &err);
        return -1;
    }
    return 0;
}

/* Whether tenant default routes this model name (R-AUTH-4). -1: answer set. */
static int route_is_platform(struct api_ctx *c, const char *model)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct ops_list l = {0};
    l.tenant_id.set = 1;
    l.tenant_id.v = c->default_tenant_id;
    l.model = model;
    l.limit = 1;
    struct json_object *res = ops_route_list(c->db, &l, &err);
    if (!res) {
        api_ops_error(c, &err);
        return -1;
    }
    int found = api_json_i64(res, "total") > 0;
    json_object_put(res);
    return found;
}

static int route_authz(struct api_ctx *c, const struct ops_route_opts *o, int platform,
                       int64_t route_tenant, struct json_object *ep)
{
    char why[256];
    struct authz_route_change ch = {o->priority.set, o->priority.v, platform, route_tenant,
                                    ep ? api_json_i64(ep, "tenant_id") : 0, c->default_tenant_id};
    if (authz_route(&c->actor, &ch, why, sizeof why) == 0)
        return 0;
    api_forbidden(c, why);
    return -1;
}

void api_routes_list(struct api_ctx *c)
{
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    char tenant[256], endpoint[256], model[256];
    if (api_page(c, &l) != 0 || api_query_str(c, "tenant", tenant, sizeof tenant, &l.tenant) != 0 ||
        api_query_id(c, "tenant_id", &l.tenant_id) != 0 ||
        api_query_str(c, "endpoint", endpoint, sizeof endpoint, &l.endpoint) != 0 ||
        api_query_id(c, "endpoint_id", &l.endpoint_id) != 0 ||
        api_query_str(c, "model", model, sizeof model, &l.model) != 0 ||
        api_scope(c, AUTHZ_ROUTE, &l) != 0)
        return;
    api_list_result(c, ops_route_list(c->db, &l, &err), "routes", &err);
}

void api_routes_create(struct api_ctx *c)
{
    const char *model, *tenant;
    struct ops_i64 tenant_id;
    struct ops_route_opts o;
    struct json_object *ep = NULL, *t = NULL;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "model tenant tenant_id " ROUTE_FIELDS) != 0 ||
        api_body_str(c, "model", &model, 1) != 0 || api_body_str(c, "tenant", &tenant, 0) != 0 ||
        api_body_int(c, "tenant_id", &tenant_id) != 0 || route_body(c, &o, &ep) != 0)
        return;
    if (!ep) {
        api_error(c, 400, "missing_field", "endpoint", "endpoint (or endpoint_id) is required");
        return;
    }
    /* The route's tenant: given, else the caller's (operator: the endpoint's). */
    struct ops_list l = {0};
    struct ops_i64 tid;
    l.tenant = tenant;
    l.tenant_id = tenant_id;
    if (ops_list_ids(c->db, &l, &tid, NULL, NULL, &err) != 0) {
        api_ops_error(c, &err);
        goto out;
    }
    if (!tid.set)
        tid.v = c->actor.role == AUTHZ_OPERATOR ? api_json_i64(ep, "tenant_id") : c->actor.tenant_id;
    int platform = route_is_platform(c, model);
    if (platform < 0 || api_allow(c, AUTHZ_ROUTE, AUTHZ_CREATE, tid.v, 0, AUTHZ_NOBODY) != 0 ||
        route_authz(c, &o, platform, tid.v, ep) != 0)
        goto out;
    if (!(t = ops_tenant_get(c->db, tid.v, &err))) {
        api_ops_error(c, &err);
        goto out;
    }
    api_result(c, ops_route_add(c->db, model, api_json_str(ep, "name"), api_json_str(t, "name"), &o,
                                &err), &err);
out:
    json_object_put(t);
    json_object_put(ep);
}

static struct json_object *route_target(struct api_ctx *c, enum authz_op op)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *r = ops_route_get(c->db, c->ids[0], &err);
    if (!r) {
        api_ops_error(c, &err);
        return NULL;
    }
    if (api_allow(c, AUTHZ_ROUTE, op, api_json_i64(r, "tenant_id"), 0, AUTHZ_NOBODY) != 0) {
        json_object_put(r);
        return NULL;
    }
    return r;
}

void api_routes_get(struct api_ctx *c)
{
    struct json_object *r = route_target(c, AUTHZ_READ);
    if (r)
        api_result(c, r, NULL);
}

void api_routes_update(struct api_ctx *c)
{
    struct ops_route_opts o;
    struct json_object *ep = NULL, *r = NULL;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, ROUTE_FIELDS) != 0 || route_body(c, &o, &ep) != 0)
        return;
    if (!(r = route_target(c, AUTHZ_UPDATE)) ||
        route_authz(c, &o, 0, api_json_i64(r, "tenant_id"), ep) != 0)
        goto out;
    o.endpoint = ep ? api_json_str(ep, "name") : NULL;
    api_result(c, ops_route_set(c->db, c->ids[0], &o, &err), &err);
out:
    json_object_put(r);
    json_object_put(ep);
}

void api_routes_delete(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *r = route_target(c, AUTHZ_DELETE);
    if (!r)
        return;
    json_object_put(r);
    api_result(c, ops_route_rm(c->db, c->ids[0], &err), &err);
}
