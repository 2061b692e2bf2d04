/* keylimits.h: the arithmetic of key limits (R-KEY-2, R-KEY-3, R-KEY-5) as pure
 * functions over plain values: exact sliding windows (a second, a minute), a
 * tokens-per-minute bucket with pre-deduction and settlement, and the reset
 * instants of daily and monthly quotas. The shared-state locking lives in admit.c. */
#ifndef SLUICE_KEYLIMITS_H
#define SLUICE_KEYLIMITS_H

#include <stdint.h>

/* An exact sliding window of `window_ms` (R-KEY-3 QPS: 1000; R-KEY-6 user
 * RPM: 60 000): ring[] holds the last admission times (ms), *head the next
 * write position. With limit <= cap the window is exact: a request is admitted
 * only if fewer than `limit` admissions lie in (now - window_ms, now]. Above
 * cap a fixed window is used (ring[0] = window number, ring[1] = count).
 * Returns 1 (admitted, recorded) or 0 (refused; *retry_ms is how long until a
 * slot frees, i.e. until the oldest admission leaves the window; *current the
 * admissions in the window). */
int limits_window_take(int64_t *ring, int cap, int32_t *head, int64_t limit, int64_t window_ms, int64_t now,
                       int64_t *retry_ms, int64_t *current);
/* The one-second window of R-KEY-3. */
int limits_qps_take(int64_t *ring, int cap, int32_t *head, int64_t limit, int64_t now,
                    int64_t *retry_ms, int64_t *current);
/* Takes back the latest admission (a later check refused the request); any window. */
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

/* R-KEY-6 shrink: the max_tokens (per answer, n answers) that still fits in
 * `remaining` tokens of a period after the prompt estimate, or 0 when no
 * useful answer fits: what is left after the prompt must exceed `floor`. Never
 * more than `asked` (0: the client gave none). */
int64_t limits_shrink_max_tokens(int64_t remaining, int64_t prompt, int64_t n, int64_t floor, int64_t asked);

/* R-KEY-2 X-Quota-Reset: the next local midnight / first of next month after
 * `now_s` in the process time zone (TZ = the billing zone), as epoch seconds. */
int64_t limits_next_day(int64_t now_s);
int64_t limits_next_month(int64_t now_s);
/* The local midnight that began the day / the first of the month holding now_s
 * (R-KEY-6: a period's tokens are rebuilt from the usage events since then). */
int64_t limits_day_start(int64_t now_s);
int64_t limits_month_start(int64_t now_s);

#endif
