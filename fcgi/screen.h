/* screen.h: the content rules stage (R-GUARD-3): the request's text before any
 * backend sees it (block: 400 content_policy_violation naming the rule; flag:
 * served, logged, X-Content-Flag), and the answer's text for output rules. */
#ifndef SLUICE_SCREEN_H
#define SLUICE_SCREEN_H

#include "request.h"

/* Input rules of the caller's tenant (and the global ones). 0, or -1 after replying. */
int screen_input(struct request *r);

#endif
