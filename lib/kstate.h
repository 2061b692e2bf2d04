/* kstate.h: the pool-wide hot state of key limits (R-KEY-2..5, issue 19) behind
 * one small interface, so the admit stage does not know where it lives:
 *   - the mapped state file (lib/shm.h, the embedded default: fcgi/admit.c's
 *     locked rings, buckets and quota counters of struct shm_key), or
 *   - Redis (kstate_redis.c), shared by every gateway host: each admission is
 *     ONE atomic server-side script on the server's clock (sliding QPS window,
 *     concurrency lease, daily / monthly call quotas, monthly token and TPM
 *     reservations), released or settled by one more at the end.
 * SQLite stays the record of the call and token quotas: counts a period does
 * not hold yet in Redis are seeded from it (KSTATE_NEED_SEED), and the usage
 * writer adds every admission to it as before. */
#ifndef SLUICE_KSTATE_H
#define SLUICE_KSTATE_H

#include <stdint.h>

enum kstate_result {
    KSTATE_OK = 0,           /* admitted; the hold says what was taken */
    KSTATE_REFUSED = 1,      /* a limit refused: which, current, retry_ms */
    KSTATE_NEED_SEED = 2,    /* a quota period is new to the store: ask again with SQLite's counts */
    KSTATE_UNAVAILABLE = -1, /* the store did not answer (the fail policy decides) */
};

/* The limit that refused, in R-KEY-2 order. */
enum kstate_limit { KSL_NONE, KSL_QPS, KSL_CONCURRENCY, KSL_DAILY, KSL_MONTHLY, KSL_MONTHLY_TOKENS, KSL_TPM };

struct kstate_ask {
    int64_t key_id;
    int64_t qps_limit, concurrency_limit;           /* 0: none */
    int64_t daily_limit, monthly_quota;             /* calls; 0: none */
    int64_t monthly_token_quota, month_want;        /* tokens reserved against it */
    int64_t tpm_limit, tpm_want;                    /* the TPM bucket and what to pre-deduct */
    char day[16], month[16];                        /* "d:YYYY-MM-DD", "m:YYYY-MM" (billing zone) */
    int seeded;                                     /* 1: the seeds below are SQLite's counts */
    int64_t seed_day_calls, seed_month_calls, seed_month_tokens;
    int lease_ms;                                   /* a concurrency slot lives this long unrenewed */
    int timeout_ms;                                 /* one call to the store at most */
};

/* What one admission took, kept with the request until it ends. */
struct kstate_hold {
    int64_t key_id;
    char lease[48];                 /* the admission's unique id: QPS member and concurrency lease */
    int qps, slot, calls;           /* a QPS entry, a concurrency lease, one call counted */
    int64_t month_tokens;           /* reserved against the monthly token quota */
    int64_t tpm_reserved, tpm_limit;
    char day[16], month[16];
    int64_t admitted_ms;            /* the server's clock at admission */
};

struct kstate_refusal {
    enum kstate_limit which;
    int64_t current, retry_ms;
};

/* ---- the Redis implementation (kstate_redis.c) -------------------------------- */

/* Is a Redis state configured and running in this process? */
int kstate_remote(void);
/* At start: url is sluice.conf's `state` ("" = the state file: nothing to do).
 * 0; -1 (logged, with why) when it cannot be used at all: a bad value, or
 * this build has no hiredis. An unreachable server is no error: the fail
 * policy holds until it answers. */
int kstate_start(const char *url);
/* One atomic admission. On KSTATE_OK *h is filled (and its lease renewed
 * until kstate_release); on KSTATE_REFUSED *why. */
enum kstate_result kstate_admit(const struct kstate_ask *a, struct kstate_hold *h, struct kstate_refusal *why);
/* The end of an admitted request, or its undoing (give_back: a later check
 * refused, so QPS entry, call and reservations go back too). tpm_actual and
 * month_actual: the tokens really used (-1: keep the reservation). 0, or -1
 * when the store did not answer (the lease then expires by itself). */
int kstate_release(struct kstate_hold *h, int give_back, int64_t tpm_actual, int64_t month_actual, int timeout_ms);

/* ---- the fail policy (kstate.c, pure) ----------------------------------------- */

/* One outage as the responder sees it: the first failure after a success is
 * logged, the others only counted; the first success after it ends it. */
struct kstate_outage {
    int down;                       /* in an outage now */
    int64_t since_ms;               /* its first failure */
    int64_t failures;               /* calls that failed in it */
};
/* Notes one call's outcome (ok 1/0) at now_ms. Returns 1 when this call starts
 * an outage (log it), 2 when it ends one (log the recovery), else 0. */
int kstate_outage_note(struct kstate_outage *o, int ok, int64_t now_ms);
/* What a request of a key with limits gets while the store does not answer:
 * 1 admitted without its limits (fail_open), 0 refused with 503 state_unavailable. */
int kstate_fail_admits(int fail_closed);
/* The metric label of the policy: "fail_open" | "fail_closed". */
const char *kstate_policy_name(int fail_closed);

/* Reconnect backoff: the wait after `failures` failed connects in a row
 * (100 ms doubling, at most 2 s; 0 failures: none). */
int64_t kstate_backoff_ms(int failures);

#endif
