/* api_tenants.c: /api/v1/tenants (R-ADM-1). The operator manages tenants and their weights
 * (R-PRIO-2); others see their own. */
#include "api.h"

void api_tenants_list(struct api_ctx *c)
{
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    if (api_page(c, &l) != 0 || api_scope(c, AUTHZ_TENANT, &l) != 0)
        return;
    api_list_result(c, ops_tenant_list(c->db, &l, &err), "tenants", &err);
}

void api_tenants_create(struct api_ctx *c)
{
    const char *name;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_TENANT, AUTHZ_CREATE, 0, 0, AUTHZ_NOBODY) != 0 ||
        api_body_fields(c, "name") != 0 || api_body_str(c, "name", &name, 1) != 0)
        return;
    api_result(c, ops_tenant_add(c->db, name, &err), &err);
}

void api_tenants_get(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_TENANT, AUTHZ_READ, c->ids[0], 0, AUTHZ_NOBODY) != 0)
        return;
    api_result(c, ops_tenant_get(c->db, c->ids[0], &err), &err);
}

void api_tenants_update(struct api_ctx *c)
{
    struct ops_i64 weight;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_TENANT, AUTHZ_UPDATE, c->ids[0], 0, AUTHZ_NOBODY) != 0 ||
        api_body_fields(c, "weight") != 0 || api_body_int(c, "weight", &weight) != 0)
        return;
    struct json_object *t = ops_tenant_get(c->db, c->ids[0], &err);
    if (!t) {
        api_ops_error(c, &err);
        return;
    }
    api_result(c, ops_tenant_set(c->db, api_json_str(t, "name"), weight, &err), &err);
    json_object_put(t);
}

void api_tenants_delete(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_TENANT, AUTHZ_DELETE, c->ids[0], 0, AUTHZ_NOBODY) != 0)
        return;
    struct json_object *t = ops_tenant_get(c->db, c->ids[0], &err);
    if (!t) {
        api_ops_error(c, &err);
        return;
    }
    api_result(c, ops_tenant_rm(c->db, api_json_str(t, "name"), &err), &err);
    json_object_put(t);
}
