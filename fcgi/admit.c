/* admit.c: idempotency and key limits before any work is done (DESIGN.md stage 3, SPEC §12-13). */
#include "admit.h"

#include "account.h"
#include "dbpool.h"
#include "idem.h"
#include "keylimits.h"
#include "kstate.h"
#include "layers.h"
#include "log.h"
#include "metrics.h"
#include "quota.h"
#include "usage_writer.h"
#include "reply.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct conf *admit_conf;
static _Atomic int64_t last_expire_ms, budget_checked_ms;
static _Atomic int over_budget;

int admit_init(const struct conf *c)
{
    admit_conf = c;
    if (kstate_start(c->state) != 0)
        return -1;
    return dbpool_init(c->database, c->db_connections, c->quota_db_wait_ms, c->db_mmap_bytes);
}

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

/* ---- idempotency (R-IDEM-1..3) ------------------------------------------- */

static void idem_housekeeping(struct dbconn *c, int64_t now)
{
    /* Expired records go at most once a minute per process; the budget is
     * re-read at most once a second (a count over up to max_records rows). */
    int64_t last = atomic_load(&last_expire_ms);
    if (now - last > 60000 && atomic_compare_exchange_strong(&last_expire_ms, &last, now))
        idem_expire(c, now, 10000);
    int64_t checked = atomic_load(&budget_checked_ms);
    if (now - checked > 1000 && atomic_compare_exchange_strong(&budget_checked_ms, &checked, now)) {
        int64_t records = 0, bytes = 0;
        if (idem_usage(c, &records, &bytes) == 0)
            atomic_store(&over_budget, records >= admit_conf->idem_max_records ||
                                           bytes >= admit_conf->idem_max_bytes);
    }
}

static void reply_replay(struct request *r, const struct idem_replay *rp)
{
    char extra[96];
    snprintf(extra, sizeof extra, "X-Idempotent-Replay: true\r\nContent-Length: %zu\r\n", rp->body_len);
    if (reply_head(r, rp->status >= 200 && rp->status < 300 ? rp->status : 200,
                   rp->content_type ? rp->content_type : "application/json", extra) == 0)
        reply_body(r, rp->body ? rp->body : "", rp->body_len, 0);
    r->replayed = 1;
}

static int admit_idempotency(struct request *r)
{
    const char *h = request_header(r, "Idempotency-Key");
    if (!h)
        return 0;
    if (idem_parse_key(h, r->idem_key) != 0) {
        reply_error(r, ERR_INVALID_HEADER, "Idempotency-Key must be 1-128 printable characters, quoted or a token",
                    NULL);
        return -1;
    }
    /* The record belongs to the credential: a member key, an endpoint (by id),
     * or a login session's user. */
    if (r->caller.key_id > 0)
        snprintf(r->idem_scope, sizeof r->idem_scope, "k:%lld", (long long)r->caller.key_id);
    else if (r->caller.endpoint >= 0)
        snprintf(r->idem_scope, sizeof r->idem_scope, "e:%lld",
                 (long long)r->snap->endpoints[r->caller.endpoint].id);
    else
        snprintf(r->idem_scope, sizeof r->idem_scope, "u:%lld", (long long)r->caller.user_id);
    /* R-IDEM-1: fingerprint = SHA-256(method + path + raw body). */
    struct buf fp_in;
    buf_init(&fp_in, 0);
    buf_printf(&fp_in, "%s %s\n", r->method, r->path);
    buf_append(&fp_in, r->body, r->body_len);
    char fp[65];
    sha256_hex(fp_in.data, fp_in.len, fp);
    buf_free(&fp_in);

    int64_t now = now_ms();
    struct idem_replay rp = {0};
    struct dbconn *c = dbpool_get();
    idem_housekeeping(c, now);
    enum idem_begin res = idem_begin(c, r->idem_scope, r->idem_key, fp, now,
                                     (int64_t)admit_conf->idem_ttl_minutes * 60000, &rp, r->arena);
    dbpool_put(c);
    switch (res) {
    case IDEM_OWNED:
        r->idem_owned = 1;
        r->capture = arena_alloc(r->arena, sizeof *r->capture);
        buf_init(r->capture, (size_t)admit_conf->idem_max_record_bytes);
        return 0;
    case IDEM_IN_PROGRESS:
        /* R-USE-4: a refusal is recorded with its status, like any failure. */
        reply_error(r, ERR_IDEMPOTENCY_REQUEST_IN_PROGRESS,
                    "A request with this Idempotency-Key is still in progress; retry later.", NULL);
        return -1;
    case IDEM_MISMATCH:
        reply_error(r, ERR_IDEMPOTENCY_KEY_BODY_MISMATCH,
                    "This Idempotency-Key was used with a different request body.", NULL);
        return -1;
    case IDEM_NOT_STORED:
        reply_error(r, ERR_IDEMPOTENCY_RESULT_NOT_STORED,
                    "This Idempotency-Key already succeeded; its response was not kept (storage budget).", NULL);
        return -1;
    case IDEM_REPLAY:
        reply_replay(r, &rp);
        return -1;
    case IDEM_DB_ERROR:
    default:
        log_warn("request %s: idempotency store unavailable; serving without it", r->request_id);
        return 0;
    }
}

