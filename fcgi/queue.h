/* queue.h: the driver's wait when every candidate is full (R-PRIO-1, DESIGN.md
 * stage 6). */
#ifndef SLUICE_QUEUE_H
#define SLUICE_QUEUE_H

#include "request.h"

/* Waits in the queue of r->ep (what r->wait_ask asks) until a place is handed
 * over: 0, r->hold holds it. -1 after replying (queue_full, the model layer's
 * 429, queue_timeout, shutting_down) or when the client left. The time queued
 * is added to r->queue_ms. */
int queue_wait(struct request *r);

/* The granted replica cannot serve (route_granted said no): its place goes
 * back, and the next queue_wait keeps this request's turn without it. */
void queue_turn_down(struct request *r);

#endif
