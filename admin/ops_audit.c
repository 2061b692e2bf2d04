/* ops_audit.c: the audit log every change writes (R-ADM-5), its listing, and alerts (R-HC-2). */
#include "ops_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACTOR_MAX 160

/* Set once per process by sluicectl or the admin CGI request (one request per
 * process); thread-local so a threaded caller cannot mix two actors up. */
static _Thread_local char ops_actor_name[ACTOR_MAX] = "system";

void ops_set_actor(const char *actor)
{
    snprintf(ops_actor_name, sizeof ops_actor_name, "%s", actor && *actor ? actor : "system");
}

const char *ops_actor(void) { return ops_actor_name; }

/* Beside the name, same lifetime: the operator until told otherwise (sluicectl). */
static _Thread_local enum authz_role ops_actor_role_v = AUTHZ_OPERATOR;
static _Thread_local struct authz_limits ops_actor_ceiling;

void ops_set_actor_rights(enum authz_role role, const struct authz_limits *ceiling)
{
    ops_actor_role_v = role;
    memset(&ops_actor_ceiling, 0, sizeof ops_actor_ceiling);
    if (ceiling)
        ops_actor_ceiling = *ceiling;
    for (int i = 0; i < AUTHZ_NLIMITS; i++)
        ops_actor_ceiling.set[i] = 1;
}

enum authz_role ops_actor_role(void) { return ops_actor_role_v; }

const struct authz_limits *ops_actor_bound(void)
{
    return ops_actor_role_v == AUTHZ_OPERATOR ? NULL : &ops_actor_ceiling;
}

int ops_actor_check(struct ops_error *err)
{
    if (ops_actor_role_v != AUTHZ_NOBODY)
        return 0;
    ops_fail(err, OPS_ERR_FORBIDDEN, NULL, "not authenticated");
    return -1;
}

void ops_limits_authz(const struct ops_key_limits *l, struct authz_limits *out)
{
    const struct ops_i64 *src[AUTHZ_NLIMITS] = {&l->qps_limit, &l->concurrency_limit,
        &l->daily_limit, &l->monthly_quota, &l->tpm_limit, &l->monthly_token_quota};
    for (int i = 0; i < AUTHZ_NLIMITS; i++) {
        out->set[i] = src[i]->set;
        out->v[i] = src[i]->set ? src[i]->v : 0;
    }
}

/* R-SEC-1: members that may carry a secret are left out of every audit record. */
static int audit_secret_field(const char *name)
{
    static const char *const secret[] = {"key", "password", "upstream_auth", "token",
                                         "csrf_token", "key_hash", "password_hash", NULL};
    for (const char *const *s = secret; *s; s++)
        if (strcmp(name, *s) == 0)
            return 1;
    return 0;
}

/* The object as JSON text without secret members; NULL for none. The caller frees. */
static char *audit_text(struct json_object *o)
{
    if (!o)
        return NULL;
    struct json_object *copy = json_object_new_object();
    json_object_object_foreach(o, k, v) {
        if (!audit_secret_field(k))
            json_object_object_add(copy, k, json_object_get(v));
    }
    char *text = strdup(json_object_to_json_string_ext(copy, JSON_C_TO_STRING_PLAIN));
    json_object_put(copy);
    if (!text)
        abort();
    return text;
}

static int64_t audit_member(struct json_object *o, const char *name, int *found)
{
    struct json_object *v;
    if (o && json_object_object_get_ex(o, name, &v) && json_object_is_type(v, json_type_int)) {
        *found = 1;
        return json_object_get_int64(v);
    }
    return 0;
}

