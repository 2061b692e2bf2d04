/* account.h: the account stage: one usage record per request (R-USE-3..5). */
#ifndef SLUICE_ACCOUNT_H
#define SLUICE_ACCOUNT_H

#include "request.h"

/* Queues the request's usage event; also for failures (R-USE-4). */
void account_record(struct request *r);

/* The tokens a request is charged: its usage, or for a client that left
 * mid-stream before the usage chunk, the estimated prompt plus one token per
 * content chunk produced (R-SSE-3). -1 when unknown (keep the estimate). */
int64_t account_billable_tokens(const struct request *r, int64_t *prompt, int64_t *completion);

#endif
