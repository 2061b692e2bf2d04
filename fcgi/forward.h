/* forward.h: the forward stage: one attempt against r's current replica through
 * the endpoint's protocol adapter (R-RT-7, R-SSE, R-ANT; DESIGN.md stage 7).
 * It knows nothing of routes, auto or guard: the driver decides what follows. */
#ifndef SLUICE_FORWARD_H
#define SLUICE_FORWARD_H

#include "proto.h"
#include "relay.h"
#include "request.h"
#include "retry.h"

/* The transfer of an attempt while it runs (on the request thread or, parked,
 * on the responder's stream loop). */
struct transfer {
    int64_t start;            /* mono ms */
    int watch_fcgi;           /* the client watch is on (off after an unexpected record) */
    enum attempt_outcome out; /* set when it ended other than by curl */
    struct obs_attempt *oa;
    int64_t t0;               /* mono us */
};

/* One attempt; lives in the request's arena (a parked stream outlives the
 * driver's frame). */
struct attempt {
    const struct proto_ops *proto;
    enum attempt_outcome outcome;
    long status;            /* the upstream status as the caller's protocol sees it */
    int sse;                /* the answer was relayed as a stream */
    struct proto_refusal refusal;
    struct relay relay;
    struct obs_attempt *obs;  /* its record in r->obs (NULL: refused, or past OBS_MAX_ATTEMPTS) */
    struct proto_request pr;
    struct transfer tr;
    const struct snap_replica *rep;   /* what the driver attempted (for its report after a park) */
    const struct snap_endpoint *ep;
};

/* Runs the transfer to r->replica and relays what may go out at once (stream
 * events). Never returns before the upstream transfer has stopped (R-API-6),
 * except with ATTEMPT_PARKED: a stream, once its request went out, when
 * r->may_park; its transfer then goes on from forward_transfer_step on the
 * stream loop and ends with forward_resume. */
void forward_attempt(struct request *r, struct attempt *a);

/* One turn of a parked transfer: curl's work, then the phase timeouts, the
 * shutdown cut and the keep-alive. 1: it goes on, *wait_ms until the next
 * turn is due at the latest; 0: it ended. */
int forward_transfer_step(struct request *r, struct attempt *a, int *wait_ms);
/* The front server's connection became readable: 1 when that means the
 * client left (the transfer ends at the next step), else the watch stops. */
int forward_client_check(struct request *r, struct attempt *a);
/* The end of a parked attempt, as forward_attempt would have ended it. */
void forward_resume(struct request *r, struct attempt *a);

/* Sends what the attempt left for the client: the buffered answer (an
 * upstream error passed on included), or the end of a stream. */
void forward_deliver(struct request *r, struct attempt *a);

void forward_attempt_free(struct attempt *a);

/* Sets a worker's curl handle's fixed options once. */
void forward_curl_init(struct worker *w);
/* The adapter between the caller's protocol and r->ep's (R-ANT-1; shadow.c builds
 * a mirror's request with its endpoint's). */
const struct proto_ops *forward_adapter(const struct request *r);

#endif
