/* keystate_redis.c: the keys' limits in a Redis `state` shared by every gateway
 * host (keystate.h over lib/kstate.h, issue 19): one atomic call per admission,
 * SQLite's counts as the seed of a period Redis does not hold, the fail policy
 * when it does not answer. */
#include "keystate.h"

#include "dbpool.h"
#include "keylimits.h"
#include "kstate.h"
#include "log.h"
#include "metrics.h"
#include "quota.h"
#include "reply.h"
#include "usage_writer.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

/* The durable record of a counted (calls = 1) or given back (-1) admission:
 * SQLite stays the system of record of the quotas, whichever state runs. */
static void quota_record(const struct snap_key *k, int calls, int64_t tokens, const char *day, const char *month)
{
    struct usage_record *u = xcalloc(1, sizeof *u);
    u->no_event = 1;
    u->quota_key_id = k->id;
    u->quota_calls = calls;
    u->quota_tokens = tokens;
    str_copy(u->quota_day, sizeof u->quota_day, day);
    str_copy(u->quota_month, sizeof u->quota_month, month);
    usage_writer_enqueue(u);
}

/* All of R-KEY-2..5 in one atomic call to the store; a period it does not hold
 * yet is read from SQLite first and handed over as its seed. */
static int redis_admit(struct request *r)
{
    const struct snap_key *k = r->key;
    const struct snapshot *snap = r->snap;
    int tokens = req_kind_spends_tokens(r->kind);
    int64_t n = r->choices > 1 ? r->choices : 1;
    int64_t want = keystate_want(r);
    int tpm = tokens && k->tpm_limit;
    if (tpm && r->max_tokens * n > k->tpm_limit) {
        keystate_refuse_never_fits(r, r->max_tokens * n);
        return -1;
    }
    int64_t mtq = tokens ? k->monthly_token_quota : 0;
    struct kstate_ask a = {0};
    a.key_id = k->id;
    a.qps_limit = k->qps_limit;
    a.concurrency_limit = k->concurrency_limit;
    a.daily_limit = k->daily_limit;
    a.monthly_quota = k->monthly_quota;
    a.monthly_token_quota = mtq;
    a.month_want = mtq && want > mtq ? mtq : want;
    a.tpm_limit = tpm ? k->tpm_limit : 0;
    a.tpm_want = want;
    int64_t now = now_ms();
    quota_day_period(now, a.day);
    quota_month_period(now, a.month);
    a.lease_ms = snap->state_lease_ms > 0 ? snap->state_lease_ms : 10000;
    a.timeout_ms = snap->state_timeout_ms > 0 ? snap->state_timeout_ms : 200;
    struct kstate_hold *h = arena_alloc(r->arena, sizeof *h);
    struct kstate_refusal why = {0};
    enum kstate_result res = kstate_admit(&a, h, &why);
    if (res == KSTATE_NEED_SEED) {
        struct quota_ask qa = {0};
        struct quota_loaded pre;
        str_copy(qa.day, sizeof qa.day, a.day);
        str_copy(qa.month, sizeof qa.month, a.month);
        struct dbconn *c = dbpool_get();
        int loaded = quota_preload(c, k->id, &qa, &pre) == 0;
        dbpool_put(c);
        if (loaded) {
            a.seeded = 1;
            a.seed_day_calls = pre.day_calls;
            a.seed_month_calls = pre.month_calls;
            a.seed_month_tokens = pre.month_tokens;
        } else {
            /* R-KEY-4: the database must never take the inference path down. */
            static _Atomic int64_t warned_ms;
            int64_t t = now_ms(), last = atomic_load(&warned_ms);
            if (t - last > 60000 && atomic_compare_exchange_strong(&warned_ms, &last, t))
                log_warn("request %s: quota counters could not be loaded; admitting without call quotas until the "
                         "database answers (logged once a minute)", r->request_id);
            a.daily_limit = a.monthly_quota = a.monthly_token_quota = 0;
        }
        res = kstate_admit(&a, h, &why);
    }
    if (res == KSTATE_UNAVAILABLE || res == KSTATE_NEED_SEED) {
        int closed = snap->state_fail_closed;
        char labels[64];
        snprintf(labels, sizeof labels, "policy=\"%s\"", kstate_policy_name(closed));
        metrics_add(r->shm, MET_STATE_UNAVAILABLE, labels, 1);
        if (kstate_fail_admits(closed))
            return 0;               /* fail_open: admitted without the key's limits */
        reply_error(r, ERR_STATE_UNAVAILABLE,
                    "The limits of this API key cannot be checked right now (the gateway's state store does not "
                    "answer); retry later.", NULL);
        return -1;
    }
    if (res == KSTATE_REFUSED) {
        int64_t s = now / 1000;
        switch (why.which) {
        case KSL_QPS:
            keystate_refuse(r, ERR_QPS_EXCEEDED, k->qps_limit, why.current, why.retry_ms, 0);
            break;
        case KSL_CONCURRENCY:
            keystate_refuse(r, ERR_CONCURRENCY_EXCEEDED, k->concurrency_limit, why.current, why.retry_ms, 0);
            break;
        case KSL_DAILY:
            keystate_refuse(r, ERR_DAILY_LIMIT_EXCEEDED, k->daily_limit, why.current, 0, limits_next_day(s));
            break;
        case KSL_MONTHLY:
            keystate_refuse(r, ERR_MONTHLY_QUOTA_EXCEEDED, k->monthly_quota, why.current, 0, limits_next_month(s));
            break;
        case KSL_MONTHLY_TOKENS:
            keystate_refuse(r, ERR_MONTHLY_TOKEN_QUOTA_EXCEEDED, k->monthly_token_quota, why.current, 0, limits_next_month(s));
            break;
        default:
            keystate_refuse(r, ERR_TPM_EXCEEDED, k->tpm_limit, why.current, why.retry_ms, 0);
            break;
        }
        return -1;
    }
    r->kstate_hold = h;
    r->admitted_ms = h->admitted_ms ? h->admitted_ms : now;
    if (h->calls) {
        /* What account.c and the usage writer read, as for the state file. */
        r->quota_shared = 1;
        str_copy(r->quota_day, sizeof r->quota_day, h->day);
        str_copy(r->month_period, sizeof r->month_period, h->month);
        r->month_tokens_reserved = h->month_tokens;
        quota_record(k, 1, h->month_tokens, h->day, h->month);
    }
    return 0;
}

