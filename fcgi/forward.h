/* forward.h: the forward stage: upstream transfer, retry and failover (R-HC-8, R-RT-7, R-SSE). */
#ifndef SLUICE_FORWARD_H
#define SLUICE_FORWARD_H

#include "request.h"

/* Sends the request to r->replica (and at most one other replica on a
 * retryable failure before the first byte) and relays the answer. Always
 * replies; never returns before the upstream transfer has stopped (R-API-6). */
void forward_run(struct request *r);

/* Sets a worker's curl handle's fixed options once. */
void forward_curl_init(CURL *c);

#endif
