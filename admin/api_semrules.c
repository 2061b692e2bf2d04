/* api_semrules.c: /api/v1/semantic-rules — semantic routing rules (R-SEM-1) over
 * ops_semrule.c, which checks every pattern (it compiles, it matches in bounded
 * time) for the CLI and the API alike. Rights as content rules' (authz_rule): the
 * operator manages every rule; a tenant admin its own tenant's, and reads the
 * global ones too; members get 403. */
#include "api.h"

static int semrule_allow(struct api_ctx *c, enum authz_op op, int64_t tenant_id)
{
    char why[256];
    if (authz_rule(&c->actor, op, tenant_id, why, sizeof why) == 0)
        return 0;
    api_forbidden(c, why);
    return -1;
}

/* ?tenant= / ?tenant_id=: that tenant's rules and the global ones. */
void api_semrules_list(struct api_ctx *c)
{
    struct ops_list l = {0};
    struct ops_error err;
    char tenant[API_NAME_MAX];
    ops_error_clear(&err);
    if (api_page(c, &l) != 0 || api_query_str(c, "tenant", tenant, sizeof tenant, &l.tenant) != 0 ||
        api_query_id(c, "tenant_id", &l.tenant_id) != 0 || api_scope(c, AUTHZ_RULE, &l) != 0)
        return;
    api_list_result(c, ops_semrule_list(c->db, &l, &err), "rules", &err);
}

/* {"name", "pattern", "tenant" | "tenant_id" (none: every tenant), "force" | "forbid"
 * (the model), "label"}. */
void api_semrules_create(struct api_ctx *c)
{
    const char *name;
    struct ops_semrule_opts o = {0};
    struct ops_list l = {0};
    struct ops_i64 tid;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "name pattern tenant tenant_id force forbid label") != 0 ||
        api_body_str(c, "name", &name, 1) != 0 || api_body_str(c, "pattern", &o.pattern, 0) != 0 ||
        api_body_str(c, "tenant", &l.tenant, 0) != 0 || api_body_int(c, "tenant_id", &l.tenant_id) != 0 ||
        api_body_str(c, "force", &o.force, 0) != 0 || api_body_str(c, "forbid", &o.forbid, 0) != 0 ||
        api_body_str(c, "label", &o.label, 0) != 0)
        return;
    if (ops_list_ids(c->db, &l, &tid, NULL, NULL, &err) != 0) {
        api_ops_error(c, &err);
        return;
    }
    if (semrule_allow(c, AUTHZ_CREATE, tid.set ? tid.v : 0) != 0)
        return;
    o.tenant_id = tid;
    api_result(c, ops_semrule_add(c->db, name, &o, &err), &err);
}

void api_semrules_delete(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "") != 0)
        return;
    /* A member is refused before the lookup, so it learns nothing of which ids exist. */
    if (c->actor.role == AUTHZ_MEMBER && semrule_allow(c, AUTHZ_DELETE, c->actor.tenant_id) != 0)
        return;
    struct json_object *res = ops_semrule_get_id(c->db, c->ids[0], &err);
    if (!res) {
        api_ops_error(c, &err);
        return;
    }
    int64_t tenant_id = api_json_i64(res, "tenant_id");
    json_object_put(res);
    if (semrule_allow(c, AUTHZ_DELETE, tenant_id) != 0)
        return;
    api_result(c, ops_semrule_rm_id(c->db, c->ids[0], &err), &err);
}
