/* ops_tenant.c: tenants and their users (SPEC §0, §2, R-ADM-2). */
#include "ops_internal.h"

#include "arena.h"
#include "util.h"

#include <crypt.h>
#include <stdlib.h>
#include <string.h>

#define PASSWORD_MIN 8
#define PASSWORD_MAX 1024

static const char *const user_roles[] = {"operator", "admin", "member", NULL};

/* ---- tenants --------------------------------------------------------------- */

#define TENANT_SELECT "SELECT id, name, created_at, weight FROM tenants"

static struct json_object *tenant_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "name", st, 1);
    ops_json_int(o, "weight", st, 3);                     /* R-PRIO-2 */
    ops_json_int(o, "created_at", st, 2);
    return o;
}

struct json_object *ops_tenant_add(struct sdb *db, const char *name, struct ops_error *err)
{
    int64_t id;
    if (ops_check_name("name", name, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    int rc = ops_query_i64(db, err, &id, "SELECT id FROM tenants WHERE name = ?1", "t", name);
    if (rc == 1)
        ops_fail(err, OPS_ERR_CONFLICT, "name", "tenant already exists: %s", name);
    if (rc != 0)
        goto out;
    if (ops_run(db, err, "INSERT INTO tenants (name) VALUES (?1)", "t", name) != 0)
        goto out;
    res = ops_tenant_get(db, (int64_t)sdb_last_insert_rowid(db), err);
    if (res && ops_audit(db, err, "create", "tenant", NULL, res) != 0) {
        json_object_put(res);
        res = NULL;
    }
out:
    return ops_finish(db, res, err);
}

struct json_object *ops_tenant_get(struct sdb *db, int64_t id, struct ops_error *err)
{
    struct json_object *res = ops_query_one(db, err, tenant_row, "tenant",
                                            TENANT_SELECT " WHERE id = ?1", "i", id);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "tenant not found: %lld", (long long)id);
    return res;
}

/* R-PRIO-2: a tenant's weight is its share of a contended queue (deficit round robin). */
struct json_object *ops_tenant_set(struct sdb *db, const char *name, struct ops_i64 weight,
                                   struct ops_error *err)
{
    int64_t id;
    if (ops_check_range("weight", weight, 1, 1000, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *before = NULL, *res = NULL;
    if (ops_tenant_id(db, name, &id, err) == 0 && (before = ops_tenant_get(db, id, err)) &&
        ops_run(db, err, "UPDATE tenants SET weight = COALESCE(?1, weight) WHERE id = ?2", "oi", weight, id) == 0)
        res = ops_audited(db, err, "update", "tenant", before, ops_tenant_get(db, id, err));
    json_object_put(before);
    return ops_finish(db, res, err);
}

struct json_object *ops_tenant_rm(struct sdb *db, const char *name, struct ops_error *err)
{
    int64_t id, owned = 0;
    if (ops_check_name("name", name, err) != 0)
        return NULL;
    if (strcmp(name, "default") == 0) {
        ops_fail(err, OPS_ERR_INVALID, "name", "tenant default cannot be removed");
        return NULL;
    }
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (ops_tenant_id(db, name, &id, err) != 0 ||
        ops_query_i64(db, err, &owned,
                      "SELECT (SELECT COUNT(*) FROM users WHERE tenant_id = ?1)"
                      " + (SELECT COUNT(*) FROM endpoints WHERE tenant_id = ?1)"
                      " + (SELECT COUNT(*) FROM routes WHERE tenant_id = ?1)"
                      " + (SELECT COUNT(*) FROM api_keys WHERE tenant_id = ?1)", "i", id) != 1)
        goto out;
    if (owned > 0) {
        ops_fail(err, OPS_ERR_CONFLICT, "name",
                 "tenant %s still owns users, endpoints, routes or keys; remove them first", name);
        goto out;
    }
    res = ops_tenant_get(db, id, err);
    if (res && (ops_run(db, err, "DELETE FROM tenants WHERE id = ?1", "i", id) != 0 ||
                ops_audit(db, err, "delete", "tenant", res, NULL) != 0)) {
        json_object_put(res);
        res = NULL;
    }
    if (res)
        json_object_object_add(res, "deleted", json_object_new_boolean(1));
out:
    return ops_finish(db, res, err);
}

struct json_object *ops_tenant_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid;
    if (ops_list_ids(db, l, &tid, NULL, NULL, err) != 0)
        return NULL;
    return ops_query_page(db, err, "tenants", tenant_row, l,
                          TENANT_SELECT " WHERE ?1 IS NULL OR id = ?1 ORDER BY id", "o", tid);
}

/* ---- passwords (R-ADM-2: a slow hash, yescrypt via crypt(3)) ------------------ */

/* A new heap string holding the hash, or NULL with err set. */
static char *password_hash(const char *password, struct ops_error *err)
{
    size_t n = strlen(password);
    if (n < PASSWORD_MIN || n > PASSWORD_MAX) {
        ops_fail(err, OPS_ERR_INVALID, "password", "password must be %d to %d bytes long",
                 PASSWORD_MIN, PASSWORD_MAX);
        return NULL;
    }
    if (strchr(password, '\n') || strchr(password, '\r')) {
        ops_fail(err, OPS_ERR_INVALID, "password", "password must not contain line breaks");
        return NULL;
    }
    char *hash = NULL;
    char *salt = crypt_gensalt_ra("$y$", 0, NULL, 0);
    struct crypt_data *cd = xcalloc(1, sizeof *cd);
    const char *h = salt ? crypt_r(password, salt, cd) : NULL;
    if (!h || h[0] == '*')
        ops_fail(err, OPS_ERR_INTERNAL, "password", "cannot hash the password");
    else
        hash = xstrdup(h);
    explicit_bzero(cd, sizeof *cd);
    free(cd);
    free(salt);
    return hash;
}

int ops_password_verify(const char *password, const char *hash)
{
    if (!password || !hash || !*hash)
        return 0;
    struct crypt_data *cd = xcalloc(1, sizeof *cd);
    const char *h = crypt_r(password, hash, cd);
    size_t n = strlen(hash);
    int ok = h && h[0] != '*' && strlen(h) == n && ct_equal(h, hash, n);
    explicit_bzero(cd, sizeof *cd);
    free(cd);
    return ok;
}

/* ---- users ----------------------------------------------------------------- */

/* Never password_hash (R-SEC-1). A user without a key_ceilings row has none (0s). */
#define USER_SELECT \
    "SELECT u.id, u.name, t.name, t.id, u.role, u.password_hash IS NOT NULL, u.created_at," \
    " COALESCE(c.qps_limit, 0), COALESCE(c.concurrency_limit, 0), COALESCE(c.daily_limit, 0)," \
    " COALESCE(c.monthly_quota, 0), COALESCE(c.tpm_limit, 0), COALESCE(c.monthly_token_quota, 0)" \
    " FROM users u JOIN tenants t ON t.id = u.tenant_id" \
    " LEFT JOIN key_ceilings c ON c.user_id = u.id"

static struct json_object *user_row(struct sdb_stmt *st)
{
    static const char *const limits[] = {"qps_limit", "concurrency_limit", "daily_limit",
                                         "monthly_quota", "tpm_limit", "monthly_token_quota"};
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "name", st, 1);
    ops_json_text(o, "tenant", st, 2);
    ops_json_int(o, "tenant_id", st, 3);
    ops_json_text(o, "role", st, 4);
    ops_json_bool(o, "has_password", st, 5);
    struct json_object *c = json_object_new_object();
    for (int i = 0; i < 6; i++)
        ops_json_int(c, limits[i], st, 7 + i);
    json_object_object_add(o, "key_ceiling", c);
    ops_json_int(o, "created_at", st, 6);
    return o;
}

struct json_object *ops_user_get(struct sdb *db, int64_t id, struct ops_error *err)
{
    struct json_object *res = ops_query_one(db, err, user_row, "user",
                                            USER_SELECT " WHERE u.id = ?1", "i", id);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "user not found: %lld", (long long)id);
    return res;
}

