/* ops_request.c: the Requests view, one usage event per request, newest first
 * (GET /api/v1/requests, issue 16, R-ADM-3). Keyset pages over (ts_ms, id): the cursor is
 * the last id seen, its ts_ms read back, so a page reads only its own rows through an
 * index ending in ts_ms (sql/012_page_api.sql) whatever the filter, and never an OFFSET. */
#include "ops_internal.h"

#include <stdio.h>
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

static struct json_object *req_row(sqlite3_stmt *st)
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

struct json_object *ops_request_get(sqlite3 *db, int64_t id, struct ops_error *err)
{
    return ops_query_one(db, err, req_row, "request",
                         "SELECT " REQ_COLS " FROM usage_events e" REQ_JOINS " WHERE e.id = ?1", "i", id);
}

/* One page's ids, newest first, for the filters that are set. Parameters: ?1 tenant,
 * ?2 user, ?3 key, ?4 endpoint, ?5 status, ?6 status class, ?7 code, ?8 model, ?9 from,
 * ?10 to, ?11 cursor ts_ms, ?12 cursor id, ?13 rows. A filter that is not given is
 * "?N IS NULL", which leaves the planner free to take the index of one that is; only
 * these constant fragments are put together, every value stays bound. */
static int req_page_sql(char *out, size_t n, const struct ops_request_filter *f, const char *model_col)
{
    char model[64] = "?8 IS NULL";
    if (model_col)
        snprintf(model, sizeof model, "e.%s = ?8", model_col);
    int w = snprintf(out, n,
                     "SELECT e.id, e.ts_ms FROM usage_events e WHERE %s AND %s AND %s AND %s AND %s AND %s"
                     " AND %s AND %s AND %s AND %s AND %s ORDER BY e.ts_ms DESC, e.id DESC LIMIT ?13",
                     f->tenant_id.set ? "e.tenant_id = ?1" : "?1 IS NULL",
                     f->user_id.set ? "e.user_id = ?2" : "?2 IS NULL",
                     f->key_id.set ? "e.key_id = ?3" : "?3 IS NULL",
                     f->endpoint_id.set ? "e.endpoint_id = ?4" : "?4 IS NULL",
                     f->status.set ? "e.status = ?5" : "?5 IS NULL",
                     f->status_class.set ? "e.status / 100 = ?6" : "?6 IS NULL",
                     f->code ? "e.error_code = ?7" : "?7 IS NULL", model,
                     f->from_ms.set ? "e.ts_ms >= ?9" : "?9 IS NULL",
                     f->to_ms.set ? "e.ts_ms <= ?10" : "?10 IS NULL",
                     f->before.set ? "e.ts_ms <= ?11 AND (e.ts_ms < ?11 OR e.id < ?12)"
                                   : "?11 IS NULL AND ?12 IS NULL");
    return w > 0 && (size_t)w < n ? 0 : -1;
}

struct json_object *ops_request_list(sqlite3 *db, const struct ops_request_filter *asked, struct ops_error *err)
{
    struct ops_request_filter fl = *asked;
    const struct ops_request_filter *f = &fl;
    if (fl.status.set && !fl.status_class.set) {   /* an exact status reads its class's index */
        fl.status_class.set = 1;
        fl.status_class.v = fl.status.v / 100;
    }
    if (f->limit < 1 || f->limit > OPS_REQUEST_LIMIT_MAX) {
        ops_fail(err, OPS_ERR_INVALID, "limit", "limit must be 1 to %d", OPS_REQUEST_LIMIT_MAX);
        return NULL;
    }
    struct ops_i64 cursor_ts = {0, 0};
    if (f->before.set) {
        int rc = ops_query_i64(db, err, &cursor_ts.v, "SELECT ts_ms FROM usage_events WHERE id = ?1", "i",
                               f->before.v);
        if (rc < 0)
            return NULL;
        if (rc == 0) {
            ops_fail(err, OPS_ERR_INVALID, "before", "before must be the id of a listed request");
            return NULL;
        }
        cursor_ts.set = 1;
    }
    /* "asked or routed": one page through each model index and the union of the two,
     * rather than an OR the planner would answer by sorting every match. */
    char a[1024], b[1024], sql[3072];
    if (req_page_sql(a, sizeof a, f, f->model ? "model" : NULL) != 0 ||
        req_page_sql(b, sizeof b, f, "routed_model") != 0)
        goto too_long;
    int w = f->model
        ? snprintf(sql, sizeof sql, "SELECT " REQ_COLS " FROM (SELECT * FROM (%s) UNION SELECT * FROM (%s)) p"
                   " JOIN usage_events e ON e.id = p.id" REQ_JOINS
                   " ORDER BY p.ts_ms DESC, p.id DESC LIMIT ?13", a, b)
        : snprintf(sql, sizeof sql, "SELECT " REQ_COLS " FROM (%s) p JOIN usage_events e ON e.id = p.id"
                   REQ_JOINS " ORDER BY p.ts_ms DESC, p.id DESC", a);
    if (w <= 0 || (size_t)w >= sizeof sql)
        goto too_long;
    struct ops_i64 cursor_id = f->before;
    /* One row more than the page says whether there is a next one. */
    sqlite3_stmt *st = ops_prepare(db, err, sql, "oooooottooooi", f->tenant_id, f->user_id, f->key_id,
                                   f->endpoint_id, f->status, f->status_class, f->code, f->model, f->from_ms, f->to_ms, cursor_ts, cursor_id, (int64_t)(f->limit + 1));
    if (!st)
        return NULL;
    struct json_object *rows = json_object_new_array();
    int64_t last = 0, count = 0;
    int rc, more = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (count == f->limit) {
            more = 1;
            break;
        }
        json_object_array_add(rows, req_row(st));
        last = sqlite3_column_int64(st, 0);
        count++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        ops_fail_db(err, db);
        sqlite3_finalize(st);
        json_object_put(rows);
        return NULL;
    }
    sqlite3_finalize(st);
    struct json_object *res = json_object_new_object();
    json_object_object_add(res, "requests", rows);
    json_object_object_add(res, "next", more ? json_object_new_int64(last) : NULL);
    json_object_object_add(res, "limit", json_object_new_int64(f->limit));
    return res;
too_long:
    ops_fail(err, OPS_ERR_INTERNAL, NULL, "requests query too long");
    return NULL;
}
