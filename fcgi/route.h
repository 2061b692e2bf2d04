/* route.h: the route stage: caller-scoped routes -> route -> replica (SPEC §3-4, R-HC-5). */
#ifndef SLUICE_ROUTE_H
#define SLUICE_ROUTE_H

#include "passive.h"
#include "request.h"

/* Chooses r->route / r->ep / r->replica (and routed_model, upstream_path),
 * skipping replicas in r->excluded. Returns 0; or -1 after replying 404/503
 * when reply_on_fail, or silently when not (a retry found no other replica). */
int route_choose(struct request *r, int reply_on_fail);

/* Is the replica in service right now: running (or woken, R-WAKE-1), not
 * removed (R-HC-2), on an online node that is not too hot (R-LB-6)? Bans and
 * circuits (R-HC-5) are not considered here. */
int route_replica_serving(const struct request *r, const struct snap_replica *rep, int64_t now);

/* Passive health bookkeeping in the shared state (R-HC-5), and the data-plane
 * recovery of a removed replica that answered (R-HC-2). */
/* Has the endpoint a replica that may serve (running, healthy, not excluded)? */
int route_endpoint_serving(const struct request *r, const struct snap_endpoint *e);

void route_report(struct request *r, const struct snap_replica *rep, int ok);
void route_passive_conf(const struct conf *c, struct passive_conf *pc);

#endif