/* SPEC §0: the operator role exists only in tenant default. */
static int user_check_role(struct sdb *db, const char *role, int64_t tenant_id,
                           struct ops_error *err)
{
    int64_t def = 0;
    if (ops_check_enum("role", role, user_roles, err) != 0)
        return -1;
    if (strcmp(role, "operator") != 0)
        return 0;
    int rc = ops_query_i64(db, err, &def, "SELECT id FROM tenants WHERE name = 'default'", "");
    if (rc < 0)
        return -1;
    if (rc == 0 || def != tenant_id) {
        ops_fail(err, OPS_ERR_INVALID, "role", "role operator is only allowed in tenant default");
        return -1;
    }
    return 0;
}

/* R-SEC-5, R-SEC-10: stores the key ceiling user id has after a change by this thread's
 * actor: given members (NULL: none) within the actor's own ceiling, the others kept but
 * tightened to it (authz_ceiling_after). A user without a row that keeps no limit gets no row. */
static int user_store_ceiling(struct sdb *db, int64_t id, const struct ops_key_limits *given,
                              struct ops_error *err)
{
    struct authz_limits cur = {{0}, {0}}, want, out;
    struct sdb_stmt *st = ops_prepare(db, err,
        "SELECT qps_limit, concurrency_limit, daily_limit, monthly_quota, tpm_limit,"
        " monthly_token_quota FROM key_ceilings WHERE user_id = ?1", "i", id);
    if (!st)
        return -1;
    int rc = sdb_step(st), had = rc == SDB_ROW;
    for (int i = 0; had && i < AUTHZ_NLIMITS; i++)
        cur.v[i] = sdb_column_int64(st, i);
    sdb_finalize(st);
    if (rc != SDB_ROW && rc != SDB_DONE) {
        ops_fail_db(err, db);
        return -1;
    }
    if (given)
        ops_limits_authz(given, &want);
    const struct authz_limits *bound = ops_actor_bound();
    int over = authz_ceiling_after(&cur, given ? &want : NULL, bound, &out);
    if (over >= 0) {
        ops_fail(err, OPS_ERR_FORBIDDEN, authz_limit_names[over],
                 "%s above your own key ceiling (%lld; 0 is unlimited)", authz_limit_names[over],
                 (long long)bound->v[over]);
        return -1;
    }
    int limited = 0;
    for (int i = 0; i < AUTHZ_NLIMITS; i++)
        limited |= out.v[i] != 0;
    if (!had && !limited)
        return 0;
    return ops_run(db, err,
                   "INSERT INTO key_ceilings (user_id, qps_limit, concurrency_limit, daily_limit,"
                   " monthly_quota, tpm_limit, monthly_token_quota) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                   " ON CONFLICT (user_id) DO UPDATE SET qps_limit = excluded.qps_limit,"
                   " concurrency_limit = excluded.concurrency_limit, daily_limit = excluded.daily_limit,"
                   " monthly_quota = excluded.monthly_quota, tpm_limit = excluded.tpm_limit,"
                   " monthly_token_quota = excluded.monthly_token_quota",
                   "iiiiiii", id, out.v[0], out.v[1], out.v[2], out.v[3], out.v[4], out.v[5]);
}

