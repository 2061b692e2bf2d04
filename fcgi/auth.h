/* auth.h: the auth stage: credentials -> the uniform caller (R-AUTH-1..3, R-AUTH-5). */
#ifndef SLUICE_AUTH_H
#define SLUICE_AUTH_H

#include "request.h"

/* Fills r->caller. Returns 0, or -1 after replying 401/403. */
int auth_caller(struct request *r);

/* For a request refused before auth ran (413, a broken body): whose it was, from
 * a member or endpoint key, so its usage record has an owner (R-USE-4). Never
 * replies, never counts a failure. */
void auth_identify(struct request *r);

#endif
