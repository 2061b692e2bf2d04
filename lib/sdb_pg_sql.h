/* sdb_pg_sql.h: sluice's SQL (SQLite's dialect) as PostgreSQL runs it. Pure text
 * rewriting, no connection: the PostgreSQL engine (sdb_pg.c) calls it once per
 * prepared statement, and the schema (db_pg.c) once per table, index and trigger. */
#ifndef SLUICE_SDB_PG_SQL_H
#define SLUICE_SDB_PG_SQL_H

#include <stddef.h>

/* One statement with ? and ?N parameters as PostgreSQL's ($N); what the dialects
 * spell differently is rewritten (INSERT OR IGNORE, IFNULL, scalar max/min,
 * strftime('%s','now'), julianday('now'), date(x,'unixepoch','localtime'), LIKE's
 * case, CAST AS INTEGER). *nparams: the highest parameter number. malloc'd. */
char *pg_sql_rewrite(const char *sql, int *nparams);
/* Where each parameter stands in a rewritten statement. */
struct pg_sql_mark {
    int off, len;         /* of its "$N" */
    int param;            /* N */
    int null_test;        /* "$N IS [NOT] NULL": a place that gives it no type */
};
/* pg_sql_rewrite, with the marks (malloc'd, *nmarks of them; NULL when none). */
char *pg_sql_rewrite_marks(const char *sql, int *nparams, struct pg_sql_mark **marks, int *nmarks);

/* What the engine does with a statement itself rather than send it as it is. */
enum pg_sql_kind {
    PG_SQL_OTHER,
    PG_SQL_BEGIN_READ,     /* BEGIN, BEGIN DEFERRED: one snapshot for every read */
    PG_SQL_BEGIN_WRITE,    /* BEGIN IMMEDIATE / EXCLUSIVE: writers one at a time */
    PG_SQL_COMMIT,         /* COMMIT, END */
    PG_SQL_ROLLBACK,       /* ROLLBACK (not ROLLBACK TO) */
    PG_SQL_NOOP,           /* PRAGMA: SQLite's own settings */
};
enum pg_sql_kind pg_sql_kind(const char *sql);

/* A schema statement as an SQLite database keeps it (sqlite_master.sql: CREATE
 * TABLE, INDEX or TRIGGER) as PostgreSQL DDL, possibly several statements (a
 * trigger is a function and a trigger). malloc'd; NULL with why when it cannot. */
char *pg_sql_schema(const char *sql, char *why, size_t cap);

/* The next statement of a script at *p (split at top-level semicolons; a
 * trigger's BEGIN … END stays whole), malloc'd without its semicolon, *p moved
 * past it. NULL at the end. */
char *pg_sql_next(const char **p);

#endif
