/* guard.h: the guard stage: validate the JSON body, strip internal fields, ask
 * for streamed usage (R-API-3, R-API-5, R-USE-1). */
#ifndef SLUICE_GUARD_H
#define SLUICE_GUARD_H

#include "request.h"

/* Returns 0, or -1 after replying 400. */
int guard_check(struct request *r);

#endif
