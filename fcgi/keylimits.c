/* keylimits.c: sliding windows, token buckets and quota boundaries (SPEC §12). */
#include "keylimits.h"

#include <time.h>

int limits_window_take(int64_t *ring, int cap, int32_t *head, int64_t limit, int64_t window_ms, int64_t now,
                       int64_t *retry_ms, int64_t *current)
{
    if (window_ms < 1)
        window_ms = 1;
    if (limit > cap) {
        /* Fixed window: its number in ring[0], count in ring[1]. */
        int64_t sec = now / window_ms;
        if (ring[0] != sec) {
            ring[0] = sec;
            ring[1] = 0;
        }
        if (ring[1] >= limit) {
            *retry_ms = (sec + 1) * window_ms - now;
            *current = ring[1];
            return 0;
        }
        ring[1]++;
        return 1;
    }
    /* The oldest of the last `limit` admissions decides. */
    int32_t h = *head % cap;
    int oldest = (int)((h - limit + cap) % cap);
    if (ring[oldest] > now - window_ms) {
        *retry_ms = ring[oldest] + window_ms - now;
        int64_t n = 0;
        for (int i = 0; i < limit; i++)
            if (ring[(h - 1 - i + 2 * cap) % cap] > now - window_ms)
                n++;
        *current = n;
        return 0;
    }
    ring[h] = now;
    *head = (h + 1) % cap;
    return 1;
}

int limits_qps_take(int64_t *ring, int cap, int32_t *head, int64_t limit, int64_t now,
                    int64_t *retry_ms, int64_t *current)
{
    return limits_window_take(ring, cap, head, limit, 1000, now, retry_ms, current);
}

void limits_qps_give_back(int64_t *ring, int cap, int32_t *head, int64_t limit)
{
    if (limit > cap) {
        if (ring[1] > 0)
            ring[1]--;
        return;
    }
    int32_t h = (*head - 1 + cap) % cap;
    ring[h] = 0;
    *head = h;
}

void limits_bucket_refill(struct token_bucket *b, int64_t limit, int64_t now)
{
    if (b->limit != limit) {
        b->limit = limit;
        b->level_milli = limit * 1000;
        b->refill_ms = now;
        return;
    }
    int64_t elapsed = now - b->refill_ms;
    if (elapsed <= 0)
        return;
    if (elapsed > 60000)
        elapsed = 60000;    /* a full minute refills the bucket; more cannot overflow the product */
    /* limit tokens per 60 000 ms = limit milli-tokens per 60 ms. */
    b->level_milli += elapsed * limit / 60;
    if (b->level_milli > limit * 1000)
        b->level_milli = limit * 1000;
    b->refill_ms = now;
}

int limits_bucket_take(struct token_bucket *b, int64_t limit, int64_t want, int64_t now,
                       int64_t *retry_ms, int64_t *current)
{
    limits_bucket_refill(b, limit, now);
    if (want > limit)
        want = limit;
    if (want < 1)
        want = 1;
    int64_t need = want * 1000;
    if (b->level_milli >= need) {
        b->level_milli -= need;
        return 1;
    }
    int64_t missing = need - b->level_milli;
    *retry_ms = (missing * 60 + limit - 1) / limit;    /* ms until refilled */
    *current = limit - (b->level_milli > 0 ? b->level_milli / 1000 : 0);
    return 0;
}

void limits_bucket_settle(struct token_bucket *b, int64_t delta)
{
    /* Bounded first, so the products cannot overflow whatever an upstream reported. */
    const int64_t bound = INT64_MAX / 4000;
    delta = delta > bound ? bound : delta < -bound ? -bound : delta;
    b->level_milli += delta * 1000;
    if (b->level_milli > b->limit * 1000)
        b->level_milli = b->limit * 1000;
    if (b->level_milli < -b->limit * 1000)
        b->level_milli = -b->limit * 1000;    /* an overrun is at most one bucket of debt */
}

int64_t limits_estimate_tokens(int64_t prompt_estimate, int64_t max_tokens, int64_t default_output)
{
    int64_t out = max_tokens > 0 ? max_tokens : default_output;
    int64_t in = prompt_estimate > 0 ? prompt_estimate : 0;
    out = out > 0 ? out : 0;
    return in > INT64_MAX - out ? INT64_MAX : in + out;   /* saturates: never wraps negative */
}

int64_t limits_shrink_max_tokens(int64_t remaining, int64_t prompt, int64_t n, int64_t floor, int64_t asked)
{
    if (n < 1)
        n = 1;
    if (prompt < 0)
        prompt = 0;
    if (remaining <= prompt || remaining - prompt <= floor)
        return 0;
    int64_t m = (remaining - prompt) / n;
    if (asked > 0 && m > asked)
        m = asked;
    return m >= 1 ? m : 0;
}

/* Local midnight (the process time zone: the billing zone) of the day now_s is in,
 * moved on by days and months; first: the first of that month instead. */
static int64_t local_midnight(int64_t now_s, int days, int months, int first)
{
    time_t t = (time_t)now_s;
    struct tm tm;
    localtime_r(&t, &tm);
    tm.tm_mon += months;
    tm.tm_mday = first ? 1 : tm.tm_mday + days;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_isdst = -1;
    return (int64_t)mktime(&tm);
}

int64_t limits_next_day(int64_t now_s) { return local_midnight(now_s, 1, 0, 0); }

int64_t limits_next_month(int64_t now_s) { return local_midnight(now_s, 0, 1, 1); }

int64_t limits_day_start(int64_t now_s) { return local_midnight(now_s, 0, 0, 0); }

int64_t limits_month_start(int64_t now_s) { return local_midnight(now_s, 0, 0, 1); }
