/* keystate_file.c: the keys' limits in the mapped state file (keystate.h), the
 * embedded default: the QPS ring, token bucket and call/token quotas of the key's
 * struct shm_key under its robust lock, concurrency in this process's row (a
 * crashed holder's row is reaped); a key without a slot counts its quotas in SQLite. */
#include "keystate.h"

#include "account.h"
#include "dbpool.h"
#include "keylimits.h"
#include "log.h"
#include "quota.h"
#include "reply.h"
#include "usage_writer.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The key's pool-wide window; robust, so a holder killed mid-update is survivable. */
static struct shm_key *key_lock(struct request *r)
{
    struct shm_key *k = &r->shm->r->keys[r->key->slot];
    int rc = pthread_mutex_lock(&k->lock);
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&k->lock);
        quota_forget_shared(k);     /* whatever the dead holder was writing: reload the periods */
        rc = 0;
    }
    return rc == 0 ? k : NULL;
}

/* Undoes what file_admit took before a later check refused. */
static void give_back(struct request *r, int qps_taken)
{
    const struct snap_key *k = r->key;
    if (r->tpm_reserved) {
        struct shm_key *sk = key_lock(r);
        if (sk) {
            struct token_bucket b = {sk->tpm_tokens_milli, sk->tpm_refill_ms, sk->tpm_limit};
            limits_bucket_settle(&b, r->tpm_reserved);
            sk->tpm_tokens_milli = b.level_milli;
            pthread_mutex_unlock(&sk->lock);
        }
        r->tpm_reserved = 0;
    }
    if (r->key_slot_held) {
        atomic_fetch_sub(&r->shm->r->procs[r->shm->row].key_active[k->slot], 1);
        r->key_slot_held = 0;
    }
    if (qps_taken) {
        struct shm_key *sk = key_lock(r);
        if (sk) {
            limits_qps_give_back(sk->qps_ring, SHM_QPS_RING, &sk->qps_head, k->qps_limit);
            pthread_mutex_unlock(&sk->lock);
        }
    }
}

static int take_tpm(struct request *r, int64_t want, int64_t *retry_ms, int64_t *current)
{
    struct shm_key *sk = key_lock(r);
    if (!sk)
        return 1;
    struct token_bucket b = {sk->tpm_tokens_milli, sk->tpm_refill_ms, sk->tpm_limit};
    int ok = limits_bucket_take(&b, r->key->tpm_limit, want, now_ms(), retry_ms, current);
    sk->tpm_tokens_milli = b.level_milli;
    sk->tpm_refill_ms = b.refill_ms;
    sk->tpm_limit = b.limit;
    pthread_mutex_unlock(&sk->lock);
    if (ok)
        r->tpm_reserved = want > r->key->tpm_limit ? r->key->tpm_limit : (want < 1 ? 1 : want);
    return ok;
}

/* R-KEY-4 without a SQLite write on the request path: the key's call and token
 * quotas in the shared state, exact under its lock (the usage writer makes them
 * durable); then the TPM bucket, whose refusal gives the quotas back. */
