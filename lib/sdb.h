/* sdb.h: the system of record behind one statement interface.
 *
 * Every stage talks to the database through these calls, never to an engine's
 * own library, so the same code runs on the embedded SQLite file and on a
 * PostgreSQL server shared by several gateway hosts (database = "postgresql://…").
 * The shape is SQLite's (prepare, bind, step, column, reset), which the code was
 * written against; each engine is one file (sdb_sqlite.c, sdb_pg.c) and one row
 * of sdb_engines in sdb.c. SQL is written in SQLite's dialect with `?` / `?N`
 * parameters; the PostgreSQL engine rewrites what differs (sdb_pg_sql.c).
 *
 * Codes and column types have SQLite's values, so a code checked against
 * SDB_CONSTRAINT means the same on both engines. Like a sqlite3 handle opened
 * NOMUTEX, a connection and its statements belong to one thread at a time. */
#ifndef SLUICE_SDB_H
#define SLUICE_SDB_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
    SDB_OK = 0,
    SDB_ERROR = 1,
    SDB_BUSY = 5,              /* locked past the wait (busy timeout, lock_timeout) */
    SDB_TOOBIG = 18,
    SDB_CONSTRAINT = 19,
    SDB_MISMATCH = 20,
    SDB_ROW = 100,
    SDB_DONE = 101,
};
/* Extended constraint codes (sdb_extended_errcode). */
enum {
    SDB_CONSTRAINT_CHECK = SDB_CONSTRAINT | (1 << 8),
    SDB_CONSTRAINT_PRIMARYKEY = SDB_CONSTRAINT | (6 << 8),
    SDB_CONSTRAINT_UNIQUE = SDB_CONSTRAINT | (8 << 8),
};
/* Column types (sdb_column_type). */
enum { SDB_INTEGER = 1, SDB_FLOAT = 2, SDB_TEXT = 3, SDB_BLOB = 4, SDB_NULL = 5 };
/* Text and blob binds: the caller keeps the bytes until the statement is reset
 * (STATIC), or the engine copies them (TRANSIENT). */
enum { SDB_STATIC = 0, SDB_TRANSIENT = 1 };

struct sdb;
struct sdb_stmt;

/* Opens where: a file path (SQLite, created if asked) or a postgresql:// URL. The
 * schema is db_open's (db.h). NULL, logged, on failure. */
struct sdb *sdb_open(const char *where, int create);
void sdb_close(struct sdb *db);
/* 1 when where names a PostgreSQL server rather than a file (inline: conf.c's
 * pure parsing uses it without linking an engine). */
static inline int sdb_is_url(const char *where)
{
    return where && (strncmp(where, "postgresql://", 13) == 0 || strncmp(where, "postgres://", 11) == 0);
}
/* The engine's name: "sqlite" or "postgresql". */
const char *sdb_engine_name(const struct sdb *db);
/* The file of an SQLite database; NULL for a server. */
const char *sdb_filename(const struct sdb *db);
/* 1 when db is a server several hosts share (PostgreSQL), 0 for a file. */
static inline int sdb_is_server(const struct sdb *db) { return sdb_filename(db) == NULL; }

/* persistent: kept for the connection's life (SQLite's PREPARE_PERSISTENT; a
 * server-side prepared statement on PostgreSQL). */
int sdb_prepare(struct sdb *db, const char *sql, struct sdb_stmt **st);
int sdb_prepare_persistent(struct sdb *db, const char *sql, struct sdb_stmt **st);
int sdb_bind_int64(struct sdb_stmt *st, int i, int64_t v);
int sdb_bind_int(struct sdb_stmt *st, int i, int v);
int sdb_bind_double(struct sdb_stmt *st, int i, double v);
int sdb_bind_text(struct sdb_stmt *st, int i, const char *s, int n, int how);
int sdb_bind_blob64(struct sdb_stmt *st, int i, const void *p, uint64_t n, int how);
int sdb_bind_null(struct sdb_stmt *st, int i);
int sdb_step(struct sdb_stmt *st);
int64_t sdb_column_int64(struct sdb_stmt *st, int i);
int sdb_column_int(struct sdb_stmt *st, int i);
double sdb_column_double(struct sdb_stmt *st, int i);
const unsigned char *sdb_column_text(struct sdb_stmt *st, int i);
const void *sdb_column_blob(struct sdb_stmt *st, int i);
int sdb_column_bytes(struct sdb_stmt *st, int i);
int sdb_column_type(struct sdb_stmt *st, int i);
int sdb_reset(struct sdb_stmt *st);
int sdb_clear_bindings(struct sdb_stmt *st);
int sdb_finalize(struct sdb_stmt *st);
struct sdb *sdb_stmt_db(struct sdb_stmt *st);

