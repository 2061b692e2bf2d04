/* quota.c: the quota_counters UPSERTs of R-KEY-4 and R-KEY-5. */
#include "quota.h"

#include "log.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

static const char SQL_CALLS[] =
    "INSERT INTO quota_counters (key_id, period, calls) VALUES (?1, ?2, 1)"
    " ON CONFLICT (key_id, period) DO UPDATE SET calls = calls + 1 WHERE calls < ?3"
    " RETURNING calls";
static const char SQL_TOKENS[] =
    "INSERT INTO quota_counters (key_id, period, tokens) VALUES (?1, ?2, ?3)"
    " ON CONFLICT (key_id, period) DO UPDATE SET tokens = tokens + ?3 WHERE tokens < ?4"
    " RETURNING tokens";
static const char SQL_SETTLE[] =
    "INSERT INTO quota_counters (key_id, period, tokens) VALUES (?1, ?2, max(?3, 0))"
    " ON CONFLICT (key_id, period) DO UPDATE SET tokens = max(tokens + ?3, 0)";
static const char SQL_CURRENT[] = "SELECT calls, tokens FROM quota_counters WHERE key_id = ?1 AND period = ?2";

/* Runs an UPSERT ... RETURNING: a row back means counted, none means refused. */
static enum quota_result quota_step(struct dbconn *c, sqlite3_stmt *st, int64_t key_id, const char *period,
                                    int column, int64_t *current)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *current = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
        return QUOTA_OK;
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        log_warn("quota: %s", sqlite3_errmsg(c->db));
        return QUOTA_DB_ERROR;
    }
    /* Refused: read the count for the 429 body (uncached; refusals are rare). */
    sqlite3_stmt *q = NULL;
    *current = 0;
    if (sqlite3_prepare_v2(c->db, SQL_CURRENT, -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(q, 1, key_id);
        sqlite3_bind_text(q, 2, period, -1, SQLITE_STATIC);
        if (sqlite3_step(q) == SQLITE_ROW)
            *current = sqlite3_column_int64(q, column);
    }
    sqlite3_finalize(q);
    return QUOTA_REFUSED;
}

enum quota_result quota_take_call(struct dbconn *c, int64_t key_id, const char *period, int64_t limit,
                                  int64_t *current)
{
    sqlite3_stmt *st = dbpool_stmt(c, DBQ_QUOTA_CALLS, SQL_CALLS);
    if (!st)
        return QUOTA_DB_ERROR;
    sqlite3_bind_int64(st, 1, key_id);
    sqlite3_bind_text(st, 2, period, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, limit);
    return quota_step(c, st, key_id, period, 0, current);
}

enum quota_result quota_take_tokens(struct dbconn *c, int64_t key_id, const char *period, int64_t want,
                                    int64_t limit, int64_t *current)
{
    sqlite3_stmt *st = dbpool_stmt(c, DBQ_QUOTA_TOKENS, SQL_TOKENS);
    if (!st)
        return QUOTA_DB_ERROR;
    sqlite3_bind_int64(st, 1, key_id);
    sqlite3_bind_text(st, 2, period, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, want > limit ? limit : want);
    sqlite3_bind_int64(st, 4, limit);
    return quota_step(c, st, key_id, period, 1, current);
}

int quota_settle_tokens(struct dbconn *c, int64_t key_id, const char *period, int64_t delta)
{
    sqlite3_stmt *st = dbpool_stmt(c, DBQ_QUOTA_SETTLE_TOKENS, SQL_SETTLE);
    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, key_id);
    sqlite3_bind_text(st, 2, period, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, delta);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        log_warn("quota settle: %s", sqlite3_errmsg(c->db));
        return -1;
    }
    return 0;
}

void quota_day_period(int64_t ms, char out[16])
{
    char day[11];
    day_string(ms, day);
    snprintf(out, 16, "d:%s", day);
}

void quota_month_period(int64_t ms, char out[16])
{
    char day[11];
    day_string(ms, day);
    snprintf(out, 16, "m:%.7s", day);
}

/* ---- shared-state quotas ---------------------------------------------------- */

static int quota_load(struct dbconn *c, int64_t key_id, const char *period, int64_t *calls, int64_t *tokens)
{
    sqlite3_stmt *q = NULL;
    *calls = *tokens = 0;
    if (!c || sqlite3_prepare_v2(c->db, SQL_CURRENT, -1, &q, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(q, 1, key_id);
    sqlite3_bind_text(q, 2, period, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        *calls = sqlite3_column_int64(q, 0);
        *tokens = sqlite3_column_int64(q, 1);
    }
    sqlite3_finalize(q);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

int quota_shared_loaded(const struct shm_key *k, const char *day, const char *month)
{
    return strncmp(k->day, day, sizeof k->day) == 0 && strncmp(k->month, month, sizeof k->month) == 0;
}

enum quota_result quota_take_shared(struct shm_key *k, struct dbconn *c, int64_t key_id, const struct quota_ask *a,
                                    enum quota_kind *which, int64_t *current)
{
    int64_t calls, tokens;
    if (strncmp(k->day, a->day, sizeof k->day) != 0) {
        if (quota_load(c, key_id, a->day, &calls, &tokens) != 0)
            return QUOTA_DB_ERROR;
        snprintf(k->day, sizeof k->day, "%s", a->day);
        k->day_calls = calls;
    }
    if (strncmp(k->month, a->month, sizeof k->month) != 0) {
        if (quota_load(c, key_id, a->month, &calls, &tokens) != 0)
            return QUOTA_DB_ERROR;
        snprintf(k->month, sizeof k->month, "%s", a->month);
        k->month_calls = calls;
        k->month_tokens = tokens;
    }
    /* R-KEY-2 order; all checked before anything is counted (the paired refund). */
    if (a->daily_limit && k->day_calls >= a->daily_limit) {
        *which = QUOTA_DAILY, *current = k->day_calls;
        return QUOTA_REFUSED;
    }
    if (a->monthly_quota && k->month_calls >= a->monthly_quota) {
        *which = QUOTA_MONTHLY, *current = k->month_calls;
        return QUOTA_REFUSED;
    }
    if (a->monthly_token_quota && k->month_tokens >= a->monthly_token_quota) {
        *which = QUOTA_MONTHLY_TOKENS, *current = k->month_tokens;
        return QUOTA_REFUSED;
    }
    k->day_calls++;
    k->month_calls++;
    if (a->monthly_token_quota)
        k->month_tokens += a->want;
    return QUOTA_OK;
}

void quota_adjust_shared(struct shm_key *k, const char *day, const char *month, int calls, int64_t tokens)
{
    if (day && strncmp(k->day, day, sizeof k->day) == 0) {
        k->day_calls += calls;
        if (k->day_calls < 0)
            k->day_calls = 0;
    }
    if (month && strncmp(k->month, month, sizeof k->month) == 0) {
        k->month_calls += calls;
        k->month_tokens += tokens;
        if (k->month_calls < 0)
            k->month_calls = 0;
        if (k->month_tokens < 0)
            k->month_tokens = 0;
    }
}