static int admit_quotas_shared(struct request *r, int64_t want, int qps_taken, int tokens, int tpm,
                               const char *day, const char *month)
{
    const struct snap_key *k = r->key;
    struct quota_ask ask = {k->daily_limit, k->monthly_quota, tokens ? k->monthly_token_quota : 0, 0, "", ""};
    ask.want = want > k->monthly_token_quota && k->monthly_token_quota ? k->monthly_token_quota : want;
    enum quota_kind which = 0;
    int64_t cur = 0, retry_ms = 0;
    enum quota_result q = QUOTA_DB_ERROR;
    struct shm_key *sk;
    /* A period new to the state is read from SQLite before the key's lock is
     * taken, never while holding it; if another process moved on meanwhile
     * (midnight), one more round. */
    str_copy(ask.day, sizeof ask.day, day);
    str_copy(ask.month, sizeof ask.month, month);
    for (int round = 0; round < 2 && q == QUOTA_DB_ERROR; round++) {
        struct quota_loaded pre, *have = NULL;
        if (!quota_shared_loaded(&r->shm->r->keys[k->slot], ask.day, ask.month)) {
            struct dbconn *c = dbpool_get();
            have = quota_preload(c, k->id, &ask, &pre) == 0 ? &pre : NULL;
            dbpool_put(c);
            if (!have)
                break;
        }
        if (!(sk = key_lock(r)))
            break;
        q = quota_take_shared(sk, have, &ask, &which, &cur);
        pthread_mutex_unlock(&sk->lock);
        if (q == QUOTA_DB_ERROR) {          /* the periods turned over: today's, now */
            char d[16], m[16];
            quota_day_period(now_ms(), d);
            quota_month_period(now_ms(), m);
            str_copy(ask.day, sizeof ask.day, d);
            str_copy(ask.month, sizeof ask.month, m);
        }
    }
    if (q == QUOTA_DB_ERROR) {
        /* R-KEY-4: the database must never take the inference path down. */
        static _Atomic int64_t warned_ms;
        int64_t now = now_ms(), last = atomic_load(&warned_ms);
        if (now - last > 60000 && atomic_compare_exchange_strong(&warned_ms, &last, now))
            log_warn("request %s: quota counters could not be loaded; admitting without call quotas until the "
                     "database answers (logged once a minute)", r->request_id);
    } else if (q == QUOTA_REFUSED) {
        give_back(r, qps_taken);
        int64_t now = now_ms() / 1000;
        if (which == QUOTA_DAILY)
            keystate_refuse(r, ERR_DAILY_LIMIT_EXCEEDED, k->daily_limit, cur, 0, limits_next_day(now));
        else if (which == QUOTA_MONTHLY)
            keystate_refuse(r, ERR_MONTHLY_QUOTA_EXCEEDED, k->monthly_quota, cur, 0, limits_next_month(now));
        else
            keystate_refuse(r, ERR_MONTHLY_TOKEN_QUOTA_EXCEEDED, k->monthly_token_quota, cur, 0, limits_next_month(now));
        return -1;
    }
    if (q == QUOTA_OK) {
        r->quota_shared = 1;
        str_copy(r->quota_day, sizeof r->quota_day, ask.day);
        str_copy(r->month_period, sizeof r->month_period, ask.month);
        if (ask.monthly_token_quota)
            r->month_tokens_reserved = ask.want;
    }
    if (tpm && !take_tpm(r, want, &retry_ms, &cur)) {
        if (r->quota_shared && (sk = key_lock(r))) {     /* the paired refund (R-KEY-5) */
            quota_adjust_shared(sk, r->quota_day, r->month_period, -1, -r->month_tokens_reserved);
            pthread_mutex_unlock(&sk->lock);
        }
        r->quota_shared = 0;
        r->month_tokens_reserved = 0;
        give_back(r, qps_taken);
        keystate_refuse(r, ERR_TPM_EXCEEDED, k->tpm_limit, cur, retry_ms, 0);
        return -1;
    }
    if (r->quota_shared) {
        /* Durable at once, not when the request ends: a responder killed mid-stream
         * loses nothing but the settlement (R-KEY-4). */
        struct usage_record *u = xcalloc(1, sizeof *u);
        u->no_event = 1;
        u->quota_key_id = k->id;
        u->quota_calls = 1;
        u->quota_tokens = r->month_tokens_reserved;
        str_copy(u->quota_day, sizeof u->quota_day, ask.day);
        str_copy(u->quota_month, sizeof u->quota_month, ask.month);
        usage_writer_enqueue(u);
    }
    return 0;
}

/* Daily, monthly, TPM and monthly tokens in one transaction: a refusal rolls
 * back the calls already counted (R-KEY-5 paired refund). 0 admitted, -1 refused. */
