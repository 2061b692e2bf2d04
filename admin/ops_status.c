/* ops_status.c: what the /inference page shows beside an endpoint or a key that changes
 * with traffic rather than by an audited change (issue 16): an endpoint's failure streak
 * and recovery hint, a key's counters today and this month. Added to the API's answers
 * only, never to audit records. */
#include "ops_internal.h"

#include "settings.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The streak is read from at most this many of the endpoint's newest events (the
 * setting's range ends there too), so the cost is bounded however long it is down. */
#define STREAK_WINDOW 1000

/* A failure of the endpoint: what its callers got as a server-side error (5xx: the
 * upstream failed or timed out, no replica could take it). A refusal of the caller
 * (4xx) says nothing about the endpoint. Counted from usage_events, where the data
 * plane records every routed request with its endpoint, so it needs no sluice-healthd
 * and clears at the first answer that is not a 5xx. */
int ops_endpoint_status(struct sdb *db, struct json_object *ep, struct ops_error *err)
{
    struct json_object *idv = NULL;
    if (!json_object_object_get_ex(ep, "id", &idv))
        return 0;
    int64_t id = json_object_get_int64(idv), streak = 0, last_ms = 0;
    struct settings_value failures;
    char unused[8];
    ops_setting(db, "recovery_hint_failures", &failures, unused, sizeof unused);
    int64_t threshold = failures.i;
    char last_error[128] = "";
    int in_streak = 1;
    struct sdb_stmt *st = ops_prepare(db, err,
                                   "SELECT status, error_code, ts_ms FROM usage_events WHERE endpoint_id = ?1"
                                   " AND shadow = 0 ORDER BY ts_ms DESC, id DESC LIMIT ?2", "ii", id, (int64_t)STREAK_WINDOW);
    if (!st)
        return -1;
    int rc;
    while ((rc = sdb_step(st)) == SDB_ROW) {
        int s = sdb_column_int(st, 0);
        if (s < 500) {
            in_streak = 0;
            if (last_ms)
                break;
            continue;
        }
        if (in_streak)
            streak++;
        if (!last_ms) {
            const char *code = (const char *)sdb_column_text(st, 1);
            snprintf(last_error, sizeof last_error, "%s (%d)", code && *code ? code : "server_error", s);
            last_ms = sdb_column_int64(st, 2);
        }
        if (!in_streak)
            break;
    }
    sdb_finalize(st);
    if (rc != SDB_ROW && rc != SDB_DONE) {
        ops_fail_db(err, db);
        return -1;
    }
    json_object_object_add(ep, "failure_streak", json_object_new_int64(streak));
    ops_json_str(ep, "last_error", last_ms ? last_error : NULL);
    json_object_object_add(ep, "last_error_ms", last_ms ? json_object_new_int64(last_ms) : NULL);
    char hint[512];
    const char *h = NULL;
    if (streak >= threshold) {
        int64_t healthy = 0;
        if (ops_query_i64(db, err, &healthy, "SELECT COUNT(*) FROM replicas WHERE endpoint_id = ?1 AND healthy = 1"
                          " AND state = 'running'", "i", id) < 0)
            return -1;
        if (healthy == 0)
            snprintf(hint, sizeof hint, "%lld requests in a row failed (last: %s) and no replica is healthy and"
                     " running: start or fix the upstream servers, or add a replica", (long long)streak, last_error);
        else
            snprintf(hint, sizeof hint, "%lld requests in a row failed (last: %s): check that the replicas"
                     " answer (their URLs, the upstream credential, the upstream's logs), or use the endpoint"
                     " test", (long long)streak, last_error);
        h = hint;
    }
    ops_json_str(ep, "recovery_hint", h);
    return 0;
}

/* The key's calls and tokens of one period from the daily aggregates (mirrors are never in
 * them): the numbers of a key whose limits keep no counter for that period. */
static int key_daily(struct sdb *db, int64_t id, const char *from_day, const char *to_day, int64_t *calls,
                     int64_t *tokens, struct ops_error *err)
{
    struct sdb_stmt *st = ops_prepare(db, err, "SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(prompt_tokens +"
                                   " completion_tokens), 0) FROM usage_daily WHERE day >= ?1 AND day <= ?2"
                                   " AND key_id = ?3", "tti", from_day, to_day, id);
    if (!st)
        return -1;
    int rc = sdb_step(st);
    if (rc == SDB_ROW) {
        *calls = sdb_column_int64(st, 0);
        *tokens = sdb_column_int64(st, 1);
    }
    sdb_finalize(st);
    if (rc != SDB_ROW) {
        ops_fail_db(err, db);
        return -1;
    }
    return 0;
}

/* R-KEY-4: calls are the counters the gateway enforces the key's call limits with, as the
 * usage writer last stored them (today's and this month's, in the billing time zone: the
 * CGI runs with TZ set to it, as the data plane does); a key without a limit for the period
 * keeps no counter, so its calls come from the daily aggregates. Tokens are the month's
 * enforced counter when the key has a monthly token quota, else the billed tokens of the
 * daily aggregates (the day counter keeps no tokens). */
int ops_key_counters(struct sdb *db, struct json_object *key, struct ops_error *err)
{
    struct json_object *idv = NULL;
    if (!json_object_object_get_ex(key, "id", &idv))
        return 0;
    int64_t id = json_object_get_int64(idv);
    time_t now = time(NULL);
    struct tm tm;
    char day[16], month[16], first[16], last[16];
    localtime_r(&now, &tm);
    strftime(day, sizeof day, "d:%Y-%m-%d", &tm);
    strftime(month, sizeof month, "m:%Y-%m", &tm);
    strftime(first, sizeof first, "%Y-%m-01", &tm);
    strftime(last, sizeof last, "%Y-%m-31", &tm);
    const char *periods[2] = {day, month}, *names[2] = {"today", "month"};
    const char *from[2] = {day + 2, first}, *to[2] = {day + 2, last};
    for (int i = 0; i < 2; i++) {
        int64_t calls = 0, tokens = 0, kept_calls = 0, kept_tokens = 0;
        if (key_daily(db, id, from[i], to[i], &calls, &tokens, err) != 0)
            return -1;
        struct sdb_stmt *st = ops_prepare(db, err, "SELECT calls, tokens FROM quota_counters WHERE key_id = ?1"
                                       " AND period = ?2", "it", id, periods[i]);
        if (!st)
            return -1;
        int rc = sdb_step(st);
        if (rc == SDB_ROW) {
            kept_calls = sdb_column_int64(st, 0);
            kept_tokens = sdb_column_int64(st, 1);
        }
        sdb_finalize(st);
        if (rc != SDB_ROW && rc != SDB_DONE) {
            ops_fail_db(err, db);
            return -1;
        }
        int kept = rc == SDB_ROW;
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "requests", json_object_new_int64(kept ? kept_calls : calls));
        json_object_object_add(o, "tokens", json_object_new_int64(kept && kept_tokens ? kept_tokens : tokens));
        json_object_object_add(key, names[i], o);
    }
    return 0;
}

int ops_list_status(struct sdb *db, struct json_object *res, const char *field,
                    int (*fn)(struct sdb *, struct json_object *, struct ops_error *), struct ops_error *err)
{
    struct json_object *arr = NULL;
    if (!res || !json_object_object_get_ex(res, field, &arr))
        return 0;
    for (size_t i = 0; i < json_object_array_length(arr); i++)
        if (fn(db, json_object_array_get_idx(arr, i), err) != 0)
            return -1;
    return 0;
}
