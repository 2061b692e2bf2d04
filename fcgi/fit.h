/* fit.h: the context pre-check (R-GUARD-2): after the route chose the model and
 * replica, the prompt's tokens (estimated, or counted by a vLLM replica's
 * /tokenize near the limit) plus max_tokens must fit the model's max_context. */
#ifndef SLUICE_FIT_H
#define SLUICE_FIT_H

#include "request.h"

/* 0, or -1 after replying 400 context_length_exceeded. */
int fit_check(struct request *r);

#endif
