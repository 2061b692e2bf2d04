/* account.h: the account stage: one usage record per request (R-USE-3..5). */
#ifndef SLUICE_ACCOUNT_H
#define SLUICE_ACCOUNT_H

#include "request.h"

/* Queues the request's usage event; also for failures (R-USE-4). */
void account_record(struct request *r);

#endif
