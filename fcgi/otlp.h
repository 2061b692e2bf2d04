/* otlp.h: OTLP/HTTP JSON export of spans (R-OBS-3), from a thread of its own.
 * A request thread only hands over spans it already formatted; the exporter
 * batches them (otlp.batch_max, otlp.flush_ms) into one POST with its own
 * libcurl handle (otlp.timeout_ms). A full queue (otlp.queue_max) or a
 * collector that does not take a batch drops the spans and counts them
 * (MET_SPANS_DROPPED): a response never waits on the collector. */
#ifndef SLUICE_OTLP_H
#define SLUICE_OTLP_H

#include "conf.h"
#include "shm.h"

#include <stddef.h>

int otlp_start(const struct conf *c);        /* 0 (nothing to do when otlp.endpoint is ""), or -1 */
int otlp_enabled(void);
/* spans: n OTLP span objects separated by commas ({...},{...}), copied. */
void otlp_enqueue(struct shm *s, const char *spans, size_t len, int n);
void otlp_stop(void);                        /* exports what is queued within otlp.timeout_ms */

#endif