static int audit_write(struct sdb *db, struct ops_error *err, const char *action,
                       const char *object_type, struct ops_i64 object_id, struct ops_i64 tenant_id,
                       struct json_object *before, struct json_object *after)
{
    char *b = audit_text(before), *a = audit_text(after);
    int rc = ops_run(db, err,
                     "INSERT INTO audit_log (actor, tenant_id, action, object_type, object_id,"
                     " before, after) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                     "tottott", ops_actor_name, tenant_id, action, object_type, object_id, b, a);
    free(b);
    free(a);
    return rc;
}

int ops_audit(struct sdb *db, struct ops_error *err, const char *action, const char *object_type,
              struct json_object *before, struct json_object *after)
{
    struct json_object *src = after ? after : before;
    struct ops_i64 id = {0, 0}, tid = {0, 0};
    id.v = audit_member(src, "id", &id.set);
    /* A tenant record is its own tenant. */
    if (strcmp(object_type, "tenant") == 0)
        tid = id;
    else
        tid.v = audit_member(src, "tenant_id", &tid.set);
    return audit_write(db, err, action, object_type, id, tid, before, after);
}

int ops_audit_event(struct sdb *db, const char *action, const char *object_type, int64_t object_id,
                    int64_t tenant_id, struct json_object *after, struct ops_error *err)
{
    struct ops_i64 id = {object_id != 0, object_id}, tid = {tenant_id != 0, tenant_id};
    return audit_write(db, err, action, object_type, id, tid, NULL, after);
}

/* ---- listing ------------------------------------------------------------------ */

static struct json_object *audit_json_col(struct sdb_stmt *st, int col)
{
    const char *s = (const char *)sdb_column_text(st, col);
    return s ? json_tokener_parse(s) : NULL;
}

/* Issue 16: "key ci-bot (#4)": the object's current name (column 9), else the name the
 * record itself holds (the object is gone), else "key #4". Names: the member naming the
 * object in its record (a replica's URL, a route's model, a setting's key). */
static void audit_label(struct json_object *o, struct sdb_stmt *st)
{
    static const char *const name_members[] = {"name", "url", "model", "setting", NULL};
    const char *type = (const char *)sdb_column_text(st, 5);
    const char *name = (const char *)sdb_column_text(st, 9);
    int has_id = sdb_column_type(st, 6) != SDB_NULL;
    long long id = (long long)sdb_column_int64(st, 6);
    struct json_object *rec[2] = {json_object_object_get(o, "after"), json_object_object_get(o, "before")}, *v;
    for (int r = 0; r < 2 && (!name || !*name); r++)
        for (const char *const *m = name_members; rec[r] && *m && (!name || !*name); m++)
            if (json_object_object_get_ex(rec[r], *m, &v) && json_object_is_type(v, json_type_string))
                name = json_object_get_string(v);
    char label[512];
    if (name && *name && has_id)
        snprintf(label, sizeof label, "%s %s (#%lld)", type ? type : "object", name, id);
    else if (name && *name)
        snprintf(label, sizeof label, "%s %s", type ? type : "object", name);
    else if (has_id)
        snprintf(label, sizeof label, "%s #%lld", type ? type : "object", id);
    else
        snprintf(label, sizeof label, "%s", type ? type : "object");
    ops_json_str(o, "target_label", label);
}

static struct json_object *audit_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_int(o, "ts", st, 1);
    ops_json_text(o, "actor", st, 2);
    ops_json_int(o, "tenant_id", st, 3);
    ops_json_text(o, "action", st, 4);
    ops_json_text(o, "object_type", st, 5);
    ops_json_int(o, "object_id", st, 6);
    json_object_object_add(o, "before", audit_json_col(st, 7));
    json_object_object_add(o, "after", audit_json_col(st, 8));
    audit_label(o, st);
    return o;
}

