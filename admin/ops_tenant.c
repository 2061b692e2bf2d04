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

#define TENANT_SELECT "SELECT id, name, created_at FROM tenants"

static struct json_object *tenant_row(sqlite3_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "name", st, 1);
    ops_json_int(o, "created_at", st, 2);
    return o;
}

struct json_object *ops_tenant_add(sqlite3 *db, const char *name, struct ops_error *err)
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
    res = ops_query_one(db, err, tenant_row, "tenant", TENANT_SELECT " WHERE id = ?1", "i",
                        (int64_t)sqlite3_last_insert_rowid(db));
out:
    return ops_finish(db, res, err);
}

struct json_object *ops_tenant_rm(sqlite3 *db, const char *name, struct ops_error *err)
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
    res = ops_query_one(db, err, tenant_row, "tenant", TENANT_SELECT " WHERE id = ?1", "i", id);
    if (res && ops_run(db, err, "DELETE FROM tenants WHERE id = ?1", "i", id) != 0) {
        json_object_put(res);
        res = NULL;
    }
    if (res)
        json_object_object_add(res, "deleted", json_object_new_boolean(1));
out:
    return ops_finish(db, res, err);
}

struct json_object *ops_tenant_list(sqlite3 *db, const char *tenant, struct ops_error *err)
{
    struct ops_i64 tid = {0, 0};
    if (tenant) {
        if (ops_tenant_id(db, tenant, &tid.v, err) != 0)
            return NULL;
        tid.set = 1;
    }
    return ops_query_list(db, err, "tenants", tenant_row,
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

#define USER_SELECT \
    "SELECT u.id, u.name, t.name, t.id, u.role, u.password_hash IS NOT NULL, u.created_at" \
    " FROM users u JOIN tenants t ON t.id = u.tenant_id"

static struct json_object *user_row(sqlite3_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "name", st, 1);
    ops_json_text(o, "tenant", st, 2);
    ops_json_int(o, "tenant_id", st, 3);
    ops_json_text(o, "role", st, 4);
    ops_json_bool(o, "has_password", st, 5);
    ops_json_int(o, "created_at", st, 6);
    return o;
}

/* SPEC §0: the operator role exists only in tenant default. */
static int user_check_role(sqlite3 *db, const char *role, int64_t tenant_id,
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

struct json_object *ops_user_add(sqlite3 *db, const char *name, const char *tenant,
                                 const char *role, const char *password, struct ops_error *err)
{
    int64_t tenant_id, id;
    char *hash = NULL;
    struct json_object *res = NULL;
    if (ops_check_name("name", name, err) != 0 ||
        ops_check_enum("role", role, user_roles, err) != 0)
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
    res = ops_query_one(db, err, user_row, "user", USER_SELECT " WHERE u.id = ?1", "i",
                        (int64_t)sqlite3_last_insert_rowid(db));
out:
    res = ops_finish(db, res, err);
out_free:
    if (hash) {
        explicit_bzero(hash, strlen(hash));
        free(hash);
    }
    return res;
}

struct json_object *ops_user_set(sqlite3 *db, const char *name, const char *role,
                                 const char *password, struct ops_error *err)
{
    int64_t id, tenant_id;
    char *hash = NULL;
    struct json_object *res = NULL;
    if (ops_check_name("name", name, err) != 0 ||
        (role && ops_check_enum("role", role, user_roles, err) != 0))
        return NULL;
    if (password && !(hash = password_hash(password, err)))
        return NULL;
    if (ops_begin(db, err) != 0)
        goto out_free;
    if (ops_user_ids(db, name, &id, &tenant_id, err) != 0 ||
        (role && user_check_role(db, role, tenant_id, err) != 0))
        goto out;
    if (ops_run(db, err, "UPDATE users SET role = COALESCE(?1, role),"
                " password_hash = COALESCE(?2, password_hash) WHERE id = ?3",
                "tti", role, hash, id) != 0)
        goto out;
    res = ops_query_one(db, err, user_row, "user", USER_SELECT " WHERE u.id = ?1", "i", id);
out:
    res = ops_finish(db, res, err);
out_free:
    if (hash) {
        explicit_bzero(hash, strlen(hash));
        free(hash);
    }
    return res;
}

struct json_object *ops_user_rm(sqlite3 *db, const char *name, struct ops_error *err)
{
    int64_t id, tenant_id;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (ops_user_ids(db, name, &id, &tenant_id, err) != 0)
        goto out;
    res = ops_query_one(db, err, user_row, "user", USER_SELECT " WHERE u.id = ?1", "i", id);
    /* The user's member keys go with it (ON DELETE CASCADE). */
    if (res && ops_run(db, err, "DELETE FROM users WHERE id = ?1", "i", id) != 0) {
        json_object_put(res);
        res = NULL;
    }
    if (res)
        json_object_object_add(res, "deleted", json_object_new_boolean(1));
out:
    return ops_finish(db, res, err);
}

struct json_object *ops_user_list(sqlite3 *db, const char *tenant, struct ops_error *err)
{
    struct ops_i64 tid = {0, 0};
    if (tenant) {
        if (ops_tenant_id(db, tenant, &tid.v, err) != 0)
            return NULL;
        tid.set = 1;
    }
    return ops_query_list(db, err, "users", user_row,
                          USER_SELECT " WHERE ?1 IS NULL OR u.tenant_id = ?1 ORDER BY u.id",
                          "o", tid);
}
