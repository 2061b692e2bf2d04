/* ops_route.c: model routes, (tenant, public model name) -> endpoint (SPEC §0, §3, R-AUTH-4). */
#include "ops_internal.h"

#include <string.h>

#define ROUTE_PRIORITY_MAX 1000000

static const char *const route_statuses[] = {"active", "inactive", NULL};
static const char *const route_cache_modes[] = {"off", "exact", "semantic", NULL};  /* R-CACHE-2 */

#define ROUTE_SELECT \
    "SELECT r.id, r.model, t.name, t.id, e.name, e.id, r.priority, r.weight, r.target_model," \
    " r.status, r.created_at, r.cache, r.cache_ttl_s, m.name, r.mirror_percent FROM routes r" \
    " JOIN tenants t ON t.id = r.tenant_id JOIN endpoints e ON e.id = r.endpoint_id" \
    " LEFT JOIN endpoints m ON m.id = r.mirror_endpoint_id"

static struct json_object *route_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "model", st, 1);
    ops_json_text(o, "tenant", st, 2);
    ops_json_int(o, "tenant_id", st, 3);
    ops_json_text(o, "endpoint", st, 4);
    ops_json_int(o, "endpoint_id", st, 5);
    ops_json_int(o, "priority", st, 6);
    ops_json_int(o, "weight", st, 7);
    ops_json_text(o, "target_model", st, 8);
    ops_json_text(o, "status", st, 9);
    ops_json_text(o, "cache", st, 11);          /* null: the model policy's */
    ops_json_int(o, "cache_ttl_s", st, 12);
    ops_json_text(o, "mirror", st, 13);         /* R-SHD-1: null = no mirror */
    ops_json_int(o, "mirror_percent", st, 14);
    ops_json_int(o, "created_at", st, 10);
    return o;
}

struct json_object *ops_route_get(struct sdb *db, int64_t id, struct ops_error *err)
{
    struct json_object *res = ops_query_one(db, err, route_row, "route",
                                            ROUTE_SELECT " WHERE r.id = ?1", "i", id);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "route not found: %lld", (long long)id);
    return res;
}

/* Negative priorities (ahead of 0) are for the operator; authz_route refuses
 * them to others before the admin CGI calls (R-ADM-2). */
static int route_check_opts(const struct ops_route_opts *o, struct ops_error *err)
{
    if (ops_check_range("priority", o->priority, -ROUTE_PRIORITY_MAX, ROUTE_PRIORITY_MAX,
                        err) != 0 ||
        ops_check_range("weight", o->weight, 0, OPS_COUNT_MAX, err) != 0)
        return -1;
    if (o->target_model && *o->target_model &&
        ops_check_name("target_model", o->target_model, err) != 0)
        return -1;
    if (o->status && ops_check_enum("status", o->status, route_statuses, err) != 0)
        return -1;
    if (o->cache && *o->cache && ops_check_enum("cache", o->cache, route_cache_modes, err) != 0)
        return -1;
    if (o->cache_ttl_s.set && o->cache_ttl_s.v >= 0 &&
        ops_check_range("cache_ttl_s", o->cache_ttl_s, 1, OPS_CACHE_TTL_MAX, err) != 0)
        return -1;
    if (ops_check_range("mirror_percent", o->mirror_percent, 0, 100, err) != 0)
        return -1;
    return 0;
}

/* R-SHD-1: the mirror endpoint by name, of the route's tenant, never the route's own
 * endpoint (the copy would land where the answer comes from); "" clears it. */
