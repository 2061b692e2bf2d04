/* ops_request.c: the Requests view, one usage event per request, newest first
 * (GET /api/v1/requests, issue 16, R-ADM-3). Keyset pages over (ts_ms, id): the cursor is
 * the last id seen, its ts_ms read back, so a page reads its rows through an index ending
 * in ts_ms (sql/012_page_api.sql) and never an OFFSET; its work is bounded (below). */
#include "ops_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The answer's columns over usage_events e and the names joined to it. */
#define REQ_COLS \
    "e.id, e.ts_ms, e.request_id, e.status, e.error_code, e.model, e.routed_model, e.path," \
    " e.tenant_id, e.user_id, u.name, e.key_id, k.name, e.endpoint_id, ep.name, e.replica_id," \
    " r.url, e.prompt_tokens, e.completion_tokens, e.cache_read_tokens, e.reasoning_tokens," \
    " e.ttft_ms, e.latency_ms, e.queue_ms, e.retries, e.stream, e.cached, e.cache, e.affinity," \
    " e.finish_reason, e.content_rule, e.usage_estimated"
#define REQ_JOINS \
    " LEFT JOIN users u ON u.id = e.user_id AND e.user_id <> 0" \
    " LEFT JOIN api_keys k ON k.id = e.key_id AND e.key_id <> 0" \
    " LEFT JOIN endpoints ep ON ep.id = e.endpoint_id AND e.endpoint_id <> 0" \
    " LEFT JOIN replicas r ON r.id = e.replica_id AND e.replica_id <> 0"

static struct json_object *req_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_int(o, "ts_ms", st, 1);
    ops_json_text(o, "request_id", st, 2);
    ops_json_int(o, "status", st, 3);
    ops_json_text(o, "error_code", st, 4);
    ops_json_text(o, "model", st, 5);
    ops_json_text(o, "routed_model", st, 6);
    ops_json_text(o, "path", st, 7);
    ops_json_int(o, "tenant_id", st, 8);
    ops_json_int(o, "user_id", st, 9);
    ops_json_text(o, "user", st, 10);
    ops_json_int(o, "key_id", st, 11);
    ops_json_text(o, "key", st, 12);
    ops_json_int(o, "endpoint_id", st, 13);
    ops_json_text(o, "endpoint", st, 14);
    ops_json_int(o, "replica_id", st, 15);
    ops_json_text(o, "replica", st, 16);
    ops_json_int(o, "prompt_tokens", st, 17);
    ops_json_int(o, "completion_tokens", st, 18);
    ops_json_int(o, "cache_read_tokens", st, 19);
    ops_json_int(o, "reasoning_tokens", st, 20);
    ops_json_int(o, "ttft_ms", st, 21);
    ops_json_int(o, "latency_ms", st, 22);
    ops_json_int(o, "queue_ms", st, 23);
    ops_json_int(o, "retries", st, 24);
    ops_json_bool(o, "stream", st, 25);
    ops_json_bool(o, "cached", st, 26);
    ops_json_text(o, "cache", st, 27);
    ops_json_text(o, "affinity", st, 28);
    ops_json_text(o, "finish_reason", st, 29);
    ops_json_text(o, "content_rule", st, 30);
    ops_json_bool(o, "estimated", st, 31);
    return o;
}

struct json_object *ops_request_get(struct sdb *db, int64_t id, struct ops_error *err)
{
    return ops_query_one(db, err, req_row, "request",
                         "SELECT " REQ_COLS " FROM usage_events e" REQ_JOINS " WHERE e.id = ?1 AND e.shadow = 0",
                         "i", id);
}

/* ---- a page ------------------------------------------------------------------------
 * Parameters of every statement below: ?1 tenant, ?2 user, ?3 key, ?4 endpoint, ?5 status,
 * ?6 status class, ?7 code, ?8 model, ?9 from, ?10 to, ?11 cursor ts_ms, ?12 cursor id,
 * ?13 rows. A term not used is "?N IS NULL" (true for an unset filter) so every statement
 * binds the same; only these constant fragments are put together, every value stays bound.
 *
 * Every filter has an index ending in ts_ms, so one filter alone is read in page order and
 * the page stops at its last row. With several, SQLite's statistics cannot tell which is
 * rare (status 500 among 10^7 events is as likely to it as status 200), and a rare
 * combination read through the common filter's index would examine millions of rows. So
 * the page is driven by the filter with the fewest matches (each counted only up to
 * REQ_WINDOW, through its index) and examines at most REQ_WINDOW of its events; when that
 * window ends before the page is full, the page is shorter and "next" is the last event
 * examined, so following "next" goes on where it stopped. */
#define REQ_WINDOW 10000

enum req_term { T_TENANT, T_USER, T_KEY, T_ENDPOINT, T_STATUS, T_CLASS, T_CODE, T_MODEL, T_NTERMS };

