/* test_balance.c: replica choice by round_robin, random, least_connections and engine_aware (fcgi/balance.h, R-LB-1..5). */
#include "check.h"

#include "balance.h"

#include <stdint.h>

#define DRAWS 10000
#define MAXC 5

static uint64_t rng_state = 0x0123456789ABCDEFULL;

static uint64_t xorshift(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Exact cases: algorithm, candidates, then the picks for rr = 0, 1, 2, 3 (rnd fixed). */
static const struct {
    const char *name;
    enum lb_algorithm alg;
    int n;
    struct balance_cand c[MAXC];
    uint64_t rnd;
    int want[4];        /* for rr = 0..3 */
} exact_cases[] = {
    /* R-LB-1 round_robin: position rr modulo n, weights and load ignored */
    {"rr 3 replicas", LB_ROUND_ROBIN, 3, {{1, 0, 0, 0, 0}, {1, 0, 0, 0, 0}, {1, 0, 0, 0, 0}}, 0, {0, 1, 2, 0}},
    {"rr ignores load", LB_ROUND_ROBIN, 2, {{1, 100, 0, 0, 0}, {0, 0, 0, 0, 0}}, 7, {0, 1, 0, 1}},
    {"rr one replica", LB_ROUND_ROBIN, 1, {{1, 5, 0, 0, 0}}, 7, {0, 0, 0, 0}},
    /* R-LB-1 least_connections: the fewest active */
    {"lc minimum", LB_LEAST_CONNECTIONS, 3, {{1, 5, 0, 0, 0}, {1, 2, 0, 0, 0}, {1, 9, 0, 0, 0}}, 0, {1, 1, 1, 1}},
    {"lc minimum last", LB_LEAST_CONNECTIONS, 3, {{1, 5, 0, 0, 0}, {1, 4, 0, 0, 0}, {1, 0, 0, 0, 0}}, 0, {2, 2, 2, 2}},
    {"lc ignores weight", LB_LEAST_CONNECTIONS, 2, {{100, 3, 0, 0, 0}, {1, 1, 0, 0, 0}}, 0, {1, 1, 1, 1}},
    /* ties rotate with rr so equal replicas share a burst */
    {"lc two equal alternate", LB_LEAST_CONNECTIONS, 2, {{1, 0, 0, 0, 0}, {1, 0, 0, 0, 0}}, 0, {0, 1, 0, 1}},
    {"lc three equal rotate", LB_LEAST_CONNECTIONS, 3, {{1, 4, 0, 0, 0}, {1, 4, 0, 0, 0}, {1, 4, 0, 0, 0}}, 0, {0, 1, 2, 0}},
    {"lc tie among two of three", LB_LEAST_CONNECTIONS, 3, {{1, 1, 0, 0, 0}, {1, 7, 0, 0, 0}, {1, 1, 0, 0, 0}}, 0, {0, 2, 2, 0}},
    {"lc one replica", LB_LEAST_CONNECTIONS, 1, {{1, 42, 0, 0, 0}}, 0, {0, 0, 0, 0}},
    /* R-LB-4: engine_aware without metrics behaves as least_connections */
    {"ea minimum", LB_ENGINE_AWARE, 3, {{1, 5, 0, 0, 0}, {1, 2, 0, 0, 0}, {1, 9, 0, 0, 0}}, 0, {1, 1, 1, 1}},
    {"ea two equal alternate", LB_ENGINE_AWARE, 2, {{1, 0, 0, 0, 0}, {1, 0, 0, 0, 0}}, 0, {0, 1, 0, 1}},
    {"ea tie among two of three", LB_ENGINE_AWARE, 3, {{1, 1, 0, 0, 0}, {1, 7, 0, 0, 0}, {1, 1, 0, 0, 0}}, 0, {0, 2, 2, 0}},
    /* R-LB-2 engine_aware with metrics {weight, active, has_metrics, waiting, kv_permille}:
     * score = waiting x 100 + kv percent, lowest wins whatever the active counts */
    {"R-LB-2 queue loses", LB_ENGINE_AWARE, 2, {{1, 0, 1, 5, 0}, {1, 9, 1, 0, 0}}, 0, {1, 1, 1, 1}},
    {"R-LB-2 kv decides", LB_ENGINE_AWARE, 2, {{1, 0, 1, 0, 420}, {1, 3, 1, 0, 410}}, 0, {1, 1, 1, 1}},
    {"R-LB-2 one waiting outweighs 99% kv", LB_ENGINE_AWARE, 2, {{1, 0, 1, 1, 0}, {1, 0, 1, 0, 990}}, 0, {1, 1, 1, 1}},
    {"R-LB-2 kv 100% beats 2 waiting", LB_ENGINE_AWARE, 2, {{1, 0, 1, 2, 0}, {1, 0, 1, 0, 1000}}, 0, {1, 1, 1, 1}},
    /* R-LB-3 equal scores: fewer active wins (live counter), then the first, never rr */
    {"R-LB-3 tie fewer active", LB_ENGINE_AWARE, 3, {{1, 2, 1, 0, 0}, {1, 1, 1, 0, 0}, {1, 3, 1, 0, 0}}, 0, {1, 1, 1, 1}},
    {"R-LB-3 full tie first wins", LB_ENGINE_AWARE, 2, {{1, 0, 1, 0, 0}, {1, 0, 1, 0, 0}}, 0, {0, 0, 0, 0}},
    {"R-LB-3 full tie among later", LB_ENGINE_AWARE, 3, {{1, 0, 1, 1, 0}, {1, 4, 1, 0, 50}, {1, 4, 1, 0, 50}}, 0, {1, 1, 1, 1}},
    /* R-LB-4 partial data: no-data replicas get the mean of those with data */
    {"R-LB-4 mean above min", LB_ENGINE_AWARE, 3, {{1, 0, 1, 4, 0}, {1, 0, 1, 1, 0}, {1, 0, 0, 0, 0}}, 0, {1, 1, 1, 1}},
    {"R-LB-4 mean ties: active", LB_ENGINE_AWARE, 3, {{1, 1, 1, 1, 0}, {1, 1, 1, 1, 0}, {1, 0, 0, 0, 0}}, 0, {2, 2, 2, 2}},
    {"R-LB-4 one with data: mean ties it, active decides", LB_ENGINE_AWARE, 2, {{1, 0, 0, 0, 0}, {1, 5, 1, 0, 100}}, 0, {0, 0, 0, 0}},
    {"R-LB-4 mean fraction exact", LB_ENGINE_AWARE, 4, {{1, 0, 1, 0, 1}, {1, 0, 1, 0, 2}, {1, 0, 0, 0, 0}, {1, 0, 1, 0, 2}}, 0, {0, 0, 0, 0}},
    {"R-LB-4 mean beats worse", LB_ENGINE_AWARE, 3, {{1, 0, 1, 3, 0}, {1, 0, 0, 0, 0}, {1, 0, 1, 1, 0}}, 0, {2, 2, 2, 2}},
    /* R-LB-4/5 no fresh data anywhere (stale or not vLLM): least_connections with rr ties */
    {"R-LB-5 no data lc", LB_ENGINE_AWARE, 3, {{1, 3, 0, 9, 900}, {1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}}, 0, {1, 1, 2, 1}},
    /* random with fixed rnd: weighted by replica weight */
    {"random rnd 0", LB_RANDOM, 2, {{3, 0, 0, 0, 0}, {1, 0, 0, 0, 0}}, 0, {0, 0, 0, 0}},
    {"random rnd 3", LB_RANDOM, 2, {{3, 0, 0, 0, 0}, {1, 0, 0, 0, 0}}, 3, {1, 1, 1, 1}},
    {"random zero weight skipped", LB_RANDOM, 3, {{0, 0, 0, 0, 0}, {2, 0, 0, 0, 0}, {0, 0, 0, 0, 0}}, 1, {1, 1, 1, 1}},
    {"random one replica", LB_RANDOM, 1, {{1, 0, 0, 0, 0}}, 99, {0, 0, 0, 0}},
    {"random single zero weight", LB_RANDOM, 1, {{0, 0, 0, 0, 0}}, 99, {0, 0, 0, 0}},
};

/* Statistical cases for random: expected share per index, -1 = never. */
static const struct {
    const char *name;
    int n;
    struct balance_cand c[MAXC];
    int want_pct[MAXC];
} random_cases[] = {
    {"weights 3/1", 2, {{3, 0, 0, 0, 0}, {1, 0, 0, 0, 0}}, {75, 25}},
    {"weights 1/1/2", 3, {{1, 0, 0, 0, 0}, {1, 0, 0, 0, 0}, {2, 0, 0, 0, 0}}, {25, 25, 50}},
    {"weight 0 never", 3, {{1, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {1, 0, 0, 0, 0}}, {50, -1, 50}},
    {"only one weighted", 3, {{0, 0, 0, 0, 0}, {5, 0, 0, 0, 0}, {0, 0, 0, 0, 0}}, {-1, 100, -1}},
    /* every weight 0: uniform */
    {"all zero uniform", 4, {{0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}}, {25, 25, 25, 25}},
};

static const enum lb_algorithm all_algs[] = {LB_ROUND_ROBIN, LB_RANDOM, LB_LEAST_CONNECTIONS,
                                             LB_ENGINE_AWARE};

int main(void)
{
    for (size_t k = 0; k < sizeof exact_cases / sizeof exact_cases[0]; k++)
        for (uint64_t rr = 0; rr < 4; rr++) {
            int got = balance_pick(exact_cases[k].alg, exact_cases[k].c, exact_cases[k].n, rr,
                                   exact_cases[k].rnd);
            CHECK(got == exact_cases[k].want[rr], "%s rr=%d: got %d, want %d", exact_cases[k].name,
                  (int)rr, got, exact_cases[k].want[rr]);
        }

    /* round_robin over a long rr run: equal shares, and rr wrap-around near UINT64_MAX */
    {
        static const struct balance_cand c3[3] = {{1, 0, 0, 0, 0}, {1, 0, 0, 0, 0}, {1, 0, 0, 0, 0}};
        int count[3] = {0};
        for (uint64_t rr = 0; rr < 3000; rr++) {
            int i = balance_pick(LB_ROUND_ROBIN, c3, 3, rr, 0);
            if (i >= 0 && i < 3)
                count[i]++;
        }
        CHECK(count[0] == 1000 && count[1] == 1000 && count[2] == 1000, "rr shares %d/%d/%d", count[0],
              count[1], count[2]);
        int i = balance_pick(LB_ROUND_ROBIN, c3, 3, UINT64_MAX, 0);
        CHECK(i >= 0 && i < 3, "rr at UINT64_MAX gave %d", i);
        i = balance_pick(LB_LEAST_CONNECTIONS, c3, 3, UINT64_MAX, 0);
        CHECK(i >= 0 && i < 3, "lc at UINT64_MAX gave %d", i);
    }

    /* least_connections: a burst over equal replicas spreads evenly */
    {
        static const struct balance_cand c4[4] = {{1, 2, 0, 0, 0}, {1, 2, 0, 0, 0}, {1, 2, 0, 0, 0}, {1, 2, 0, 0, 0}};
        int count[4] = {0};
        for (uint64_t rr = 0; rr < 400; rr++) {
            int i = balance_pick(LB_LEAST_CONNECTIONS, c4, 4, rr, 0);
            if (i >= 0 && i < 4)
                count[i]++;
        }
        CHECK(count[0] == 100 && count[1] == 100 && count[2] == 100 && count[3] == 100,
              "lc tie shares %d/%d/%d/%d", count[0], count[1], count[2], count[3]);
    }

    for (size_t k = 0; k < sizeof random_cases / sizeof random_cases[0]; k++) {
        int count[MAXC] = {0}, bad = 0;
        for (int d = 0; d < DRAWS; d++) {
            int i = balance_pick(LB_RANDOM, random_cases[k].c, random_cases[k].n, (uint64_t)d, xorshift());
            if (i < 0 || i >= random_cases[k].n)
                bad++;
            else
                count[i]++;
        }
        CHECK(bad == 0, "%s: %d out-of-range picks", random_cases[k].name, bad);
        for (int i = 0; i < random_cases[k].n; i++) {
            int want = random_cases[k].want_pct[i];
            double pct = 100.0 * count[i] / DRAWS;
            if (want < 0)
                CHECK(count[i] == 0, "%s: replica %d chosen %d times, want never", random_cases[k].name, i,
                      count[i]);
            else
                CHECK(pct >= want - 3.0 && pct <= want + 3.0, "%s: replica %d got %.2f%%, want %d%% +- 3",
                      random_cases[k].name, i, pct, want);
        }
    }

    /* R-LB-3: a burst over two idle equal replicas, each pick counted as active at
     * once (the live counter), splits evenly instead of piling onto replica 0 */
    {
        struct balance_cand c2[2] = {{1, 0, 1, 0, 0}, {1, 0, 1, 0, 0}};
        for (int k = 0; k < 12; k++) {
            int i = balance_pick(LB_ENGINE_AWARE, c2, 2, 0, 0);
            if (i >= 0 && i < 2)
                c2[i].active++;
        }
        CHECK(c2[0].active == 6 && c2[1].active == 6, "ea burst split %d/%d", c2[0].active, c2[1].active);
        CHECK_INT(balance_score10(1, 0), 1000, "score10 one waiting");
        CHECK_INT(balance_score10(0, 420), 420, "score10 42% kv");
        CHECK_INT(balance_score10(-1, -5), 0, "score10 clamps negatives");
    }

    /* n = 0: no replica, for every algorithm */
    for (size_t k = 0; k < sizeof all_algs / sizeof all_algs[0]; k++) {
        struct balance_cand none[1] = {{1, 0, 0, 0, 0}};
        CHECK_INT(balance_pick(all_algs[k], none, 0, 3, 5), -1, "n = 0");
        CHECK_INT(balance_pick(all_algs[k], none, -1, 3, 5), -1, "n < 0");
    }

    return check_done();
}
