/* balance.h: choose a replica of an endpoint (R-LB-1), as a pure function. */
#ifndef SLUICE_BALANCE_H
#define SLUICE_BALANCE_H

#include "snapshot.h"

#include <stdint.h>

struct balance_cand {
    int weight;         /* replica weight (random) */
    int active;         /* pool-wide active requests (least_connections) */
};

/* Index into c[0..n) or -1 when n == 0.
 * round_robin: position rr modulo n.
 * random: weighted by replica weight (uniform if every weight is 0).
 * least_connections (and engine_aware without engine metrics, R-LB-4): the
 * fewest active; ties rotate with rr so equal replicas share a burst. */
int balance_pick(enum lb_algorithm alg, const struct balance_cand *c, int n, uint64_t rr,
                 uint64_t rnd);

#endif
