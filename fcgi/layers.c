/* layers.c: the tenant and user quota layers at admission (R-KEY-6).
 *
 * Each layer is a row of `quotas` with a slot in the shared state
 * (struct shm_quota). Concurrency is counted in this process's row
 * (procs[].quota_active), so a responder killed mid-request leaks nothing once
 * its row is reaped; the minute window and the token periods are guarded by the
 * layer's robust lock, which is never held over SQL. A token period new to the
 * state (first request of the day or month, or a lost state file) is rebuilt
 * from usage_events: what the usage records charge is what counts. */
#include "layers.h"

#include "account.h"
#include "dbpool.h"
#include "errors.h"
#include "keylimits.h"
#include "log.h"
#include "quota.h"
#include "reply.h"
#include "util.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SHRINK_FLOOR 16     /* a shrunk answer gets more than this many tokens, or none */

/* Sums of what the usage records charged since a period began (the indexes
 * usage_events_by_tenant_ts and usage_events_by_user_ts). */
static const char SQL_TENANT_TOKENS[] =
    "SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM usage_events WHERE tenant_id = ?1 AND ts_ms >= ?2 AND shadow = 0";
static const char SQL_USER_TOKENS[] =
    "SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM usage_events WHERE user_id = ?1 AND ts_ms >= ?2 AND shadow = 0";

enum layer { LAYER_TENANT, LAYER_USER };

/* Logged at most once a minute per kind: a full table or a database outage
 * must not flood the log, and must never refuse requests (R-KEY-4). */
static void warn_rarely(_Atomic int64_t *last_ms, const struct request *r, const char *what)
{
    int64_t now = now_ms(), last = atomic_load(last_ms);
    if (now - last > 60000 && atomic_compare_exchange_strong(last_ms, &last, now))
        log_warn("request %s: %s (logged once a minute)", r->request_id, what);
}

/* The layer's shared counters, locked; a holder that died mid-update leaves
 * plain counters, but its token periods are rebuilt to be sure. */
static struct shm_quota *layer_lock(struct request *r, const struct snap_quota *q)
{
    struct shm_quota *s = &r->shm->r->quotas[q->slot];
    int died = 0;
    if (shm_robust_lock(&s->lock, &died) != 0)
        return NULL;
    if (died)
        s->day[0] = s->month[0] = '\0';
    return s;
}

static void refuse(struct request *r, enum error_code code, enum layer which, int64_t limit, int64_t current,
                   int64_t retry_ms, int64_t quota_reset_s, const char *message)
{
    reply_limit_refusal(r, code, which == LAYER_TENANT ? "per_tenant" : "per_user", limit, current, retry_ms,
                        quota_reset_s, message);
}

/* ---- token periods ---------------------------------------------------------- */

/* What the usage records charged the tenant since the month began / the user
 * since the day began, read through the responder's pool. 0, or -1. */
static int period_load(struct request *r, enum layer which, int64_t now, int64_t *used)
{
    int64_t start_s = which == LAYER_TENANT ? limits_month_start(now / 1000) : limits_day_start(now / 1000);
    int64_t id = which == LAYER_TENANT ? r->caller.tenant_id : r->caller.user_id;
    struct dbconn *c = dbpool_get();
    struct sdb_stmt *st = NULL;
    int rc = -1;
    *used = 0;
    if (c && sdb_prepare(c->db, which == LAYER_TENANT ? SQL_TENANT_TOKENS : SQL_USER_TOKENS, &st) == SDB_OK) {
        sdb_bind_int64(st, 1, id);
        sdb_bind_int64(st, 2, start_s * 1000);
        if (sdb_step(st) == SDB_ROW) {
            *used = sdb_column_int64(st, 0);
            rc = 0;
        }
    }
    sdb_finalize(st);
    if (c)
        dbpool_put(c);
    return rc;
}

enum take { TAKE_OK, TAKE_REFUSED, TAKE_OPEN };

/* The request's asked tokens against a layer's period: reserved whole, or
 * shrunk to what is left (shrink != 0), or refused (*used says how many the
 * period holds). *want may come back smaller (shrunk); period gets the period
 * the tokens were counted in. TAKE_OPEN: the counters could not be loaded,
 * nothing was counted (the layer admits: R-KEY-4). */
