/* sticky.h: session affinity in the route stage (SPEC §5): which replica a
 * conversation sticks to, pool-wide, and the headers that report it. */
#ifndef SLUICE_STICKY_H
#define SLUICE_STICKY_H

#include "affinity.h"
#include "request.h"

enum sticky_outcome { STICKY_HIT, STICKY_MISS, STICKY_OVERLOAD, STICKY_STALE };

/* What the lookup found; filled by sticky_lookup, used by sticky_commit. */
struct sticky {
    int active;                   /* affinity applies to this request */
    struct aff_keys keys;
    int level;                    /* the level that hit (or was stale / overloaded) */
    enum sticky_outcome outcome;
    int64_t replica_id;           /* the mapped replica, 0 if none */
};

/* Does affinity apply (endpoint opt-in; chat completions and Messages, the
 * pass-through's included)? */
int sticky_applies(const struct request *r, const struct snap_endpoint *e);

/* R-AFF-1/3/5: among cand[0..n) (replica indexes) with their load signal, the
 * sticky replica's position, or -1 for "let the algorithm choose". */
int sticky_lookup(struct request *r, const struct snap_endpoint *e, const int *cand, const double *load, int n,
                  struct sticky *st);

/* After the choice: maps every present level (and a new session token) to the
 * chosen replica, counts the outcome, and sets the response headers' values. */
void sticky_commit(struct request *r, const struct snap_endpoint *e, int replica_index, struct sticky *st);

/* R-API-8: a response id -> the replica that created it, in the same pool-wide
 * table and TTL, scoped by tenant. */
enum pin_result { PIN_UNKNOWN, PIN_FOUND, PIN_OTHER_TENANT };
enum pin_result sticky_pin_lookup(struct request *r, const char *id, int64_t *replica_id);
void sticky_pin_store(struct request *r, const char *id, int64_t replica_id);

#endif
