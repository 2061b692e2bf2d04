/* ops_usage.c: usage reports from the daily aggregates (R-USE-6, R-USE-7); only the latency
 * percentiles read events, a bounded number (issue 16). */
#include "ops_internal.h"

#include "settings.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* R-USE-7: the report groups the matching aggregate rows first and names the groups
 * after, so a 30-day report reads only that range through an index: (day, ...) for
 * every tenant, (tenant_id, day) for one, (user_id, day) for one user. A filter that
 * is not given is written as "?N IS NULL" rather than "(?N IS NULL OR col = ?N)",
 * which SQLite could not use an index for. Only these constant fragments are put
 * together; every value stays bound. Columns 0-4 are the sums and the cost, 5 the
 * group's key; the group's names follow.
 * By model, user, key and day the report reads usage_daily; by endpoint and replica
 * usage_daily_route (sql/012_page_api.sql), which the usage writer fills beside it. The
 * cost prices each aggregate row's tokens with its model's policy (issue 16, usage_cost). */
enum usage_group { USAGE_MODEL, USAGE_USER, USAGE_KEY, USAGE_DAY, USAGE_ENDPOINT, USAGE_REPLICA };

static const struct {
    const char *name;   /* group_by value, also the row field naming the group */
    const char *table;  /* the aggregate it reads */
    const char *key;    /* the grouping column of the aggregate */
    const char *extra;  /* more of the inner query's columns (g.ep: a replica's endpoint) */
    const char *cols;   /* the group's columns in the answer */
    const char *join;   /* names for the group */
    const char *order;
    const char *event;  /* the group's key in usage_events (latency percentiles) */
    const char *sample; /* a group's own newest events: ?5 its key, ?6 ?7 its day's bounds, ?8 its endpoint */
} usage_reports[] = {
    [USAGE_MODEL] = {"model", "usage_daily", "d.model", "", ", g.k", "", " ORDER BY g.p + g.c DESC, g.r DESC, g.k",
                     "e.model", "e.model = ?5"},
    [USAGE_USER] = {"user", "usage_daily", "d.user_id", "", ", g.k, u.name", " LEFT JOIN users u ON u.id = g.k",
                    " ORDER BY g.p + g.c DESC, g.r DESC, g.k", "e.user_id", "e.user_id = ?5"},
    [USAGE_KEY] = {"key", "usage_daily", "d.key_id", "", ", g.k, k.prefix, k.name, u.name",
                   " LEFT JOIN api_keys k ON k.id = g.k LEFT JOIN users u ON u.id = k.user_id",
                   " ORDER BY g.p + g.c DESC, g.r DESC, g.k", "e.key_id", "e.key_id = ?5"},
    [USAGE_DAY] = {"day", "usage_daily", "d.day", "", ", g.k", "", " ORDER BY g.k",
                   "date(e.ts_ms / 1000, 'unixepoch', 'localtime')", "?5 IS NOT NULL AND e.ts_ms BETWEEN ?6 AND ?7"},
    [USAGE_ENDPOINT] = {"endpoint", "usage_daily_route", "d.endpoint_id", "", ", g.k, ep.name",
                        " LEFT JOIN endpoints ep ON ep.id = g.k", " ORDER BY g.p + g.c DESC, g.r DESC, g.k",
                        "e.endpoint_id", "e.endpoint_id = ?5"},
    [USAGE_REPLICA] = {"replica", "usage_daily_route", "d.replica_id", ", MAX(d.endpoint_id) AS ep",
                       ", g.k, r.url, g.ep, ep.name",
                       " LEFT JOIN replicas r ON r.id = g.k LEFT JOIN endpoints ep ON ep.id = g.ep",
                       " ORDER BY g.p + g.c DESC, g.r DESC, g.k", "e.replica_id",
                       "e.endpoint_id = ?8 AND e.replica_id = ?5"},
};
#define USAGE_NGROUPS (sizeof usage_reports / sizeof usage_reports[0])

/* ---- cost: each aggregate row's tokens at its model's prices -------------------------
 * The prices (few models have one) are read once into a sorted table and applied by a SQL
 * function of this connection: a join to model_policies per aggregate row cost the 30-day
 * report of every tenant a third more (bench/usage_api). */
