/* quota.h: call and token quotas counted by atomic UPSERT in SQLite (R-KEY-4, R-KEY-5).
 * Calls run inside a transaction the caller opens, so a refusal by a later
 * check rolls back the earlier counts (the paired-bucket refund). */
#ifndef SLUICE_QUOTA_H
#define SLUICE_QUOTA_H

#include "dbpool.h"
#include "shm.h"

#include <stdint.h>

enum quota_result { QUOTA_OK = 0, QUOTA_REFUSED = 1, QUOTA_DB_ERROR = -1 };

/* Counts one call in period ('d:YYYY-MM-DD' or 'm:YYYY-MM') unless it already
 * holds `limit`; *current gets the count after (or at) the check. */
enum quota_result quota_take_call(struct dbconn *c, int64_t key_id, const char *period, int64_t limit,
                                  int64_t *current);
/* Pre-deducts `want` tokens (capped at the quota) unless the period's tokens
 * already reached `limit`. */
enum quota_result quota_take_tokens(struct dbconn *c, int64_t key_id, const char *period, int64_t want,
                                    int64_t limit, int64_t *current);
/* Takes back one call counted in period (a later check refused the request). */
int quota_refund_call(struct dbconn *c, int64_t key_id, const char *period);
/* Settlement: adds delta (negative = refund) to the period's tokens. */
int quota_settle_tokens(struct dbconn *c, int64_t key_id, const char *period, int64_t delta);

/* ---- the same quotas in the shared state (R-KEY-4): no SQLite write per request.
 * The caller holds the key's lock. Counters of a period are loaded from SQLite
 * (through c) the first time the state sees it; the usage writer adds every
 * request's net effect to SQLite afterwards (usage_writer.c), so a state file
 * lost with every process costs at most one flush interval. */
struct quota_ask {
    int64_t daily_limit, monthly_quota, monthly_token_quota;   /* 0: none */
    int64_t want;                                              /* tokens to reserve */
    char day[16], month[16];      /* the request's periods; on QUOTA_OK the ones it was counted in */
};
/* A period's counters as SQLite has them, read before the key's lock is taken. */
struct quota_loaded {
    char day[16], month[16];      /* "" when not read */
    int64_t day_calls, month_calls, month_tokens;
};
/* Reads the counters of a's periods from SQLite into *out. 0, or -1. */
int quota_preload(struct dbconn *c, int64_t key_id, const struct quota_ask *a, struct quota_loaded *out);
/* After a robust lock was taken from a holder that died: its periods are
 * reloaded, whatever it was writing (call with the lock held). */
void quota_forget_shared(struct shm_key *k);
enum quota_kind { QUOTA_DAILY = 1, QUOTA_MONTHLY, QUOTA_MONTHLY_TOKENS };
/* All of them or none: QUOTA_OK (counted), QUOTA_REFUSED (*which and *current
 * say which and at what count), QUOTA_DB_ERROR (a new period and pre holds no
 * counters for it; nothing counted). A request whose period the state has
 * already left behind (it raced midnight) counts in the state's newer one:
 * periods never move backwards. */
enum quota_result quota_take_shared(struct shm_key *k, const struct quota_loaded *pre, struct quota_ask *a,
                                    enum quota_kind *which, int64_t *current);
/* Does the state already hold these periods (no SQLite needed)? A hint, read unlocked. */
int quota_shared_loaded(const struct shm_key *k, const char *day, const char *month);
/* Undoes a take (a later check refused) or settles tokens (delta, negative =
 * refund), for the periods given, if they are still the state's. */
void quota_adjust_shared(struct shm_key *k, const char *day, const char *month, int calls, int64_t tokens);

/* "d:YYYY-MM-DD" / "m:YYYY-MM" for epoch ms in the billing time zone. */
void quota_day_period(int64_t ms, char out[16]);
void quota_month_period(int64_t ms, char out[16]);

#endif