/* ---- key limits (R-KEY-1..5) ---------------------------------------------- */

static void refuse(struct request *r, enum error_code code, int64_t limit, int64_t current, int64_t retry_ms,
                   int64_t quota_reset_s)
{
    reply_limit_refusal(r, code, NULL, limit, current, retry_ms, quota_reset_s, NULL);
}

/* R-KEY-5: a request that needs more tokens than the whole TPM bucket holds can
 * never be admitted: retrying cannot help. */
static void refuse_never_fits(struct request *r, int64_t need)
{
    struct limit_info li = {0};
    li.code = ERR_TPM_EXCEEDED;
    li.limit = r->key->tpm_limit;
    li.current = need;
    li.retry_after_s = 60;
    li.reset_s = now_ms() / 1000 + 60;
    li.no_retry = 1;
    li.message = arena_printf(r->arena, "This request needs about %lld tokens, more than this API key's limit of "
                              "%lld tokens per minute: it can never be admitted. Lower max_tokens or the prompt.",
                              (long long)need, (long long)r->key->tpm_limit);
    reply_limit(r, &li);
}

/* Undoes what admit_limits took before a later check refused. */
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
            refuse(r, ERR_DAILY_LIMIT_EXCEEDED, k->daily_limit, cur, 0, limits_next_day(now));
        else if (which == QUOTA_MONTHLY)
            refuse(r, ERR_MONTHLY_QUOTA_EXCEEDED, k->monthly_quota, cur, 0, limits_next_month(now));
        else
            refuse(r, ERR_MONTHLY_TOKEN_QUOTA_EXCEEDED, k->monthly_token_quota, cur, 0, limits_next_month(now));
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
        refuse(r, ERR_TPM_EXCEEDED, k->tpm_limit, cur, retry_ms, 0);
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
        refuse_never_fits(r, need);
        return -1;
    }
    if (!k->daily_limit && !k->monthly_quota && (!k->monthly_token_quota || !tokens)) {
        if (tpm && !take_tpm(r, want, &retry_ms, &cur)) {
            give_back(r, qps_taken);
            refuse(r, ERR_TPM_EXCEEDED, k->tpm_limit, cur, retry_ms, 0);
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
        refuse(r, refused, limit, cur, retry_ms, reset_s);
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
                 "minute)", r->request_id, sqlite3_errmsg(c->db));
    dbpool_exec(c, "ROLLBACK");
    dbpool_put(c);
    return 0;
}

