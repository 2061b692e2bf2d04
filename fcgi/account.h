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

/* The status the usage record carries: 499 for a client that left, 503 for a
 * stream the shutdown ended under a 200 head, else the status sent. The access
 * log and the metrics say the same. */
int account_status(const struct request *r);
/* The prompt and completion tokens the usage record carries for that status
 * (R-USE-4: none for a kind that spends no tokens, none for a failure that
 * produced nothing). */
void account_charged_tokens(const struct request *r, int status, int64_t *prompt, int64_t *completion);

#endif
