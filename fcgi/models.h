/* models.h: GET /v1/models and /v1/models/{id} (R-AUTH-6). */
#ifndef SLUICE_MODELS_H
#define SLUICE_MODELS_H

#include "request.h"

void models_reply(struct request *r);

#endif
