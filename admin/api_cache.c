/* api_cache.c: /api/v1/cache — the answer cache's housekeeping (R-CACHE-3): GET its
 * counts per model, DELETE its entries by ?model= and ?tenant= (or ?tenant_id=); and
 * GET /api/v1/cache/semantic-hits, the semantic cache's sampled hit audit (R-CACHE-4).
 * The operator reaches every tenant's; a tenant admin only its own tenant's; members 403. */
#include "api.h"

/* ?tenant= ?tenant_id= ?model= into l (buffers from the caller). -1: answer set. */
static int cache_query(struct api_ctx *c, struct ops_list *l, char *tenant, char *model, size_t cap)
{
    return api_query_str(c, "tenant", tenant, cap, &l->tenant) != 0 ||
           api_query_id(c, "tenant_id", &l->tenant_id) != 0 ||
           api_query_str(c, "model", model, cap, &l->model) != 0 ? -1 : 0;
}

void api_cache_stats(struct api_ctx *c)
{
    char tenant[API_NAME_MAX], model[API_NAME_MAX];
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    if (cache_query(c, &l, tenant, model, sizeof tenant) != 0 || api_scope(c, AUTHZ_CACHE, &l) != 0)
        return;
    api_result(c, ops_cache_stats(c->db, &l, &err), &err);
}

void api_cache_clear(struct api_ctx *c)
{
    char tenant[API_NAME_MAX], model[API_NAME_MAX];
    struct ops_list l = {0};
    struct ops_i64 tid;
    struct ops_error err;
    ops_error_clear(&err);
    /* The filters are in the query; a body may be empty only. */
    if (api_body_fields(c, "") != 0 || cache_query(c, &l, tenant, model, sizeof tenant) != 0)
        return;
    if (ops_list_ids(c->db, &l, &tid, NULL, NULL, &err) != 0) {
        api_ops_error(c, &err);
        return;
    }
    /* A non-operator clears its own tenant's when it names none (a name cannot slip past:
     * it is an id by now). */
    if (!tid.set && c->actor.role != AUTHZ_OPERATOR) {
        tid.set = 1;
        tid.v = c->actor.tenant_id;
    }
    if (api_allow(c, AUTHZ_CACHE, AUTHZ_DELETE, tid.set ? tid.v : 0, 0, AUTHZ_NOBODY) != 0)
        return;
    l.tenant = NULL;
    l.tenant_id = tid;
    api_result(c, ops_cache_clear(c->db, &l, &err), &err);
}

/* R-CACHE-4: ?model= ?tenant= ?tenant_id= ?limit= ?offset=, newest first. */
void api_cache_hits(struct api_ctx *c)
{
    char tenant[API_NAME_MAX], model[API_NAME_MAX];
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    if (api_page(c, &l) != 0 || cache_query(c, &l, tenant, model, sizeof tenant) != 0 ||
        api_scope(c, AUTHZ_CACHE, &l) != 0)
        return;
    api_list_result(c, ops_cache_hits(c->db, &l, &err), "hits", &err);
}
