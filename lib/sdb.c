/* sdb.c: the statement interface's dispatch to the engine that owns a connection. */
#include "sdb.h"

#include "log.h"

#include <string.h>

/* The first engine whose claims() accepts a database's name opens it; SQLite,
 * last, takes any path. */
static const struct sdb_engine *const sdb_engines[] = {
#ifdef SLUICE_LIBPQ
    &sdb_pg_engine,
#endif
    &sdb_sqlite_engine,
};

struct sdb *sdb_open(const char *where, int create)
{
    for (size_t i = 0; i < sizeof sdb_engines / sizeof sdb_engines[0]; i++)
        if (sdb_engines[i]->claims(where))
            return sdb_engines[i]->open(where, create);
    log_error("database %s: this sluice was built without PostgreSQL (libpq)", where);
    return NULL;
}

void sdb_close(struct sdb *db)
{
    if (db)
        db->e->close(db);
}

const char *sdb_engine_name(const struct sdb *db) { return db->e->name; }
const char *sdb_filename(const struct sdb *db) { return db->e->filename(db); }

int sdb_prepare(struct sdb *db, const char *sql, struct sdb_stmt **st)
{
    return db->e->prepare(db, sql, 0, st);
}

int sdb_prepare_persistent(struct sdb *db, const char *sql, struct sdb_stmt **st)
{
    return db->e->prepare(db, sql, 1, st);
}

int sdb_bind_int64(struct sdb_stmt *st, int i, int64_t v) { return st->e->bind_int64(st, i, v); }
int sdb_bind_int(struct sdb_stmt *st, int i, int v) { return st->e->bind_int64(st, i, v); }
int sdb_bind_double(struct sdb_stmt *st, int i, double v) { return st->e->bind_double(st, i, v); }

int sdb_bind_text(struct sdb_stmt *st, int i, const char *s, int n, int how)
{
    return s ? st->e->bind_text(st, i, s, n, how) : st->e->bind_null(st, i);
}

int sdb_bind_blob64(struct sdb_stmt *st, int i, const void *p, uint64_t n, int how)
{
    return p ? st->e->bind_blob(st, i, p, n, how) : st->e->bind_null(st, i);
}

int sdb_bind_null(struct sdb_stmt *st, int i) { return st->e->bind_null(st, i); }
int sdb_step(struct sdb_stmt *st) { return st->e->step(st); }
int64_t sdb_column_int64(struct sdb_stmt *st, int i) { return st->e->column_int64(st, i); }
int sdb_column_int(struct sdb_stmt *st, int i) { return (int)st->e->column_int64(st, i); }
double sdb_column_double(struct sdb_stmt *st, int i) { return st->e->column_double(st, i); }
const unsigned char *sdb_column_text(struct sdb_stmt *st, int i) { return st->e->column_text(st, i); }
const void *sdb_column_blob(struct sdb_stmt *st, int i) { return st->e->column_blob(st, i); }
int sdb_column_bytes(struct sdb_stmt *st, int i) { return st->e->column_bytes(st, i); }
int sdb_column_type(struct sdb_stmt *st, int i) { return st->e->column_type(st, i); }
int sdb_reset(struct sdb_stmt *st) { return st->e->reset(st); }
int sdb_clear_bindings(struct sdb_stmt *st) { return st->e->clear_bindings(st); }

int sdb_finalize(struct sdb_stmt *st)
{
    return st ? st->e->finalize(st) : SDB_OK;
}

struct sdb *sdb_stmt_db(struct sdb_stmt *st) { return st->db; }
int sdb_exec(struct sdb *db, const char *sql) { return db->e->exec(db, sql); }
const char *sdb_errmsg(struct sdb *db) { return db->e->errmsg(db); }
int sdb_extended_errcode(struct sdb *db) { return db->e->extended_errcode(db); }
int64_t sdb_changes(struct sdb *db) { return db->e->changes(db); }
int64_t sdb_last_insert_rowid(struct sdb *db) { return db->e->last_insert_rowid(db); }
int sdb_get_autocommit(struct sdb *db) { return db->e->get_autocommit(db); }
int sdb_busy_timeout(struct sdb *db, int ms) { return db->e->busy_timeout(db, ms); }

int sdb_create_function3(struct sdb *db, const char *name, sdb_fn3 *fn, void *ctx)
{
    return db->e->create_function3 ? db->e->create_function3(db, name, fn, ctx) : SDB_ERROR;
}

int sdb_wait_notice(struct sdb *db, const char *channel, int timeout_ms)
{
    return db->e->wait_notice ? db->e->wait_notice(db, channel, timeout_ms) : -1;
}
