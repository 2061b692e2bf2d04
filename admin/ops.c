/* ops.c: shared helpers of the management operations (errors, validation,
 * bound statements, transactions) plus init and settings (SPEC §20). */
#include "ops_internal.h"

#include "db.h"
#include "log.h"
#include "settings.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors -------------------------------------------------------------- */

void ops_error_clear(struct ops_error *err)
{
    err->kind = OPS_ERR_NONE;
    err->param[0] = '\0';
    err->message[0] = '\0';
}

const char *ops_error_type(enum ops_error_kind kind)
{
    /* The data plane's types (fcgi/errors.c), so one client handles both. */
    switch (kind) {
    case OPS_ERR_INVALID:
    case OPS_ERR_NOT_FOUND:
    case OPS_ERR_CONFLICT: return "invalid_request_error";
    case OPS_ERR_FORBIDDEN: return "permission_error";
    case OPS_ERR_NONE:
    case OPS_ERR_INTERNAL: break;
    }
    return "server_error";
}

const char *ops_error_code(enum ops_error_kind kind)
{
    switch (kind) {
    case OPS_ERR_INVALID: return "invalid_value";
    case OPS_ERR_NOT_FOUND: return "not_found";
    case OPS_ERR_CONFLICT: return "conflict";
    case OPS_ERR_FORBIDDEN: return "permission_denied";
    case OPS_ERR_NONE:
    case OPS_ERR_INTERNAL: break;
    }
    return "internal_error";
}

int ops_error_status(enum ops_error_kind kind)
{
    switch (kind) {
    case OPS_ERR_INVALID: return 400;
    case OPS_ERR_NOT_FOUND: return 404;
    case OPS_ERR_CONFLICT: return 409;
    case OPS_ERR_FORBIDDEN: return 403;
    case OPS_ERR_NONE:
    case OPS_ERR_INTERNAL: break;
    }
    return 500;
}

struct json_object *ops_error_json(const struct ops_error *err)
{
    struct json_object *e = json_object_new_object();
    json_object_object_add(e, "message", json_object_new_string(
        err->message[0] ? err->message : "internal error"));
    json_object_object_add(e, "type", json_object_new_string(ops_error_type(err->kind)));
    ops_json_str(e, "param", err->param[0] ? err->param : NULL);
    json_object_object_add(e, "code", json_object_new_string(ops_error_code(err->kind)));
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "error", e);
    return o;
}

void ops_fail(struct ops_error *err, enum ops_error_kind kind, const char *param,
              const char *fmt, ...)
{
    err->kind = kind;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

void ops_fail_db(struct ops_error *err, struct sdb *db)
{
    int code = sdb_extended_errcode(db);
    if (code == SDB_CONSTRAINT_UNIQUE || code == SDB_CONSTRAINT_PRIMARYKEY)
        ops_fail(err, OPS_ERR_CONFLICT, NULL, "already exists (%s)", sdb_errmsg(db));
    else if (code == SDB_CONSTRAINT_CHECK)
        ops_fail(err, OPS_ERR_INVALID, NULL, "value out of range (%s)", sdb_errmsg(db));
    else
        ops_fail(err, OPS_ERR_INTERNAL, NULL, "database error: %s", sdb_errmsg(db));
}

/* ---- validation ------------------------------------------------------------ */

/* Length of the UTF-8 sequence at s (at most n bytes), 0 if malformed. */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t len;
    uint32_t c = s[0], min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xe0) == 0xc0) {
        len = 2, c &= 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, c &= 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4, c &= 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

int ops_check_text(const char *param, const char *s, size_t max, struct ops_error *err)
{
    if (!s || !*s) {
        ops_fail(err, OPS_ERR_INVALID, param, "%s must not be empty", param);
        return -1;
    }
    size_t n = strlen(s);
    if (n > max) {
        ops_fail(err, OPS_ERR_INVALID, param, "%s is longer than %zu bytes", param, max);
        return -1;
    }
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = utf8_seq(p + i, n - i, &cp);
        if (len == 0) {
            ops_fail(err, OPS_ERR_INVALID, param, "%s is not valid UTF-8", param);
            return -1;
        }
        if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
            ops_fail(err, OPS_ERR_INVALID, param, "%s must not contain control characters",
                     param);
            return -1;
        }
        i += len;
    }
    return 0;
}

