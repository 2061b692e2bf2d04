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