struct json_object *ops_audit_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid;
    if (ops_list_ids(db, l, &tid, NULL, NULL, err) != 0)
        return NULL;
    const char *type = l ? l->object_type : NULL;
    if (type && ops_check_name("object_type", type, err) != 0)
        return NULL;
    return ops_query_page(db, err, "audit", audit_row, l,
                          "SELECT a.id, a.ts, a.actor, a.tenant_id, a.action, a.object_type, a.object_id,"
                          " a.before, a.after, CASE a.object_type"
                          " WHEN 'key' THEN (SELECT name FROM api_keys WHERE id = a.object_id)"
                          " WHEN 'endpoint' THEN (SELECT name FROM endpoints WHERE id = a.object_id)"
                          " WHEN 'user' THEN (SELECT name FROM users WHERE id = a.object_id)"
                          " WHEN 'tenant' THEN (SELECT name FROM tenants WHERE id = a.object_id)"
                          " WHEN 'replica' THEN (SELECT url FROM replicas WHERE id = a.object_id)"
                          " WHEN 'node' THEN (SELECT name FROM nodes WHERE id = a.object_id)"
                          " WHEN 'content_rule' THEN (SELECT name FROM content_rules WHERE id = a.object_id)"
                          " END FROM audit_log a"
                          " WHERE (?1 IS NULL OR a.tenant_id = ?1) AND (?2 IS NULL OR a.object_type = ?2)"
                          " ORDER BY a.id DESC", "ot", tid, type);
}

/* ---- alerts ---------------------------------------------------------------------- */

#define ALERT_SELECT \
    "SELECT id, type, severity, status, tenant_id, endpoint_id, replica_id, message," \
    " created_at, resolved_at FROM alerts"

static struct json_object *alert_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "type", st, 1);
    ops_json_text(o, "severity", st, 2);
    ops_json_text(o, "status", st, 3);
    ops_json_int(o, "tenant_id", st, 4);
    ops_json_int(o, "endpoint_id", st, 5);
    ops_json_int(o, "replica_id", st, 6);
    ops_json_text(o, "message", st, 7);
    ops_json_int(o, "created_at", st, 8);
    ops_json_int(o, "resolved_at", st, 9);
    return o;
}

struct json_object *ops_alert_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    static const char *const statuses[] = {"ACTIVE", "RECOVERED", NULL};
    struct ops_i64 tid;
    if (ops_list_ids(db, l, &tid, NULL, NULL, err) != 0)
        return NULL;
    const char *status = l ? l->status : NULL;
    if (status && ops_check_enum("status", status, statuses, err) != 0)
        return NULL;
    return ops_query_page(db, err, "alerts", alert_row, l,
                          ALERT_SELECT " WHERE (?1 IS NULL OR tenant_id = ?1)"
                          " AND (?2 IS NULL OR status = ?2) ORDER BY id DESC", "ot", tid, status);
}

struct json_object *ops_alert_get(struct sdb *db, int64_t id, struct ops_error *err)
{
    return ops_query_one(db, err, alert_row, "alert", ALERT_SELECT " WHERE id = ?1", "i", id);
}

struct json_object *ops_alert_resolve(struct sdb *db, int64_t id, struct ops_error *err)
{
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *before = ops_alert_get(db, id, err), *res = NULL;
    if (!before)
        goto out;
    if (ops_run(db, err, "UPDATE alerts SET status = 'RECOVERED',"
                " resolved_at = CAST(strftime('%s','now') AS INTEGER)"
                " WHERE id = ?1 AND status = 'ACTIVE'", "i", id) != 0)
        goto out;
    res = ops_alert_get(db, id, err);
    if (res && ops_audit(db, err, "resolve", "alert", before, res) != 0) {
        json_object_put(res);
        res = NULL;
    }
out:
    json_object_put(before);
    return ops_finish(db, res, err);
}

struct json_object *ops_audited(struct sdb *db, struct ops_error *err, const char *action, const char *object_type,
                                struct json_object *before, struct json_object *res)
{
    if (res && ops_audit(db, err, action, object_type, before, res) != 0) {
        json_object_put(res);
        return NULL;
    }
    return res;
}

struct json_object *ops_deleted(struct sdb *db, struct ops_error *err, const char *table, const char *object_type,
                                struct json_object *res)
{
    struct json_object *id;
    char sql[96];
    if (!res || !json_object_object_get_ex(res, "id", &id))
        return res;
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE id = ?1", table);    /* a constant of the caller */
    if (ops_run(db, err, sql, "i", (int64_t)json_object_get_int64(id)) != 0 ||
        ops_audit(db, err, "delete", object_type, res, NULL) != 0) {
        json_object_put(res);
        return NULL;
    }
    return res;
}