struct usage_price {
    char model[OPS_NAME_MAX + 40];
    double in, out;              /* per 1 000 tokens */
};
struct usage_prices {
    struct usage_price *p;
    size_t n;
    const struct usage_price *last;   /* the previous row's, if it had a price */
};

static int cmp_price(const void *a, const void *b)
{
    return strcmp(((const struct usage_price *)a)->model, ((const struct usage_price *)b)->model);
}

static int usage_prices_load(struct sdb *db, struct usage_prices *t, struct ops_error *err)
{
    struct sdb_stmt *st = ops_prepare(db, err, "SELECT model, COALESCE(price_input_per_1k, 0),"
                                   " COALESCE(price_output_per_1k, 0) FROM model_policies"
                                   " WHERE price_input_per_1k IS NOT NULL OR price_output_per_1k IS NOT NULL", "");
    if (!st)
        return -1;
    size_t cap = 0;
    int rc;
    while ((rc = sdb_step(st)) == SDB_ROW) {
        if (t->n == cap) {
            cap = cap ? cap * 2 : 16;
            t->p = realloc(t->p, cap * sizeof *t->p);
            if (!t->p)
                abort();
        }
        const char *m = (const char *)sdb_column_text(st, 0);
        snprintf(t->p[t->n].model, sizeof t->p[t->n].model, "%s", m ? m : "");
        t->p[t->n].in = sdb_column_double(st, 1);
        t->p[t->n].out = sdb_column_double(st, 2);
        t->n++;
    }
    sdb_finalize(st);
    if (rc != SDB_DONE) {
        ops_fail_db(err, db);
        return -1;
    }
    if (t->n)                       /* no policies: no array (qsort wants one) */
        qsort(t->p, t->n, sizeof *t->p, cmp_price);
    return 0;
}

/* usage_cost(model, prompt_tokens, completion_tokens): their price, 0 without a policy.
 * Called once per aggregate row (~100 000 for a 30-day report of every tenant), so it
 * compares in place and tries the previous row's model first. */
static double usage_cost_fn(void *ctx, const char *m, int64_t prompt, int64_t completion)
{
    struct usage_prices *t = ctx;
    const struct usage_price *hit = NULL;
    if (m && t->last && strcmp(t->last->model, m) == 0)
        hit = t->last;
    for (size_t lo = 0, hi = t->n; m && !hit && lo < hi;) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m, t->p[mid].model);
        if (c == 0)
            hit = t->last = &t->p[mid];
        else if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return hit ? ((double)prompt * hit->in + (double)completion * hit->out) / 1000.0 : 0.0;
}

enum { PRICED_NONE, PRICED_FN, PRICED_SQL };