int ops_check_name(const char *param, const char *s, struct ops_error *err)
{
    return ops_check_text(param, s, OPS_NAME_MAX, err);
}

int ops_check_enum(const char *param, const char *s, const char *const *allowed,
                   struct ops_error *err)
{
    char list[256] = "";
    size_t used = 0;
    for (const char *const *a = allowed; *a; a++) {
        if (s && strcmp(s, *a) == 0)
            return 0;
        int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", *a);
        if (w > 0 && (size_t)w < sizeof list - used)
            used += (size_t)w;
    }
    ops_fail(err, OPS_ERR_INVALID, param, "%s must be one of: %s", param, list);
    return -1;
}

int ops_check_range(const char *param, struct ops_i64 v, int64_t min, int64_t max,
                    struct ops_error *err)
{
    if (!v.set || (v.v >= min && v.v <= max))
        return 0;
    ops_fail(err, OPS_ERR_INVALID, param, "%s must be between %lld and %lld", param,
             (long long)min, (long long)max);
    return -1;
}

/* ---- statements ------------------------------------------------------------ */

static struct sdb_stmt *ops_prepare_v(struct sdb *db, struct ops_error *err, const char *sql,
                                   const char *types, va_list ap)
{
    struct sdb_stmt *st = NULL;
    if (sdb_prepare(db, sql, &st) != SDB_OK) {
        ops_fail_db(err, db);
        return NULL;
    }
    for (int i = 0; types[i]; i++) {
        int rc = SDB_OK;
        if (types[i] == 't') {
            const char *s = va_arg(ap, const char *);
            rc = s ? sdb_bind_text(st, i + 1, s, -1, SDB_TRANSIENT)
                   : sdb_bind_null(st, i + 1);
        } else if (types[i] == 'i') {
            rc = sdb_bind_int64(st, i + 1, va_arg(ap, int64_t));
        } else if (types[i] == 'o') {
            struct ops_i64 v = va_arg(ap, struct ops_i64);
            rc = v.set ? sdb_bind_int64(st, i + 1, v.v) : sdb_bind_null(st, i + 1);
        }
        if (rc != SDB_OK) {
            ops_fail_db(err, db);
            sdb_finalize(st);
            return NULL;
        }
    }
    return st;
}

struct sdb_stmt *ops_prepare(struct sdb *db, struct ops_error *err, const char *sql,
                          const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    struct sdb_stmt *st = ops_prepare_v(db, err, sql, types, ap);
    va_end(ap);
    return st;
}

int ops_run(struct sdb *db, struct ops_error *err, const char *sql, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    struct sdb_stmt *st = ops_prepare_v(db, err, sql, types, ap);
    va_end(ap);
    if (!st)
        return -1;
    int rc;
    while ((rc = sdb_step(st)) == SDB_ROW)
        ;
    if (rc != SDB_DONE)
        ops_fail_db(err, db);
    sdb_finalize(st);
    return rc == SDB_DONE ? 0 : -1;
}

int ops_query_i64(struct sdb *db, struct ops_error *err, int64_t *out, const char *sql,
                  const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    struct sdb_stmt *st = ops_prepare_v(db, err, sql, types, ap);
    va_end(ap);
    if (!st)
        return -1;
    int ret = -1, rc = sdb_step(st);
    if (rc == SDB_ROW) {
        *out = sdb_column_int64(st, 0);
        ret = 1;
    } else if (rc == SDB_DONE) {
        ret = 0;
    } else {
        ops_fail_db(err, db);
    }
    sdb_finalize(st);
    return ret;
}

