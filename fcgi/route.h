/* route.h: the route stage: caller-scoped routes -> the plan -> one attempt at a
 * time (SPEC §3-5, R-HC-5, R-AUTO-5, DESIGN.md stage 5). */
#ifndef SLUICE_ROUTE_H
#define SLUICE_ROUTE_H

#include "request.h"

/* Builds r->plan (the model's routes, auto's candidate chain, or the
 * pass-through's endpoint) and chooses the first attempt: r->route, r->ep,
 * r->replica, r->routed_model, r->upstream_path, and the place it holds
 * under caps (r->hold). When every candidate is full, r->replica is NULL and
 * r->ep the endpoint to queue on (the driver waits). A sleeping endpoint is
 * woken here, once for the pool. Returns 0; or -1 after replying 400/404/429/503. */
int route_plan(struct request *r);

/* A call of sluice's own through its routes (the semantic cache's embedding,
 * R-CACHE-4), on a side request that shares the caller's snapshot and caller:
 * the plan of r->model (the caller's routes, as route_plan makes it) and its
 * first attempt, with the place it holds (r->hold). Never waits, wakes,
 * degrades or replies. 0, or -1 when no replica can take it now. */
int route_plan_quiet(struct request *r);

/* After a failed attempt: another replica of the current model, the failed
 * one excluded (or a wait, as route_plan). 0, or -1 when none is left
 * (nothing is replied). */
int route_next_replica(struct request *r);

/* After the endpoint's adapter refused the request (R-ANT-2/3): another
 * endpoint of the current model, then of the plan's next models; that endpoint
 * stays out for the rest of the plan. 0, or -1 when none is left. */
int route_skip_endpoint(struct request *r);

/* R-PRIO-1: the driver's attempt after a grant of the queue: the replica of
 * r->hold on the endpoint waited for. 0, or -1 when that replica cannot serve
 * now (the place goes back and the request waits again). */
int route_granted(struct request *r);

/* R-AUTO-5: the next candidate model of the plan and its first attempt.
 * 0, or -1 when the plan is exhausted (nothing is replied). */
int route_next_model(struct request *r);

/* Does one of the caller's routes of r->model reach an endpoint speaking p?
 * 1 or 0; -1 after replying 404 when the caller has no route of it at all.
 * (count_tokens asks before planning: a local count takes no replica.) */
int route_model_speaks(struct request *r, enum upstream_protocol p);

#endif