struct json_object *ops_user_add(struct sdb *db, const char *name, const char *tenant,
                                 const char *role, const char *password,
                                 const struct ops_key_limits *ceiling, struct ops_error *err)
{
    int64_t tenant_id, id;
    char *hash = NULL;
    struct json_object *res = NULL;
    if (ops_actor_check(err) != 0 || ops_check_name("name", name, err) != 0 ||
        ops_check_enum("role", role, user_roles, err) != 0 ||
        (ceiling && ops_key_check_limits(ceiling, err) != 0))
        return NULL;
    if (password && !(hash = password_hash(password, err)))
        return NULL;
    if (ops_begin(db, err) != 0)
        goto out_free;
    if (ops_tenant_id(db, tenant, &tenant_id, err) != 0 ||
        user_check_role(db, role, tenant_id, err) != 0)
        goto out;
    int rc = ops_query_i64(db, err, &id, "SELECT id FROM users WHERE name = ?1", "t", name);
    if (rc == 1)
        ops_fail(err, OPS_ERR_CONFLICT, "name", "user already exists: %s", name);
    if (rc != 0)
        goto out;
    if (ops_run(db, err, "INSERT INTO users (tenant_id, name, role, password_hash)"
                " VALUES (?1, ?2, ?3, ?4)", "ittt", tenant_id, name, role, hash) != 0)
        goto out;
    id = (int64_t)sdb_last_insert_rowid(db);
    /* In the same transaction: the user never exists above its creator's ceiling. */
    if (user_store_ceiling(db, id, ceiling, err) != 0)
        goto out;
    res = ops_audited(db, err, "create", "user", NULL, ops_user_get(db, id, err));
out:
    res = ops_finish(db, res, err);
out_free:
    if (hash) {
        explicit_bzero(hash, strlen(hash));
        free(hash);
    }
    return res;
}