/* The report's SQL for the filters that are set (?1 tenant, ?2 from, ?3 to, ?4 user). */
static int usage_sql(char *out, size_t n, enum usage_group g, int tenant, int from, int to,
                     int user, int priced)
{
    int w = snprintf(out, n,
                     "SELECT g.r, g.e, g.p, g.c, g.cost%s FROM (SELECT %s AS k, SUM(d.requests) AS r,"
                     " SUM(d.errors) AS e, SUM(d.prompt_tokens) AS p, SUM(d.completion_tokens) AS c,"
                     " %s AS cost%s FROM %s d"
                     " WHERE %s AND %s AND %s AND %s GROUP BY 1) g%s%s",
                     usage_reports[g].cols, usage_reports[g].key,
                     priced == PRICED_FN ? "SUM(usage_cost(d.model, d.prompt_tokens, d.completion_tokens))"
                     : priced == PRICED_SQL ? "SUM(COALESCE((SELECT (d.prompt_tokens * COALESCE(p.price_input_per_1k, 0)"
                                              " + d.completion_tokens * COALESCE(p.price_output_per_1k, 0)) / 1000.0"
                                              " FROM model_policies p WHERE p.model = d.model), 0))"
                     : "0.0",
                     usage_reports[g].extra, usage_reports[g].table,
                     tenant ? "d.tenant_id = ?1" : "?1 IS NULL",
                     from ? "d.day >= ?2" : "?2 IS NULL", to ? "d.day <= ?3" : "?3 IS NULL",
                     user ? "d.user_id = ?4" : "?4 IS NULL", usage_reports[g].join,
                     usage_reports[g].order);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

struct usage_counts {
    int64_t requests, errors, prompt_tokens, completion_tokens;
    double cost;
};

static void usage_add_counts(struct json_object *o, const struct usage_counts *c, const char *currency)
{
    json_object_object_add(o, "requests", json_object_new_int64(c->requests));
    json_object_object_add(o, "errors", json_object_new_int64(c->errors));
    json_object_object_add(o, "prompt_tokens", json_object_new_int64(c->prompt_tokens));
    json_object_object_add(o, "completion_tokens", json_object_new_int64(c->completion_tokens));
    json_object_object_add(o, "total_tokens",
                           json_object_new_int64(c->prompt_tokens + c->completion_tokens));
    /* a millionth of the unit: enough for any price, and no 0.30000000000000004 */
    char text[64];
    double cost = (double)llround(c->cost * 1e6) / 1e6;
    snprintf(text, sizeof text, "%.6f", cost);
    size_t len = strlen(text);
    while (len > 1 && text[len - 1] == '0')
        text[--len] = '\0';
    if (text[len - 1] == '.')
        text[--len] = '\0';
    json_object_object_add(o, "cost", json_object_new_double_s(cost, text));
    ops_json_str(o, "currency", currency);
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

/* The first millisecond of a (checked) day in the billing time zone (the process's TZ),
 * or with next set the first of the day after. */
static int64_t usage_day_ms(const char *day, int next)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = atoi(day) - 1900;
    tm.tm_mon = atoi(day + 5) - 1;
    tm.tm_mday = atoi(day + 8) + (next ? 1 : 0);
    tm.tm_isdst = -1;
    return (int64_t)mktime(&tm) * 1000;
}

static struct json_object *usage_row(enum usage_group g, struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    switch (g) {
    case USAGE_MODEL:
        ops_json_text(o, "model", st, 5);
        break;
    case USAGE_USER:   /* user 0: endpoint keys, no member identity (R-USE-6) */
        ops_json_text(o, "user", st, 6);
        ops_json_int(o, "user_id", st, 5);
        break;
    case USAGE_KEY:
        ops_json_int(o, "key", st, 5);
        ops_json_int(o, "key_id", st, 5);
        ops_json_text(o, "prefix", st, 6);
        ops_json_text(o, "name", st, 7);
        ops_json_text(o, "user", st, 8);
        break;
    case USAGE_DAY:
        ops_json_text(o, "day", st, 5);
        break;
    case USAGE_ENDPOINT:   /* 0: refused before an endpoint was chosen */
        ops_json_text(o, "endpoint", st, 6);
        ops_json_int(o, "endpoint_id", st, 5);
        break;
    case USAGE_REPLICA:
        ops_json_text(o, "replica", st, 6);
        ops_json_int(o, "replica_id", st, 5);
        ops_json_text(o, "endpoint", st, 8);
        ops_json_int(o, "endpoint_id", st, 7);
        break;
    }
    return o;
}

/* The CSV's columns: the JSON row's members in order (ops_usage_csv). */
static struct json_object *usage_columns(enum usage_group g)
{
    static const char *const labels[USAGE_NGROUPS][6] = {
        [USAGE_MODEL] = {"model"}, [USAGE_USER] = {"user", "user_id"},
        [USAGE_KEY] = {"key", "key_id", "prefix", "name", "user"}, [USAGE_DAY] = {"day"},
        [USAGE_ENDPOINT] = {"endpoint", "endpoint_id"},
        [USAGE_REPLICA] = {"replica", "replica_id", "endpoint", "endpoint_id"}};
    static const char *const counts[] = {"requests", "errors", "prompt_tokens", "completion_tokens", "total_tokens",
                                         "cost", "currency", "latency_p50_ms", "latency_p95_ms", "ttft_p50_ms",
                                         "ttft_p95_ms", NULL};
    struct json_object *a = json_object_new_array();
    for (size_t i = 0; i < 6 && labels[g][i]; i++)
        json_object_array_add(a, json_object_new_string(labels[g][i]));
    for (size_t i = 0; counts[i]; i++)
        json_object_array_add(a, json_object_new_string(counts[i]));
    return a;
}

/* ---- latency percentiles: a bounded scan of the events ------------------------------
 * The aggregates hold no latencies, so the page's groups get theirs from the events:
 * first the newest USAGE_SAMPLE successful events of the report's range and filters in
 * one indexed scan (ts_ms, or tenant_id / user_id then ts_ms), each counted for its
 * group; then, for a group on the page with none among them, its own newest
 * USAGE_GROUP_SAMPLE through its own index. So the cost is bounded whatever the range
 * holds, and the percentiles are those of the newest events of each group. */
#define USAGE_SAMPLE 5000
#define USAGE_GROUP_SAMPLE 100

struct usage_samples {
    char key[192];              /* the group's key as text */
    int64_t endpoint_id;        /* replica groups: its endpoint (its own index) */
    struct json_object *row;
    int64_t *lat, *ttft;
    size_t nlat, nttft, cap_lat, cap_ttft;
};

static void samples_push(int64_t **a, size_t *n, size_t *cap, int64_t v)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *a = realloc(*a, *cap * sizeof **a);
        if (!*a)
            abort();
    }
    (*a)[(*n)++] = v;
}

