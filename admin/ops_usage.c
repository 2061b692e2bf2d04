/* ops_usage.c: usage reports from the daily aggregate, never from raw events (R-USE-6, R-USE-7). */
#include "ops_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* R-USE-7: the report groups the matching aggregate rows first and names the groups
 * after, so a 30-day report reads only that range through an index: (day, ...) for
 * every tenant, (tenant_id, day) for one, (user_id, day) for one user. A filter that
 * is not given is written as "?N IS NULL" rather than "(?N IS NULL OR col = ?N)",
 * which SQLite could not use an index for. Only these constant fragments are put
 * together; every value stays bound. Columns 0-3 are the sums; the group's own
 * columns follow. */
enum usage_group { USAGE_MODEL, USAGE_USER, USAGE_KEY, USAGE_DAY };

static const struct {
    const char *name;   /* group_by value, also the row field naming the group */
    const char *key;    /* the grouping column of usage_daily */
    const char *cols;   /* the group's columns in the answer */
    const char *join;   /* names for the group */
    const char *order;
} usage_reports[] = {
    [USAGE_MODEL] = {"model", "d.model", ", g.k", "", " ORDER BY g.p + g.c DESC, g.r DESC, g.k"},
    [USAGE_USER] = {"user", "d.user_id", ", g.k, u.name", " LEFT JOIN users u ON u.id = g.k",
                    " ORDER BY g.p + g.c DESC, g.r DESC, g.k"},
    [USAGE_KEY] = {"key", "d.key_id", ", g.k, k.prefix, k.name, u.name",
                   " LEFT JOIN api_keys k ON k.id = g.k LEFT JOIN users u ON u.id = k.user_id",
                   " ORDER BY g.p + g.c DESC, g.r DESC, g.k"},
    [USAGE_DAY] = {"day", "d.day", ", g.k", "", " ORDER BY g.k"},
};

/* The report's SQL for the filters that are set (?1 tenant, ?2 from, ?3 to, ?4 user). */
static int usage_sql(char *out, size_t n, enum usage_group g, int tenant, int from, int to,
                     int user)
{
    int w = snprintf(out, n,
                     "SELECT g.r, g.e, g.p, g.c%s FROM (SELECT %s AS k, SUM(d.requests) AS r,"
                     " SUM(d.errors) AS e, SUM(d.prompt_tokens) AS p, SUM(d.completion_tokens) AS c"
                     " FROM usage_daily d WHERE %s AND %s AND %s AND %s GROUP BY 1) g%s%s",
                     usage_reports[g].cols, usage_reports[g].key,
                     tenant ? "d.tenant_id = ?1" : "?1 IS NULL",
                     from ? "d.day >= ?2" : "?2 IS NULL", to ? "d.day <= ?3" : "?3 IS NULL",
                     user ? "d.user_id = ?4" : "?4 IS NULL", usage_reports[g].join,
                     usage_reports[g].order);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

struct usage_counts {
    int64_t requests, errors, prompt_tokens, completion_tokens;
};

static void usage_add_counts(struct json_object *o, const struct usage_counts *c)
{
    json_object_object_add(o, "requests", json_object_new_int64(c->requests));
    json_object_object_add(o, "errors", json_object_new_int64(c->errors));
    json_object_object_add(o, "prompt_tokens", json_object_new_int64(c->prompt_tokens));
    json_object_object_add(o, "completion_tokens", json_object_new_int64(c->completion_tokens));
    json_object_object_add(o, "total_tokens",
                           json_object_new_int64(c->prompt_tokens + c->completion_tokens));
}

/* YYYY-MM-DD naming a real date. */
static int usage_check_day(const char *param, const char *s, struct ops_error *err)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int ok = strlen(s) == 10 && s[4] == '-' && s[7] == '-';
    for (int i = 0; ok && i < 10; i++)
        if (i != 4 && i != 7 && !isdigit((unsigned char)s[i]))
            ok = 0;
    if (ok) {
        int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
        int m = (s[5] - '0') * 10 + (s[6] - '0');
        int d = (s[8] - '0') * 10 + (s[9] - '0');
        int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        ok = m >= 1 && m <= 12 && d >= 1 && d <= mdays[m - 1] && !(m == 2 && d == 29 && !leap);
    }
    if (!ok)
        ops_fail(err, OPS_ERR_INVALID, param, "%s must be a date YYYY-MM-DD", param);
    return ok ? 0 : -1;
}

static struct json_object *usage_row(enum usage_group g, sqlite3_stmt *st,
                                     const struct usage_counts *c)
{
    struct json_object *o = json_object_new_object();
    switch (g) {
    case USAGE_MODEL:
        ops_json_text(o, "model", st, 4);
        break;
    case USAGE_USER:   /* user 0: endpoint keys, no member identity (R-USE-6) */
        ops_json_text(o, "user", st, 5);
        ops_json_int(o, "user_id", st, 4);
        break;
    case USAGE_KEY:
        ops_json_int(o, "key", st, 4);
        ops_json_int(o, "key_id", st, 4);
        ops_json_text(o, "prefix", st, 5);
        ops_json_text(o, "name", st, 6);
        ops_json_text(o, "user", st, 7);
        break;
    case USAGE_DAY:
        ops_json_text(o, "day", st, 4);
        break;
    }
    usage_add_counts(o, c);
    return o;
}