/* ---- key limits in a Redis `state` (issue 19) ------------------------------ */

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
static int admit_limits_remote(struct request *r)
{
    const struct snap_key *k = r->key;
    const struct snapshot *snap = r->snap;
    int tokens = req_kind_spends_tokens(r->kind);
    int64_t n = r->choices > 1 ? r->choices : 1;
    int64_t want = limits_estimate_tokens(r->prompt_estimate ? r->prompt_estimate : (int64_t)r->body_len / 4 + 1,
                                          r->max_tokens * n, admit_conf->default_max_output * n);
    int tpm = tokens && k->tpm_limit;
    if (tpm && r->max_tokens * n > k->tpm_limit) {
        refuse_never_fits(r, r->max_tokens * n);
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
            refuse(r, ERR_QPS_EXCEEDED, k->qps_limit, why.current, why.retry_ms, 0);
            break;
        case KSL_CONCURRENCY:
            refuse(r, ERR_CONCURRENCY_EXCEEDED, k->concurrency_limit, why.current, why.retry_ms, 0);
            break;
        case KSL_DAILY:
            refuse(r, ERR_DAILY_LIMIT_EXCEEDED, k->daily_limit, why.current, 0, limits_next_day(s));
            break;
        case KSL_MONTHLY:
            refuse(r, ERR_MONTHLY_QUOTA_EXCEEDED, k->monthly_quota, why.current, 0, limits_next_month(s));
            break;
        case KSL_MONTHLY_TOKENS:
            refuse(r, ERR_MONTHLY_TOKEN_QUOTA_EXCEEDED, k->monthly_token_quota, why.current, 0, limits_next_month(s));
            break;
        default:
            refuse(r, ERR_TPM_EXCEEDED, k->tpm_limit, why.current, why.retry_ms, 0);
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
static void give_back_remote(struct request *r)
{
    struct kstate_hold *h = r->kstate_hold;
    int calls = h->calls;
    int64_t tokens = h->month_tokens;
    kstate_release(h, 1, -1, -1, r->snap->state_timeout_ms);
    if (calls)
        quota_record(r->key, -1, -tokens, r->quota_day, r->month_period);
    r->kstate_hold = NULL;
    r->quota_shared = 0;
    r->month_tokens_reserved = 0;
}

static int admit_limits(struct request *r)
{
    if (kstate_remote())
        return admit_limits_remote(r);
    const struct snap_key *k = r->key;
    int64_t now = now_ms(), retry_ms = 0, cur = 0;
    int qps_taken = 0;
    int shared = k->slot >= 0 && r->shm->row >= 0;   /* see admit_request */
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
                refuse(r, ERR_QPS_EXCEEDED, k->qps_limit, cur, retry_ms, 0);
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
            refuse(r, ERR_CONCURRENCY_EXCEEDED, k->concurrency_limit, sum, 1000, 0);
            return -1;
        }
    }
    int64_t n = r->choices > 1 ? r->choices : 1;      /* <= 128, and max_tokens <= the cap: no overflow */
    int64_t want = limits_estimate_tokens(r->prompt_estimate ? r->prompt_estimate : (int64_t)r->body_len / 4 + 1,
                                          r->max_tokens * n, admit_conf->default_max_output * n);
    return admit_quotas(r, want, qps_taken);
}

static int admit_key(struct request *r, const struct snap_key *k)
{
    r->key = k;
    if (!kstate_remote() && (k->slot < 0 || r->shm->row < 0)) {
        /* The shared state has no room for this key: its call quotas (SQLite)
         * still hold; QPS, concurrency and TPM cannot be counted. */
        static _Atomic int64_t warned_ms;
        int64_t now = now_ms(), last = atomic_load(&warned_ms);
        if (now - last > 60000 && atomic_compare_exchange_strong(&warned_ms, &last, now))
            log_error("key %lld: no shared-state slot (SHM_MAX_KEYS keys with limits); QPS, concurrency "
                      "and TPM are not enforced for it", (long long)k->id);
    }
    if (admit_limits(r) != 0) {
        r->key = NULL;
        return -1;
    }
    return 0;
}

/* R-KEY-6: a quota layer refused after the key's limits passed: everything
 * they took goes back (QPS, concurrency, TPM, the call and token quotas). */
