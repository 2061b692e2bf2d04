/* guard.h: the guard stage: validate the JSON body, strip internal fields, ask
 * for streamed usage (R-API-3, R-API-5, R-USE-1). */
#ifndef SLUICE_GUARD_H
#define SLUICE_GUARD_H

#include "request.h"

/* Returns 0, or -1 after replying 400. */
int guard_check(struct request *r);

/* The body to send for one attempt, with "model" set to routed_model when it
 * differs from the client's (R-RT-5). Sets r->fwd_body / r->fwd_len. */
void guard_forward_body(struct request *r);

#endif
