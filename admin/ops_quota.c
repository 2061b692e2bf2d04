/* ops_quota.c: quota layers of tenants, users, endpoints and models (R-KEY-6). The data
 * plane ANDs every layer that applies to a request; here they are set, changed and removed.
 * One row of table quotas per (scope, target), at most (quotas_by_target). */
#include "ops_internal.h"

#include <string.h>

#define QUOTA_LIMIT_MAX 1000000000000LL   /* 10^12, as the key limits; 0 = no limit */

/* R-KEY-6: the limits each scope takes, in authz_quota_scope order. */
static const char *const quota_fields[AUTHZ_NQSCOPES][3] = {
    [AUTHZ_QSCOPE_TENANT] = {"monthly_tokens", "concurrency", NULL},
    [AUTHZ_QSCOPE_USER] = {"rpm", "daily_tokens", NULL},
    [AUTHZ_QSCOPE_ENDPOINT] = {"concurrency", NULL, NULL},
    [AUTHZ_QSCOPE_MODEL] = {"concurrency", "queue_max", NULL},
};

int ops_quota_takes(const char *scope, const char *field)
{
    int s = authz_quota_scope_parse(scope);
    for (int i = 0; s >= 0 && field && quota_fields[s][i]; i++)
        if (strcmp(quota_fields[s][i], field) == 0)
            return 1;
    return 0;
}

/* The layer's tenant is its target's: the tenant itself, or the one the user or endpoint
 * belongs to (so the audit row and a tenant admin's view carry it); none for a model. */
#define QUOTA_SELECT \
    "SELECT q.id, q.scope, t.name, t.id, u.name, u.id, e.name, e.id, q.model, q.concurrency," \
    " q.rpm, q.daily_tokens, q.monthly_tokens, q.queue_max, q.updated_at FROM quotas q" \
    " LEFT JOIN users u ON u.id = q.user_id LEFT JOIN endpoints e ON e.id = q.endpoint_id" \
    " LEFT JOIN tenants t ON t.id = COALESCE(q.tenant_id, u.tenant_id, e.tenant_id)"
/* Scopes in the order of authz_quota_scope, for sorting and the scopes bit mask. */
#define QUOTA_SCOPE_INDEX \
    "CASE q.scope WHEN 'tenant' THEN 0 WHEN 'user' THEN 1 WHEN 'endpoint' THEN 2 ELSE 3 END"

static struct json_object *quota_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "scope", st, 1);
    ops_json_text(o, "tenant", st, 2);
    ops_json_int(o, "tenant_id", st, 3);
    ops_json_text(o, "user", st, 4);
    ops_json_int(o, "user_id", st, 5);
    ops_json_text(o, "endpoint", st, 6);
    ops_json_int(o, "endpoint_id", st, 7);
    ops_json_text(o, "model", st, 8);
    ops_json_int(o, "concurrency", st, 9);
    ops_json_int(o, "rpm", st, 10);
    ops_json_int(o, "daily_tokens", st, 11);
    ops_json_int(o, "monthly_tokens", st, 12);
    ops_json_int(o, "queue_max", st, 13);             /* null: the endpoint's queue_max */
    ops_json_int(o, "updated_at", st, 14);
    return o;
}

struct json_object *ops_quota_get(struct sdb *db, int64_t id, struct ops_error *err)
{
    struct json_object *res = ops_query_one(db, err, quota_row, "quota", QUOTA_SELECT " WHERE q.id = ?1",
                                            "i", id);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "quota not found: %lld", (long long)id);
    return res;
}

static int quota_check_scope(const char *scope, struct ops_error *err)
{
    if (authz_quota_scope_parse(scope) >= 0)
        return 0;
    ops_fail(err, OPS_ERR_INVALID, "scope", "scope must be tenant, user, endpoint or model");
    return -1;
}