/* Undoes a Redis admission (a quota layer refused after it). */
static void redis_give_back(struct request *r)
{
    struct kstate_hold *h = r->kstate_hold;
    if (!h)
        return;                     /* admitted by fail_open: nothing was taken */
    int calls = h->calls;
    int64_t tokens = h->month_tokens;
    kstate_release(h, 1, -1, -1, r->snap->state_timeout_ms);
    if (calls)
        quota_record(r->key, -1, -tokens, r->quota_day, r->month_period);
    r->kstate_hold = NULL;
    r->quota_shared = 0;
    r->month_tokens_reserved = 0;
}

/* The end: one call frees the lease and settles the TPM and monthly token
 * reservations; unanswered, the lease expires by itself (the outage is logged
 * once, in lib/kstate_redis.c). */
static void redis_finish(struct request *r, int64_t actual)
{
    struct kstate_hold *h = r->kstate_hold;
    if (!h)
        return;                     /* admitted by fail_open: nothing was taken */
    int64_t delta = h->month_tokens && actual >= 0 ? actual - h->month_tokens : 0;
    kstate_release(h, 0, actual, actual, r->snap->state_timeout_ms);
    if (r->quota_shared)
        r->quota_month_tokens = r->month_tokens_reserved + delta;
    r->kstate_hold = NULL;
}

const struct keystate_ops keystate_redis = {"redis", redis_admit, redis_give_back, redis_finish};
