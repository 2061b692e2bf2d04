/* test_limits.c: the sliding QPS and RPM windows, the TPM bucket, quota boundaries and the
 * max_tokens shrink (R-KEY-2, R-KEY-3, R-KEY-5, R-KEY-6). */
#include "keylimits.h"

#include "check.h"

#include <stdlib.h>
#include <time.h>

#define CAP 16

/* R-KEY-3: admissions at given times against a limit; expected verdicts. */
static const struct {
    const char *name;
    int64_t limit;
    int64_t at[12];     /* ms; -1 ends */
    int want[12];
} qps_cases[] = {
    {"limit 3 within a second", 3, {0, 10, 20, 30, -1}, {1, 1, 1, 0}},
    {"window slides, not resets", 3, {0, 500, 900, 1001, 1002, 1499, 1501, -1}, {1, 1, 1, 1, 0, 0, 1}},
    {"exactly 1000 ms later is outside", 2, {0, 0, 999, 1000, -1}, {1, 1, 0, 1}},
    {"limit 1", 1, {0, 999, 1000, 1500, 2000, -1}, {1, 0, 1, 0, 1}},
    {"burst at a second boundary stays at limit", 4, {990, 995, 998, 999, 1001, 1005, 1989, 1991, -1},
     {1, 1, 1, 1, 0, 0, 0, 1}},
    {"ring wraps", 2, {0, 1000, 2000, 3000, 3001, 3002, 4001, -1}, {1, 1, 1, 1, 1, 0, 1}},
};

static void test_qps(void)
{
    for (size_t i = 0; i < sizeof qps_cases / sizeof qps_cases[0]; i++) {
        int64_t ring[CAP] = {0};
        int32_t head = 0;
        for (int k = 0; qps_cases[i].at[k] >= 0; k++) {
            int64_t retry = -1, cur = -1, now = 100000 + qps_cases[i].at[k];
            int got = limits_qps_take(ring, CAP, &head, qps_cases[i].limit, now, &retry, &cur);
            CHECK(got == qps_cases[i].want[k], "%s: admission %d at %lld: got %d", qps_cases[i].name, k,
                  (long long)qps_cases[i].at[k], got);
            if (!got)
                CHECK(retry > 0 && retry <= 1000 && cur == qps_cases[i].limit,
                      "%s: refusal %d: retry %lld current %lld", qps_cases[i].name, k, (long long)retry,
                      (long long)cur);
        }
    }
}

/* Randomised: no one-second window ever holds more than the limit. */
static void test_qps_never_over(void)
{
    srand(7);
    for (int64_t limit = 1; limit <= CAP; limit += 5) {
        int64_t ring[CAP] = {0}, admitted[4000];
        int32_t head = 0;
        int n = 0;
        int64_t t = 50000;
        for (int k = 0; k < 4000; k++) {
            t += rand() % 40;
            int64_t retry, cur;
            if (limits_qps_take(ring, CAP, &head, limit, t, &retry, &cur))
                admitted[n++] = t;
        }
        int worst = 0;
        for (int a = 0; a < n; a++) {
            int c = 0;
            for (int b = a; b < n && admitted[b] < admitted[a] + 1000; b++)
                c++;
            worst = c > worst ? c : worst;
        }
        CHECK(worst == limit, "limit %lld: busiest window %d", (long long)limit, worst);
    }
}

static void test_qps_give_back(void)
{
    int64_t ring[CAP] = {0}, retry, cur;
    int32_t head = 0;
    CHECK_INT(limits_qps_take(ring, CAP, &head, 2, 1000, &retry, &cur), 1, "first");
    CHECK_INT(limits_qps_take(ring, CAP, &head, 2, 1001, &retry, &cur), 1, "second");
    CHECK_INT(limits_qps_take(ring, CAP, &head, 2, 1002, &retry, &cur), 0, "third refused");
    limits_qps_give_back(ring, CAP, &head, 2);     /* R-KEY-5: a later check refused the second */
    CHECK_INT(limits_qps_take(ring, CAP, &head, 2, 1003, &retry, &cur), 1, "slot given back");
    /* Above the ring's size the fixed window is used. */
    int64_t big[CAP] = {0};
    head = 0;
    int ok = 0;
    for (int i = 0; i < 40; i++)
        ok += limits_qps_take(big, CAP, &head, 30, 5000 + i, &retry, &cur);
    CHECK_INT(ok, 30, "fixed window above the ring size");
    CHECK_INT(limits_qps_take(big, CAP, &head, 30, 6000, &retry, &cur), 1, "next second");
}

