/* db_pg.c: the schema of a PostgreSQL system of record, made from sql/NNN_*.sql.
 *
 * The migrations are SQLite's and stay the one source. A new PostgreSQL database
 * gets the schema they end in: they are applied to an SQLite database in memory,
 * and its tables, indexes and triggers (as sqlite_master keeps them) and the rows
 * they seed are written to PostgreSQL in one transaction (pg_sql_schema rewrites
 * each). A database made by an older sluice gets the newer migrations one by one,
 * each statement rewritten the same way; so a migration after the baseline keeps
 * to SQL both dialects run (ALTER TABLE ADD COLUMN, CREATE INDEX, UPDATE).
 * The version is the table sluice_schema's one row. */
#include "db.h"

#include "log.h"
#include "sdb_pg_sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Serialises the first start of several processes (and hosts) on one database. */
#define PG_MIGRATE_LOCK "SELECT pg_advisory_lock(7365656473)"
#define PG_MIGRATE_UNLOCK "SELECT pg_advisory_unlock(7365656473)"

struct item {
    char *type, *name, *sql;
    int done;
};

static int exec_pg(struct sdb *pg, const char *sql)
{
    if (sdb_exec(pg, sql) != SDB_OK) {
        log_error("postgresql: %s (in: %.300s)", sdb_errmsg(pg), sql);
        return -1;
    }
    return 0;
}

static int schema_version(struct sdb *pg)
{
    struct sdb_stmt *st;
    int v = -1;
    if (sdb_prepare(pg, "SELECT version FROM sluice_schema", &st) != SDB_OK)
        return -2;
    int rc = sdb_step(st);
    if (rc == SDB_ROW)
        v = sdb_column_int(st, 0);
    else if (rc != SDB_DONE)
        v = -2;
    sdb_finalize(st);
    return v;
}

/* Does the table's SQL name other among the tables it references? */
static int references(const char *sql, const char *other)
{
    size_t n = strlen(other);
    for (const char *p = sql; (p = strcasestr(p, "REFERENCES")); p += 10) {
        const char *q = p + 10;
        while (*q == ' ' || *q == '"')
            q++;
        if (strncasecmp(q, other, n) == 0 && (q[n] == ' ' || q[n] == '(' || q[n] == '"'))
            return 1;
    }
    return 0;
}

