/* observe.h: what a request leaves for the operator (R-OBS): its trace
 * context at the start; metrics, the access log line and its spans at the
 * end (DESIGN.md stage 8). */
#ifndef SLUICE_OBSERVE_H
#define SLUICE_OBSERVE_H

#include "request.h"

/* After the read stage: timing start, the caller's or a fresh trace context. */
void observe_begin(struct request *r);
/* After account: metrics, access log, spans. Never blocks on I/O. */
void observe_end(struct request *r);

#endif
