/* metrics_record.h: a finished request's counters and histograms (R-OBS-1). */
#ifndef SLUICE_METRICS_RECORD_H
#define SLUICE_METRICS_RECORD_H

#include "request.h"

void metrics_record(struct request *r);

#endif