/* Each given limit in range and taken by the scope (R-KEY-6). */
static int quota_check_opts(const char *scope, const struct ops_quota_opts *o, struct ops_error *err)
{
    const struct { const char *name; const struct ops_i64 *v; int64_t min, max; } f[] = {
        {"concurrency", &o->concurrency, 0, OPS_COUNT_MAX},
        {"rpm", &o->rpm, 0, QUOTA_LIMIT_MAX},
        {"daily_tokens", &o->daily_tokens, 0, QUOTA_LIMIT_MAX},
        {"monthly_tokens", &o->monthly_tokens, 0, QUOTA_LIMIT_MAX},
        {"queue_max", &o->queue_max, -1, OPS_COUNT_MAX},    /* < 0: back to the endpoint's */
    };
    int s = authz_quota_scope_parse(scope);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].v->set)
            continue;
        if (!ops_quota_takes(scope, f[i].name)) {
            ops_fail(err, OPS_ERR_INVALID, f[i].name,
                     "%s does not apply to a %s quota (a %s quota takes %s%s%s)", f[i].name, scope,
                     scope, quota_fields[s][0], quota_fields[s][1] ? " and " : "",
                     quota_fields[s][1] ? quota_fields[s][1] : "");
            return -1;
        }
        if (ops_check_range(f[i].name, *f[i].v, f[i].min, f[i].max, err) != 0)
            return -1;
    }
    return 0;
}

/* The target of (scope, name): its id into the column the scope names (tenant_id, user_id,
 * endpoint_id; 0 for the others) and, for a model, the name. 0 or -1 with err set. */
struct quota_target {
    int64_t tenant_id, user_id, endpoint_id;
    const char *model;
};

static int quota_resolve(struct sdb *db, const char *scope, const char *name, struct quota_target *t,
                         struct ops_error *err)
{
    int64_t other;
    memset(t, 0, sizeof *t);
    if (quota_check_scope(scope, err) != 0)
        return -1;
    if (!name || !*name) {
        ops_fail(err, OPS_ERR_INVALID, scope, "a %s quota needs the %s it limits", scope, scope);
        return -1;
    }
    switch (authz_quota_scope_parse(scope)) {
    case AUTHZ_QSCOPE_TENANT:
        return ops_tenant_id(db, name, &t->tenant_id, err);
    case AUTHZ_QSCOPE_USER:
        return ops_user_ids(db, name, &t->user_id, &other, err);
    case AUTHZ_QSCOPE_ENDPOINT:
        return ops_endpoint_ids(db, name, &t->endpoint_id, &other, err);
    default:
        t->model = name;
        return ops_check_name("model", name, err);
    }
}

/* The id of the layer of t: 1 found, 0 none, -1 error. */
static int quota_lookup(struct sdb *db, const char *scope, const struct quota_target *t, int64_t *id,
                        struct ops_error *err)
{
    return ops_query_i64(db, err, id,
                         "SELECT id FROM quotas WHERE scope = ?1 AND COALESCE(tenant_id, 0) = ?2"
                         " AND COALESCE(user_id, 0) = ?3 AND COALESCE(endpoint_id, 0) = ?4"
                         " AND COALESCE(model, '') = ?5",
                         "tiiit", scope, t->tenant_id, t->user_id, t->endpoint_id,
                         t->model ? t->model : "");
}

/* Given limits only; queue_max < 0 clears it. */
static int quota_update(struct sdb *db, int64_t id, const struct ops_quota_opts *o, struct ops_error *err)
{
    return ops_run(db, err,
                   "UPDATE quotas SET concurrency = COALESCE(?1, concurrency), rpm = COALESCE(?2, rpm),"
                   " daily_tokens = COALESCE(?3, daily_tokens),"
                   " monthly_tokens = COALESCE(?4, monthly_tokens),"
                   " queue_max = CASE WHEN ?5 IS NULL THEN queue_max WHEN ?5 < 0 THEN NULL ELSE ?5 END,"
                   " updated_at = CAST(strftime('%s','now') AS INTEGER) WHERE id = ?6",
                   "oooooi", o->concurrency, o->rpm, o->daily_tokens, o->monthly_tokens, o->queue_max, id);
}

