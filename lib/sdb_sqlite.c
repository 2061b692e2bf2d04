/* sdb_sqlite.c: the embedded engine, a SQLite file (the default system of record). */
#include "sdb.h"

#include "arena.h"
#include "log.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

struct lite {
    struct sdb base;
    sqlite3 *h;
};
struct lite_stmt {
    struct sdb_stmt base;
    sqlite3_stmt *st;
};

/* the engine's own handle behind the interface's */
static sqlite3 *H(const struct sdb *db) { return ((const struct lite *)db)->h; }
static sqlite3_stmt *S(struct sdb_stmt *st) { return ((struct lite_stmt *)st)->st; }
static sqlite3_destructor_type how_of(int how) { return how == SDB_STATIC ? SQLITE_STATIC : SQLITE_TRANSIENT; }

static int lite_claims(const char *where) { return !sdb_is_url(where); }

static struct sdb *lite_open(const char *where, int create)
{
    sqlite3 *h = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(where, &h, flags, NULL) != SQLITE_OK) {
        log_error("cannot open database %s: %s", where, h ? sqlite3_errmsg(h) : "out of memory");
        sqlite3_close(h);
        return NULL;
    }
    struct lite *db = xcalloc(1, sizeof *db);
    db->base.e = &sdb_sqlite_engine;
    db->h = h;
    return &db->base;
}

static void lite_close(struct sdb *db)
{
    sqlite3_close(H(db));
    free(db);
}

static const char *lite_filename(const struct sdb *db) { return sqlite3_db_filename(H(db), "main"); }

static int lite_prepare(struct sdb *db, const char *sql, int persistent, struct sdb_stmt **out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v3(H(db), sql, -1, persistent ? SQLITE_PREPARE_PERSISTENT : 0, &st, NULL);
    if (rc != SQLITE_OK) {
        *out = NULL;
        return rc;
    }
    struct lite_stmt *s = xcalloc(1, sizeof *s);
    s->base.e = &sdb_sqlite_engine;
    s->base.db = db;
    s->st = st;
    *out = &s->base;
    return SDB_OK;
}

static int lite_bind_int64(struct sdb_stmt *st, int i, int64_t v) { return sqlite3_bind_int64(S(st), i, v); }
static int lite_bind_double(struct sdb_stmt *st, int i, double v) { return sqlite3_bind_double(S(st), i, v); }

static int lite_bind_text(struct sdb_stmt *st, int i, const char *s, int n, int how)
{
    return sqlite3_bind_text(S(st), i, s, n, how_of(how));
}

static int lite_bind_blob(struct sdb_stmt *st, int i, const void *p, uint64_t n, int how)
{
    return sqlite3_bind_blob64(S(st), i, p, n, how_of(how));
}

static int lite_bind_null(struct sdb_stmt *st, int i) { return sqlite3_bind_null(S(st), i); }
static int lite_step(struct sdb_stmt *st) { return sqlite3_step(S(st)); }
static int64_t lite_column_int64(struct sdb_stmt *st, int i) { return sqlite3_column_int64(S(st), i); }
static double lite_column_double(struct sdb_stmt *st, int i) { return sqlite3_column_double(S(st), i); }
static const unsigned char *lite_column_text(struct sdb_stmt *st, int i) { return sqlite3_column_text(S(st), i); }
static const void *lite_column_blob(struct sdb_stmt *st, int i) { return sqlite3_column_blob(S(st), i); }
static int lite_column_bytes(struct sdb_stmt *st, int i) { return sqlite3_column_bytes(S(st), i); }
static int lite_column_type(struct sdb_stmt *st, int i) { return sqlite3_column_type(S(st), i); }
static int lite_reset(struct sdb_stmt *st) { return sqlite3_reset(S(st)); }
static int lite_clear_bindings(struct sdb_stmt *st) { return sqlite3_clear_bindings(S(st)); }

static int lite_finalize(struct sdb_stmt *st)
{
    int rc = sqlite3_finalize(S(st));
    free(st);
    return rc;
}

static int lite_exec(struct sdb *db, const char *sql) { return sqlite3_exec(H(db), sql, NULL, NULL, NULL); }
static const char *lite_errmsg(struct sdb *db) { return sqlite3_errmsg(H(db)); }
static int lite_extended_errcode(struct sdb *db) { return sqlite3_extended_errcode(H(db)); }
static int64_t lite_changes(struct sdb *db) { return sqlite3_changes(H(db)); }
static int64_t lite_last_insert_rowid(struct sdb *db) { return sqlite3_last_insert_rowid(H(db)); }
static int lite_get_autocommit(struct sdb *db) { return sqlite3_get_autocommit(H(db)); }
static int lite_busy_timeout(struct sdb *db, int ms) { return sqlite3_busy_timeout(H(db), ms); }

struct lite_fn {
    sdb_fn3 *fn;
    void *ctx;
};

static void lite_fn3(sqlite3_context *c, int argc, sqlite3_value **argv)
{
    const struct lite_fn *f = sqlite3_user_data(c);
    (void)argc;
    sqlite3_result_double(c, f->fn(f->ctx, (const char *)sqlite3_value_text(argv[0]),
                                   sqlite3_value_int64(argv[1]), sqlite3_value_int64(argv[2])));
}

static int lite_create_function3(struct sdb *db, const char *name, sdb_fn3 *fn, void *ctx)
{
    if (!fn)
        return sqlite3_create_function_v2(H(db), name, 3, SQLITE_UTF8, NULL, NULL, NULL, NULL, NULL);
    struct lite_fn *f = xcalloc(1, sizeof *f);
    f->fn = fn;
    f->ctx = ctx;
    /* SQLite frees f (free) when the function is replaced or removed */
    return sqlite3_create_function_v2(H(db), name, 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC, f, lite_fn3, NULL, NULL,
                                      free);
}

const struct sdb_engine sdb_sqlite_engine = {
    .name = "sqlite",
    .claims = lite_claims,
    .open = lite_open,
    .close = lite_close,
    .filename = lite_filename,
    .prepare = lite_prepare,
    .bind_int64 = lite_bind_int64,
    .bind_double = lite_bind_double,
    .bind_text = lite_bind_text,
    .bind_blob = lite_bind_blob,
    .bind_null = lite_bind_null,
    .step = lite_step,
    .column_int64 = lite_column_int64,
    .column_double = lite_column_double,
    .column_text = lite_column_text,
    .column_blob = lite_column_blob,
    .column_bytes = lite_column_bytes,
    .column_type = lite_column_type,
    .reset = lite_reset,
    .clear_bindings = lite_clear_bindings,
    .finalize = lite_finalize,
    .exec = lite_exec,
    .errmsg = lite_errmsg,
    .extended_errcode = lite_extended_errcode,
    .changes = lite_changes,
    .last_insert_rowid = lite_last_insert_rowid,
    .get_autocommit = lite_get_autocommit,
    .busy_timeout = lite_busy_timeout,
    .create_function3 = lite_create_function3,
};