struct json_object *ops_query_one(struct sdb *db, struct ops_error *err, ops_row_fn row,
                                  const char *what, const char *sql, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    struct sdb_stmt *st = ops_prepare_v(db, err, sql, types, ap);
    va_end(ap);
    if (!st)
        return NULL;
    struct json_object *res = NULL;
    int rc = sdb_step(st);
    if (rc == SDB_ROW)
        res = row(st);
    else if (rc == SDB_DONE)
        ops_fail(err, OPS_ERR_NOT_FOUND, NULL, "%s not found", what);
    else
        ops_fail_db(err, db);
    sdb_finalize(st);
    return res;
}

struct json_object *ops_query_list(struct sdb *db, struct ops_error *err, const char *field,
                                   ops_row_fn row, const char *sql, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    struct sdb_stmt *st = ops_prepare_v(db, err, sql, types, ap);
    va_end(ap);
    if (!st)
        return NULL;
    struct json_object *arr = json_object_new_array();
    int rc;
    while ((rc = sdb_step(st)) == SDB_ROW)
        json_object_array_add(arr, row(st));
    if (rc != SDB_DONE)
        ops_fail_db(err, db);
    sdb_finalize(st);
    if (rc != SDB_DONE) {
        json_object_put(arr);
        return NULL;
    }
    struct json_object *res = json_object_new_object();
    json_object_object_add(res, field, arr);
    return res;
}

struct json_object *ops_query_page(struct sdb *db, struct ops_error *err, const char *field,
                                   ops_row_fn row, const struct ops_list *l, const char *sql,
                                   const char *types, ...)
{
    char count_sql[4096], page_sql[4096], page_types[32];
    size_t nt = strlen(types);
    int64_t total = 0, limit = l ? l->limit : 0, offset = l ? l->offset : 0;
    if (limit < 0 || limit > OPS_LIST_LIMIT_MAX || offset < 0) {
        ops_fail(err, OPS_ERR_INVALID, limit < 0 || limit > OPS_LIST_LIMIT_MAX ? "limit" : "offset",
                 "limit must be 1 to %d and offset at least 0", OPS_LIST_LIMIT_MAX);
        return NULL;
    }
    /* Only our own SQL constants are composed here; every input stays bound. */
    if (nt + 3 > sizeof page_types ||
        snprintf(count_sql, sizeof count_sql, "SELECT COUNT(*) FROM (%s) AS page", sql) >= (int)sizeof count_sql ||
        snprintf(page_sql, sizeof page_sql, "%s LIMIT ?%zu OFFSET ?%zu", sql, nt + 1, nt + 2) >=
            (int)sizeof page_sql) {
        ops_fail(err, OPS_ERR_INTERNAL, NULL, "listing query too long");
        return NULL;
    }
    snprintf(page_types, sizeof page_types, "%sii", types);
    va_list ap, ap2;
    va_start(ap, types);
    va_copy(ap2, ap);
    struct sdb_stmt *cst = ops_prepare_v(db, err, count_sql, types, ap);
    va_end(ap);
    struct sdb_stmt *st = NULL;
    if (cst) {
        st = ops_prepare_v(db, err, page_sql, types, ap2);
        /* no limit: the largest, since PostgreSQL takes no -1 */
        if (st && (sdb_bind_int64(st, (int)nt + 1, limit > 0 ? limit : INT64_MAX) != SDB_OK ||
                   sdb_bind_int64(st, (int)nt + 2, offset) != SDB_OK)) {
            ops_fail_db(err, db);
            sdb_finalize(st);
            st = NULL;
        }
    }
    va_end(ap2);
    struct json_object *res = NULL, *arr = NULL;
    int rc;
    if (!cst || !st)
        goto out;
    rc = sdb_step(cst);
    if (rc != SDB_ROW) {
        ops_fail_db(err, db);
        goto out;
    }
    total = sdb_column_int64(cst, 0);
    arr = json_object_new_array();
    while ((rc = sdb_step(st)) == SDB_ROW)
        json_object_array_add(arr, row(st));
    if (rc != SDB_DONE) {
        ops_fail_db(err, db);
        json_object_put(arr);
        goto out;
    }
    res = json_object_new_object();
    json_object_object_add(res, field, arr);
    json_object_object_add(res, "total", json_object_new_int64(total));
    json_object_object_add(res, "limit", json_object_new_int64(limit));
    json_object_object_add(res, "offset", json_object_new_int64(offset));
out:
    sdb_finalize(cst);
    sdb_finalize(st);
    return res;
}

