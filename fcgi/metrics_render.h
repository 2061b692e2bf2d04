/* metrics_render.h: GET /metrics, Prometheus text format 0.0.4 (R-OBS-1). */
#ifndef SLUICE_METRICS_RENDER_H
#define SLUICE_METRICS_RENDER_H

#include "request.h"

void metrics_serve(struct request *r);

#endif