static void test_bucket(void)
{
    struct token_bucket b = {0, 0, 0};
    int64_t retry = 0, cur = 0;
    /* R-KEY-5: 600 per minute = 10 per second. A new bucket starts full. */
    CHECK_INT(limits_bucket_take(&b, 600, 500, 1000, &retry, &cur), 1, "500 of 600");
    CHECK_INT(limits_bucket_take(&b, 600, 200, 1000, &retry, &cur), 0, "200 more refused");
    CHECK(retry == 10000, "100 missing at 10/s: retry %lld", (long long)retry);
    CHECK_INT(cur, 500, "current use");
    CHECK_INT(limits_bucket_take(&b, 600, 200, 11000, &retry, &cur), 1, "refilled after 10 s");
    limits_bucket_settle(&b, 150);                  /* actual usage was 150 below the estimate */
    CHECK_INT(b.level_milli, 150000 + 0, "refund settles the level");
    limits_bucket_settle(&b, -400);                 /* actual above the estimate: debt */
    CHECK(b.level_milli < 0, "level below zero: %lld", (long long)b.level_milli);
    {
        /* R-KEY-5: an idle day with a limit near KEY_LIMIT_MAX, and an upstream's huge usage,
         * neither overflows the bucket's arithmetic */
        struct token_bucket big = {0, 0, 0};
        int64_t r2 = 0, c2 = 0;
        limits_bucket_take(&big, 1000000000000LL, 1, 0, &r2, &c2);
        CHECK_INT(limits_bucket_take(&big, 1000000000000LL, 1, 86400000LL * 365, &r2, &c2), 1, "a year idle");
        CHECK(big.level_milli > 0 && big.level_milli <= 1000000000000LL * 1000, "level in range");
        limits_bucket_settle(&big, -INT64_MAX / 2);
        CHECK(big.level_milli >= -1000000000000LL * 1000, "debt bounded");
    }
    limits_bucket_settle(&b, 10000);
    CHECK_INT(b.level_milli, 600000, "never above capacity");
    /* A request larger than the whole limit passes a full bucket (capped), not never. */
    struct token_bucket c2 = {0, 0, 0};
    CHECK_INT(limits_bucket_take(&c2, 100, 5000, 0, &retry, &cur), 1, "capped to the limit");
    CHECK_INT(limits_bucket_take(&c2, 100, 1, 0, &retry, &cur), 0, "then empty");
    /* A changed limit starts a new full bucket. */
    CHECK_INT(limits_bucket_take(&c2, 200, 150, 0, &retry, &cur), 1, "new limit, full again");
}

static void test_estimate_and_boundaries(void)
{
    CHECK_INT(limits_estimate_tokens(100, 50, 1024), 150, "max_tokens given");
    CHECK_INT(limits_estimate_tokens(100, 0, 1024), 1124, "default output");
    CHECK_INT(limits_estimate_tokens(-5, 0, 0), 0, "never negative");
    /* R-KEY-5: near INT64_MAX the sum saturates instead of wrapping negative */
    CHECK_INT(limits_estimate_tokens(100, INT64_MAX - 10, 1024), INT64_MAX, "saturates");
    CHECK_INT(limits_estimate_tokens(INT64_MAX, INT64_MAX, 1024), INT64_MAX, "saturates both");
    CHECK(limits_estimate_tokens(7, INT64_MAX, 1) > 0, "positive");
    setenv("TZ", "UTC", 1);
    tzset();
    /* 2026-11-30T10:00:00Z */
    CHECK_INT(limits_next_day(1796032800), 1796083200, "next midnight UTC");
    CHECK_INT(limits_next_month(1796032800), 1796083200, "1 December UTC");
    CHECK_INT(limits_next_month(1798761600 - 1), 1798761600, "31 Dec 23:59:59 -> 1 Jan");
    setenv("TZ", "Asia/Shanghai", 1);
    tzset();
    /* 10:00Z is 18:00 in UTC+8; the next local midnight is 16:00Z. */
    CHECK_INT(limits_next_day(1796032800), 1796054400, "next midnight UTC+8");
}