/* One kind of filter: by name (resolved) or by id. */
static int ops_list_id(struct sdb *db, const char *what, const char *name, struct ops_i64 id,
                       struct ops_i64 *out, struct ops_error *err)
{
    if (!out)
        return 0;
    *out = id;
    if (!name)
        return 0;
    if (id.set) {
        ops_fail(err, OPS_ERR_INVALID, what, "give %s or %s_id, not both", what, what);
        return -1;
    }
    int64_t tid;
    int rc = strcmp(what, "tenant") == 0 ? ops_tenant_id(db, name, &out->v, err)
           : strcmp(what, "user") == 0 ? ops_user_ids(db, name, &out->v, &tid, err)
           : ops_endpoint_ids(db, name, &out->v, &tid, err);
    out->set = rc == 0;
    return rc;
}

int ops_list_ids(struct sdb *db, const struct ops_list *l, struct ops_i64 *tenant_id,
                 struct ops_i64 *user_id, struct ops_i64 *endpoint_id, struct ops_error *err)
{
    static const struct ops_list none;
    if (!l)
        l = &none;
    if (ops_list_id(db, "tenant", l->tenant, l->tenant_id, tenant_id, err) != 0 ||
        ops_list_id(db, "user", l->user, l->user_id, user_id, err) != 0 ||
        ops_list_id(db, "endpoint", l->endpoint, l->endpoint_id, endpoint_id, err) != 0)
        return -1;
    return 0;
}

/* ---- transactions ---------------------------------------------------------- */

int ops_begin(struct sdb *db, struct ops_error *err)
{
    return ops_run(db, err, "BEGIN IMMEDIATE", "");
}

struct json_object *ops_finish(struct sdb *db, struct json_object *res, struct ops_error *err)
{
    if (res && ops_run(db, err, "COMMIT", "") == 0)
        return res;
    json_object_put(res);
    if (!sdb_get_autocommit(db))
        sdb_exec(db, "ROLLBACK");
    return NULL;
}

/* ---- lookups --------------------------------------------------------------- */

int ops_tenant_id(struct sdb *db, const char *name, int64_t *id, struct ops_error *err)
{
    if (ops_check_name("tenant", name, err) != 0)
        return -1;
    int rc = ops_query_i64(db, err, id, "SELECT id FROM tenants WHERE name = ?1", "t", name);
    if (rc == 0)
        ops_fail(err, OPS_ERR_NOT_FOUND, "tenant", "tenant not found: %s", name);
    return rc == 1 ? 0 : -1;
}

/* Two numbers of the one row named by name; 0, or -1 with NOT_FOUND "<what> not found". */
static int ops_ids(struct sdb *db, const char *what, const char *sql, const char *name,
                   int64_t *id, int64_t *tenant_id, struct ops_error *err)
{
    if (ops_check_name(what, name, err) != 0)
        return -1;
    struct sdb_stmt *st = ops_prepare(db, err, sql, "t", name);
    if (!st)
        return -1;
    int ret = -1, rc = sdb_step(st);
    if (rc == SDB_ROW) {
        *id = sdb_column_int64(st, 0);
        if (tenant_id)
            *tenant_id = sdb_column_int64(st, 1);
        ret = 0;
    } else if (rc == SDB_DONE) {
        ops_fail(err, OPS_ERR_NOT_FOUND, what, "%s not found: %s", what, name);
    } else {
        ops_fail_db(err, db);
    }
    sdb_finalize(st);
    return ret;
}

int ops_endpoint_ids(struct sdb *db, const char *name, int64_t *id, int64_t *tenant_id,
                     struct ops_error *err)
{
    return ops_ids(db, "endpoint", "SELECT id, tenant_id FROM endpoints WHERE name = ?1",
                   name, id, tenant_id, err);
}

