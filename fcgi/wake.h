/* wake.h: lazy wake of a sleeping endpoint, from the route stage (SPEC §9, R-WAKE-1..3). */
#ifndef SLUICE_WAKE_H
#define SLUICE_WAKE_H

#include "request.h"

/* Does e have a sleeping replica that no wake has made ready yet? */
int wake_needed(const struct request *r, const struct snap_endpoint *e);

/* Wakes e's sleeping replicas (one wake for the whole pool, R-WAKE-3) and waits
 * for one to be ready, at most min(wake.max_wait_ms, max(start_period, 1 s)),
 * or wake.no_health_wait_ms when the endpoint has no health check (R-WAKE-1).
 * 0: a replica is ready (marked awake in the shared state; choose again).
 * -1: replied 503 service_waking / wake_queued_gpu_borrowed /
 * wake_failed_node_offline with its Retry-After (R-WAKE-2). */
int wake_endpoint(struct request *r, const struct snap_endpoint *e);

#endif