static int route_mirror(struct sdb *db, int64_t id, const struct ops_route_opts *o, struct ops_error *err)
{
    if (!o->mirror && !o->mirror_percent.set)
        return 0;
    if (o->mirror && !*o->mirror)
        return ops_run(db, err, "UPDATE routes SET mirror_endpoint_id = NULL, mirror_percent = COALESCE(?2, 0)"
                       " WHERE id = ?1", "io", id, o->mirror_percent);
    int64_t mid = 0, mtid = 0, tid = 0, own = 0;
    if (o->mirror) {
        if (ops_endpoint_ids(db, o->mirror, &mid, &mtid, err) != 0)
            return -1;
        if (ops_query_i64(db, err, &tid, "SELECT tenant_id FROM routes WHERE id = ?1", "i", id) != 1 ||
            ops_query_i64(db, err, &own, "SELECT endpoint_id FROM routes WHERE id = ?1", "i", id) != 1)
            return -1;
        if (mtid != tid) {
            ops_fail(err, OPS_ERR_INVALID, "mirror",
                     "endpoint %s belongs to another tenant; a route may only mirror to its own tenant's endpoints",
                     o->mirror);
            return -1;
        }
        if (mid == own) {
            ops_fail(err, OPS_ERR_INVALID, "mirror", "a route cannot mirror to its own endpoint %s", o->mirror);
            return -1;
        }
    }
    /* A mirror given without a percent mirrors everything; a percent alone keeps the endpoint. */
    struct ops_i64 pct = o->mirror_percent;
    if (o->mirror && !pct.set) {
        pct.set = 1;
        pct.v = 100;
    }
    return ops_run(db, err, "UPDATE routes SET mirror_endpoint_id = CASE WHEN ?2 = 0 THEN mirror_endpoint_id"
                   " ELSE ?2 END, mirror_percent = COALESCE(?3, mirror_percent) WHERE id = ?1", "iio",
                   id, mid, pct);
}

/* target_model and cache: NULL keeps, "" clears (cache: inherit). cache_ttl_s: unset keeps,
 * v < 0 inherits. endpoint_id: unset keeps it. */
static int route_update(struct sdb *db, int64_t id, const struct ops_route_opts *o,
                        struct ops_i64 endpoint_id, struct ops_error *err)
{
    if (route_mirror(db, id, o, err) != 0)
        return -1;
    return ops_run(db, err,
                   "UPDATE routes SET priority = COALESCE(?1, priority),"
                   " weight = COALESCE(?2, weight),"
                   " target_model = CASE WHEN ?3 IS NULL THEN target_model"
                   "   WHEN ?3 = '' THEN NULL ELSE ?3 END,"
                   " status = COALESCE(?4, status), endpoint_id = COALESCE(?5, endpoint_id),"
                   " cache = CASE WHEN ?7 IS NULL THEN cache WHEN ?7 = '' THEN NULL ELSE ?7 END,"
                   " cache_ttl_s = CASE WHEN ?8 IS NULL THEN cache_ttl_s WHEN ?8 < 0 THEN NULL"
                   "   ELSE ?8 END"
                   " WHERE id = ?6",
                   "oottoito", o->priority, o->weight, o->target_model, o->status, endpoint_id, id,
                   o->cache, o->cache_ttl_s);
}

/* R-ADM-2: a route may only point at an endpoint of its own tenant. */
static int route_check_endpoint(const char *endpoint, int64_t endpoint_tenant,
                                int64_t route_tenant, struct ops_error *err)
{
    if (endpoint_tenant == route_tenant)
        return 0;
    ops_fail(err, OPS_ERR_INVALID, "endpoint",
             "endpoint %s belongs to another tenant; a route may only use its own tenant's endpoints",
             endpoint);
    return -1;
}