static int admit_quotas(struct request *r, int64_t want, int qps_taken)
{
    const struct snap_key *k = r->key;
    int64_t now = now_ms(), cur = 0, retry_ms = 0;
    int tokens = req_kind_spends_tokens(r->kind);   /* a listing or a count spends calls, not tokens */
    int tpm = tokens && k->tpm_limit && k->slot >= 0;
    /* Refused for good only when the answer it asked for alone (max_tokens,
     * times n) exceeds the bucket: the prompt is only estimated from bytes, and
     * a reservation without max_tokens is clamped to the bucket. */
    int64_t need = r->max_tokens * (r->choices > 1 ? r->choices : 1);
    if (tpm && need > k->tpm_limit) {
        give_back(r, qps_taken);
        keystate_refuse_never_fits(r, need);
        return -1;
    }
    if (!k->daily_limit && !k->monthly_quota && (!k->monthly_token_quota || !tokens)) {
        if (tpm && !take_tpm(r, want, &retry_ms, &cur)) {
            give_back(r, qps_taken);
            keystate_refuse(r, ERR_TPM_EXCEEDED, k->tpm_limit, cur, retry_ms, 0);
            return -1;
        }
        return 0;
    }
    char day[16], month[16];
    quota_day_period(now, day);
    quota_month_period(now, month);
    if (k->slot >= 0 && r->shm->row >= 0)
        return admit_quotas_shared(r, want, qps_taken, tokens, tpm, day, month);
    struct dbconn *c = dbpool_get();
    enum error_code refused = ERR_NONE;
    int64_t limit = 0, reset_s = 0;
    enum quota_result q = QUOTA_OK;
    if (dbpool_exec(c, "BEGIN IMMEDIATE") != 0) {
        q = QUOTA_DB_ERROR;
        goto db_failed;
    }
    if (k->daily_limit && (q = quota_take_call(c, k->id, day, k->daily_limit, &cur)) != QUOTA_OK) {
        refused = ERR_DAILY_LIMIT_EXCEEDED, limit = k->daily_limit, reset_s = limits_next_day(now / 1000);
    } else if (k->monthly_quota && (q = quota_take_call(c, k->id, month, k->monthly_quota, &cur)) != QUOTA_OK) {
        refused = ERR_MONTHLY_QUOTA_EXCEEDED, limit = k->monthly_quota, reset_s = limits_next_month(now / 1000);
    } else if (tpm && !take_tpm(r, want, &retry_ms, &cur)) {
        refused = ERR_TPM_EXCEEDED, limit = k->tpm_limit;
    } else if (tokens && k->monthly_token_quota &&
               (q = quota_take_tokens(c, k->id, month, want, k->monthly_token_quota, &cur)) != QUOTA_OK) {
        refused = ERR_MONTHLY_TOKEN_QUOTA_EXCEEDED, limit = k->monthly_token_quota;
        reset_s = limits_next_month(now / 1000);
    }
    if (q == QUOTA_DB_ERROR)
        goto db_failed;
    if (refused != ERR_NONE) {
        dbpool_exec(c, "ROLLBACK");
        dbpool_put(c);
        give_back(r, qps_taken);
        keystate_refuse(r, refused, limit, cur, retry_ms, reset_s);
        return -1;
    }
    if (dbpool_exec(c, "COMMIT") != 0) {
        q = QUOTA_DB_ERROR;
        goto db_failed;
    }
    dbpool_put(c);
    r->key_quota_sql = 1;           /* what give_back_quotas undoes if a quota layer refuses */
    str_copy(r->quota_day, sizeof r->quota_day, day);
    str_copy(r->month_period, sizeof r->month_period, month);
    if (tokens && k->monthly_token_quota) {
        r->month_tokens_reserved = want > k->monthly_token_quota ? k->monthly_token_quota : want;
        str_copy(r->month_period, sizeof r->month_period, month);
    }
    return 0;
db_failed:
    /* R-KEY-4: the database must never take the inference path down. */
    static _Atomic int64_t warned_ms;
    int64_t t = now_ms(), last = atomic_load(&warned_ms);
    if (t - last > 60000 && atomic_compare_exchange_strong(&warned_ms, &last, t))
        log_warn("request %s: quota database unavailable (%s); admitting without call quotas (logged once a "
                 "minute)", r->request_id, sdb_errmsg(c->db));
    dbpool_exec(c, "ROLLBACK");
    dbpool_put(c);
    return 0;
}

static int file_admit(struct request *r)
{
    const struct snap_key *k = r->key;
    int64_t now = now_ms(), retry_ms = 0, cur = 0;
    int qps_taken = 0;
    if (k->slot < 0 || r->shm->row < 0) {
        /* The shared state has no room for this key: its call quotas (SQLite)
         * still hold; QPS, concurrency and TPM cannot be counted. */
        static _Atomic int64_t warned_ms;
        int64_t t = now_ms(), last = atomic_load(&warned_ms);
        if (t - last > 60000 && atomic_compare_exchange_strong(&warned_ms, &last, t))
            log_error("key %lld: no shared-state slot (SHM_MAX_KEYS keys with limits); QPS, concurrency "
                      "and TPM are not enforced for it", (long long)k->id);
    }
    int shared = k->slot >= 0 && r->shm->row >= 0;
    if (shared && k->qps_limit) {
        struct shm_key *sk = key_lock(r);
        if (sk) {
            /* The time is read under the lock, so the ring stays in time order. */
            now = now_ms();
            r->admitted_ms = now;
            qps_taken = limits_qps_take(sk->qps_ring, SHM_QPS_RING, &sk->qps_head, k->qps_limit, now,
                                        &retry_ms, &cur);
            pthread_mutex_unlock(&sk->lock);
            if (!qps_taken) {
                keystate_refuse(r, ERR_QPS_EXCEEDED, k->qps_limit, cur, retry_ms, 0);
                return -1;
            }
            r->key_qps_taken = 1;
        }
    }
    if (shared && k->concurrency_limit) {
        /* R-KEY-3: count in this process's row, then read the pool's sum; a
         * crashed holder's row is reaped, so nothing leaks. */
        _Atomic int32_t *mine = &r->shm->r->procs[r->shm->row].key_active[k->slot];
        int64_t sum = 0;
        /* Sum and take under the key's lock, so two requests racing for the
         * last slot cannot both be refused (or both admitted). */
        struct shm_key *sk = key_lock(r);
        int hi = atomic_load(&r->shm->r->rows_hi);
        for (int i = 0; i < hi && i < SHM_MAX_PROCS; i++)
            if (atomic_load(&r->shm->r->procs[i].pid))
                sum += atomic_load(&r->shm->r->procs[i].key_active[k->slot]);
        int admitted = sum < k->concurrency_limit;
        if (admitted) {
            atomic_fetch_add(mine, 1);
            r->key_slot_held = 1;
        }
        if (sk)
            pthread_mutex_unlock(&sk->lock);
        if (!admitted) {
            give_back(r, qps_taken);
            keystate_refuse(r, ERR_CONCURRENCY_EXCEEDED, k->concurrency_limit, sum, 1000, 0);
            return -1;
        }
    }
    return admit_quotas(r, keystate_want(r), qps_taken);
}