struct json_object *ops_user_set(struct sdb *db, const char *name, const char *role,
                                 const char *password, struct ops_error *err)
{
    int64_t id, tenant_id;
    char *hash = NULL;
    struct json_object *res = NULL;
    if (ops_actor_check(err) != 0 || ops_check_name("name", name, err) != 0 ||
        (role && ops_check_enum("role", role, user_roles, err) != 0))
        return NULL;
    if (password && !(hash = password_hash(password, err)))
        return NULL;
    if (ops_begin(db, err) != 0)
        goto out_free;
    struct json_object *before = NULL;
    if (ops_user_ids(db, name, &id, &tenant_id, err) != 0 ||
        (role && user_check_role(db, role, tenant_id, err) != 0) ||
        !(before = ops_user_get(db, id, err)))
        goto out;
    if (ops_run(db, err, "UPDATE users SET role = COALESCE(?1, role),"
                " password_hash = COALESCE(?2, password_hash) WHERE id = ?3",
                "tti", role, hash, id) != 0)
        goto out;
    /* R-SEC-5: a role given by a non-operator brings the user under the giver's ceiling. */
    if (role && ops_actor_bound() && user_store_ceiling(db, id, NULL, err) != 0)
        goto out;
    res = ops_user_get(db, id, err);
    /* That the password changed is recorded, never the password or its hash. */
    if (res && hash)
        json_object_object_add(res, "password_changed", json_object_new_boolean(1));
    res = ops_audited(db, err, "update", "user", before, res);
    if (res)
        json_object_object_del(res, "password_changed");
    /* Sessions of a user whose password or role changed end (R-ADM-2). */
    if (res && (hash || role) &&
        ops_run(db, err, "DELETE FROM sessions WHERE user_id = ?1", "i", id) != 0) {
        json_object_put(res);
        res = NULL;
    }
out:
    json_object_put(before);
    res = ops_finish(db, res, err);
out_free:
    if (hash) {
        explicit_bzero(hash, strlen(hash));
        free(hash);
    }
    return res;
}

struct json_object *ops_user_rm(struct sdb *db, const char *name, struct ops_error *err)
{
    int64_t id, tenant_id;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (ops_user_ids(db, name, &id, &tenant_id, err) != 0)
        goto out;
    res = ops_user_get(db, id, err);
    /* The user's member keys go with it (ON DELETE CASCADE). */
    if (res && (ops_run(db, err, "DELETE FROM users WHERE id = ?1", "i", id) != 0 ||
                ops_audit(db, err, "delete", "user", res, NULL) != 0)) {
        json_object_put(res);
        res = NULL;
    }
    if (res)
        json_object_object_add(res, "deleted", json_object_new_boolean(1));
out:
    return ops_finish(db, res, err);
}

struct json_object *ops_user_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid, uid;
    if (ops_list_ids(db, l, &tid, &uid, NULL, err) != 0)
        return NULL;
    return ops_query_page(db, err, "users", user_row, l,
                          USER_SELECT " WHERE (?1 IS NULL OR u.tenant_id = ?1)"
                          " AND (?2 IS NULL OR u.id = ?2) ORDER BY u.id", "oo", tid, uid);
}

struct json_object *ops_user_set_ceiling(struct sdb *db, const char *user,
                                         const struct ops_key_limits *l, struct ops_error *err)
{
    int64_t id, tid;
    if (ops_actor_check(err) != 0 || ops_key_check_limits(l, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *before = NULL, *res = NULL;
    if (ops_user_ids(db, user, &id, &tid, err) != 0 || !(before = ops_user_get(db, id, err)))
        goto out;
    /* Unset members keep theirs, tightened to a non-operator's own ceiling (R-SEC-10). */
    if (user_store_ceiling(db, id, l, err) != 0)
        goto out;
    res = ops_audited(db, err, "set_key_ceiling", "user", before, ops_user_get(db, id, err));
out:
    json_object_put(before);
    return ops_finish(db, res, err);
}
