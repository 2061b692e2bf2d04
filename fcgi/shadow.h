/* shadow.h: shadow traffic (R-SHD-1): a route's mirror gets a copy of a share of
 * its requests, sent from a background thread per responder with its own curl
 * multi handle, so the client's answer never waits for, or hears of, the mirror.
 * Pool-wide at most shadow.max_inflight mirrors run (the shared state's process
 * rows); one more is dropped and counted. Each mirror's outcome, tokens and
 * timings go to metrics, a shadow usage event (never billed, in no report or
 * quota) and, once the client's answer is done too, one comparison log line. */
#ifndef SLUICE_SHADOW_H
#define SLUICE_SHADOW_H

#include "request.h"

/* Starts the thread (once per responder). 0, or -1 (logged: no mirroring). */
int shadow_start(const struct conf *c, struct shm *s);

/* After the main attempt was admitted, before it is forwarded: a copy of the
 * request for the route's mirror when the route has one and the request is
 * in its share (r->shadow set). Never fails the request. */
void shadow_begin(struct request *r);

/* At the end of the request: the client's answer, for the comparison. */
void shadow_end(struct request *r);

#endif