int ops_user_ids(struct sdb *db, const char *name, int64_t *id, int64_t *tenant_id,
                 struct ops_error *err)
{
    return ops_ids(db, "user", "SELECT id, tenant_id FROM users WHERE name = ?1",
                   name, id, tenant_id, err);
}

/* ---- JSON from columns ------------------------------------------------------- */

void ops_json_str(struct json_object *o, const char *key, const char *s)
{
    json_object_object_add(o, key, s ? json_object_new_string(s) : NULL);
}

void ops_json_text(struct json_object *o, const char *key, struct sdb_stmt *st, int col)
{
    const unsigned char *s = sdb_column_text(st, col);
    json_object_object_add(o, key, s ? json_object_new_string_len(
        (const char *)s, sdb_column_bytes(st, col)) : NULL);
}

void ops_json_int(struct json_object *o, const char *key, struct sdb_stmt *st, int col)
{
    json_object_object_add(o, key, sdb_column_type(st, col) == SDB_NULL ? NULL
                               : json_object_new_int64(sdb_column_int64(st, col)));
}

void ops_json_real(struct json_object *o, const char *key, struct sdb_stmt *st, int col, int decimals)
{
    if (sdb_column_type(st, col) == SDB_NULL) {
        json_object_object_add(o, key, NULL);
        return;
    }
    char text[64];
    double v = sdb_column_double(st, col);
    snprintf(text, sizeof text, "%.*f", decimals, v);
    /* Trailing zeros go, and a bare "." with them: 0.002, 71.5, 85 */
    char *dot = strchr(text, '.');
    if (dot) {
        char *end = text + strlen(text) - 1;
        while (end > dot && *end == '0')
            *end-- = '\0';
        if (end == dot)
            *end = '\0';
    }
    json_object_object_add(o, key, json_object_new_double_s(strtod(text, NULL), text));
}

void ops_json_bool(struct json_object *o, const char *key, struct sdb_stmt *st, int col)
{
    json_object_object_add(o, key, json_object_new_boolean(sdb_column_int64(st, col) != 0));
}

/* ---- init ------------------------------------------------------------------ */

struct json_object *ops_init(struct sdb *db, const char *path, struct ops_error *err)
{
    int64_t version = 0, sealed = 0;
    char key_path[PATH_MAX] = "";
    /* R-SEC-9: the database and its -wal and -shm readable by the owner's group only. */
    if (db_protect(path) != 0) {
        ops_fail(err, OPS_ERR_INTERNAL, NULL, "cannot set the database files to mode %o (logged)",
                 DB_FILE_MODE);
        return NULL;
    }
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (ops_run(db, err, "INSERT INTO tenants (name) VALUES ('default') ON CONFLICT (name) DO NOTHING",
                "") != 0 ||
        (version = db_stored_version(db)) < 0 ||
        ops_endpoint_seal_all(db, key_path, sizeof key_path, &sealed, err) != 0)
        goto out;
    res = json_object_new_object();
    json_object_object_add(res, "ok", json_object_new_boolean(1));
    ops_json_str(res, "database", path);
    json_object_object_add(res, "schema_version", json_object_new_int64(version));
    ops_json_str(res, "key_file", key_path);
    json_object_object_add(res, "credentials_sealed", json_object_new_int64(sealed));
out:
    res = ops_finish(db, res, err);
    /* The clear values just sealed may linger in free space and in the WAL: the database
     * is rewritten and the WAL emptied (once, when something was sealed). */
    int64_t busy = 1;
    if (res && sealed > 0 && !sdb_is_server(db) &&      /* a server keeps its own files */
        (db_exec(db, "VACUUM") != 0 ||
         ops_query_i64(db, &(struct ops_error){0}, &busy, "PRAGMA wal_checkpoint(TRUNCATE)", "") != 1 ||
         busy != 0))
        log_warn("the sealed credentials' clear values may remain in %s's free pages until the"
                 " next VACUUM", path);
    return res;
}

