/* pick.h: choose a route among a model's routes (R-RT-1..4), as a pure function. */
#ifndef SLUICE_PICK_H
#define SLUICE_PICK_H

#include <stdint.h>

struct pick_route {
    int priority;       /* 0 is best; the array is sorted by priority */
    int weight;         /* 0 = standby, failover only (R-RT-4) */
    int available;      /* the route's endpoint has a usable replica */
};

/* Returns the index of the route to use, or -1 when none is available.
 * Groups by priority ascending (R-RT-1); inside the best group with an
 * available route, weighted random among available weighted routes (R-RT-2),
 * then its available weight-0 routes in order (R-RT-3, R-RT-4).
 * rnd is a uniformly random 64-bit number supplied by the caller. */
int pick_route(const struct pick_route *routes, int n, uint64_t rnd);

/* Weighted random index among weights[0..n) (all > 0 in use); -1 if total is 0. */
int pick_weighted(const int *weights, int n, uint64_t rnd);

#endif