/* R-KEY-6: the user's requests per minute, the same window over 60 s. */
static void test_minute_window(void)
{
    int64_t ring[CAP] = {0}, retry = -1, cur = -1;
    int32_t head = 0;
    const int64_t t0 = 1000000;
    for (int k = 0; k < 3; k++)
        CHECK_INT(limits_window_take(ring, CAP, &head, 3, 60000, t0 + k * 10000, &retry, &cur), 1, "rpm 3: admission");
    /* A fourth within the minute: refused until the first leaves it. */
    CHECK_INT(limits_window_take(ring, CAP, &head, 3, 60000, t0 + 59000, &retry, &cur), 0, "rpm 3: fourth refused");
    CHECK_INT(retry, 1000, "until the oldest leaves the minute");
    CHECK_INT(cur, 3, "three in the minute");
    CHECK_INT(limits_window_take(ring, CAP, &head, 3, 60000, t0 + 59999, &retry, &cur), 0, "one ms before");
    CHECK_INT(limits_window_take(ring, CAP, &head, 3, 60000, t0 + 60000, &retry, &cur), 1, "exactly 60 s later");
    CHECK_INT(limits_window_take(ring, CAP, &head, 3, 60000, t0 + 60001, &retry, &cur), 0, "slides: second still in");
    CHECK_INT(retry, 9999, "until the second leaves");
    /* A refused request later in the chain is given back: the slot is free again. */
    CHECK_INT(limits_window_take(ring, CAP, &head, 3, 60000, t0 + 70000, &retry, &cur), 1, "second left");
    limits_qps_give_back(ring, CAP, &head, 3);
    CHECK_INT(limits_window_take(ring, CAP, &head, 3, 60000, t0 + 70001, &retry, &cur), 1, "given back, taken again");
    CHECK_INT(limits_window_take(ring, CAP, &head, 3, 60000, t0 + 70002, &retry, &cur), 0, "and full");
    /* Above the ring's capacity: a fixed minute. */
    int64_t big[CAP] = {0};
    head = 0;
    for (int k = 0; k < CAP + 4; k++)
        CHECK_INT(limits_window_take(big, CAP, &head, CAP + 4, 60000, 120000 + k, &retry, &cur), 1, "fixed minute");
    CHECK_INT(limits_window_take(big, CAP, &head, CAP + 4, 60000, 150000, &retry, &cur), 0, "fixed minute full");
    CHECK_INT(retry, 30000, "until the minute ends");
    CHECK_INT(limits_window_take(big, CAP, &head, CAP + 4, 60000, 180000, &retry, &cur), 1, "next minute");
    /* The one-second window is the same function. */
    int64_t q[CAP] = {0};
    head = 0;
    CHECK_INT(limits_qps_take(q, CAP, &head, 1, 5000, &retry, &cur), 1, "qps 1");
    CHECK_INT(limits_qps_take(q, CAP, &head, 1, 5999, &retry, &cur), 0, "qps 1 within the second");
    CHECK_INT(retry, 1, "qps retry");
}

/* R-KEY-6: shrink max_tokens to what is left of a token period. */
static const struct {
    const char *name;
    int64_t remaining, prompt, n, floor, asked, want;
} shrink_cases[] = {
    {"room for an answer", 500, 100, 1, 16, 1000, 400},
    {"n answers share it", 500, 100, 4, 16, 1000, 100},
    {"no max_tokens given", 500, 100, 1, 16, 0, 400},
    {"never above the asked", 500, 100, 1, 16, 50, 50},
    {"just above the floor", 117, 100, 1, 16, 1000, 17},
    {"at the floor: refused", 116, 100, 1, 16, 1000, 0},
    {"prompt alone too big", 90, 100, 1, 16, 1000, 0},
    {"nothing left", 0, 10, 1, 16, 1000, 0},
    {"negative remaining", -40, 10, 1, 16, 1000, 0},
    {"n larger than the room", 120, 100, 64, 16, 1000, 0},
};

static void test_shrink(void)
{
    for (size_t i = 0; i < sizeof shrink_cases / sizeof shrink_cases[0]; i++)
        CHECK_INT(limits_shrink_max_tokens(shrink_cases[i].remaining, shrink_cases[i].prompt, shrink_cases[i].n,
                                           shrink_cases[i].floor, shrink_cases[i].asked),
                  shrink_cases[i].want, shrink_cases[i].name);
}

/* R-KEY-6: the start of the day and month whose tokens are rebuilt from the events. */
static void test_period_starts(void)
{
    setenv("TZ", "UTC", 1);
    tzset();
    /* 2026-11-30T10:00:00Z */
    CHECK_INT(limits_day_start(1796032800), 1795996800, "midnight UTC");
    CHECK_INT(limits_month_start(1796032800), 1793491200, "1 November UTC");
    CHECK_INT(limits_day_start(1795996800), 1795996800, "midnight itself");
    setenv("TZ", "Asia/Shanghai", 1);
    tzset();
    /* 18:00 local; the local day began at 16:00Z the day before. */
    CHECK_INT(limits_day_start(1796032800), 1795968000, "midnight UTC+8");
    CHECK_INT(limits_month_start(1796032800), 1793462400, "1 November UTC+8");
}

int main(void)
{
    test_qps();
    test_qps_never_over();
    test_qps_give_back();
    test_bucket();
    test_estimate_and_boundaries();
    test_minute_window();
    test_shrink();
    test_period_starts();
    return check_done();
}