/* ---- settings -------------------------------------------------------------- */

static struct json_object *setting_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_text(o, "key", st, 0);
    ops_json_text(o, "value", st, 1);
    return o;
}

/* The audit never writes a member named "key" (it may be a secret elsewhere), so a
 * setting is recorded as {"setting","value"}. */
static struct json_object *setting_for_audit(struct json_object *row)
{
    if (!row)
        return NULL;
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "setting", json_object_get(json_object_object_get(row, "key")));
    json_object_object_add(o, "value", json_object_get(json_object_object_get(row, "value")));
    return o;
}

static int ops_settings_audit(struct sdb *db, struct ops_error *err, const char *action,
                              struct json_object *before, struct json_object *after)
{
    struct json_object *b = setting_for_audit(before), *a = setting_for_audit(after);
    int rc = ops_audit(db, err, action, "setting", b, a);
    json_object_put(b);
    json_object_put(a);
    return rc;
}

/* Known keys only, and a value their schema row (lib/settings.c) takes; it is stored in
 * its canonical form (on -> true, 85.50 -> 85.5), as config set stores it. */
struct json_object *ops_settings_set(struct sdb *db, const char *key, const char *value,
                                     struct ops_error *err)
{
    char msg[512], canon[OPS_VALUE_MAX + 1];
    struct settings_value v;
    if (ops_check_name("key", key, err) != 0)
        return NULL;
    const struct settings_def *d = settings_find(key);
    if (!d) {
        char names[1024];
        settings_names(names, sizeof names);
        ops_fail(err, OPS_ERR_INVALID, "key", "unknown setting (known: %s)", names);
        return NULL;
    }
    if (!value) {
        ops_fail(err, OPS_ERR_INVALID, "value", "value is required");
        return NULL;
    }
    if (*value && ops_check_text("value", value, OPS_VALUE_MAX, err) != 0)
        return NULL;
    if (settings_parse(d, value, &v, msg, sizeof msg) != 0) {
        ops_fail(err, OPS_ERR_INVALID, "value", "%s", msg);
        return NULL;
    }
    settings_format(d, &v, canon, sizeof canon);
    value = canon;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL, *before = ops_query_one(
        db, err, setting_row, "setting", "SELECT key, value FROM settings WHERE key = ?1", "t", key);
    ops_error_clear(err);
    if (ops_run(db, err, "INSERT INTO settings (key, value) VALUES (?1, ?2) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value", "tt", key, value) == 0)
        res = ops_query_one(db, err, setting_row, "setting",
                            "SELECT key, value FROM settings WHERE key = ?1", "t", key);
    if (res && ops_settings_audit(db, err, before ? "update" : "create", before, res) != 0) {
        json_object_put(res);
        res = NULL;
    }
    json_object_put(before);
    return ops_finish(db, res, err);
}

struct json_object *ops_settings_get(struct sdb *db, const char *key, struct ops_error *err)
{
    if (ops_check_name("key", key, err) != 0)
        return NULL;
    struct json_object *res = ops_query_one(db, err, setting_row, "setting",
                                            "SELECT key, value FROM settings WHERE key = ?1",
                                            "t", key);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "key", "setting not found: %s", key);
    return res;
}

struct json_object *ops_settings_rm(struct sdb *db, const char *key, struct ops_error *err)
{
    if (ops_check_name("key", key, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = ops_settings_get(db, key, err);
    if (res && (ops_run(db, err, "DELETE FROM settings WHERE key = ?1", "t", key) != 0 ||
                ops_settings_audit(db, err, "delete", res, NULL) != 0)) {
        json_object_put(res);
        res = NULL;
    }
    if (res)
        json_object_object_add(res, "deleted", json_object_new_boolean(1));
    return ops_finish(db, res, err);
}

struct json_object *ops_settings_list(struct sdb *db, struct ops_error *err)
{
    return ops_query_list(db, err, "settings", setting_row,
                          "SELECT key, value FROM settings ORDER BY key", "");
}