/* R-KEY-6: a quota layer refused after the key's limits passed: everything
 * they took goes back (QPS, concurrency, TPM, the call and token quotas). */
static void file_give_back(struct request *r)
{
    const struct snap_key *k = r->key;
    if (r->quota_shared) {
        struct shm_key *sk = key_lock(r);
        if (sk) {
            quota_adjust_shared(sk, r->quota_day, r->month_period, -1, -r->month_tokens_reserved);
            pthread_mutex_unlock(&sk->lock);
        }
        /* The admission's durable record is undone by one of the opposite sign. */
        struct usage_record *u = xcalloc(1, sizeof *u);
        u->no_event = 1;
        u->quota_key_id = k->id;
        u->quota_calls = -1;
        u->quota_tokens = -r->month_tokens_reserved;
        str_copy(u->quota_day, sizeof u->quota_day, r->quota_day);
        str_copy(u->quota_month, sizeof u->quota_month, r->month_period);
        usage_writer_enqueue(u);
        r->quota_shared = 0;
    } else if (r->key_quota_sql) {
        struct dbconn *c = dbpool_get();
        if ((k->daily_limit && quota_refund_call(c, k->id, r->quota_day) != 0) ||
            (k->monthly_quota && quota_refund_call(c, k->id, r->month_period) != 0) ||
            (r->month_tokens_reserved &&
             quota_settle_tokens(c, k->id, r->month_period, -r->month_tokens_reserved) != 0))
            log_warn("request %s: the key's quota counts could not be given back", r->request_id);
        dbpool_put(c);
        r->key_quota_sql = 0;
    }
    r->month_tokens_reserved = 0;
    give_back(r, r->key_qps_taken);
    r->key_qps_taken = 0;
}

/* The end of a request admitted in the state file: slot, TPM and monthly tokens. */
static void file_finish(struct request *r, int64_t actual)
{
    if (r->key_slot_held) {
        atomic_fetch_sub(&r->shm->r->procs[r->shm->row].key_active[r->key->slot], 1);
        r->key_slot_held = 0;
    }
    if (r->tpm_reserved && actual >= 0) {
        struct shm_key *sk = key_lock(r);
        if (sk) {
            struct token_bucket b = {sk->tpm_tokens_milli, sk->tpm_refill_ms, sk->tpm_limit};
            limits_bucket_settle(&b, r->tpm_reserved - actual);
            sk->tpm_tokens_milli = b.level_milli;
            pthread_mutex_unlock(&sk->lock);
        }
    }
    /* R-KEY-5: the monthly token pre-deduction is settled now, before the
     * client has the end of the answer and can send its next request; only
     * when the database refuses does the usage writer carry it later. */
    int64_t delta = r->month_tokens_reserved && actual >= 0 ? actual - r->month_tokens_reserved : 0;
    if (r->quota_shared) {
        /* The shared counters now; SQLite gets the net through the usage writer. */
        struct shm_key *sk = delta ? key_lock(r) : NULL;
        if (sk) {
            quota_adjust_shared(sk, NULL, r->month_period, 0, delta);
            pthread_mutex_unlock(&sk->lock);
        }
        r->quota_month_tokens = r->month_tokens_reserved + delta;
    } else if (delta) {
        struct dbconn *c = dbpool_get();
        if (quota_settle_tokens(c, r->key->id, r->month_period, delta) != 0) {
            log_warn("request %s: monthly token settlement deferred to the usage writer", r->request_id);
            r->month_tokens_delta = delta;
        }
        dbpool_put(c);
    }
}

const struct keystate_ops keystate_file = {"state file", file_admit, file_give_back, file_finish};