static void give_back_quotas(struct request *r)
{
    const struct snap_key *k = r->key;
    if (r->kstate_hold) {
        give_back_remote(r);
        return;
    }
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

int admit_request(struct request *r)
{
    if (admit_idempotency(r) != 0)
        return -1;
    const struct snap_key *k = r->caller.key;
    /* R-KEY-1: a key without limits does no key-limit work at all. */
    if (k && k->has_limits && admit_key(r, k) != 0)
        return -1;
    /* R-KEY-6: the tenant and user layers, ANDed with the key's limits. */
    if (layers_admit(r) != 0) {
        if (r->key)
            give_back_quotas(r);
        r->key = NULL;
        return -1;
    }
    return 0;
}

/* The end of a request admitted in the state file: slot, TPM and monthly tokens. */
static void finish_in_state_file(struct request *r, int64_t actual)
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

void admit_finish(struct request *r)
{
    layers_finish(r);
    if (r->key) {
        int64_t prompt, completion;
        int64_t actual = account_billable_tokens(r, &prompt, &completion);   /* -1: keep the estimate */
        if (r->kstate_hold) {
            /* One call settles the TPM and monthly token reservations and frees the lease. */
            struct kstate_hold *h = r->kstate_hold;
            int64_t delta = h->month_tokens && actual >= 0 ? actual - h->month_tokens : 0;
            /* Unanswered, the lease expires by itself (the outage is logged once, in kstate). */
            kstate_release(h, 0, actual, actual, r->snap->state_timeout_ms);
            if (r->quota_shared)
                r->quota_month_tokens = r->month_tokens_reserved + delta;
            r->kstate_hold = NULL;
        } else {
            finish_in_state_file(r, actual);
        }
    }
    if (r->idem_owned) {
        int ok = r->status >= 200 && r->status < 300 && !r->client_gone && !r->error_code;
        struct dbconn *c = dbpool_get();
        if (ok) {
            int keep = !r->capture_overflow && !atomic_load(&over_budget);
            if (idem_done(c, r->idem_scope, r->idem_key, r->status, r->response_content_type,
                          keep ? r->capture->data : NULL, keep ? r->capture->len : 0) != 0) {
                /* Better a retry that runs again than one stuck at 409 for the TTL. */
                log_warn("request %s: could not store the idempotent response; releasing the key", r->request_id);
                if (idem_release(c, r->idem_scope, r->idem_key) != 0)
                    log_error("request %s: idempotency key left in progress until it expires", r->request_id);
            }
        } else if (idem_release(c, r->idem_scope, r->idem_key) != 0) {
            log_error("request %s: idempotency key left in progress until it expires", r->request_id);
        }
        dbpool_put(c);
        buf_free(r->capture);
        r->idem_owned = 0;
    }
}

/* ---- R-SEC-6: authentication failures per client address ------------------ */

/* Is addr one of limits.trusted_proxies (comma- or space-separated)? */
static int trusted_proxy(const char *addr, size_t n)
{
    const char *p = admit_conf->trusted_proxies;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t k = strcspn(p, ", ");
        if (k && k == n && strncmp(p, addr, n) == 0)
            return 1;
        p += k;
    }
    return 0;
}

/* The client's address: REMOTE_ADDR, or when that is a trusted front, the
 * rightmost X-Forwarded-For hop that is not one (a client can prepend any
 * hops it likes, never append after the front's own). */
static size_t client_address_of(struct request *r, const char **addr);

/* ... and kept for the access log (R-OBS-2), which names the same client. */
static size_t client_address(struct request *r, const char **addr)
{
    size_t n = client_address_of(r, addr);
    if (!r->obs.client_addr)
        r->obs.client_addr = arena_strndup(r->arena, *addr, n);
    return n;
}

static size_t client_address_of(struct request *r, const char **addr)
{
    const char *remote = request_param(r, "REMOTE_ADDR");
    *addr = remote ? remote : "";
    size_t n = strlen(*addr);
    const char *xff = request_header(r, "X-Forwarded-For");
    if (!xff || !*admit_conf->trusted_proxies || !trusted_proxy(*addr, n))
        return n;
    const char *end = xff + strlen(xff);
    while (end > xff) {
        const char *start = end;
        while (start > xff && start[-1] != ',')
            start--;
        const char *a = start, *b = end;
        while (a < b && *a == ' ')
            a++;
        while (b > a && b[-1] == ' ')
            b--;
        if (b > a && !trusted_proxy(a, (size_t)(b - a))) {
            *addr = a;
            return (size_t)(b - a);
        }
        end = start > xff ? start - 1 : xff;
    }
    return n;
}

/* The client as the slow-down counts it: an IPv4 address, an IPv6 /64 (one
 * host can hold a whole /64, so rotating addresses in it gains nothing), an
 * IPv4-mapped IPv6 address as its IPv4; anything unparsable as its text. */
static uint64_t client_hash(const char *addr, size_t n)
{
    char text[INET6_ADDRSTRLEN + 1];
    unsigned char bin[16];
    const unsigned char *key = (const unsigned char *)addr;
    size_t klen = n;
    if (n < sizeof text) {
        memcpy(text, addr, n);
        text[n] = '\0';
        if (inet_pton(AF_INET, text, bin) == 1) {
            key = bin, klen = 4;
        } else if (inet_pton(AF_INET6, text, bin) == 1) {
            static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
            key = memcmp(bin, mapped, 12) == 0 ? bin + 12 : bin;
            klen = key == bin ? 8 : 4;
        }
    }
    uint64_t h = 1469598103934665603ULL;       /* FNV-1a */
    for (size_t i = 0; i < klen; i++)
        h = (h ^ key[i]) * 1099511628211ULL;
    return h;
}