static enum take period_take(struct request *r, const struct snap_quota *q, enum layer which, int64_t limit,
                             int64_t prompt, int64_t n, int shrink, int64_t *want, int64_t *used, char period[16])
{
    int64_t now = now_ms();
    (which == LAYER_TENANT ? quota_month_period : quota_day_period)(now, period);
    for (int round = 0; round < 2; round++) {
        struct shm_quota *s = &r->shm->r->quotas[q->slot];
        char *have = which == LAYER_TENANT ? s->month : s->day;
        int64_t pre = 0;
        int loaded = 0;
        /* A hint read unlocked: a period new here is read from SQLite first,
         * never while the lock is held. */
        if (strncmp(have, period, 16) != 0) {
            if (period_load(r, which, now, &pre) != 0)
                return TAKE_OPEN;
            loaded = 1;
        }
        if (!(s = layer_lock(r, q)))
            return TAKE_OPEN;
        have = which == LAYER_TENANT ? s->month : s->day;
        int64_t *count = which == LAYER_TENANT ? &s->month_tokens : &s->day_tokens;
        int cmp = strncmp(have, period, 16);
        if (cmp != 0 && have[0] && cmp > 0) {
            snprintf(period, 16, "%.15s", have);    /* raced the boundary: periods never move backwards */
        } else if (cmp != 0) {
            if (!loaded) {                          /* moved on (or its holder died) since the hint */
                pthread_mutex_unlock(&s->lock);
                continue;
            }
            /* The count first, the period last: a holder dying in between
             * leaves the old name, so the next caller loads again. */
            *count = pre;
            snprintf(have, 16, "%.15s", period);
        }
        *used = *count;
        enum take res = TAKE_OK;
        int64_t m;
        if (*count > limit || *want > limit - *count) {
            if (shrink && (m = limits_shrink_max_tokens(limit - *count, prompt, n, SHRINK_FLOOR,
                                                        r->max_tokens)) > 0) {
                *want = prompt + m * n;
                r->shrunk_max_tokens = m;
                r->degrade_level = 3;       /* the degrade order's third step (route never lowers it) */
            } else {
                res = TAKE_REFUSED;
            }
        }
        if (res == TAKE_OK)
            *count += *want;
        pthread_mutex_unlock(&s->lock);
        return res;
    }
    return TAKE_OPEN;
}

/* Adds delta to a layer's period if the state still holds that period (a
 * request that started yesterday settles nothing into today). */
static void period_adjust(struct request *r, const struct snap_quota *q, enum layer which, const char *period,
                          int64_t delta)
{
    struct shm_quota *s;
    if (!delta || !(s = layer_lock(r, q)))
        return;
    char *have = which == LAYER_TENANT ? s->month : s->day;
    int64_t *count = which == LAYER_TENANT ? &s->month_tokens : &s->day_tokens;
    if (strncmp(have, period, 16) == 0) {
        const int64_t bound = INT64_MAX / 4;
        *count = delta > 0 && *count > bound - delta ? bound : *count + delta;
        if (*count < 0)
            *count = 0;
    }
    pthread_mutex_unlock(&s->lock);
}

/* ---- the layers ------------------------------------------------------------ */

static void release(struct request *r)
{
    if (r->tenant_slot_held) {
        atomic_fetch_sub(&r->shm->r->procs[r->shm->row].quota_active[r->tenant_quota->slot], 1);
        r->tenant_slot_held = 0;
    }
}

/* Undoes whatever layers_admit took so far (a later layer refused). */
static void give_back(struct request *r, int rpm_taken)
{
    if (rpm_taken) {
        struct shm_quota *s = layer_lock(r, r->user_quota);
        if (s) {
            limits_qps_give_back(s->rpm_ring, SHM_RPM_RING, &s->rpm_head, r->user_quota->rpm);
            pthread_mutex_unlock(&s->lock);
        }
    }
    if (r->user_tokens_reserved)
        period_adjust(r, r->user_quota, LAYER_USER, r->user_day, -r->user_tokens_reserved);
    if (r->tenant_tokens_reserved)
        period_adjust(r, r->tenant_quota, LAYER_TENANT, r->tenant_month, -r->tenant_tokens_reserved);
    r->user_tokens_reserved = r->tenant_tokens_reserved = 0;
    if (r->shrunk_max_tokens && r->degrade_level == 3)
        r->degrade_level = 0;
    r->shrunk_max_tokens = 0;
    release(r);
    r->tenant_quota = r->user_quota = NULL;
}

