/* keylimits.h: the arithmetic of key limits (R-KEY-2, R-KEY-3, R-KEY-5) as pure
 * functions over plain values: an exact sliding one-second window, a
 * tokens-per-minute bucket with pre-deduction and settlement, and the reset
 * instants of daily and monthly quotas. The shared-state locking lives in admit.c. */
#ifndef SLUICE_KEYLIMITS_H
#define SLUICE_KEYLIMITS_H

#include <stdint.h>

/* R-KEY-3 QPS: ring[] holds the last admission times (ms), *head the next
 * write position. With limit <= cap the window is exact: a request is admitted
 * only if fewer than `limit` admissions lie in (now - 1000, now]. Above cap a
 * fixed one-second window is used (ring[0] = second, ring[1] = count).
 * Returns 1 (admitted, recorded) or 0 (refused; *retry_ms is how long until a
 * slot frees, *current the admissions in the window). */
int limits_qps_take(int64_t *ring, int cap, int32_t *head, int64_t limit, int64_t now,
                    int64_t *retry_ms, int64_t *current);
/* Takes back the latest admission (a later check refused the request). */
void limits_qps_give_back(int64_t *ring, int cap, int32_t *head, int64_t limit);

/* R-KEY-5 tokens per minute: a bucket of capacity `limit` tokens refilled at
 * limit/60 per second. Levels are in thousandths of a token. */
struct token_bucket {
    int64_t level_milli, refill_ms, limit;
};

/* Brings the bucket to `now` (and to a changed limit: full on first use). */
void limits_bucket_refill(struct token_bucket *b, int64_t limit, int64_t now);
/* Pre-deducts `want` tokens (capped at the limit, so one large request can
 * still pass a full bucket). 1 admitted; 0 refused with *retry_ms, *current
 * (tokens used in the window) filled. */
int limits_bucket_take(struct token_bucket *b, int64_t limit, int64_t want, int64_t now,
                       int64_t *retry_ms, int64_t *current);
/* Settlement: `delta` > 0 returns tokens (estimate above actual), < 0 charges
 * more (the level may go below zero: debt repaid by refill). */
void limits_bucket_settle(struct token_bucket *b, int64_t delta);

/* Tokens a request may use: prompt estimate + max_tokens (or default_output). */
int64_t limits_estimate_tokens(int64_t prompt_estimate, int64_t max_tokens, int64_t default_output);

/* R-KEY-2 X-Quota-Reset: the next local midnight / first of next month after
 * `now_s` in the process time zone (TZ = the billing zone), as epoch seconds. */
int64_t limits_next_day(int64_t now_s);
int64_t limits_next_month(int64_t now_s);

#endif