struct json_object *ops_quota_set(struct sdb *db, const char *scope, const char *target,
                                  const struct ops_quota_opts *o, struct ops_error *err)
{
    struct quota_target t;
    int64_t id = 0;
    if (quota_check_scope(scope, err) != 0 || quota_check_opts(scope, o, err) != 0 ||
        ops_begin(db, err) != 0)
        return NULL;
    struct json_object *before = NULL, *res = NULL;
    int rc;
    if (quota_resolve(db, scope, target, &t, err) != 0 || (rc = quota_lookup(db, scope, &t, &id, err)) < 0)
        goto out;
    if (rc == 1 && !(before = ops_quota_get(db, id, err)))
        goto out;
    if (rc == 0) {
        /* The column the scope names holds the target; the others stay NULL (the table's CHECK). */
        struct ops_i64 tid = {t.tenant_id != 0, t.tenant_id}, uid = {t.user_id != 0, t.user_id},
                       eid = {t.endpoint_id != 0, t.endpoint_id};
        if (ops_run(db, err, "INSERT INTO quotas (scope, tenant_id, user_id, endpoint_id, model)"
                    " VALUES (?1, ?2, ?3, ?4, ?5)", "tooot", scope, tid, uid, eid, t.model) != 0)
            goto out;
        id = sdb_last_insert_rowid(db);
    }
    if (quota_update(db, id, o, err) == 0)
        res = ops_audited(db, err, before ? "update" : "create", "quota", before, ops_quota_get(db, id, err));
out:
    json_object_put(before);
    return ops_finish(db, res, err);
}

struct json_object *ops_quota_update(struct sdb *db, int64_t id, const struct ops_quota_opts *o,
                                     struct ops_error *err)
{
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *before = ops_quota_get(db, id, err), *res = NULL;
    if (before && quota_check_opts(json_object_get_string(json_object_object_get(before, "scope")), o, err) == 0 && quota_update(db, id, o, err) == 0)
        res = ops_audited(db, err, "update", "quota", before, ops_quota_get(db, id, err));
    json_object_put(before);
    return ops_finish(db, res, err);
}

struct json_object *ops_quota_rm_id(struct sdb *db, int64_t id, struct ops_error *err)
{
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = ops_quota_get(db, id, err);
    if (res && (ops_run(db, err, "DELETE FROM quotas WHERE id = ?1", "i", id) != 0 ||
                ops_audit(db, err, "delete", "quota", res, NULL) != 0)) {
        json_object_put(res);
        res = NULL;
    }
    if (res)
        json_object_object_add(res, "deleted", json_object_new_boolean(1));
    return ops_finish(db, res, err);
}

struct json_object *ops_quota_find(struct sdb *db, const char *scope, const char *target,
                                   struct ops_error *err)
{
    struct quota_target t;
    int64_t id;
    if (quota_resolve(db, scope, target, &t, err) != 0)
        return NULL;
    int rc = quota_lookup(db, scope, &t, &id, err);
    if (rc == 0)
        ops_fail(err, OPS_ERR_NOT_FOUND, scope, "%s %s has no quota", scope, target);
    return rc == 1 ? ops_quota_get(db, id, err) : NULL;
}

struct json_object *ops_quota_rm(struct sdb *db, const char *scope, const char *target,
                                 struct ops_error *err)
{
    struct json_object *q = ops_quota_find(db, scope, target, err);
    if (!q)
        return NULL;
    int64_t id = json_object_get_int64(json_object_object_get(q, "id"));
    json_object_put(q);
    return ops_quota_rm_id(db, id, err);
}

struct json_object *ops_quota_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid, uid, eid;
    if ((l->scope && quota_check_scope(l->scope, err) != 0) || ops_list_ids(db, l, &tid, &uid, &eid, err) != 0)
        return NULL;
    int64_t mask = l->scopes ? (int64_t)l->scopes : (1 << AUTHZ_NQSCOPES) - 1;
    return ops_query_page(db, err, "quotas", quota_row, l,
                          QUOTA_SELECT " WHERE (?1 IS NULL OR t.id = ?1) AND (?2 IS NULL OR q.user_id = ?2)"
                          " AND (?3 IS NULL OR q.endpoint_id = ?3) AND (?4 IS NULL OR q.model = ?4)"
                          " AND (?5 IS NULL OR q.scope = ?5) AND (?6 & (1 << " QUOTA_SCOPE_INDEX ")) <> 0"
                          " ORDER BY " QUOTA_SCOPE_INDEX ", q.id",
                          "oootti", tid, uid, eid, l->model, l->scope, mask);
}
