/* metrics_render.c: GET /metrics (metrics_render.h). */
#include "metrics_render.h"

#include "reply.h"

void metrics_serve(struct request *r)
{
    reply_error(r, ERR_NOT_FOUND, "metrics are not rendered yet", NULL);
}