/* The rows a migration seeded (the default tenant, config_version's row). */
static int copy_rows(struct sdb *lite, struct sdb *pg, const char *table)
{
    char sql[4096];
    snprintf(sql, sizeof sql, "SELECT name FROM pragma_table_info('%s') ORDER BY cid", table);
    struct sdb_stmt *cols;
    if (sdb_prepare(lite, sql, &cols) != SDB_OK)
        return -1;
    char names[2048] = "", marks[1024] = "";
    int n = 0;
    while (sdb_step(cols) == SDB_ROW) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s\"%s\"", n ? ", " : "", (const char *)sdb_column_text(cols, 0));
        l = strlen(marks);
        snprintf(marks + l, sizeof marks - l, "%s?", n ? ", " : "");
        n++;
    }
    sdb_finalize(cols);
    snprintf(sql, sizeof sql, "SELECT * FROM \"%s\"", table);
    struct sdb_stmt *rows, *ins;
    if (sdb_prepare(lite, sql, &rows) != SDB_OK)
        return -1;
    snprintf(sql, sizeof sql, "INSERT INTO \"%s\" (%s) VALUES (%s)", table, names, marks);
    if (sdb_prepare(pg, sql, &ins) != SDB_OK) {
        sdb_finalize(rows);
        return -1;
    }
    int rc = 0;
    while (rc == 0 && sdb_step(rows) == SDB_ROW) {
        sdb_reset(ins);
        for (int i = 0; i < n; i++) {
            int t = sdb_column_type(rows, i);
            if (t == SDB_INTEGER)
                sdb_bind_int64(ins, i + 1, sdb_column_int64(rows, i));
            else if (t == SDB_FLOAT)
                sdb_bind_double(ins, i + 1, sdb_column_double(rows, i));
            else if (t == SDB_BLOB)
                sdb_bind_blob64(ins, i + 1, sdb_column_blob(rows, i), (uint64_t)sdb_column_bytes(rows, i),
                                SDB_TRANSIENT);
            else if (t == SDB_TEXT)
                sdb_bind_text(ins, i + 1, (const char *)sdb_column_text(rows, i), -1, SDB_TRANSIENT);
            else
                sdb_bind_null(ins, i + 1);
        }
        if (sdb_step(ins) != SDB_DONE) {
            log_error("postgresql: seeding %s: %s", table, sdb_errmsg(pg));
            rc = -1;
        }
    }
    sdb_finalize(rows);
    sdb_finalize(ins);
    /* ids given in seeded rows: the next one the database gives comes after them */
    struct sdb_stmt *idc = NULL;
    if (rc == 0 && sdb_prepare(pg,
                               "SELECT column_name FROM information_schema.columns WHERE table_schema ="
                               " current_schema() AND table_name = ?1 AND is_identity = 'YES'",
                               &idc) == SDB_OK) {
        sdb_bind_text(idc, 1, table, -1, SDB_STATIC);
        char col[128] = "";
        if (sdb_step(idc) == SDB_ROW)
            snprintf(col, sizeof col, "%s", (const char *)sdb_column_text(idc, 0));
        sdb_finalize(idc);
        if (*col) {
            snprintf(sql, sizeof sql,
                     "SELECT setval(pg_get_serial_sequence('\"%s\"', '%s'),"
                     " (SELECT COALESCE(MAX(\"%s\"), 0) + 1 FROM \"%s\"), false)",
                     table, col, col, table);
            rc = exec_pg(pg, sql);
        }
    }
    return rc;
}

static int write_item(struct sdb *pg, const struct item *it)
{
    char why[256] = "";
    char *ddl = pg_sql_schema(it->sql, why, sizeof why);
    if (!ddl) {
        log_error("postgresql: %s %s: %s", it->type, it->name, why);
        return -1;
    }
    int rc = exec_pg(pg, ddl);
    free(ddl);
    return rc;
}

