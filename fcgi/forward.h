/* forward.h: the forward stage: one attempt against r's current replica through
 * the endpoint's protocol adapter (R-RT-7, R-SSE, R-ANT; DESIGN.md stage 7).
 * It knows nothing of routes, auto or guard: the driver decides what follows. */
#ifndef SLUICE_FORWARD_H
#define SLUICE_FORWARD_H

#include "proto.h"
#include "relay.h"
#include "request.h"
#include "retry.h"

/* One attempt; lives on the driver's stack. */
struct attempt {
    const struct proto_ops *proto;
    enum attempt_outcome outcome;
    long status;            /* the upstream status as the caller's protocol sees it */
    int sse;                /* the answer was relayed as a stream */
    struct proto_refusal refusal;
    struct relay relay;
    struct obs_attempt *obs;  /* its record in r->obs (NULL: refused, or past OBS_MAX_ATTEMPTS) */
};

/* Runs the transfer to r->replica and relays what may go out at once (stream
 * events). Never returns before the upstream transfer has stopped (R-API-6). */
void forward_attempt(struct request *r, struct attempt *a);

/* Sends what the attempt left for the client: the buffered answer (an
 * upstream error passed on included), or the end of a stream. */
void forward_deliver(struct request *r, struct attempt *a);

void forward_attempt_free(struct attempt *a);

/* Sets a worker's curl handle's fixed options once. */
void forward_curl_init(CURL *c);
/* The adapter between the caller's protocol and r->ep's (R-ANT-1; shadow.c builds
 * a mirror's request with its endpoint's). */
const struct proto_ops *forward_adapter(const struct request *r);

#endif
