/* api_endpoints.c: /api/v1/endpoints, their replicas, key rotation and the one-click
 * test (R-ADM-1, R-ANT-4, R-ANT-5, R-SEC-3). */
#include "api.h"

#include <string.h>

#define ENDPOINT_FIELDS "algorithm protocol health_path affinity stream_guard connect_timeout_ms" \
    " first_byte_timeout_ms idle_timeout_ms upstream_auth wake_url health_check" \
    " failure_threshold start_period_seconds business_probe_rounds anthropic_version default_max_tokens" \
    " max_concurrency queue_max queue_timeout_ms"
#define REPLICA_FIELDS "engine state weight max_concurrency node"

static int endpoint_opts(struct api_ctx *c, struct ops_endpoint_opts *o)
{
    memset(o, 0, sizeof *o);
    if (api_body_str(c, "algorithm", &o->algorithm, 0) != 0 ||
        api_body_str(c, "protocol", &o->protocol, 0) != 0 ||
        api_body_str(c, "health_path", &o->health_path, 0) != 0 ||
        api_body_bool(c, "affinity", &o->affinity) != 0 ||
        api_body_bool(c, "stream_guard", &o->stream_guard) != 0 ||
        api_body_int(c, "connect_timeout_ms", &o->connect_timeout_ms) != 0 ||
        api_body_int(c, "first_byte_timeout_ms", &o->first_byte_timeout_ms) != 0 ||
        api_body_int(c, "idle_timeout_ms", &o->idle_timeout_ms) != 0 ||
        api_body_str(c, "upstream_auth", &o->upstream_auth, 0) != 0 ||
        api_body_str(c, "wake_url", &o->wake_url, 0) != 0 ||
        api_body_bool(c, "health_check", &o->health_check) != 0 ||
        api_body_int(c, "failure_threshold", &o->failure_threshold) != 0 ||
        api_body_int(c, "start_period_seconds", &o->start_period_seconds) != 0 ||
        api_body_int(c, "business_probe_rounds", &o->business_probe_rounds) != 0 ||
        api_body_str(c, "anthropic_version", &o->anthropic_version, 0) != 0 ||
        api_body_int(c, "default_max_tokens", &o->default_max_tokens) != 0 ||
        api_body_int(c, "max_concurrency", &o->max_concurrency) != 0 ||
        api_body_int(c, "queue_max", &o->queue_max) != 0 ||
        api_body_int(c, "queue_timeout_ms", &o->queue_timeout_ms) != 0)
        return -1;
    return 0;
}

/* The endpoint by path id after the rights check for op; NULL with the answer set. */
static struct json_object *endpoint_target(struct api_ctx *c, enum authz_op op)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *e = ops_endpoint_get(c->db, c->ids[0], &err);
    if (!e) {
        api_ops_error(c, &err);
        return NULL;
    }
    if (api_allow(c, AUTHZ_ENDPOINT, op, api_json_i64(e, "tenant_id"), 0, AUTHZ_NOBODY) != 0) {
        json_object_put(e);
        return NULL;
    }
    return e;
}

void api_endpoints_list(struct api_ctx *c)
{
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    char tenant[256];
    if (api_page(c, &l) != 0 || api_query_str(c, "tenant", tenant, sizeof tenant, &l.tenant) != 0 ||
        api_query_id(c, "tenant_id", &l.tenant_id) != 0 || api_scope(c, AUTHZ_ENDPOINT, &l) != 0)
        return;
    struct json_object *res = ops_endpoint_list(c->db, &l, &err);
    if (res && ops_list_status(c->db, res, "endpoints", ops_endpoint_status, &err) != 0) {
        json_object_put(res);
        res = NULL;
    }
    api_list_result(c, res, "endpoints", &err);
}

void api_endpoints_create(struct api_ctx *c)
{
    const char *name, *tenant;
    struct ops_i64 tenant_id;
    struct ops_endpoint_opts o;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "name tenant tenant_id " ENDPOINT_FIELDS) != 0 ||
        api_body_str(c, "name", &name, 1) != 0 || api_body_str(c, "tenant", &tenant, 0) != 0 ||
        api_body_int(c, "tenant_id", &tenant_id) != 0 || endpoint_opts(c, &o) != 0)
        return;
    struct ops_list l = {0};
    struct ops_i64 tid;
    l.tenant = tenant;
    l.tenant_id = tenant_id;
    if (ops_list_ids(c->db, &l, &tid, NULL, NULL, &err) != 0) {
        api_ops_error(c, &err);
        return;
    }
    if (!tid.set)
        tid.v = c->actor.tenant_id;
    if (api_allow(c, AUTHZ_ENDPOINT, AUTHZ_CREATE, tid.v, 0, AUTHZ_NOBODY) != 0)
        return;
    struct json_object *t = ops_tenant_get(c->db, tid.v, &err);
    if (!t) {
        api_ops_error(c, &err);
        return;
    }
    api_result(c, ops_endpoint_add(c->db, name, api_json_str(t, "name"), &o, &err), &err);
    json_object_put(t);
}

void api_endpoints_get(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *e = endpoint_target(c, AUTHZ_READ);
    if (e && ops_endpoint_status(c->db, e, &err) != 0) {
        json_object_put(e);
        api_ops_error(c, &err);
        return;
    }
    if (e)
        api_result(c, e, NULL);
}

