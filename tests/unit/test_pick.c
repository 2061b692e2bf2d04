/* test_pick.c: route choice by priority group, weight and availability (fcgi/pick.h, R-RT-1..4). */
#include "check.h"

#include "pick.h"

#include <stdint.h>

#define DRAWS 10000
#define MAXR 6

/* Deterministic pseudo-random draws (xorshift64*), so failures reproduce. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t xorshift(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Each case: routes, and for DRAWS draws the share (percent) each index must get,
 * within tol percentage points. -1 in want means "never chosen" exactly. */
static const struct {
    const char *name;
    int n;
    struct pick_route r[MAXR];
    int want_pct[MAXR];
    double tol;
} dist_cases[] = {
    /* R-RT-2: an 80/20 canary split */
    {"80/20", 2, {{0, 80, 1}, {0, 20, 1}}, {80, 20}, 2.0},
    {"50/50", 2, {{0, 1, 1}, {0, 1, 1}}, {50, 50}, 2.0},
    {"60/30/10", 3, {{0, 6, 1}, {0, 3, 1}, {0, 1, 1}}, {60, 30, 10}, 2.0},
    /* R-RT-3: an unavailable route is skipped, the rest share its traffic */
    {"80/20, first unavailable", 2, {{0, 80, 0}, {0, 20, 1}}, {-1, 100}, 0},
    {"50/30/20, middle unavailable", 3, {{0, 50, 1}, {0, 30, 0}, {0, 20, 1}}, {71, -1, 29}, 2.0},
    /* R-RT-4: weight 0 only as failover */
    {"weighted + standby", 2, {{0, 100, 1}, {0, 0, 1}}, {100, -1}, 0},
    {"standby first in group", 3, {{0, 0, 1}, {0, 3, 1}, {0, 1, 1}}, {-1, 75, 25}, 2.0},
    {"weighted down, standby serves", 2, {{0, 100, 0}, {0, 0, 1}}, {-1, 100}, 0},
    {"first available standby wins", 4, {{0, 5, 0}, {0, 0, 0}, {0, 0, 1}, {0, 0, 1}}, {-1, -1, 100, -1}, 0},
    /* R-RT-1: the best priority group with an available route is used */
    {"priority 0 preferred", 3, {{0, 10, 1}, {1, 90, 1}, {2, 100, 1}}, {100, -1, -1}, 0},
    {"priority 0 group split", 4, {{0, 80, 1}, {0, 20, 1}, {1, 100, 1}, {1, 100, 1}}, {80, 20, -1, -1}, 2.0},
    {"standby in best group beats next group", 3, {{0, 10, 0}, {0, 0, 1}, {1, 100, 1}}, {-1, 100, -1}, 0},
    {"fall to next group", 4, {{0, 80, 0}, {0, 20, 0}, {1, 30, 1}, {1, 70, 1}}, {-1, -1, 30, 70}, 2.0},
    {"fall two groups", 4, {{0, 1, 0}, {1, 1, 0}, {1, 0, 0}, {2, 1, 1}}, {-1, -1, -1, 100}, 0},
    {"next group standby", 3, {{0, 1, 0}, {1, 0, 1}, {2, 5, 1}}, {-1, 100, -1}, 0},
    {"non-zero priorities", 2, {{5, 1, 1}, {9, 1, 1}}, {100, -1}, 0},
};

/* Exact cases: one fixed rnd, one answer. */
static const struct {
    const char *name;
    int n;
    struct pick_route r[MAXR];
    uint64_t rnd;
    int want;
} exact_cases[] = {
    {"n = 0", 0, {{0}}, 12345, -1},
    {"all unavailable", 3, {{0, 1, 0}, {0, 0, 0}, {1, 5, 0}}, 7, -1},
    {"only unavailable standby", 1, {{0, 0, 0}}, 0, -1},
    {"single route", 1, {{0, 1, 1}}, UINT64_MAX, 0},
    {"single standby", 1, {{0, 0, 1}}, 99, 0},
    {"rnd 0 takes the first weighted", 2, {{0, 80, 1}, {0, 20, 1}}, 0, 0},
    {"rnd 79 still first", 2, {{0, 80, 1}, {0, 20, 1}}, 79, 0},
    {"rnd 80 second", 2, {{0, 80, 1}, {0, 20, 1}}, 80, 1},
    {"rnd 99 second", 2, {{0, 80, 1}, {0, 20, 1}}, 99, 1},
    {"rnd 100 wraps to first", 2, {{0, 80, 1}, {0, 20, 1}}, 100, 0},
    {"huge rnd", 2, {{0, 80, 1}, {0, 20, 1}}, UINT64_MAX, (int)(UINT64_MAX % 100 < 80 ? 0 : 1)},
    {"negative weight is never chosen", 2, {{0, -5, 1}, {0, 1, 1}}, 0, 1},
};