struct json_object *ops_route_add(struct sdb *db, const char *model, const char *endpoint,
                                  const char *tenant, const struct ops_route_opts *o,
                                  struct ops_error *err)
{
    int64_t eid, etid, tid, def_id = 0, clash = 0;
    if (ops_check_name("model", model, err) != 0 || route_check_opts(o, err) != 0)
        return NULL;
    if (strcmp(model, "auto") == 0) {
        ops_fail(err, OPS_ERR_INVALID, "model", "model name auto is reserved for automatic routing");
        return NULL;
    }
    if (o->endpoint) {
        ops_fail(err, OPS_ERR_INVALID, "endpoint", "give the endpoint once");
        return NULL;
    }
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (ops_endpoint_ids(db, endpoint, &eid, &etid, err) != 0)
        goto out;
    tid = etid;
    if (tenant && (ops_tenant_id(db, tenant, &tid, err) != 0 ||
                   route_check_endpoint(endpoint, etid, tid, err) != 0))
        goto out;
    /* R-AUTH-4: a tenant may not register a model name that tenant default routes. */
    int rc = ops_query_i64(db, err, &def_id, "SELECT id FROM tenants WHERE name = 'default'", "");
    if (rc < 0)
        goto out;
    if (rc == 1 && tid != def_id) {
        rc = ops_query_i64(db, err, &clash,
                           "SELECT COUNT(*) FROM routes WHERE tenant_id = ?1 AND model = ?2",
                           "it", def_id, model);
        if (rc < 0)
            goto out;
        if (clash > 0) {
            ops_fail(err, OPS_ERR_CONFLICT, "model",
                     "model %s is already a platform model (tenant default); choose another name",
                     model);
            goto out;
        }
    }
    if (ops_run(db, err, "INSERT INTO routes (tenant_id, model, endpoint_id) VALUES (?1, ?2, ?3)",
                "iti", tid, model, eid) != 0)
        goto out;
    int64_t id = sdb_last_insert_rowid(db);
    struct ops_i64 keep = {0, 0};
    if (route_update(db, id, o, keep, err) == 0)
        res = ops_audited(db, err, "create", "route", NULL, ops_route_get(db, id, err));
out:
    return ops_finish(db, res, err);
}

/* The tenant of route id, or NOT_FOUND. */
static int route_tenant(struct sdb *db, int64_t id, int64_t *tenant_id, struct ops_error *err)
{
    int rc = ops_query_i64(db, err, tenant_id, "SELECT tenant_id FROM routes WHERE id = ?1",
                           "i", id);
    if (rc == 0)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "route not found: %lld", (long long)id);
    return rc == 1 ? 0 : -1;
}

struct json_object *ops_route_set(struct sdb *db, int64_t id, const struct ops_route_opts *o,
                                  struct ops_error *err)
{
    int64_t tid, etid;
    struct ops_i64 eid = {0, 0};
    if (route_check_opts(o, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL, *before = NULL;
    if (route_tenant(db, id, &tid, err) != 0 || !(before = ops_route_get(db, id, err)))
        goto out;
    if (o->endpoint) {
        if (ops_endpoint_ids(db, o->endpoint, &eid.v, &etid, err) != 0 ||
            route_check_endpoint(o->endpoint, etid, tid, err) != 0)
            goto out;
        eid.set = 1;
    }
    if (route_update(db, id, o, eid, err) == 0)
        res = ops_audited(db, err, "update", "route", before, ops_route_get(db, id, err));
out:
    json_object_put(before);
    return ops_finish(db, res, err);
}

struct json_object *ops_route_rm(struct sdb *db, int64_t id, struct ops_error *err)
{
    int64_t tid;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (route_tenant(db, id, &tid, err) != 0 || !(res = ops_route_get(db, id, err)))
        goto out;
    if (ops_run(db, err, "DELETE FROM routes WHERE id = ?1", "i", id) != 0 ||
        ops_audit(db, err, "delete", "route", res, NULL) != 0) {
        json_object_put(res);
        res = NULL;
        goto out;
    }
    json_object_object_add(res, "deleted", json_object_new_boolean(1));
out:
    return ops_finish(db, res, err);
}

struct json_object *ops_route_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid, eid;
    const char *model = l ? l->model : NULL;
    if (ops_list_ids(db, l, &tid, NULL, &eid, err) != 0 ||
        (model && ops_check_name("model", model, err) != 0))
        return NULL;
    return ops_query_page(db, err, "routes", route_row, l,
                          ROUTE_SELECT " WHERE (?1 IS NULL OR r.tenant_id = ?1)"
                          " AND (?2 IS NULL OR r.endpoint_id = ?2) AND (?3 IS NULL OR r.model = ?3)"
                          " ORDER BY r.id", "oot", tid, eid, model);
}
