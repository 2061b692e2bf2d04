/* metrics_render.h: GET /metrics, Prometheus text format 0.0.4 (R-OBS-1). */
#ifndef SLUICE_METRICS_RENDER_H
#define SLUICE_METRICS_RENDER_H

#include "request.h"

/* Answers GET /metrics: 401 without the metrics token when one is set. */
void metrics_serve(struct request *r);
/* Appends the whole exposition (every family of metrics.def) to b. */
void metrics_render(const struct request *r, struct buf *b);

#endif
