/* api_live.h: GET /api/v1/live (admin/api_live.c), the Live tab's data. */
#ifndef SLUICE_API_LIVE_H
#define SLUICE_API_LIVE_H

#include "api.h"

void api_live(struct api_ctx *c);

#endif