/* The schema the migrations end in, written to an empty PostgreSQL database. */
static int baseline(struct sdb *pg)
{
    struct sdb *lite = sdb_open(":memory:", 1);
    if (!lite)
        return -1;
    int rc = 0;
    for (int i = 0; rc == 0 && i < db_migrations_count; i++)
        if (sdb_exec(lite, db_migrations[i].sql) != SDB_OK) {
            log_error("migration %s (in memory, for postgresql): %s", db_migrations[i].name, sdb_errmsg(lite));
            rc = -1;
        }
    struct item *items = NULL;
    size_t n = 0;
    struct sdb_stmt *st = NULL;
    if (rc == 0 && sdb_prepare(lite,
                               "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL"
                               " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid",
                               &st) != SDB_OK)
        rc = -1;
    while (rc == 0 && sdb_step(st) == SDB_ROW) {
        items = realloc(items, (n + 1) * sizeof *items);
        if (!items)
            abort();
        items[n].type = strdup((const char *)sdb_column_text(st, 0));
        items[n].name = strdup((const char *)sdb_column_text(st, 1));
        items[n].sql = strdup((const char *)sdb_column_text(st, 2));
        items[n].done = 0;
        if (!items[n].type || !items[n].name || !items[n].sql)
            abort();
        n++;
    }
    sdb_finalize(st);
    /* Tables after the tables they reference (a rebuilt table comes late in
     * sqlite_master), then their rows, then indexes and triggers. */
    for (size_t left = n, pass = 0; rc == 0 && pass <= n; pass++) {
        size_t before = left;
        for (size_t i = 0; rc == 0 && i < n; i++) {
            if (items[i].done || strcmp(items[i].type, "table") != 0)
                continue;
            int ready = 1;
            for (size_t j = 0; j < n && ready; j++)
                if (j != i && !items[j].done && strcmp(items[j].type, "table") == 0 &&
                    references(items[i].sql, items[j].name))
                    ready = 0;
            if (!ready)
                continue;
            rc = write_item(pg, &items[i]);
            if (rc == 0)
                rc = copy_rows(lite, pg, items[i].name);
            items[i].done = 1;
            left--;
        }
        if (left == before)
            break;
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!items[i].done && strcmp(items[i].type, "table") == 0) {
            log_error("postgresql: table %s references a table never made", items[i].name);
            rc = -1;
        }
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (strcmp(items[i].type, "index") == 0)
            rc = write_item(pg, &items[i]);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (strcmp(items[i].type, "trigger") == 0)
            rc = write_item(pg, &items[i]);
    /* Every responder of every host LISTENs on sluice_config: a new configuration
     * version is told at its commit, not found at the next poll. */
    if (rc == 0)
        rc = exec_pg(pg, "CREATE OR REPLACE FUNCTION sluice_config_notify() RETURNS trigger LANGUAGE plpgsql AS"
                         " $fn$ BEGIN PERFORM pg_notify('sluice_config', NEW.v::text); RETURN NULL; END $fn$;"
                         " CREATE TRIGGER config_version_notify AFTER UPDATE ON config_version FOR EACH ROW"
                         " EXECUTE FUNCTION sluice_config_notify()");
    for (size_t i = 0; i < n; i++) {
        free(items[i].type);
        free(items[i].name);
        free(items[i].sql);
    }
    free(items);
    sdb_close(lite);
    return rc;
}

/* A migration after the baseline, statement by statement. */
static int migrate_one(struct sdb *pg, const struct db_migration *m)
{
    const char *p = m->sql;
    char *one;
    int rc = 0;
    while (rc == 0 && (one = pg_sql_next(&p))) {
        struct item it = {"statement", (char *)m->name, one, 0};
        rc = write_item(pg, &it);
        free(one);
    }
    return rc;
}

int db_pg_migrate(struct sdb *pg, const char *where)
{
    if (exec_pg(pg, PG_MIGRATE_LOCK) != 0)
        return -1;
    int rc = -1;
    if (exec_pg(pg, "CREATE TABLE IF NOT EXISTS sluice_schema (version BIGINT NOT NULL)") != 0)
        goto out;
    int have = schema_version(pg);
    if (have < -1)
        goto out;
    if (have > db_schema_version()) {
        log_error("database %s has schema version %d, newer than this sluice knows (%d): it was upgraded by a "
                  "newer sluice; install that version again, or restore a backup taken before the upgrade",
                  where, have, db_schema_version());
        goto out;
    }
    if (have == db_schema_version()) {
        rc = 0;
        goto out;
    }
    if (exec_pg(pg, "BEGIN") != 0)
        goto out;
    int ok;
    if (have < 0) {
        ok = baseline(pg) == 0;
    } else {
        ok = 1;
        for (int i = 0; ok && i < db_migrations_count; i++)
            if (db_migrations[i].version > have && migrate_one(pg, &db_migrations[i]) != 0) {
                log_error("migration %s failed", db_migrations[i].name);
                ok = 0;
            }
    }
    char sql[96];
    snprintf(sql, sizeof sql, "DELETE FROM sluice_schema; INSERT INTO sluice_schema VALUES (%d)", db_schema_version());
    if (ok && exec_pg(pg, sql) == 0 && exec_pg(pg, "COMMIT") == 0)
        rc = 0;
    else
        sdb_exec(pg, "ROLLBACK");
out:
    sdb_exec(pg, PG_MIGRATE_UNLOCK);
    return rc;
}
