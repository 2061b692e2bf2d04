/* api_users.c: /api/v1/users — members of tenants, their roles, passwords and key
 * ceilings (R-ADM-1, R-ADM-2, R-SEC-5). */
#include "api.h"

#include <string.h>

/* The user by path id, after the rights check for op; NULL with the answer set. */
static struct json_object *users_target(struct api_ctx *c, enum authz_op op)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *u = ops_user_get(c->db, c->ids[0], &err);
    if (!u) {
        api_ops_error(c, &err);
        return NULL;
    }
    if (api_allow(c, AUTHZ_USER, op, api_json_i64(u, "tenant_id"), c->ids[0],
                  authz_role_parse(api_json_str(u, "role"))) != 0) {
        json_object_put(u);
        return NULL;
    }
    return u;
}

void api_users_list(struct api_ctx *c)
{
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    char tenant[256];
    if (api_page(c, &l) != 0 || api_query_str(c, "tenant", tenant, sizeof tenant, &l.tenant) != 0 ||
        api_query_id(c, "tenant_id", &l.tenant_id) != 0 || api_scope(c, AUTHZ_USER, &l) != 0)
        return;
    api_list_result(c, ops_user_list(c->db, &l, &err), "users", &err);
}

void api_users_get(struct api_ctx *c)
{
    struct json_object *u = users_target(c, AUTHZ_READ);
    if (u)
        api_result(c, u, NULL);
}

void api_users_create(struct api_ctx *c)
{
    const char *name, *tenant, *role, *password;
    struct ops_i64 tenant_id;
    struct ops_key_limits ceil;
    struct json_object *ceil_obj = NULL;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "name tenant tenant_id role password key_ceiling") != 0 ||
        api_body_str(c, "name", &name, 1) != 0 || api_body_str(c, "tenant", &tenant, 0) != 0 ||
        api_body_int(c, "tenant_id", &tenant_id) != 0 || api_body_str(c, "role", &role, 0) != 0 ||
        api_body_str(c, "password", &password, 0) != 0)
        return;
    json_object_object_get_ex(c->body, "key_ceiling", &ceil_obj);
    if (api_body_limits(c, ceil_obj, &ceil) != 0)
        return;
    /* The tenant: named, numbered, or the caller's own. */
    struct ops_list l = {0};
    l.tenant = tenant;
    l.tenant_id = tenant_id;
    struct ops_i64 tid;
    if (ops_list_ids(c->db, &l, &tid, NULL, NULL, &err) != 0) {
        api_ops_error(c, &err);
        return;
    }
    if (!tid.set) {
        tid.set = 1;
        tid.v = c->actor.tenant_id;
    }
    struct json_object *t = ops_tenant_get(c->db, tid.v, &err);
    if (!t) {
        api_ops_error(c, &err);
        return;
    }
    char why[256];
    struct authz_target target = {tid.v, 0, AUTHZ_NOBODY};
    struct authz_user_change ch = {role ? role : "member", 0, ceil_obj != NULL, {{0}, {0}}};
    api_limits_to_authz(&ceil, &ch.new_ceiling);
    if (authz_user(&c->actor, &target, &ch, why, sizeof why) != 0) {
        api_forbidden(c, why);
        json_object_put(t);
        return;
    }
    /* R-SEC-5: ops gives the user the caller's ceiling where key_ceiling leaves a member out. */
    struct json_object *res = ops_user_add(c->db, name, api_json_str(t, "name"),
                                           role ? role : "member", password, &ceil, &err);
    json_object_put(t);
    api_result(c, res, &err);
}

void api_users_update(struct api_ctx *c)
{
    const char *role, *password;
    struct ops_key_limits ceil;
    struct json_object *ceil_obj = NULL;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "role password key_ceiling") != 0 ||
        api_body_str(c, "role", &role, 0) != 0 || api_body_str(c, "password", &password, 0) != 0)
        return;
    json_object_object_get_ex(c->body, "key_ceiling", &ceil_obj);
    if (api_body_limits(c, ceil_obj, &ceil) != 0)
        return;
    struct json_object *u = users_target(c, AUTHZ_UPDATE);
    if (!u)
        return;
    char why[256];
    struct authz_target target = {api_json_i64(u, "tenant_id"), c->ids[0],
                                  authz_role_parse(api_json_str(u, "role"))};
    struct authz_user_change ch = {role, password != NULL, ceil_obj != NULL, {{0}, {0}}};
    api_limits_to_authz(&ceil, &ch.new_ceiling);
    if (authz_user(&c->actor, &target, &ch, why, sizeof why) != 0) {
        api_forbidden(c, why);
        json_object_put(u);
        return;
    }
    const char *name = api_json_str(u, "name");
    struct json_object *res = NULL;
    if (role || password || !ceil_obj)
        res = ops_user_set(c->db, name, role, password, &err);
    if (ceil_obj && (res || (!role && !password))) {
        json_object_put(res);
        res = ops_user_set_ceiling(c->db, name, &ceil, &err);
    }
    json_object_put(u);
    api_result(c, res, &err);
}

void api_users_delete(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *u = users_target(c, AUTHZ_DELETE);
    if (!u)
        return;
    if (c->ids[0] == c->actor.user_id && c->actor.role != AUTHZ_OPERATOR) {
        api_forbidden(c, "you may not delete yourself");
        json_object_put(u);
        return;
    }
    api_result(c, ops_user_rm(c->db, api_json_str(u, "name"), &err), &err);
    json_object_put(u);
}
