/* ops_key.c: member keys sk-tenant-..., their limits and revocation (SPEC §0, R-KEY-1, R-SEC-1). */
#include "ops_internal.h"

#include "authz.h"
#include "util.h"

#include <string.h>

#define MEMBER_KEY_PREFIX "sk-tenant-"
#define MEMBER_KEY_RANDOM 40
#define KEY_PREFIX_LEN 12
#define KEY_LIMIT_MAX 1000000000000LL   /* 10^12: any real limit fits; 0 = unlimited */

/* Never key_hash (R-SEC-1). */
#define KEY_SELECT \
    "SELECT k.id, k.prefix, k.name, u.name, u.id, t.name, t.id, k.revoked_at IS NOT NULL," \
    " k.revoked_at, k.qps_limit, k.concurrency_limit, k.daily_limit, k.monthly_quota," \
    " k.tpm_limit, k.monthly_token_quota, k.created_at, k.priority, k.max_priority, k.require_labels FROM api_keys k" \
    " JOIN users u ON u.id = k.user_id JOIN tenants t ON t.id = k.tenant_id"

static struct json_object *key_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "prefix", st, 1);
    ops_json_text(o, "name", st, 2);
    ops_json_text(o, "user", st, 3);
    ops_json_int(o, "user_id", st, 4);
    ops_json_text(o, "tenant", st, 5);
    ops_json_int(o, "tenant_id", st, 6);
    ops_json_bool(o, "revoked", st, 7);
    ops_json_int(o, "revoked_at", st, 8);
    ops_json_int(o, "qps_limit", st, 9);
    ops_json_int(o, "concurrency_limit", st, 10);
    ops_json_int(o, "daily_limit", st, 11);
    ops_json_int(o, "monthly_quota", st, 12);
    ops_json_int(o, "tpm_limit", st, 13);
    ops_json_int(o, "monthly_token_quota", st, 14);
    ops_json_int(o, "priority", st, 16);                  /* R-PRIO-2: 0 the highest */
    ops_json_int(o, "max_priority", st, 17);              /* null: no higher than priority */
    ops_json_text(o, "require_labels", st, 18);           /* R-SEM-1 */
    ops_json_int(o, "created_at", st, 15);
    return o;
}

struct json_object *ops_key_get(struct sdb *db, int64_t id, struct ops_error *err)
{
    struct json_object *res = ops_query_one(db, err, key_row, "key", KEY_SELECT " WHERE k.id = ?1",
                                            "i", id);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "key not found: %lld", (long long)id);
    return res;
}

int ops_key_check_limits(const struct ops_key_limits *l, struct ops_error *err)
{
    if (ops_check_range("qps_limit", l->qps_limit, 0, KEY_LIMIT_MAX, err) != 0 ||
        ops_check_range("concurrency_limit", l->concurrency_limit, 0, KEY_LIMIT_MAX, err) != 0 ||
        ops_check_range("daily_limit", l->daily_limit, 0, KEY_LIMIT_MAX, err) != 0 ||
        ops_check_range("monthly_quota", l->monthly_quota, 0, KEY_LIMIT_MAX, err) != 0 ||
        ops_check_range("tpm_limit", l->tpm_limit, 0, KEY_LIMIT_MAX, err) != 0 ||
        ops_check_range("monthly_token_quota", l->monthly_token_quota, 0, KEY_LIMIT_MAX, err) != 0)
        return -1;
    return 0;
}

static int key_check(const char *name, const struct ops_key_limits *l, const struct ops_key_priority *p,
                     struct ops_error *err)
{
    if (name && *name && ops_check_name("name", name, err) != 0)
        return -1;
    /* R-PRIO-2: 0 is the highest; a negative max_priority clears it. */
    if (p && (ops_check_range("priority", p->priority, 0, 9, err) != 0 ||
              (p->max_priority.set && p->max_priority.v >= 0 &&
               ops_check_range("max_priority", p->max_priority, 0, 9, err) != 0)))
        return -1;
    return ops_key_check_limits(l, err);
}

