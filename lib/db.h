/* db.h: opening the system of record (an SQLite file or a PostgreSQL server) and
 * applying migrations. */
#ifndef SLUICE_DB_H
#define SLUICE_DB_H

#include "sdb.h"

/* Opens (creating if asked) the database in WAL mode with a busy timeout and
 * foreign keys on, and brings the schema up to date (PRAGMA user_version).
 * Returns NULL and logs why on failure. The caller owns the handle. */
struct sdb *db_open(const char *path, int create);
/* PostgreSQL's schema from the same migrations (db_pg.c); 0 or -1 (logged). */
int db_pg_migrate(struct sdb *pg, const char *where);
void db_close(struct sdb *db);

/* R-SEC-9: the mode of the database file and its -wal and -shm. */
#define DB_FILE_MODE 0640
/* Sets the database file, and its -wal and -shm where they exist, to DB_FILE_MODE.
 * 0, or -1 (logged). */
int db_protect(const char *path);

/* Runs SQL text with no parameters (schema, BEGIN/COMMIT). 0 or -1 (logged). */
int db_exec(struct sdb *db, const char *sql);

/* A consistent read of several statements (BEGIN / COMMIT). */
int db_begin_read(struct sdb *db);
void db_end_read(struct sdb *db);

/* The schema version the database is at; -1 on error. */
int db_stored_version(struct sdb *db);
/* The schema version this build writes. */
int db_schema_version(void);

/* Migrations, generated from sql/NNN_*.sql by the build (lib/schema_sql.c). */
struct db_migration {
    int version;
    const char *name;
    const char *sql;
};
extern const struct db_migration db_migrations[];
extern const int db_migrations_count;

#endif
