/* spans.h: W3C trace context and the request's spans (R-OBS-3, R-OBS-5):
 * JSON lines to trace_log and, when otlp.endpoint is set, OTLP/HTTP JSON
 * export from a thread of its own (batched, dropping and counting when the
 * collector is down, never delaying a response). */
#ifndef SLUICE_SPANS_H
#define SLUICE_SPANS_H

#include "conf.h"
#include "request.h"

int spans_start(const struct conf *c);        /* 0, or -1 (logged) */
void spans_begin(struct request *r);          /* r->obs trace context from traceparent/tracestate */
void spans_end(const struct request *r);
void spans_new_span_id(struct request *r, char out[17]);   /* 16 hex digits, never all zeros */
int spans_move(const char *path);               /* SIGHUP: a new trace_log (linelog_move) */
void spans_reopen(void);                      /* SIGHUP */
void spans_thread_end(void);                /* a worker thread ends: its buffers go */
void spans_stop(void);                        /* exports what is queued (bounded) */

#endif