/* Given priorities only; max_priority < 0 clears it. */
static int key_update_priority(struct sdb *db, int64_t id, const struct ops_key_priority *p,
                               struct ops_error *err)
{
    if (!p)
        return 0;
    return ops_run(db, err,
                   "UPDATE api_keys SET priority = COALESCE(?1, priority),"
                   " max_priority = CASE WHEN ?2 IS NULL THEN max_priority WHEN ?2 < 0 THEN NULL"
                   "   ELSE ?2 END WHERE id = ?3",
                   "ooi", p->priority, p->max_priority, id);
}

/* R-SEC-5, for everybody: a key never allows more than its owner's key ceiling.
 * The key's limits after the change are checked: given ones, else the current
 * (key_id > 0) or unlimited (a new key). */
static int key_check_ceiling(struct sdb *db, int64_t user_id, int64_t key_id,
                             const struct ops_key_limits *l, struct ops_error *err)
{
    const struct ops_i64 *want[AUTHZ_NLIMITS] = {&l->qps_limit, &l->concurrency_limit,
        &l->daily_limit, &l->monthly_quota, &l->tpm_limit, &l->monthly_token_quota};
    struct authz_limits after = {{0}, {0}}, ceil = {{0}, {0}};
    struct sdb_stmt *st = ops_prepare(db, err,
        "SELECT c.qps_limit, c.concurrency_limit, c.daily_limit, c.monthly_quota, c.tpm_limit,"
        " c.monthly_token_quota, k.qps_limit, k.concurrency_limit, k.daily_limit, k.monthly_quota,"
        " k.tpm_limit, k.monthly_token_quota FROM users u"
        " LEFT JOIN key_ceilings c ON c.user_id = u.id LEFT JOIN api_keys k ON k.id = ?2"
        " WHERE u.id = ?1", "ii", user_id, key_id);
    if (!st)
        return -1;
    int rc = sdb_step(st);
    for (int i = 0; rc == SDB_ROW && i < AUTHZ_NLIMITS; i++) {
        ceil.v[i] = sdb_column_int64(st, i);
        after.v[i] = want[i]->set ? want[i]->v : sdb_column_int64(st, AUTHZ_NLIMITS + i);
    }
    sdb_finalize(st);
    if (rc != SDB_ROW) {
        ops_fail_db(err, db);
        return -1;
    }
    int over = authz_limits_over(&after, &ceil, 0);
    if (over < 0)
        return 0;
    ops_fail(err, OPS_ERR_INVALID, authz_limit_names[over],
             "%s is above the owner's key ceiling (%lld; 0 is unlimited)",
             authz_limit_names[over], (long long)ceil.v[over]);
    return -1;
}

/* name: NULL keeps it, "" clears it; unset limits are kept. */
static int key_update(struct sdb *db, int64_t id, const char *name, const struct ops_key_limits *l,
                      struct ops_error *err)
{
    return ops_run(db, err,
                   "UPDATE api_keys SET name = CASE WHEN ?1 IS NULL THEN name"
                   "   WHEN ?1 = '' THEN NULL ELSE ?1 END,"
                   " qps_limit = COALESCE(?2, qps_limit),"
                   " concurrency_limit = COALESCE(?3, concurrency_limit),"
                   " daily_limit = COALESCE(?4, daily_limit),"
                   " monthly_quota = COALESCE(?5, monthly_quota),"
                   " tpm_limit = COALESCE(?6, tpm_limit),"
                   " monthly_token_quota = COALESCE(?7, monthly_token_quota) WHERE id = ?8",
                   "tooooooi", name, l->qps_limit, l->concurrency_limit, l->daily_limit,
                   l->monthly_quota, l->tpm_limit, l->monthly_token_quota, id);
}

