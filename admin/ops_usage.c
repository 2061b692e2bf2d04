/* ops_usage.c: usage reports from the daily aggregate, never from raw events (R-USE-6, R-USE-7). */
#include "ops_internal.h"

#include <ctype.h>
#include <string.h>

#define USAGE_SUMS \
    "SELECT SUM(d.requests), SUM(d.errors), SUM(d.prompt_tokens), SUM(d.completion_tokens)"
#define USAGE_WHERE \
    " WHERE (?1 IS NULL OR d.tenant_id = ?1) AND (?2 IS NULL OR d.day >= ?2)" \
    " AND (?3 IS NULL OR d.day <= ?3)"
#define USAGE_BY_TOKENS " ORDER BY SUM(d.prompt_tokens) + SUM(d.completion_tokens) DESC," \
    " SUM(d.requests) DESC"

/* One report per grouping. Columns 0-3 are the sums; the group's own columns follow. */
enum usage_group { USAGE_MODEL, USAGE_USER, USAGE_KEY, USAGE_DAY };

static const struct {
    const char *name;   /* group_by value, also the row field naming the group */
    const char *sql;
} usage_reports[] = {
    [USAGE_MODEL] = {"model", USAGE_SUMS ", d.model FROM usage_daily d" USAGE_WHERE
                     " GROUP BY d.model" USAGE_BY_TOKENS ", d.model"},
    [USAGE_USER] = {"user", USAGE_SUMS ", d.user_id, u.name FROM usage_daily d"
                    " LEFT JOIN users u ON u.id = d.user_id" USAGE_WHERE
                    " GROUP BY d.user_id" USAGE_BY_TOKENS ", d.user_id"},
    [USAGE_KEY] = {"key", USAGE_SUMS ", d.key_id, k.prefix, k.name, u.name FROM usage_daily d"
                   " LEFT JOIN api_keys k ON k.id = d.key_id LEFT JOIN users u ON u.id = k.user_id"
                   USAGE_WHERE " GROUP BY d.key_id" USAGE_BY_TOKENS ", d.key_id"},
    [USAGE_DAY] = {"day", USAGE_SUMS ", d.day FROM usage_daily d" USAGE_WHERE
                   " GROUP BY d.day ORDER BY d.day"},
};

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

struct json_object *ops_usage(sqlite3 *db, const char *tenant, const char *group_by,
                              const char *from, const char *to, struct ops_error *err)
{
    enum usage_group g = USAGE_MODEL;
    struct ops_i64 tid = {0, 0};
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
    if (tenant) {
        if (ops_tenant_id(db, tenant, &tid.v, err) != 0)
            return NULL;
        tid.set = 1;
    }
    sqlite3_stmt *st = ops_prepare(db, err, usage_reports[g].sql, "ott", tid, from, to);
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
        json_object_array_add(rows, usage_row(g, st, &c));
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
    ops_json_str(res, "tenant", tenant);
    ops_json_str(res, "from", from);
    ops_json_str(res, "to", to);
    json_object_object_add(res, "rows", rows);
    struct json_object *t = json_object_new_object();
    usage_add_counts(t, &total);
    json_object_object_add(res, "total", t);
    return res;
}
