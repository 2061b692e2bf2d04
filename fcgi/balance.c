/* balance.c: round_robin, weighted random, least_connections and engine_aware (R-LB-1..5). */
#include "balance.h"

#include "pick.h"

int64_t balance_score10(int waiting, int kv_permille)
{
    /* kv percent x 10 is the permille: integer arithmetic keeps ties exact. */
    return (int64_t)(waiting < 0 ? 0 : waiting) * 1000 + (kv_permille < 0 ? 0 : kv_permille);
}

static int balance_least_connections(const struct balance_cand *c, int n, uint64_t rr)
{
    int best = -1;
    for (int k = 0; k < n; k++) {
        int i = (int)((rr + (uint64_t)k) % (uint64_t)n);
        if (best < 0 || c[i].active < c[best].active)
            best = i;
    }
    return best;
}

static int balance_engine_aware(const struct balance_cand *c, int n, uint64_t rr)
{
    int with = 0;
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
        if (c[i].has_metrics) {
            with++;
            sum += balance_score10(c[i].waiting, c[i].kv_permille);
        }
    if (with == 0)
        return balance_least_connections(c, n, rr);   /* R-LB-4 */
    /* Scores scaled by `with` so the mean (sum / with) compares exactly. */
    int best = -1;
    int64_t best_score = 0;
    for (int i = 0; i < n; i++) {
        int64_t s = c[i].has_metrics ? balance_score10(c[i].waiting, c[i].kv_permille) * with : sum;
        /* R-LB-3: equal scores go to the fewer active; the first wins a full tie. */
        if (best < 0 || s < best_score || (s == best_score && c[i].active < c[best].active)) {
            best = i;
            best_score = s;
        }
    }
    return best;
}

int balance_pick(enum lb_algorithm alg, const struct balance_cand *c, int n, uint64_t rr,
                 uint64_t rnd)
{
    if (n <= 0)
        return -1;
    switch (alg) {
    case LB_ROUND_ROBIN:
        return (int)(rr % (uint64_t)n);
    case LB_RANDOM: {
        int weights[n];
        for (int i = 0; i < n; i++)
            weights[i] = c[i].weight;
        int i = pick_weighted(weights, n, rnd);
        return i >= 0 ? i : (int)(rnd % (uint64_t)n);
    }
    case LB_ENGINE_AWARE:
        return balance_engine_aware(c, n, rr);
    case LB_LEAST_CONNECTIONS:
    default:
        return balance_least_connections(c, n, rr);
    }
}
