/* api_rules.c: /api/v1/rules — content rules (R-GUARD-3) over ops_rule.c, which
 * checks every pattern (it compiles, it matches in bounded time) for the CLI and
 * the API alike. The operator manages every rule; a tenant admin its own tenant's,
 * and reads the global ones too (authz_rule); members get 403. */
#include "api.h"

static int rule_allow(struct api_ctx *c, enum authz_op op, int64_t tenant_id)
{
    char why[256];
    if (authz_rule(&c->actor, op, tenant_id, why, sizeof why) == 0)
        return 0;
    api_forbidden(c, why);
    return -1;
}

/* The rule by path id after the rights check for op; NULL: answer set. */
static struct json_object *rule_target(struct api_ctx *c, enum authz_op op)
{
    struct ops_error err;
    ops_error_clear(&err);
    /* A member is refused before the lookup, so it learns nothing of which ids exist. */
    if (c->actor.role == AUTHZ_MEMBER && rule_allow(c, op, c->actor.tenant_id) != 0)
        return NULL;
    struct json_object *res = ops_rule_get_id(c->db, c->ids[0], &err);
    if (!res) {
        api_ops_error(c, &err);
        return NULL;
    }
    if (rule_allow(c, op, api_json_i64(res, "tenant_id")) != 0) {
        json_object_put(res);
        return NULL;
    }
    return res;
}

/* ?tenant= / ?tenant_id=: that tenant's rules and the global ones; an admin's
 * listing is always its own tenant's view. */
void api_rules_list(struct api_ctx *c)
{
    struct ops_list l = {0};
    struct ops_error err;
    char tenant[API_NAME_MAX];
    ops_error_clear(&err);
    if (api_page(c, &l) != 0 || api_query_str(c, "tenant", tenant, sizeof tenant, &l.tenant) != 0 ||
        api_query_id(c, "tenant_id", &l.tenant_id) != 0 || api_scope(c, AUTHZ_RULE, &l) != 0)
        return;
    api_list_result(c, ops_rule_list(c->db, &l, &err), "rules", &err);
}

/* {"name", "pattern" | "keyword", "tenant" | "tenant_id" (none: every tenant),
 * "action", "scope"}. */
void api_rules_create(struct api_ctx *c)
{
    const char *name;
    struct ops_rule_opts o = {0};
    struct ops_list l = {0};
    struct ops_i64 tid;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "name pattern keyword tenant tenant_id action scope") != 0 ||
        api_body_str(c, "name", &name, 1) != 0 || api_body_str(c, "pattern", &o.pattern, 0) != 0 ||
        api_body_str(c, "keyword", &o.keyword, 0) != 0 || api_body_str(c, "tenant", &l.tenant, 0) != 0 ||
        api_body_int(c, "tenant_id", &l.tenant_id) != 0 || api_body_str(c, "action", &o.action, 0) != 0 ||
        api_body_str(c, "scope", &o.scope, 0) != 0)
        return;
    /* The tenant as an id (a name that does not exist is a 404 here), for the rights. */
    if (ops_list_ids(c->db, &l, &tid, NULL, NULL, &err) != 0) {
        api_ops_error(c, &err);
        return;
    }
    if (rule_allow(c, AUTHZ_CREATE, tid.set ? tid.v : 0) != 0)
        return;
    o.tenant_id = tid;
    api_result(c, ops_rule_add(c->db, name, &o, &err), &err);
}

void api_rules_get(struct api_ctx *c)
{
    struct json_object *res = rule_target(c, AUTHZ_READ);
    if (res)
        api_result(c, res, NULL);
}

void api_rules_delete(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "") != 0)
        return;
    struct json_object *res = rule_target(c, AUTHZ_DELETE);
    if (!res)
        return;
    json_object_put(res);
    api_result(c, ops_rule_rm_id(c->db, c->ids[0], &err), &err);
}