/* Runs SQL text without parameters; several statements may be given. */
int sdb_exec(struct sdb *db, const char *sql);
const char *sdb_errmsg(struct sdb *db);
int sdb_extended_errcode(struct sdb *db);
int64_t sdb_changes(struct sdb *db);
/* The id the last INSERT on this connection gave its row. */
int64_t sdb_last_insert_rowid(struct sdb *db);
/* 1 outside a transaction. */
int sdb_get_autocommit(struct sdb *db);
/* How long a statement waits on a lock before SDB_BUSY. */
int sdb_busy_timeout(struct sdb *db, int ms);
/* Waits up to timeout_ms for a notice on channel (PostgreSQL LISTEN/NOTIFY: a
 * change another host committed): 1 one came, 0 none in the time, -1 the engine
 * has none (SQLite: the caller polls instead). */
int sdb_wait_notice(struct sdb *db, const char *channel, int timeout_ms);
/* A scalar SQL function name(text, integer, integer) -> real calling fn with ctx,
 * until it is removed (fn NULL). Where the engine cannot run C inside SQL
 * (PostgreSQL) it is SDB_ERROR and the caller writes the SQL another way. */
typedef double sdb_fn3(void *ctx, const char *a, int64_t b, int64_t c);
int sdb_create_function3(struct sdb *db, const char *name, sdb_fn3 *fn, void *ctx);

/* ---- for the engines (sdb_sqlite.c, sdb_pg.c) ---- */
struct sdb_engine {
    const char *name;
    int (*claims)(const char *where);
    struct sdb *(*open)(const char *where, int create);
    void (*close)(struct sdb *);
    const char *(*filename)(const struct sdb *);
    int (*prepare)(struct sdb *, const char *sql, int persistent, struct sdb_stmt **);
    int (*bind_int64)(struct sdb_stmt *, int, int64_t);
    int (*bind_double)(struct sdb_stmt *, int, double);
    int (*bind_text)(struct sdb_stmt *, int, const char *, int, int);
    int (*bind_blob)(struct sdb_stmt *, int, const void *, uint64_t, int);
    int (*bind_null)(struct sdb_stmt *, int);
    int (*step)(struct sdb_stmt *);
    int64_t (*column_int64)(struct sdb_stmt *, int);
    double (*column_double)(struct sdb_stmt *, int);
    const unsigned char *(*column_text)(struct sdb_stmt *, int);
    const void *(*column_blob)(struct sdb_stmt *, int);
    int (*column_bytes)(struct sdb_stmt *, int);
    int (*column_type)(struct sdb_stmt *, int);
    int (*reset)(struct sdb_stmt *);
    int (*clear_bindings)(struct sdb_stmt *);
    int (*finalize)(struct sdb_stmt *);
    int (*exec)(struct sdb *, const char *);
    const char *(*errmsg)(struct sdb *);
    int (*extended_errcode)(struct sdb *);
    int64_t (*changes)(struct sdb *);
    int64_t (*last_insert_rowid)(struct sdb *);
    int (*get_autocommit)(struct sdb *);
    int (*busy_timeout)(struct sdb *, int);
    int (*create_function3)(struct sdb *, const char *, sdb_fn3 *, void *);   /* NULL: none */
    int (*wait_notice)(struct sdb *, const char *, int);                       /* NULL: none */
};

/* The head of every engine's connection and statement. */
struct sdb {
    const struct sdb_engine *e;
};
struct sdb_stmt {
    const struct sdb_engine *e;
    struct sdb *db;
};

extern const struct sdb_engine sdb_sqlite_engine;
#ifdef SLUICE_LIBPQ
extern const struct sdb_engine sdb_pg_engine;
#endif

#endif