static void samples_add(struct usage_samples *s, int64_t latency, int64_t ttft)
{
    samples_push(&s->lat, &s->nlat, &s->cap_lat, latency);
    if (ttft > 0)   /* 0: no first token was timed (an answer without a stream) */
        samples_push(&s->ttft, &s->nttft, &s->cap_ttft, ttft);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_samples(const void *a, const void *b)
{
    return strcmp(((const struct usage_samples *)a)->key, ((const struct usage_samples *)b)->key);
}

/* Nearest rank: the smallest value with at least p percent of the samples at or below. */
static struct json_object *percentile(int64_t *v, size_t n, int p)
{
    if (n == 0)
        return NULL;
    size_t rank = (n * (size_t)p + 99) / 100;
    return json_object_new_int64(v[rank ? rank - 1 : 0]);
}

static void samples_finish(struct usage_samples *s)
{
    if (s->nlat)                    /* a group without samples has no arrays */
        qsort(s->lat, s->nlat, sizeof *s->lat, cmp_i64);
    if (s->nttft)
        qsort(s->ttft, s->nttft, sizeof *s->ttft, cmp_i64);
    json_object_object_add(s->row, "latency_p50_ms", percentile(s->lat, s->nlat, 50));
    json_object_object_add(s->row, "latency_p95_ms", percentile(s->lat, s->nlat, 95));
    json_object_object_add(s->row, "ttft_p50_ms", percentile(s->ttft, s->nttft, 50));
    json_object_object_add(s->row, "ttft_p95_ms", percentile(s->ttft, s->nttft, 95));
    free(s->lat);
    free(s->ttft);
}

/* The filters of the report on usage_events e: ?1 tenant, ?2 from_ms, ?3 to_ms, ?4 user;
 * never a mirror's event (R-SHD-1). */
static int usage_event_where(char *out, size_t n, int tenant, int from, int to, int user)
{
    int w = snprintf(out, n, "%s AND %s AND %s AND %s AND e.status < 400 AND e.shadow = 0",
                     tenant ? "e.tenant_id = ?1" : "?1 IS NULL", from ? "e.ts_ms >= ?2" : "?2 IS NULL",
                     to ? "e.ts_ms < ?3" : "?3 IS NULL", user ? "e.user_id = ?4" : "?4 IS NULL");
    return w > 0 && (size_t)w < n ? 0 : -1;
}

static int usage_latencies(struct sdb *db, enum usage_group g, struct usage_samples *s, size_t n, struct ops_i64 tid,
                           struct ops_i64 uid, struct ops_i64 from_ms, struct ops_i64 to_ms, struct ops_error *err)
{
    char where[256], sql[1024];
    if (n == 0)
        return 0;
    qsort(s, n, sizeof *s, cmp_samples);
    if (usage_event_where(where, sizeof where, tid.set, from_ms.set, to_ms.set, uid.set) != 0 ||
        snprintf(sql, sizeof sql, "SELECT %s, e.latency_ms, e.ttft_ms FROM usage_events e WHERE %s"
                 " ORDER BY e.ts_ms DESC LIMIT %d", usage_reports[g].event, where, USAGE_SAMPLE) >= (int)sizeof sql) {
        ops_fail(err, OPS_ERR_INTERNAL, NULL, "usage query too long");
        return -1;
    }
    struct sdb_stmt *st = ops_prepare(db, err, sql, "oooo", tid, from_ms, to_ms, uid);
    if (!st)
        return -1;
    int rc;
    struct usage_samples probe;
    while ((rc = sdb_step(st)) == SDB_ROW) {
        const char *k = (const char *)sdb_column_text(st, 0);
        snprintf(probe.key, sizeof probe.key, "%s", k ? k : "");
        struct usage_samples *hit = bsearch(&probe, s, n, sizeof *s, cmp_samples);
        if (hit)
            samples_add(hit, sdb_column_int64(st, 1), sdb_column_int64(st, 2));
    }
    sdb_finalize(st);
    if (rc != SDB_DONE) {
        ops_fail_db(err, db);
        return -1;
    }
    if (snprintf(sql, sizeof sql, "SELECT e.latency_ms, e.ttft_ms FROM usage_events e WHERE %s AND %s"
                 /* every group binds ?5-?8; those its fragment does not use are named here */
                 " AND ?5 IS NOT NULL AND ?6 IS NOT NULL AND ?7 IS NOT NULL AND ?8 IS NOT NULL"
                 " ORDER BY e.ts_ms DESC LIMIT %d", usage_reports[g].sample, where, USAGE_GROUP_SAMPLE) >=
        (int)sizeof sql) {
        ops_fail(err, OPS_ERR_INTERNAL, NULL, "usage query too long");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i].nlat)
            continue;
        int64_t day0 = 0, day1 = 0;
        if (g == USAGE_DAY && usage_check_day("day", s[i].key, err) == 0) {
            day0 = usage_day_ms(s[i].key, 0);
            day1 = usage_day_ms(s[i].key, 1) - 1;
        }
        ops_error_clear(err);
        st = ops_prepare(db, err, sql, "ooootiii", tid, from_ms, to_ms, uid, s[i].key, day0, day1,
                         s[i].endpoint_id);
        if (!st)
            return -1;
        while ((rc = sdb_step(st)) == SDB_ROW)
            samples_add(&s[i], sdb_column_int64(st, 0), sdb_column_int64(st, 1));
        sdb_finalize(st);
        if (rc != SDB_DONE) {
            ops_fail_db(err, db);
            return -1;
        }
    }
    return 0;
}

