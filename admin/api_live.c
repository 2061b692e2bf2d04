/* api_live.c: GET /api/v1/live — the /inference page's Live tab (issue 12): request and
 * error rates, p50/p95 latency and TTFT per model and endpoint over the last minutes, and
 * every replica's load now, from the same shared state GET /metrics reads (admin/stats.c).
 *
 * Who sees what (R-ADM-2): reading the live view is reading endpoints. The operator sees
 * the whole pool; an admin its tenant's endpoints and replicas, and the models only its
 * tenant's routes route (the model series carry no tenant label, so a shared name would
 * show another tenant's traffic). A member may not read endpoints, and the series have
 * no user or key label to narrow them to its own traffic: 403 (its usage is under
 * tenant/usage). */
#include "api_live.h"

#include "stats.h"

#include <stdio.h>

#define LIVE_MINUTES 15

void api_live(struct api_ctx *c)
{
    struct ops_i64 minutes = {0};
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_ENDPOINT, AUTHZ_READ, c->actor.tenant_id, 0, AUTHZ_NOBODY) != 0 ||
        api_query_id(c, "minutes", &minutes) != 0)
        return;
    if (minutes.set && minutes.v > LIVE_MINUTES) {
        api_error(c, 400, "invalid_value", "minutes", "minutes must be 1 to %d", LIVE_MINUTES);
        return;
    }
    int64_t tenant = c->actor.role == AUTHZ_OPERATOR ? 0 : c->actor.tenant_id;
    struct json_object *res = stats_live_json(c->db, c->conf->state_file, tenant,
                                              minutes.set ? (int)minutes.v : LIVE_MINUTES);
    if (!res) {
        err.kind = OPS_ERR_INTERNAL;
        snprintf(err.message, sizeof err.message, "cannot map the shared state file");
    }
    api_result(c, res, &err);
}