/* The failure counter of (client, credential prefix), or of the client alone
 * when prefix is NULL. The two kinds live in separate halves of the table, so
 * spraying prefixes cannot push the per-client counters out; a full probe
 * window gives way to its oldest entry, so filling the table evicts rather
 * than blinds the slow-down. */
static struct shm_client *client_slot(struct request *r, const char *prefix, int create)
{
    const char *addr;
    size_t n = client_address(r, &addr);
    uint64_t h = client_hash(addr, n);
    if (prefix) {
        h = (h ^ '|') * 1099511628211ULL;
        for (const char *p = prefix; *p && p - prefix < 8; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    }
    if (!h)
        h = 1;
    const int half = SHM_MAX_CLIENTS / 2, base = prefix ? half : 0;
    struct shm_client *oldest = NULL;
    int64_t now = now_ms(), oldest_start = INT64_MAX;
    for (int k = 0; k < 8; k++) {
        struct shm_client *c = &r->shm->r->clients[base + (int)((h + (uint64_t)k) % (uint64_t)half)];
        uint64_t cur = atomic_load(&c->addr_hash);
        if (cur == h)
            return c;
        if (!create)
            continue;
        int64_t start = atomic_load(&c->window_start_ms);
        /* Free, or an entry whose window has ended: take it. */
        if ((cur == 0 || now - start >= admit_conf->auth_fail_window_ms) &&
            atomic_compare_exchange_strong(&c->addr_hash, &cur, h)) {
            atomic_store(&c->window_start_ms, now);
            atomic_store(&c->failures, 0);
            return c;
        }
        if (start < oldest_start)
            oldest = c, oldest_start = start;
    }
    if (oldest) {
        uint64_t cur = atomic_load(&oldest->addr_hash);
        if (atomic_compare_exchange_strong(&oldest->addr_hash, &cur, h)) {
            atomic_store(&oldest->window_start_ms, now);
            atomic_store(&oldest->failures, 0);
            return oldest;
        }
    }
    return NULL;
}

/* Seconds until the window of c ends when it is over limit, else 0. */
static int64_t client_wait(const struct shm_client *c, int64_t limit)
{
    if (!c)
        return 0;
    int64_t now = now_ms(), start = atomic_load(&c->window_start_ms);
    if (now - start >= admit_conf->auth_fail_window_ms || atomic_load(&c->failures) < limit)
        return 0;
    int64_t wait = (start + admit_conf->auth_fail_window_ms - now + 999) / 1000;
    return wait > 0 ? wait : 1;
}

int admit_auth_blocked(struct request *r, const char *credential)
{
    /* auth.fail_limit per address and credential prefix (one client's typos
     * never lock out its neighbours behind the same NAT or proxy), and ten
     * times that per address, against guessing with ever new keys. */
    int64_t a = client_wait(client_slot(r, credential ? credential : "", 0), admit_conf->auth_fail_limit);
    int64_t b = client_wait(client_slot(r, NULL, 0), (int64_t)admit_conf->auth_fail_limit * 10);
    int64_t wait = a > b ? a : b;
    if (!wait)
        return 0;
    char extra[64];
    snprintf(extra, sizeof extra, "Retry-After: %lld\r\n", (long long)wait);
    reply_error_extra(r, ERR_TOO_MANY_AUTH_FAILURES, NULL, extra);
    return 1;
}

static void client_count(struct shm_client *c)
{
    if (!c)
        return;
    int64_t now = now_ms(), start = atomic_load(&c->window_start_ms);
    if (now - start >= admit_conf->auth_fail_window_ms) {
        atomic_store(&c->window_start_ms, now);
        atomic_store(&c->failures, 0);
    }
    atomic_fetch_add(&c->failures, 1);
}

void admit_auth_failed(struct request *r, const char *credential)
{
    client_count(client_slot(r, credential ? credential : "", 1));
    client_count(client_slot(r, NULL, 1));
}
