/* admit.h: the admit stage: idempotency first, then the key's limits in the
 * order of R-KEY-2 (QPS -> concurrency -> daily -> monthly -> tokens). */
#ifndef SLUICE_ADMIT_H
#define SLUICE_ADMIT_H

#include "request.h"

int admit_init(const struct conf *c);

/* Returns 0 to go on; or -1 after replying (replay, 409, 422, 429). */
int admit_request(struct request *r);

/* At the end of every admitted request: releases the concurrency slot, settles
 * token reservations with the real usage, finishes the idempotency record. */
void admit_finish(struct request *r);

/* R-SEC-6, for a credential that failed: 1 when its client (address and the
 * credential's first 8 characters, or the address as a whole at ten times the
 * budget) is over its authentication-failure budget (a 429 has been sent);
 * else count the failure with admit_auth_failed. A valid credential is never
 * refused for failures (its own or anyone's). */
int admit_auth_blocked(struct request *r, const char *credential);
void admit_auth_failed(struct request *r, const char *credential);

#endif
