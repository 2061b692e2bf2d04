/* test_pg_sql.c: sluice's SQLite-dialect SQL as PostgreSQL runs it (lib/sdb_pg_sql.h):
 * parameters, what the dialects spell apart, and the schema read back from SQLite. */
#include "check.h"

#include "sdb_pg_sql.h"

#include <stdlib.h>
#include <string.h>

static void rewrites(const char *in, const char *want, int want_params)
{
    int n = -1;
    char *out = pg_sql_rewrite(in, &n);
    CHECK(out && strcmp(out, want) == 0, "rewrite %s\n  got  %s\n  want %s", in, out ? out : "(null)", want);
    CHECK(n == want_params, "%s: %d parameters, want %d", in, n, want_params);
    free(out);
}

static void schema(const char *in, const char *want)
{
    char why[128] = "";
    char *out = pg_sql_schema(in, why, sizeof why);
    CHECK(out && strcmp(out, want) == 0, "schema %s\n  got  %s\n  want %s (%s)", in, out ? out : "(null)", want, why);
    free(out);
}

int main(void)
{
    /* parameters: ?N keep their number, a bare ? is one past the highest so far */
    rewrites("SELECT a FROM t WHERE b = ?1 AND c = ?2 OR d = ?1", "SELECT a FROM t WHERE b = $1 AND c = $2 OR d = $1", 2);
    rewrites("INSERT INTO t VALUES (?,?,?)", "INSERT INTO t VALUES ($1,$2,$3)", 3);
    rewrites("SELECT ?3, ?", "SELECT $3, $4", 4);
    /* never inside a literal, a quoted name or a comment */
    rewrites("SELECT 'is ? ifnull(' , \"max(\" -- ?1\n FROM t", "SELECT 'is ? ifnull(' , \"max(\" -- ?1\n FROM t", 0);
    rewrites("SELECT 'it''s ?' WHERE a = ?", "SELECT 'it''s ?' WHERE a = $1", 1);
    /* the dialects */
    rewrites("INSERT OR IGNORE INTO alerts (a) VALUES (?1);", "INSERT INTO alerts (a) VALUES ($1) ON CONFLICT DO NOTHING", 1);
    rewrites("SELECT IFNULL(a, 0), ifnull(b, '')", "SELECT COALESCE(a, 0), COALESCE(b, '')", 0);
    rewrites("SELECT max(a), MIN(b), max(a, 0), min(max(x, 1), 9e18)",
             "SELECT max(a), MIN(b), GREATEST(a, 0), LEAST(GREATEST(x, 1), 9e18)", 0);
    rewrites("UPDATE t SET at = CAST(strftime('%s','now') AS INTEGER)",
             "UPDATE t SET at = CAST(CAST(floor(EXTRACT(EPOCH FROM statement_timestamp())) AS BIGINT) AS BIGINT)", 0);
    rewrites("SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
             "SELECT CAST(((EXTRACT(EPOCH FROM statement_timestamp()) / 86400.0 + 2440587.5) - 2440587.5) * 86400000 AS BIGINT)", 0);
    rewrites("SELECT date(e.ts_ms / 1000, 'unixepoch', 'localtime')",
             "SELECT to_char(to_timestamp(e.ts_ms / 1000), 'YYYY-MM-DD')", 0);
    rewrites("SELECT a FROM t WHERE name LIKE ?1", "SELECT a FROM t WHERE name ILIKE $1 ESCAPE ''", 1);
    rewrites("SELECT a FROM t WHERE name NOT LIKE 'a\\b%'", "SELECT a FROM t WHERE name NOT ILIKE 'a\\b%' ESCAPE ''", 0);
    rewrites("SELECT a WHERE n LIKE ?1 ESCAPE '!'", "SELECT a WHERE n ILIKE $1 ESCAPE '!'", 1);
    rewrites("SELECT count(*), total(b) FROM t", "SELECT count(*), COALESCE(SUM(b), 0) FROM t", 0);
    rewrites("SELECT a WHERE b IS NOT 'x' AND c IS ?1 AND d IS NULL AND e IS NOT NULL",
             "SELECT a WHERE b IS DISTINCT FROM 'x' AND c IS NOT DISTINCT FROM $1 AND d IS NULL AND e IS NOT NULL", 1);
    rewrites("SELECT a == 1", "SELECT a = 1", 0);
    /* an upsert's bare columns are the row's */
    rewrites("INSERT INTO d (k, n) VALUES (?1, ?2) ON CONFLICT (k) DO UPDATE SET n = n + excluded.n,"
             " m = max(m, 0) WHERE n < ?3 RETURNING n",
             "INSERT INTO d (k, n) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET n = d.n + excluded.n,"
             " m = GREATEST(d.m, 0) WHERE d.n < $3 RETURNING n", 3);

    /* a quoted target is qualified too; a subquery's columns are left alone */
    rewrites("INSERT INTO \"d\" (k, n) VALUES (?1, ?2) ON CONFLICT (k) DO UPDATE SET n = n + 1",
             "INSERT INTO \"d\" (k, n) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET n = \"d\".n + 1", 2);
    rewrites("INSERT INTO t (k, b) VALUES (?1, 0) ON CONFLICT (k) DO UPDATE SET b = (SELECT x FROM o WHERE o.k = a)",
             "INSERT INTO t (k, b) VALUES ($1, 0) ON CONFLICT (k) DO UPDATE SET b = (SELECT x FROM o WHERE o.k = a)", 1);

    /* the marks: where each parameter stands, and whether that place is a NULL test */
    {
        struct pg_sql_mark *m = NULL;
        int nm = 0, np = 0;
        char *out = pg_sql_rewrite_marks("UPDATE t SET a = CASE WHEN ?1 IS NULL THEN a ELSE ?1 END WHERE id = ?2",
                                         &np, &m, &nm);
        CHECK(np == 2 && nm == 3 && m[0].param == 1 && m[0].null_test && m[1].param == 1 && !m[1].null_test &&
              m[2].param == 2 && !m[2].null_test && strncmp(out + m[0].off, "$1", 2) == 0 &&
              strncmp(out + m[2].off, "$2", 2) == 0, "marks of %s", out);
        free(out);
        free(m);
    }

    CHECK(pg_sql_kind("BEGIN IMMEDIATE") == PG_SQL_BEGIN_WRITE, "BEGIN IMMEDIATE");
    CHECK(pg_sql_kind(" begin") == PG_SQL_BEGIN_READ, "BEGIN");
    CHECK(pg_sql_kind("COMMIT;") == PG_SQL_COMMIT && pg_sql_kind("END") == PG_SQL_COMMIT, "COMMIT, END");
    CHECK(pg_sql_kind("ROLLBACK") == PG_SQL_ROLLBACK, "ROLLBACK");
    CHECK(pg_sql_kind("ROLLBACK TO SAVEPOINT x") == PG_SQL_OTHER, "ROLLBACK TO is a statement");
    CHECK(pg_sql_kind("PRAGMA mmap_size=0") == PG_SQL_NOOP, "PRAGMA");
    CHECK(pg_sql_kind("SELECT 1") == PG_SQL_OTHER, "SELECT");

    /* the schema */
    schema("CREATE TABLE t (\n  id INTEGER PRIMARY KEY AUTOINCREMENT,\n  r REAL, b BLOB NOT NULL, x,\n"
           "  at INTEGER NOT NULL DEFAULT (strftime('%s','now')), -- when\n  PRIMARY KEY (r)\n) WITHOUT ROWID",
           "CREATE TABLE t (\n  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,\n  r DOUBLE PRECISION, b BYTEA NOT NULL,"
           " x TEXT,\n  at BIGINT NOT NULL DEFAULT (CAST(floor(EXTRACT(EPOCH FROM statement_timestamp())) AS BIGINT)), -- when\n"
           "  PRIMARY KEY (r)\n)");
    schema("CREATE TABLE q (calls INTEGER NOT NULL CHECK (typeof(calls) = 'integer'))",
           "CREATE TABLE q (calls BIGINT NOT NULL CHECK ((CASE WHEN (calls) IS NULL THEN 'null' WHEN pg_typeof(calls)::text"
           " IN ('bigint', 'integer', 'smallint') THEN 'integer' WHEN pg_typeof(calls)::text IN ('double precision',"
           " 'real', 'numeric') THEN 'real' WHEN pg_typeof(calls)::text = 'bytea' THEN 'blob' ELSE 'text' END) = 'integer'))");
    schema("CREATE INDEX e_by_class ON e (status / 100, ts_ms) WHERE status <> 200",
           "CREATE INDEX e_by_class ON e ((status / 100), ts_ms) WHERE status <> 200");
    schema("CREATE UNIQUE INDEX q_by ON q (scope, COALESCE(t, 0))", "CREATE UNIQUE INDEX q_by ON q (scope, COALESCE(t, 0))");
    schema("CREATE TRIGGER a_ins AFTER INSERT ON a BEGIN UPDATE v SET n = n + 1; END",
           "CREATE OR REPLACE FUNCTION sluice_trigger_a_ins() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN"
           " UPDATE v SET n = n + 1;  RETURN NULL; END $fn$;\nCREATE TRIGGER a_ins AFTER INSERT ON a  FOR EACH ROW"
           " EXECUTE FUNCTION sluice_trigger_a_ins()");
    schema("CREATE TRIGGER r_upd AFTER UPDATE OF state ON r\n  WHEN NEW.state = 'running' AND OLD.state <> 'running'\n"
           "  BEGIN UPDATE r SET at = 1 WHERE id = NEW.id; END",
           "CREATE OR REPLACE FUNCTION sluice_trigger_r_upd() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN"
           " UPDATE r SET at = 1 WHERE id = NEW.id;  RETURN NULL; END $fn$;\nCREATE TRIGGER r_upd AFTER UPDATE OF state"
           " ON r\n   FOR EACH ROW WHEN (NEW.state = 'running' AND OLD.state <> 'running'\n  ) EXECUTE FUNCTION"
           " sluice_trigger_r_upd()");

    /* a script splits at top-level semicolons; a trigger's body stays whole */
    const char *script = "CREATE TABLE a (x); -- one\nCREATE TRIGGER t AFTER INSERT ON a BEGIN UPDATE b SET y = 1; "
                         "UPDATE c SET z = 2; END; INSERT INTO a VALUES (';');\n";
    const char *want[] = {"CREATE TABLE a (x)",
                          "CREATE TRIGGER t AFTER INSERT ON a BEGIN UPDATE b SET y = 1; UPDATE c SET z = 2; END",
                          "INSERT INTO a VALUES (';')"};
    const char *p = script;
    char *one;
    int n = 0;
    while ((one = pg_sql_next(&p))) {
        CHECK(n < 3 && strcmp(one, want[n]) == 0, "statement %d: %s", n, one);
        free(one);
        n++;
    }
    CHECK(n == 3, "three statements, got %d", n);
    /* a CASE ... END inside a trigger's body is not the body's END */
    p = "CREATE TRIGGER t AFTER INSERT ON a BEGIN UPDATE b SET y = CASE WHEN 1 THEN 2 END; END; SELECT 2";
    one = pg_sql_next(&p);
    CHECK(one && strcmp(one, "CREATE TRIGGER t AFTER INSERT ON a BEGIN UPDATE b SET y = CASE WHEN 1 THEN 2 END; END") == 0,
          "CASE inside a trigger: %s", one ? one : "(null)");
    free(one);
    one = pg_sql_next(&p);
    CHECK(one && strcmp(one, "SELECT 2") == 0, "then the next statement");
    free(one);
    /* PostgreSQL's own DDL: a dollar-quoted body is one token */
    p = "CREATE FUNCTION f() RETURNS int AS $fn$ BEGIN PERFORM 1; RETURN 2; END $fn$; SELECT 1";
    one = pg_sql_next(&p);
    CHECK(one && strcmp(one, "CREATE FUNCTION f() RETURNS int AS $fn$ BEGIN PERFORM 1; RETURN 2; END $fn$") == 0,
          "a dollar-quoted body stays whole: %s", one ? one : "(null)");
    free(one);
    one = pg_sql_next(&p);
    CHECK(one && strcmp(one, "SELECT 1") == 0, "then the next statement");
    free(one);
    return check_done();
}