struct json_object *ops_usage(struct sdb *db, const struct ops_list *l, const char *group_by,
                              const char *from, const char *to, struct ops_error *err)
{
    enum usage_group g = USAGE_MODEL;
    struct ops_i64 tid, uid;
    int64_t limit = l ? l->limit : 0, offset = l ? l->offset : 0, groups = 0;
    if (group_by) {
        static const char *const names[] = {"model", "user", "key", "day", "endpoint", "replica", NULL};
        if (ops_check_enum("group_by", group_by, names, err) != 0)
            return NULL;
        for (size_t i = 0; i < USAGE_NGROUPS; i++)
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
    char currency[64];
    struct settings_value cur;
    ops_setting(db, "usage_currency", &cur, currency, sizeof currency);
    /* Groups are few (models, users, keys, days, endpoints, replicas): one pass sums every
     * group for the totals and keeps only the page, so the report costs one indexed scan. */
    char sql[2048];
    struct usage_prices prices = {NULL, 0, NULL};
    if (usage_prices_load(db, &prices, err) != 0)
        return NULL;
    /* The price of a row: usage_cost() in C where the engine runs it (SQLite), else
     * the same sum in SQL from model_policies (PostgreSQL). */
    int priced = !prices.n ? PRICED_NONE : sdb_is_server(db) ? PRICED_SQL : PRICED_FN;
    if (usage_sql(sql, sizeof sql, g, tid.set, from != NULL, to != NULL, uid.set, priced) != 0) {
        free(prices.p);
        ops_fail(err, OPS_ERR_INTERNAL, NULL, "usage query too long");
        return NULL;
    }
    if (priced == PRICED_FN && sdb_create_function3(db, "usage_cost", usage_cost_fn, &prices) != SDB_OK) {
        free(prices.p);
        ops_fail_db(err, db);
        return NULL;
    }
    struct sdb_stmt *st = ops_prepare(db, err, sql, "otto", tid, from, to, uid);
    if (!st) {
        free(prices.p);
        return NULL;
    }
    struct json_object *rows = json_object_new_array();
    struct usage_counts total = {0, 0, 0, 0, 0};
    size_t npage = 0, cap = limit > 0 ? (size_t)limit : 64;
    struct usage_samples *samples = calloc(cap, sizeof *samples);
    if (!samples)
        abort();
    int rc;
    while ((rc = sdb_step(st)) == SDB_ROW) {
        struct usage_counts c = {
            sdb_column_int64(st, 0), sdb_column_int64(st, 1),
            sdb_column_int64(st, 2), sdb_column_int64(st, 3), sdb_column_double(st, 4)};
        total.requests += c.requests;
        total.errors += c.errors;
        total.prompt_tokens += c.prompt_tokens;
        total.completion_tokens += c.completion_tokens;
        total.cost += c.cost;
        if (groups >= offset && (limit == 0 || groups < offset + limit)) {
            struct json_object *o = usage_row(g, st);
            usage_add_counts(o, &c, currency);
            json_object_array_add(rows, o);
            if (npage == cap) {
                cap *= 2;
                samples = realloc(samples, cap * sizeof *samples);
                if (!samples)
                    abort();
            }
            memset(&samples[npage], 0, sizeof samples[npage]);
            const char *k = (const char *)sdb_column_text(st, 5);
            snprintf(samples[npage].key, sizeof samples[npage].key, "%s", k ? k : "");
            samples[npage].row = o;
            if (g == USAGE_REPLICA)
                samples[npage].endpoint_id = sdb_column_int64(st, 7);
            npage++;
        }
        groups++;
    }
    if (rc != SDB_DONE)
        ops_fail_db(err, db);
    sdb_finalize(st);
    /* the function points at prices: gone from the connection before they are */
    if (priced == PRICED_FN)
        sdb_create_function3(db, "usage_cost", NULL, NULL);
    free(prices.p);
    struct ops_i64 from_ms = {from != NULL, from ? usage_day_ms(from, 0) : 0};
    struct ops_i64 to_ms = {to != NULL, to ? usage_day_ms(to, 1) : 0};
    if (rc == SDB_DONE && usage_latencies(db, g, samples, npage, tid, uid, from_ms, to_ms, err) != 0)
        rc = SDB_ERROR;
    for (size_t i = 0; i < npage; i++)
        samples_finish(&samples[i]);
    free(samples);
    if (rc != SDB_DONE) {
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
    json_object_object_add(res, "columns", usage_columns(g));
    json_object_object_add(res, "total", json_object_new_int64(groups));
    json_object_object_add(res, "limit", json_object_new_int64(limit));
    json_object_object_add(res, "offset", json_object_new_int64(offset));
    struct json_object *t = json_object_new_object();
    usage_add_counts(t, &total, currency);
    json_object_object_add(res, "totals", t);
    return res;
}

/* R-USE-7: events older than the retention go (and R-CACHE-4's semantic hit audit rows);
 * the daily aggregates stay forever. */
struct json_object *ops_usage_prune(struct sdb *db, int64_t days, struct ops_error *err)
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
        int64_t deleted = sdb_changes(db);
        /* R-CACHE-4: the semantic hit audit is kept as long as the events it samples. */
        if (ops_run(db, err, "DELETE FROM semantic_hits WHERE ts_ms < ?1", "i", cutoff_ms) == 0) {
            res = json_object_new_object();
            json_object_object_add(res, "deleted", json_object_new_int64(deleted));
            json_object_object_add(res, "semantic_hits_deleted", json_object_new_int64(sdb_changes(db)));
            json_object_object_add(res, "days", json_object_new_int64(days));
        }
    }
    return ops_finish(db, res, err);
}
