/* balance.c: round_robin, weighted random and least_connections (R-LB-1). */
#include "balance.h"

#include "pick.h"

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
    case LB_LEAST_CONNECTIONS:
    case LB_ENGINE_AWARE:
    default: {
        int best = -1;
        for (int k = 0; k < n; k++) {
            int i = (int)((rr + (uint64_t)k) % (uint64_t)n);
            if (best < 0 || c[i].active < c[best].active)
                best = i;
        }
        return best;
    }
    }
}
