/* db.c: opening the system of record and migrating its schema. */
#include "db.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int db_exec(struct sdb *db, const char *sql)
{
    if (sdb_exec(db, sql) != SDB_OK) {
        log_error("%s: %s", sdb_engine_name(db), sdb_errmsg(db));
        return -1;
    }
    return 0;
}

int db_begin_read(struct sdb *db) { return db_exec(db, "BEGIN"); }

void db_end_read(struct sdb *db) { db_exec(db, "COMMIT"); }

int db_schema_version(void) { return db_migrations[db_migrations_count - 1].version; }

int db_stored_version(struct sdb *db)
{
    struct sdb_stmt *st;
    int v = -1;
    if (sdb_prepare(db, !sdb_is_server(db) ? "PRAGMA user_version" : "SELECT version FROM sluice_schema", &st) != SDB_OK)
        return -1;
    if (sdb_step(st) == SDB_ROW)
        v = sdb_column_int(st, 0);
    sdb_finalize(st);
    return v;
}

static int db_migrate(struct sdb *db, const char *path)
{
    /* BEGIN IMMEDIATE serialises concurrent first starts of several processes. */
    if (db_exec(db, "BEGIN IMMEDIATE") != 0)
        return -1;
    int have = db_stored_version(db);
    if (have < 0)
        goto fail;
    /* A newer sluice migrated it: these binaries do not know its tables, and
     * writing through them could lose what the newer schema holds. */
    if (have > db_schema_version()) {
        log_error("database %s has schema version %d, newer than this sluice knows (%d): it was upgraded by a "
                  "newer sluice; install that version again, or restore a backup taken before the upgrade",
                  path, have, db_schema_version());
        goto fail;
    }
    for (int i = 0; i < db_migrations_count; i++) {
        const struct db_migration *m = &db_migrations[i];
        if (m->version <= have)
            continue;
        if (db_exec(db, m->sql) != 0) {
            log_error("migration %s failed", m->name);
            goto fail;
        }
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", m->version);
        if (db_exec(db, pragma) != 0)
            goto fail;
    }
    return db_exec(db, "COMMIT");
fail:
    db_exec(db, "ROLLBACK");
    return -1;
}

int db_protect(const char *path)
{
    if (sdb_is_url(path))
        return 0;               /* the server keeps its files */
    static const char *const suffix[] = {"", "-wal", "-shm"};
    int rc = 0;
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        char p[4096];
        if (snprintf(p, sizeof p, "%s%s", path, suffix[i]) >= (int)sizeof p)
            return -1;
        if (chmod(p, DB_FILE_MODE) != 0 && !(i > 0 && errno == ENOENT)) {
            log_error("cannot chmod %s to %o: %s", p, DB_FILE_MODE, strerror(errno));
            rc = -1;
        }
    }
    return rc;
}

struct sdb *db_open(const char *path, int create)
{
    struct sdb *db = NULL;
    if (sdb_is_url(path)) {
        if (!(db = sdb_open(path, create)))
            return NULL;
        sdb_busy_timeout(db, 5000);
        if (db_pg_migrate(db, path) != 0) {
            sdb_close(db);
            return NULL;
        }
        return db;
    }
    /* R-SEC-9: a new database is created 0640 here, not 0644 by SQLite, which gives its
     * -wal and -shm files the database's mode. */
    if (create && path[0] != ':' && strncmp(path, "file:", 5) != 0) {   /* not :memory: or a URI */
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, DB_FILE_MODE);
        if (fd >= 0) {
            if (fchmod(fd, DB_FILE_MODE) != 0)
                log_error("cannot chmod %s to %o: %s", path, DB_FILE_MODE, strerror(errno));
            close(fd);
        }
    }
    if (!(db = sdb_open(path, create)))
        return NULL;
    sdb_busy_timeout(db, 5000);
    if (db_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;") != 0 ||
        db_migrate(db, path) != 0) {
        sdb_close(db);
        return NULL;
    }
    return db;
}

void db_close(struct sdb *db)
{
    if (db)
        sdb_close(db);
}
