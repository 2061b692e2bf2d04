/* count.h: POST /v1/messages/count_tokens answered by sluice itself (R-ANT-7). */
#ifndef SLUICE_COUNT_H
#define SLUICE_COUNT_H

#include "request.h"

/* {"input_tokens":N}: the estimate the token pre-deduction uses, for a model
 * whose endpoint cannot count natively. */
void count_reply(struct request *r);

#endif
