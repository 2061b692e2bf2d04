/* serving.h: the serving view: can this replica serve now, and record how it
 * went (R-HC-2, R-HC-5, R-HC-7, R-LB-6, R-WAKE-1). route, auto and wake ask it;
 * it asks none of them. */
#ifndef SLUICE_SERVING_H
#define SLUICE_SERVING_H

#include "passive.h"
#include "request.h"

/* Is the replica in service right now: not disabled, running (or woken,
 * R-WAKE-1), not removed by health checks (R-HC-2), on an online node that is
 * not too hot (R-LB-6)? Bans and circuits (R-HC-5) are not considered here. */
int serving_replica_up(const struct request *r, const struct snap_replica *rep, int64_t now);

/* Do the replica's ban and circuit let a request through now (R-HC-5)? */
int serving_replica_open(const struct request *r, const struct snap_replica *rep, int64_t now);

/* Has the endpoint a replica that is up (bans and circuits aside)? */
int serving_endpoint_up(const struct request *r, const struct snap_endpoint *e, int64_t now);

/* Takes a half-open circuit's trial for the replica (at most N pool-wide, under
 * the pool lock). 0: the replica may be used; -1: the last trial went to
 * another request since the choice was made. */
int serving_take(struct request *r, const struct snap_replica *rep);

/* The replica route took is not used after all (the answer cache served the
 * request): a half-open trial serving_take handed out for it goes back. */
void serving_unused(struct request *r, const struct snap_replica *rep);

/* Passive health after an attempt (R-HC-5), and the data-plane recovery of a
 * removed replica that answered (R-HC-2). */
void serving_report(struct request *r, const struct snap_replica *rep, int ok, const char *why);

#endif
