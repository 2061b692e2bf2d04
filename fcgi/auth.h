/* auth.h: the auth stage: credentials -> the uniform caller (R-AUTH-1..3, R-AUTH-5). */
#ifndef SLUICE_AUTH_H
#define SLUICE_AUTH_H

#include "request.h"

/* Fills r->caller. Returns 0, or -1 after replying 401/403. */
int auth_caller(struct request *r);

#endif
