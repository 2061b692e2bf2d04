/* screen.h: the content rules stage (R-GUARD-3): the request's text before any
 * backend sees it (block: 400 content_policy_violation naming the rule; flag:
 * served, logged, X-Content-Flag), and the answer's text for output rules. */
#ifndef SLUICE_SCREEN_H
#define SLUICE_SCREEN_H

#include "request.h"

/* Input rules of the caller's tenant (and the global ones). 0, or -1 after replying. */
int screen_input(struct request *r);

/* Do output rules apply to this request (its tenant's, the global ones, an answer
 * with text)? Asked once, then remembered. */
int screen_output_wanted(struct request *r);

/* Output rules, only when some apply to the caller's tenant (else no cost). The
 * buffered answer in the caller's protocol: 0 send it (a flag is noted for the
 * X-Content-Flag header), -1 refused after replying 400 content_policy_violation. */
int screen_output_body(struct request *r, const char *body, size_t len);
/* One event's data of a stream in the caller's protocol: its text joins the text so
 * far of its channel (a choice, a tool call, a content block; the last SCREEN_WINDOW
 * bytes), which is matched at once but for a last word that may go on; the stream's
 * end ([DONE], message_stop, response.completed) matches every channel whole. 0 relay
 * it, -1 the stream was ended with an error event (the event is not sent). */
int screen_output_event(struct request *r, const char *data, size_t len);

#endif
