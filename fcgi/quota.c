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
static const char SQL_REFUND_CALL[] =
    "UPDATE quota_counters SET calls = max(calls - 1, 0) WHERE key_id = ?1 AND period = ?2";
static const char SQL_CURRENT[] = "SELECT calls, tokens FROM quota_counters WHERE key_id = ?1 AND period = ?2";

/* Runs an UPSERT ... RETURNING: a row back means counted, none means refused. */
static enum quota_result quota_step(struct dbconn *c, struct sdb_stmt *st, int64_t key_id, const char *period,
                                    int column, int64_t *current)
{
    int rc = sdb_step(st);
    if (rc == SDB_ROW) {
        *current = sdb_column_int64(st, 0);
        sdb_reset(st);
        return QUOTA_OK;
    }
    sdb_reset(st);
    if (rc != SDB_DONE) {
        log_warn("quota: %s", sdb_errmsg(c->db));
        return QUOTA_DB_ERROR;
    }
    /* Refused: read the count for the 429 body (uncached; refusals are rare). */
    struct sdb_stmt *q = NULL;
    *current = 0;
    if (sdb_prepare(c->db, SQL_CURRENT, &q) == SDB_OK) {
        sdb_bind_int64(q, 1, key_id);
        sdb_bind_text(q, 2, period, -1, SDB_STATIC);
        if (sdb_step(q) == SDB_ROW)
            *current = sdb_column_int64(q, column);
    }
    sdb_finalize(q);
    return QUOTA_REFUSED;
}

enum quota_result quota_take_call(struct dbconn *c, int64_t key_id, const char *period, int64_t limit,
                                  int64_t *current)
{
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_QUOTA_CALLS, SQL_CALLS);
    if (!st)
        return QUOTA_DB_ERROR;
    sdb_bind_int64(st, 1, key_id);
    sdb_bind_text(st, 2, period, -1, SDB_STATIC);
    sdb_bind_int64(st, 3, limit);
    return quota_step(c, st, key_id, period, 0, current);
}

enum quota_result quota_take_tokens(struct dbconn *c, int64_t key_id, const char *period, int64_t want,
                                    int64_t limit, int64_t *current)
{
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_QUOTA_TOKENS, SQL_TOKENS);
    if (!st)
        return QUOTA_DB_ERROR;
    sdb_bind_int64(st, 1, key_id);
    sdb_bind_text(st, 2, period, -1, SDB_STATIC);
    sdb_bind_int64(st, 3, want > limit ? limit : want);
    sdb_bind_int64(st, 4, limit);
    return quota_step(c, st, key_id, period, 1, current);
}

int quota_refund_call(struct dbconn *c, int64_t key_id, const char *period)
{
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_QUOTA_REFUND_CALLS, SQL_REFUND_CALL);
    if (!st)
        return -1;
    sdb_bind_int64(st, 1, key_id);
    sdb_bind_text(st, 2, period, -1, SDB_STATIC);
    int rc = sdb_step(st);
    sdb_reset(st);
    if (rc != SDB_DONE) {
        log_warn("quota refund: %s", sdb_errmsg(c->db));
        return -1;
    }
    return 0;
}

int quota_settle_tokens(struct dbconn *c, int64_t key_id, const char *period, int64_t delta)
{
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_QUOTA_SETTLE_TOKENS, SQL_SETTLE);
    if (!st)
        return -1;
    sdb_bind_int64(st, 1, key_id);
    sdb_bind_text(st, 2, period, -1, SDB_STATIC);
    sdb_bind_int64(st, 3, delta);
    int rc = sdb_step(st);
    sdb_reset(st);
    if (rc != SDB_DONE) {
        log_warn("quota settle: %s", sdb_errmsg(c->db));
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

/* a + b, kept within [0, QUOTA_TOKENS_MAX]: no count can overflow a counter. */
#define QUOTA_TOKENS_MAX (INT64_MAX / 4)
static int64_t quota_sum(int64_t a, int64_t b)
{
    if (b > 0 && a > QUOTA_TOKENS_MAX - b)
        return QUOTA_TOKENS_MAX;
    int64_t s = a + b;
    return s < 0 ? 0 : s;
}


static int quota_load(struct dbconn *c, int64_t key_id, const char *period, int64_t *calls, int64_t *tokens)
{
    struct sdb_stmt *q = NULL;
    *calls = *tokens = 0;
    if (!c || sdb_prepare(c->db, SQL_CURRENT, &q) != SDB_OK)
        return -1;
    sdb_bind_int64(q, 1, key_id);
    sdb_bind_text(q, 2, period, -1, SDB_STATIC);
    int rc = sdb_step(q);
    if (rc == SDB_ROW) {
        *calls = sdb_column_int64(q, 0);
        *tokens = sdb_column_int64(q, 1);
    }
    sdb_finalize(q);
    return rc == SDB_ROW || rc == SDB_DONE ? 0 : -1;
}

int quota_preload(struct dbconn *c, int64_t key_id, const struct quota_ask *a, struct quota_loaded *out)
{
    int64_t unused;
    memset(out, 0, sizeof *out);
    if (quota_load(c, key_id, a->day, &out->day_calls, &unused) != 0 ||
        quota_load(c, key_id, a->month, &out->month_calls, &out->month_tokens) != 0)
        return -1;
    str_copy(out->day, sizeof out->day, a->day);
    str_copy(out->month, sizeof out->month, a->month);
    return 0;
}

int quota_shared_loaded(const struct shm_key *k, const char *day, const char *month)
{
    return strncmp(k->day, day, sizeof k->day) == 0 && strncmp(k->month, month, sizeof k->month) == 0;
}

void quota_forget_shared(struct shm_key *k)
{
    k->day[0] = k->month[0] = '\0';
}

/* Brings the state's period to want (or keeps its newer one, copied into want).
 * 0, or -1 when want is new here and pre has nothing for it. */
static int period_align(char *have, size_t have_size, char *want, size_t want_size, const char *pre_period,
                        int64_t *counter, int64_t pre_value, int64_t *counter2, int64_t pre_value2)
{
    int cmp = strncmp(have, want, have_size);
    if (cmp == 0)
        return 0;
    if (have[0] && cmp > 0) {
        snprintf(want, want_size, "%s", have);     /* never backwards */
        return 0;
    }
    if (!pre_period || strncmp(pre_period, want, want_size) != 0)
        return -1;
    /* The counts first, the period last: a holder dying in between leaves the
     * old period's name, so the next caller loads again. */
    *counter = pre_value;
    if (counter2)
        *counter2 = pre_value2;
    snprintf(have, have_size, "%s", want);
    return 0;
}

enum quota_result quota_take_shared(struct shm_key *k, const struct quota_loaded *pre, struct quota_ask *a,
                                    enum quota_kind *which, int64_t *current)
{
    if (period_align(k->day, sizeof k->day, a->day, sizeof a->day, pre ? pre->day : NULL, &k->day_calls,
                     pre ? pre->day_calls : 0, NULL, 0) != 0 ||
        period_align(k->month, sizeof k->month, a->month, sizeof a->month, pre ? pre->month : NULL,
                     &k->month_calls, pre ? pre->month_calls : 0, &k->month_tokens, pre ? pre->month_tokens : 0) != 0)
        return QUOTA_DB_ERROR;
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
        k->month_tokens = quota_sum(k->month_tokens, a->want);
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
        k->month_tokens = quota_sum(k->month_tokens, tokens);
        if (k->month_calls < 0)
            k->month_calls = 0;
    }
}