void api_endpoints_update(struct api_ctx *c)
{
    struct ops_endpoint_opts o;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, ENDPOINT_FIELDS) != 0 || endpoint_opts(c, &o) != 0)
        return;
    struct json_object *e = endpoint_target(c, AUTHZ_UPDATE);
    if (!e)
        return;
    api_result(c, ops_endpoint_set(c->db, api_json_str(e, "name"), &o, &err), &err);
    json_object_put(e);
}

void api_endpoints_delete(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *e = endpoint_target(c, AUTHZ_DELETE);
    if (!e)
        return;
    api_result(c, ops_endpoint_rm(c->db, api_json_str(e, "name"), &err), &err);
    json_object_put(e);
}

/* The new endpoint key is in this answer only (R-SEC-1). */
void api_endpoints_rotate(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "") != 0)
        return;
    struct json_object *e = endpoint_target(c, AUTHZ_UPDATE);
    if (!e)
        return;
    api_result(c, ops_endpoint_rotate_key(c->db, api_json_str(e, "name"), &err), &err);
    json_object_put(e);
}

/* R-ANT-5: always 200 when the endpoint exists; the verdict is "ok". */
void api_endpoints_test(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "") != 0)
        return;
    struct json_object *e = endpoint_target(c, AUTHZ_UPDATE);
    if (!e)
        return;
    api_result(c, ops_endpoint_test(c->db, api_json_str(e, "name"), c->conf->admin_test_timeout_ms,
                                    &err), &err);
    json_object_put(e);
}

/* ---- replicas ---------------------------------------------------------------------- */

static int replica_opts(struct api_ctx *c, struct ops_replica_opts *o)
{
    memset(o, 0, sizeof *o);
    if (api_body_str(c, "engine", &o->engine, 0) != 0 || api_body_str(c, "state", &o->state, 0) != 0 ||
        api_body_int(c, "weight", &o->weight) != 0 ||
        api_body_int(c, "max_concurrency", &o->max_concurrency) != 0 ||
        api_body_str(c, "node", &o->node, 0) != 0)
        return -1;
    return 0;
}

/* The replica ids[1] of endpoint ids[0] (after the endpoint's rights check). */
static struct json_object *replica_target(struct api_ctx *c, enum authz_op op,
                                          struct json_object **endpoint)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (!(*endpoint = endpoint_target(c, op)))
        return NULL;
    struct json_object *r = ops_replica_get(c->db, c->ids[1], &err);
    if (r && api_json_i64(r, "endpoint_id") != c->ids[0]) {
        json_object_put(r);
        r = NULL;
        api_error(c, 404, "not_found", "id", "endpoint %lld has no replica %lld",
                  (long long)c->ids[0], (long long)c->ids[1]);
    } else if (!r) {
        api_ops_error(c, &err);
    }
    if (!r) {
        json_object_put(*endpoint);
        *endpoint = NULL;
    }
    return r;
}

void api_replicas_list(struct api_ctx *c)
{
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    if (api_page(c, &l) != 0)
        return;
    struct json_object *e = endpoint_target(c, AUTHZ_READ);
    if (!e)
        return;
    json_object_put(e);
    l.endpoint_id.set = 1;
    l.endpoint_id.v = c->ids[0];
    api_list_result(c, ops_replica_list(c->db, &l, &err), "replicas", &err);
}

void api_replicas_create(struct api_ctx *c)
{
    const char *url;
    struct ops_replica_opts o;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "url " REPLICA_FIELDS) != 0 || api_body_str(c, "url", &url, 1) != 0 ||
        replica_opts(c, &o) != 0)
        return;
    struct json_object *e = endpoint_target(c, AUTHZ_UPDATE);
    if (!e)
        return;
    api_result(c, ops_replica_add(c->db, api_json_str(e, "name"), url, &o, &err), &err);
    json_object_put(e);
}

void api_replicas_get(struct api_ctx *c)
{
    struct json_object *e, *r = replica_target(c, AUTHZ_READ, &e);
    if (!r)
        return;
    json_object_put(e);
    api_result(c, r, NULL);
}

void api_replicas_update(struct api_ctx *c)
{
    struct ops_replica_opts o;
    struct ops_error err;
    ops_error_clear(&err);
    /* R-SEC-9: "approved" (the operator's, ops refuses anyone else) only on a change. */
    if (api_body_fields(c, REPLICA_FIELDS " approved") != 0 || replica_opts(c, &o) != 0 ||
        api_body_bool(c, "approved", &o.approved) != 0)
        return;
    struct json_object *e, *r = replica_target(c, AUTHZ_UPDATE, &e);
    if (!r)
        return;
    api_result(c, ops_replica_set(c->db, api_json_str(e, "name"), api_json_str(r, "url"), &o, &err),
               &err);
    json_object_put(e);
    json_object_put(r);
}

void api_replicas_delete(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *e, *r = replica_target(c, AUTHZ_UPDATE, &e);
    if (!r)
        return;
    api_result(c, ops_replica_rm(c->db, api_json_str(e, "name"), api_json_str(r, "url"), &err), &err);
    json_object_put(e);
    json_object_put(r);
}