static const char *const req_terms[T_NTERMS] = {
    [T_TENANT] = "e.tenant_id = ?1", [T_USER] = "e.user_id = ?2", [T_KEY] = "e.key_id = ?3",
    [T_ENDPOINT] = "e.endpoint_id = ?4", [T_STATUS] = "e.status = ?5", [T_CLASS] = "e.status / 100 = ?6",
    [T_CODE] = "e.error_code = ?7", [T_MODEL] = "(e.model = ?8 OR e.routed_model = ?8)",
};

/* The term as the driver of a scan: the status indexes hold only statuses other than 200
 * (sql/012_page_api.sql), which SQLite uses only when the query says so in its text; 200
 * and 2xx are read along the time index, where they are most events. */
static const char *req_driver_term(const struct ops_request_filter *f, int t)
{
    if (t == T_STATUS && f->status.v != 200)
        return "e.status = ?5 AND e.status <> 200";
    if (t == T_CLASS && f->status_class.v != 2)
        return "e.status / 100 = ?6 AND e.status <> 200";
    return t >= 0 ? req_terms[t] : "1";
}

/* from, to, cursor: ranges of every index's ts_ms; a mirror's event is no caller's request (R-SHD-1) */
#define REQ_RANGE "%s AND %s AND %s AND e.shadow = 0"

static void req_range(const struct ops_request_filter *f, const char **a, const char **b, const char **c)
{
    *a = f->from_ms.set ? "e.ts_ms >= ?9" : "?9 IS NULL";
    *b = f->to_ms.set ? "e.ts_ms <= ?10" : "?10 IS NULL";
    *c = f->before.set ? "e.ts_ms <= ?11 AND (e.ts_ms < ?11 OR e.id < ?12)" : "?11 IS NULL AND ?12 IS NULL";
}

static int req_set(const struct ops_request_filter *f, enum req_term t)
{
    switch (t) {
    case T_TENANT: return f->tenant_id.set;
    case T_USER: return f->user_id.set;
    case T_KEY: return f->key_id.set;
    case T_ENDPOINT: return f->endpoint_id.set;
    case T_STATUS: return f->status.set;
    case T_CLASS: return f->status_class.set;
    case T_CODE: return f->code != NULL;
    case T_MODEL: return f->model != NULL;
    case T_NTERMS: break;
    }
    return 0;
}

/* The ids and times of the driver's events in page order, at most `limit` (an SQL
 * fragment): one index scan, or for the model (asked or routed) the union of two. */