struct json_object *ops_usage(sqlite3 *db, const struct ops_list *l, const char *group_by,
                              const char *from, const char *to, struct ops_error *err)
{
    enum usage_group g = USAGE_MODEL;
    struct ops_i64 tid, uid;
    int64_t limit = l ? l->limit : 0, offset = l ? l->offset : 0, groups = 0;
    if (group_by) {
        static const char *const names[] = {"model", "user", "key", "day", NULL};
        if (ops_check_enum("group_by", group_by, names, err) != 0)
            return NULL;
        for (size_t i = 0; i < sizeof usage_reports / sizeof usage_reports[0]; i++)
            if (strcmp(group_by, usage_reports[i].name) == 0)
                g = (enum usage_group)i;
    }
    if ((from && usage_check_day("from", from, err) != 0) ||
        (to && usage_check_day("to", to, err) != 0))
        return NULL;
    if (from && to && strcmp(from, to) > 0) {
        ops_fail(err, OPS_ERR_INVALID, "from", "from must not be after to");
        return NULL;
    }
    if (limit < 0 || limit > OPS_LIST_LIMIT_MAX || offset < 0) {
        ops_fail(err, OPS_ERR_INVALID, offset < 0 ? "offset" : "limit",
                 "limit must be 1 to %d and offset at least 0", OPS_LIST_LIMIT_MAX);
        return NULL;
    }
    if (ops_list_ids(db, l, &tid, &uid, NULL, err) != 0)
        return NULL;
    /* Groups are few (models, users, keys, days): one pass sums every group for the
     * totals and keeps only the page, so the report costs one indexed scan. */
    char sql[1024];
    if (usage_sql(sql, sizeof sql, g, tid.set, from != NULL, to != NULL, uid.set) != 0) {
        ops_fail(err, OPS_ERR_INTERNAL, NULL, "usage query too long");
        return NULL;
    }
    sqlite3_stmt *st = ops_prepare(db, err, sql, "otto", tid, from, to, uid);
    if (!st)
        return NULL;
    struct json_object *rows = json_object_new_array();
    struct usage_counts total = {0, 0, 0, 0};
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct usage_counts c = {
            sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
            sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3)};
        total.requests += c.requests;
        total.errors += c.errors;
        total.prompt_tokens += c.prompt_tokens;
        total.completion_tokens += c.completion_tokens;
        if (groups >= offset && (limit == 0 || groups < offset + limit))
            json_object_array_add(rows, usage_row(g, st, &c));
        groups++;
    }
    if (rc != SQLITE_DONE)
        ops_fail_db(err, db);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        json_object_put(rows);
        return NULL;
    }
    struct json_object *res = json_object_new_object();
    ops_json_str(res, "group_by", usage_reports[g].name);
    if (tid.set)
        json_object_object_add(res, "tenant_id", json_object_new_int64(tid.v));
    if (uid.set)
        json_object_object_add(res, "user_id", json_object_new_int64(uid.v));
    ops_json_str(res, "from", from);
    ops_json_str(res, "to", to);
    json_object_object_add(res, "rows", rows);
    json_object_object_add(res, "total", json_object_new_int64(groups));
    json_object_object_add(res, "limit", json_object_new_int64(limit));
    json_object_object_add(res, "offset", json_object_new_int64(offset));
    struct json_object *t = json_object_new_object();
    usage_add_counts(t, &total);
    json_object_object_add(res, "totals", t);
    return res;
}

/* R-USE-7: events older than the retention go (and R-CACHE-4's semantic hit audit rows);
 * the daily aggregates stay forever. */
struct json_object *ops_usage_prune(sqlite3 *db, int64_t days, struct ops_error *err)
{
    if (days < 1 || days > 36500) {
        ops_fail(err, OPS_ERR_INVALID, "days", "days must be 1 to 36500");
        return NULL;
    }
    int64_t cutoff_ms = ((int64_t)time(NULL) - days * 86400) * 1000;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (ops_run(db, err, "DELETE FROM usage_events WHERE ts_ms < ?1", "i", cutoff_ms) == 0) {
        int64_t deleted = sqlite3_changes(db);
        /* R-CACHE-4: the semantic hit audit is kept as long as the events it samples. */
        if (ops_run(db, err, "DELETE FROM semantic_hits WHERE ts_ms < ?1", "i", cutoff_ms) == 0) {
            res = json_object_new_object();
            json_object_object_add(res, "deleted", json_object_new_int64(deleted));
            json_object_object_add(res, "semantic_hits_deleted", json_object_new_int64(sqlite3_changes(db)));
            json_object_object_add(res, "days", json_object_new_int64(days));
        }
    }
    return ops_finish(db, res, err);
}
