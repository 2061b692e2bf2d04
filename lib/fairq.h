/* fairq.h: the order a contended queue serves its waiters in (R-PRIO-2), as
 * pure functions over plain values.
 *
 * Priority first (0 highest). Inside a priority level, weighted fairness across
 * tenants and, inside a tenant, across users: start-time fair queueing, the
 * virtual-time form of deficit round robin with a quantum of one request. Each
 * tenant (and user) carries a finish tag; serving it moves the tag on by
 * FAIRQ_UNIT / weight, so a tenant of weight 2 is served twice as often as one
 * of weight 1 while both wait, and a tenant that was idle starts at the queue's
 * virtual time instead of cashing in credit for the time it did not ask. */
#ifndef SLUICE_FAIRQ_H
#define SLUICE_FAIRQ_H

#include <stdint.h>

#define FAIRQ_UNIT 1000000            /* one request of weight 1, in tag units */

struct fairq_cand {
    int priority;                     /* 0 highest */
    int64_t tenant_id;
    int64_t tenant_start;             /* fairq_start(tenant's finish tag, vnow) */
    int64_t user_start;               /* the same for its user */
    int64_t seq;                      /* arrival order: first come first among equals */
};

/* The tag a tenant or user starts its next request at. */
int64_t fairq_start(int64_t finish, int64_t vnow);

/* The finish tag after serving one request that started at start. weight < 1 counts as 1. */
int64_t fairq_finish(int64_t start, int weight);

/* Index of the waiter to serve next in c[0..n), or -1 when n == 0: the lowest
 * (priority, tenant_start, tenant_id, user_start, seq). */
int fairq_pick(const struct fairq_cand *c, int n);

#endif