static int req_window_sql(char *out, size_t n, const struct ops_request_filter *f, int driver, const char *limit)
{
    const char *a, *b, *c;
    req_range(f, &a, &b, &c);
    int w;
    if (driver == T_MODEL)
        w = snprintf(out, n,
                     "SELECT id, ts_ms FROM (SELECT * FROM (SELECT e.id, e.ts_ms FROM usage_events e WHERE e.model = ?8"
                     " AND " REQ_RANGE " ORDER BY e.ts_ms DESC, e.id DESC LIMIT %s) AS asked UNION SELECT * FROM (SELECT e.id,"
                     " e.ts_ms FROM usage_events e WHERE e.routed_model = ?8 AND e.routed_model <> e.model AND "
                     REQ_RANGE " ORDER BY e.ts_ms DESC,"
                     " e.id DESC LIMIT %s) AS routed) AS either ORDER BY ts_ms DESC, id DESC LIMIT %s", a, b, c, limit, a, b, c, limit, limit);
    else
        w = snprintf(out, n, "SELECT e.id, e.ts_ms FROM usage_events e WHERE %s AND " REQ_RANGE
                     " ORDER BY e.ts_ms DESC, e.id DESC LIMIT %s",
                     req_driver_term(f, driver), a, b, c, limit);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

static struct sdb_stmt *req_prepare(struct sdb *db, struct ops_error *err, const char *sql,
                                 const struct ops_request_filter *f, struct ops_i64 cursor_ts, int64_t rows)
{
    return ops_prepare(db, err, sql, "oooooottooooi", f->tenant_id, f->user_id, f->key_id, f->endpoint_id,
                       f->status, f->status_class, f->code, f->model, f->from_ms, f->to_ms, cursor_ts, f->before,
                       rows);
}

/* How many events the term matches in the range, counted up to REQ_WINDOW; -1 on error. */
static int64_t req_count(struct sdb *db, struct ops_error *err, const struct ops_request_filter *f, int t,
                         struct ops_i64 cursor_ts)
{
    char win[2048], sql[2200];
    if (req_window_sql(win, sizeof win, f, t, "?13") != 0 ||
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM (%s) AS page", win) >= (int)sizeof sql) {
        ops_fail(err, OPS_ERR_INTERNAL, NULL, "requests query too long");
        return -1;
    }
    struct sdb_stmt *st = req_prepare(db, err, sql, f, cursor_ts, REQ_WINDOW);
    if (!st)
        return -1;
    int64_t n = sdb_step(st) == SDB_ROW ? sdb_column_int64(st, 0) : -1;
    if (n < 0)
        ops_fail_db(err, db);
    sdb_finalize(st);
    return n;
}

struct json_object *ops_request_list(struct sdb *db, const struct ops_request_filter *f, struct ops_error *err)
{
    if (f->limit < 1 || f->limit > OPS_REQUEST_LIMIT_MAX) {
        ops_fail(err, OPS_ERR_INVALID, "limit", "limit must be 1 to %d", OPS_REQUEST_LIMIT_MAX);
        return NULL;
    }
    struct ops_i64 cursor_ts = {0, 0};
    if (f->before.set) {
        /* Only an event the caller could have been shown: otherwise the 400 / 200 difference
         * would tell anyone which ids exist in other tenants (a GET of them is a 404). */
        int rc = ops_query_i64(db, err, &cursor_ts.v, "SELECT ts_ms FROM usage_events WHERE id = ?1 AND shadow = 0"
                               " AND (?2 IS NULL OR tenant_id = ?2) AND (?3 IS NULL OR user_id = ?3)", "ioo",
                               f->before.v, f->tenant_id, f->user_id);
        if (rc < 0)
            return NULL;
        if (rc == 0) {
            ops_fail(err, OPS_ERR_INVALID, "before", "before must be the id of a listed request");
            return NULL;
        }
        cursor_ts.set = 1;
    }
    /* The driver: the only filter, or the one with the fewest matches. */
    int driver = -1, nset = 0;
    int64_t fewest = INT64_MAX;
    for (int t = 0; t < T_NTERMS; t++)
        if (req_set(f, (enum req_term)t)) {
            nset++;
            driver = t;
        }
    if (nset > 1) {
        for (int t = 0; t < T_NTERMS && fewest > 0; t++) {
            if (!req_set(f, (enum req_term)t))
                continue;
            int64_t n = req_count(db, err, f, t, cursor_ts);
            if (n < 0)
                return NULL;
            if (n < fewest) {
                fewest = n;
                driver = t;
            }
        }
    }
    /* The other filters, checked on each event of the window. */
    char others[512] = "1", win[2048], sql[3072];
    size_t used = 1;
    for (int t = 0; t < T_NTERMS; t++)
        if (t != driver && req_set(f, (enum req_term)t)) {
            int w = snprintf(others + used, sizeof others - used, " AND %s", req_terms[t]);
            if (w < 0 || (size_t)w >= sizeof others - used)
                goto too_long;
            used += (size_t)w;
        }
    /* One filter or none: every event of the window is on the page, so it is the page
     * (and one row more, to know whether another follows). */
    int64_t window = nset > 1 ? REQ_WINDOW : f->limit + 1;
    if (req_window_sql(win, sizeof win, f, driver, "?13") != 0 ||
        snprintf(sql, sizeof sql, "SELECT w.id, %s FROM (%s) w JOIN usage_events e ON e.id = w.id"
                 " ORDER BY w.ts_ms DESC, w.id DESC", others, win) >= (int)sizeof sql)
        goto too_long;
    struct sdb_stmt *st = req_prepare(db, err, sql, f, cursor_ts, window);
    if (!st)
        return NULL;
    int64_t *ids = malloc((size_t)(f->limit + 1) * sizeof *ids), examined = 0, last_examined = 0, found = 0;
    if (!ids)
        abort();
    int rc;
    while (found <= f->limit && (rc = sdb_step(st)) == SDB_ROW) {
        examined++;
        last_examined = sdb_column_int64(st, 0);
        if (sdb_column_int(st, 1))
            ids[found++] = last_examined;
    }
    if (found > f->limit)
        rc = SDB_DONE;
    sdb_finalize(st);
    if (rc != SDB_DONE) {
        free(ids);
        ops_fail_db(err, db);
        return NULL;
    }
    /* A full page and one more: next is the page's last; a window that ended before the
     * page was full: next is the last event it examined. */
    int more = found > f->limit || (nset > 1 && examined == window);
    int64_t page = found > f->limit ? f->limit : found;
    int64_t next = found > f->limit ? ids[f->limit - 1] : last_examined;
    struct json_object *rows = json_object_new_array();
    st = ops_prepare(db, err, "SELECT " REQ_COLS " FROM usage_events e" REQ_JOINS " WHERE e.id = ?1", "i",
                     (int64_t)0);
    for (int64_t i = 0; st && i < page; i++) {
        sdb_reset(st);
        sdb_bind_int64(st, 1, ids[i]);
        if ((rc = sdb_step(st)) == SDB_ROW)
            json_object_array_add(rows, req_row(st));
        else if (rc != SDB_DONE) {   /* DONE: pruned meanwhile */
            ops_fail_db(err, db);
            sdb_finalize(st);
            st = NULL;
        }
    }
    free(ids);
    if (!st) {
        json_object_put(rows);
        return NULL;
    }
    sdb_finalize(st);
    struct json_object *res = json_object_new_object();
    json_object_object_add(res, "requests", rows);
    json_object_object_add(res, "next", more ? json_object_new_int64(next) : NULL);
    json_object_object_add(res, "limit", json_object_new_int64(f->limit));
    return res;
too_long:
    ops_fail(err, OPS_ERR_INTERNAL, NULL, "requests query too long");
    return NULL;
}
