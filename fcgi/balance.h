/* balance.h: choose a replica of an endpoint (R-LB-1..5), as a pure function. */
#ifndef SLUICE_BALANCE_H
#define SLUICE_BALANCE_H

#include "snapshot.h"

#include <stdint.h>

struct balance_cand {
    int weight;         /* replica weight (random) */
    int active;         /* pool-wide active requests (least_connections, R-LB-3 ties) */
    /* engine_aware (R-LB-2): the replica's vLLM metrics, when fresh (R-LB-4) */
    int has_metrics;    /* 0: no data (stale, never scraped, or not vLLM, R-LB-5) */
    int waiting;        /* vllm:num_requests_waiting */
    int kv_permille;    /* 1000 x kv cache usage fraction */
};

/* Index into c[0..n) or -1 when n == 0.
 * round_robin: position rr modulo n.
 * random: weighted by replica weight (uniform if every weight is 0).
 * least_connections: the fewest active; ties rotate with rr so equal replicas
 *   share a burst.
 * engine_aware: the lowest score (balance_score10); a replica without data
 *   gets the mean score of those with data (R-LB-4); equal scores go to the
 *   fewer active, then the first (R-LB-3). No replica with data: as
 *   least_connections (R-LB-4). */
int balance_pick(enum lb_algorithm alg, const struct balance_cand *c, int n, uint64_t rr,
                 uint64_t rnd);

/* R-LB-2 score in tenths: 10 x (waiting x 100 + kv cache percent). */
int64_t balance_score10(int waiting, int kv_permille);

#endif