static const struct {
    const char *name;
    int n;
    int w[MAXR];
    uint64_t rnd;
    int want;
} weighted_cases[] = {
    {"n = 0", 0, {0}, 5, -1},
    {"all zero", 3, {0, 0, 0}, 5, -1},
    {"all zero, rnd 0", 2, {0, 0}, 0, -1},
    {"one", 1, {7}, 123456789, 0},
    {"3/1 rnd 0", 2, {3, 1}, 0, 0},
    {"3/1 rnd 2", 2, {3, 1}, 2, 0},
    {"3/1 rnd 3", 2, {3, 1}, 3, 1},
    {"3/1 rnd 4", 2, {3, 1}, 4, 0},
    {"zero skipped", 3, {0, 2, 0}, 1, 1},
    {"zero between", 3, {1, 0, 1}, 1, 2},
    {"negative skipped", 3, {-3, 2, 1}, 2, 2},
    {"only negative", 2, {-1, -2}, 0, -1},
    {"large weights", 2, {2000000000, 2000000000}, 2000000000ULL, 1},
};

int main(void)
{
    for (size_t c = 0; c < sizeof dist_cases / sizeof dist_cases[0]; c++) {
        int count[MAXR] = {0}, none = 0;
        for (int d = 0; d < DRAWS; d++) {
            int i = pick_route(dist_cases[c].r, dist_cases[c].n, xorshift());
            if (i < 0 || i >= dist_cases[c].n)
                none++;
            else
                count[i]++;
        }
        CHECK(none == 0, "%s: %d draws returned no route", dist_cases[c].name, none);
        for (int i = 0; i < dist_cases[c].n; i++) {
            int want = dist_cases[c].want_pct[i];
            double pct = 100.0 * count[i] / DRAWS;
            if (want < 0)
                CHECK(count[i] == 0, "%s: route %d chosen %d times, want never", dist_cases[c].name, i,
                      count[i]);
            else
                CHECK(pct >= want - dist_cases[c].tol && pct <= want + dist_cases[c].tol,
                      "%s: route %d got %.2f%%, want %d%% +- %.1f", dist_cases[c].name, i, pct, want,
                      dist_cases[c].tol);
        }
    }

    for (size_t c = 0; c < sizeof exact_cases / sizeof exact_cases[0]; c++) {
        int got = pick_route(exact_cases[c].r, exact_cases[c].n, exact_cases[c].rnd);
        CHECK(got == exact_cases[c].want, "pick_route %s: got %d, want %d", exact_cases[c].name, got,
              exact_cases[c].want);
    }

    for (size_t c = 0; c < sizeof weighted_cases / sizeof weighted_cases[0]; c++) {
        int got = pick_weighted(weighted_cases[c].w, weighted_cases[c].n, weighted_cases[c].rnd);
        CHECK(got == weighted_cases[c].want, "pick_weighted %s: got %d, want %d", weighted_cases[c].name,
              got, weighted_cases[c].want);
    }

    /* pick_weighted statistically: 80/20 over the same draws */
    {
        static const int w[] = {80, 0, 20};
        int count[3] = {0};
        for (int d = 0; d < DRAWS; d++) {
            int i = pick_weighted(w, 3, xorshift());
            if (i >= 0 && i < 3)
                count[i]++;
        }
        CHECK(count[1] == 0, "pick_weighted chose weight 0 %d times", count[1]);
        CHECK(count[0] >= 7800 && count[0] <= 8200, "pick_weighted 80%%: %d / %d", count[0], DRAWS);
        CHECK(count[2] >= 1800 && count[2] <= 2200, "pick_weighted 20%%: %d / %d", count[2], DRAWS);
    }

    return check_done();
}