/* The layer of (scope, id) that has something to enforce here; NULL = none. */
static const struct snap_quota *layer_of(struct request *r, enum quota_scope scope, int64_t id)
{
    static _Atomic int64_t warned_ms;
    const struct snap_quota *q = id > 0 ? snapshot_quota(r->snap, scope, id, NULL) : NULL;
    if (!q)
        return NULL;
    if (q->slot < 0 || r->shm->row < 0) {
        warn_rarely(&warned_ms, r, "a quota layer has no shared-state slot (SHM_MAX_QUOTAS rows); it is not "
                                   "enforced");
        return NULL;
    }
    return q;
}

/* R-KEY-6 shrink: only for a model whose policy allows it, and a body sluice
 * may rewrite (never the byte-for-byte pass-through, nor embeddings, which
 * produce no answer to shorten). */
static int may_shrink(const struct request *r)
{
    if (!r->json || !r->model || r->kind == REQ_PROXY || r->kind == REQ_EMBEDDINGS)
        return 0;
    const struct snap_policy *p = snapshot_policy(r->snap, r->model);
    return p && p->shrink_max_tokens;
}

/* The shrunk max_tokens into the parsed body and the body sent upstream: every
 * adapter (as-is, translated, renamed model) builds from these. */
static void apply_shrink(struct request *r)
{
    static const char *const names[] = {"max_tokens", "max_completion_tokens", "max_output_tokens"};
    int64_t m = r->shrunk_max_tokens;
    int set = 0;
    struct json_object *v;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (json_object_object_get_ex(r->json, names[i], &v) && !json_object_is_type(v, json_type_null)) {
            json_object_object_add(r->json, names[i], json_object_new_int64(m));
            set = 1;
        }
    if (!set)
        json_object_object_add(r->json, r->kind == REQ_RESPONSES ? "max_output_tokens" : "max_tokens",
                               json_object_new_int64(m));
    const char *s = json_object_to_json_string_ext(r->json, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    r->fwd_body = arena_strdup(r->arena, s);
    r->fwd_len = strlen(r->fwd_body);
    r->max_tokens = m;
}

static const char *tokens_message(struct request *r, enum error_code code, enum layer which, int64_t want,
                                  int64_t limit, int64_t used)
{
    int64_t left = limit - used > 0 ? limit - used : 0;
    return arena_printf(r->arena, "Rate limit reached for this %s: %s. This request needs about %lld tokens; "
                        "%lld of its %lld %s tokens are left.", which == LAYER_TENANT ? "tenant" : "user",
                        errors_get(code)->code, (long long)want, (long long)left, (long long)limit,
                        which == LAYER_TENANT ? "monthly" : "daily");
}

int layers_admit(struct request *r)
{
    static _Atomic int64_t db_warned_ms;
    const struct snap_quota *t = layer_of(r, QSCOPE_TENANT, r->caller.tenant_id);
    const struct snap_quota *u = layer_of(r, QSCOPE_USER, r->caller.user_id);   /* 0: an endpoint key */
    if (!t && !u)
        return 0;
    r->tenant_quota = t;
    r->user_quota = u;
    int tokens = req_kind_spends_tokens(r->kind), rpm_taken = 0, shrink = may_shrink(r);
    int64_t n = r->choices > 1 ? r->choices : 1;
    int64_t prompt = r->prompt_estimate ? r->prompt_estimate : (int64_t)r->body_len / 4 + 1;
    /* The key's reservation (admit.c): the prompt estimate and every answer at max_tokens. */
    int64_t want = limits_estimate_tokens(prompt, r->max_tokens * n, r->conf->default_max_output * n);
    int64_t used = 0, retry_ms = 0, cur = 0;
    enum take res;

    /* 1. the tenant's requests in flight, pool-wide: summed and taken under
     * its lock, so two racing for the last place cannot both win. */
    if (t && t->concurrency) {
        struct shm_quota *s = layer_lock(r, t);
        if (s) {
            cur = shm_row_sum(r->shm, offsetof(struct shm_proc, quota_active), t->slot);
            if (cur < t->concurrency) {
                atomic_fetch_add(&r->shm->r->procs[r->shm->row].quota_active[t->slot], 1);
                r->tenant_slot_held = 1;
            }
            pthread_mutex_unlock(&s->lock);
            if (!r->tenant_slot_held) {
                give_back(r, 0);
                refuse(r, ERR_TENANT_CONCURRENCY_EXCEEDED, LAYER_TENANT, t->concurrency, cur, 1000, 0, NULL);
                return -1;
            }
        }
    }
    /* 2. the tenant's tokens this month */
    if (t && t->monthly_tokens && tokens) {
        int64_t asked = want;
        res = period_take(r, t, LAYER_TENANT, t->monthly_tokens, prompt, n, shrink, &want, &used, r->tenant_month);
        if (res == TAKE_REFUSED) {
            give_back(r, 0);
            enum error_code code = ERR_TENANT_MONTHLY_TOKEN_QUOTA_EXCEEDED;
            refuse(r, code, LAYER_TENANT, t->monthly_tokens, used, 0, limits_next_month(now_ms() / 1000),
                   tokens_message(r, code, LAYER_TENANT, asked, t->monthly_tokens, used));
            return -1;
        }
        if (res == TAKE_OK)
            r->tenant_tokens_reserved = want;
        else
            warn_rarely(&db_warned_ms, r, "quota layer tokens could not be loaded; admitting without them until "
                                          "the database answers");
    }
    /* 3. the user's requests in the last minute (exact sliding window) */
    if (u && u->rpm) {
        struct shm_quota *s = layer_lock(r, u);
        if (s) {
            /* The time is read under the lock, so the ring stays in time order. */
            rpm_taken = limits_window_take(s->rpm_ring, SHM_RPM_RING, &s->rpm_head, u->rpm, 60000, now_ms(),
                                           &retry_ms, &cur);
            pthread_mutex_unlock(&s->lock);
            if (!rpm_taken) {
                give_back(r, 0);
                refuse(r, ERR_USER_RPM_EXCEEDED, LAYER_USER, u->rpm, cur, retry_ms, 0, NULL);
                return -1;
            }
        }
    }
    /* 4. the user's tokens today */
    if (u && u->daily_tokens && tokens) {
        int64_t asked = want;
        res = period_take(r, u, LAYER_USER, u->daily_tokens, prompt, n, shrink, &want, &used, r->user_day);
        if (res == TAKE_REFUSED) {
            give_back(r, rpm_taken);
            enum error_code code = ERR_USER_DAILY_TOKEN_LIMIT_EXCEEDED;
            refuse(r, code, LAYER_USER, u->daily_tokens, used, 0, limits_next_day(now_ms() / 1000),
                   tokens_message(r, code, LAYER_USER, asked, u->daily_tokens, used));
            return -1;
        }
        if (res == TAKE_OK) {
            r->user_tokens_reserved = want;
            /* Shrunk here: the tenant's reservation shrinks with it. */
            if (want < r->tenant_tokens_reserved) {
                period_adjust(r, t, LAYER_TENANT, r->tenant_month, want - r->tenant_tokens_reserved);
                r->tenant_tokens_reserved = want;
            }
        } else {
            warn_rarely(&db_warned_ms, r, "quota layer tokens could not be loaded; admitting without them until "
                                          "the database answers");
        }
    }
    if (r->shrunk_max_tokens)
        apply_shrink(r);
    return 0;
}

void layers_finish(struct request *r)
{
    if (!r->tenant_quota && !r->user_quota)
        return;
    release(r);
    if (r->tenant_tokens_reserved || r->user_tokens_reserved) {
        /* Settled to what the usage record charges (the sum a rebuilt period
         * reads back), before the client can send its next request. */
        int64_t prompt, completion;
        account_charged_tokens(r, account_status(r), &prompt, &completion);
        int64_t actual = prompt + completion;
        if (r->tenant_tokens_reserved)
            period_adjust(r, r->tenant_quota, LAYER_TENANT, r->tenant_month, actual - r->tenant_tokens_reserved);
        if (r->user_tokens_reserved)
            period_adjust(r, r->user_quota, LAYER_USER, r->user_day, actual - r->user_tokens_reserved);
        r->tenant_tokens_reserved = r->user_tokens_reserved = 0;
    }
    r->tenant_quota = r->user_quota = NULL;
}