struct json_object *ops_key_add(struct sdb *db, const char *user, const char *name,
                                const struct ops_key_limits *lim, const struct ops_key_priority *prio,
                                struct ops_error *err)
{
    int64_t uid, tid;
    char key[sizeof MEMBER_KEY_PREFIX + MEMBER_KEY_RANDOM], hash[65], prefix[KEY_PREFIX_LEN + 1];
    if (ops_actor_check(err) != 0 || key_check(name, lim, prio, err) != 0)
        return NULL;
    /* R-SEC-5: a non-operator's new key is within its own ceiling too (unset = unlimited). */
    const struct authz_limits *bound = ops_actor_bound();
    struct authz_limits want;
    ops_limits_authz(lim, &want);
    int over = bound ? authz_limits_over(&want, bound, 0) : -1;
    if (over >= 0) {
        ops_fail(err, OPS_ERR_FORBIDDEN, authz_limit_names[over],
                 "%s above your own limits (a key cannot have more than its maker)",
                 authz_limit_names[over]);
        return NULL;
    }
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (ops_user_ids(db, user, &uid, &tid, err) != 0 ||
        key_check_ceiling(db, uid, 0, lim, err) != 0)
        goto out;
    memcpy(key, MEMBER_KEY_PREFIX, sizeof MEMBER_KEY_PREFIX - 1);
    random_token(key + sizeof MEMBER_KEY_PREFIX - 1, MEMBER_KEY_RANDOM);
    sha256_hex(key, strlen(key), hash);
    memcpy(prefix, key, KEY_PREFIX_LEN);
    prefix[KEY_PREFIX_LEN] = '\0';
    if (ops_run(db, err, "INSERT INTO api_keys (user_id, tenant_id, key_hash, prefix)"
                " VALUES (?1, ?2, ?3, ?4)", "iitt", uid, tid, hash, prefix) != 0)
        goto out;
    int64_t id = sdb_last_insert_rowid(db);
    if (key_update(db, id, name, lim, err) != 0 || key_update_priority(db, id, prio, err) != 0 ||
        !(res = ops_audited(db, err, "create", "key", NULL, ops_key_get(db, id, err))))
        goto out;
    /* R-SEC-1: the clear key leaves only here, once (never in the audit record). */
    json_object_object_add(res, "key", json_object_new_string(key));
out:
    explicit_bzero(key, sizeof key);
    return ops_finish(db, res, err);
}

struct json_object *ops_key_set(struct sdb *db, int64_t id, const char *name,
                                const struct ops_key_limits *lim, const struct ops_key_priority *prio,
                                struct ops_error *err)
{
    if (ops_actor_check(err) != 0 || key_check(name, lim, prio, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *before = ops_key_get(db, id, err), *res = NULL;
    if (before && key_check_ceiling(db, json_object_get_int64(json_object_object_get(before, "user_id")),
                                    id, lim, err) == 0 &&
        key_update(db, id, name, lim, err) == 0 && key_update_priority(db, id, prio, err) == 0)
        res = ops_audited(db, err, "update", "key", before, ops_key_get(db, id, err));
    json_object_put(before);
    return ops_finish(db, res, err);
}

/* R-SEM-1: the labels its semantic picks must carry; "" clears them. */
struct json_object *ops_key_labels_set(struct sdb *db, int64_t id, const char *labels, struct ops_error *err)
{
    if (labels && *labels && ops_check_labels("require_labels", labels, err) != 0)
        return NULL;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *before = ops_key_get(db, id, err), *res = NULL;
    if (before && ops_run(db, err, "UPDATE api_keys SET require_labels = CASE WHEN ?1 = '' THEN NULL ELSE ?1 END"
                          " WHERE id = ?2", "ti", labels ? labels : "", id) == 0)
        res = ops_audited(db, err, "update", "key", before, ops_key_get(db, id, err));
    json_object_put(before);
    return ops_finish(db, res, err);
}

/* Revoking twice keeps the first time. Responders stop accepting it within
 * 2 s through config_version (R-AUTH-2, R-CFG-1). */
struct json_object *ops_key_revoke(struct sdb *db, int64_t id, struct ops_error *err)
{
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *before = ops_key_get(db, id, err), *res = NULL;
    if (before && ops_run(db, err, "UPDATE api_keys SET revoked_at ="
                          " COALESCE(revoked_at, CAST(strftime('%s','now') AS INTEGER)) WHERE id = ?1",
                          "i", id) == 0)
        res = ops_audited(db, err, "revoke", "key", before, ops_key_get(db, id, err));
    json_object_put(before);
    return ops_finish(db, res, err);
}

struct json_object *ops_key_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid, uid;
    if (ops_list_ids(db, l, &tid, &uid, NULL, err) != 0)
        return NULL;
    return ops_query_page(db, err, "keys", key_row, l,
                          KEY_SELECT " WHERE (?1 IS NULL OR k.tenant_id = ?1)"
                          " AND (?2 IS NULL OR k.user_id = ?2) ORDER BY k.id",
                          "oo", tid, uid);
}
