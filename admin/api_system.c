/* api_system.c: /api/v1/system/inference-config (run-time settings) and /api/v1/nodes
 * (GPU hosts, pushed temperatures) — the operator's (R-ADM-1, R-HC-7, R-LB-6). */
#include "api.h"

#include <math.h>
#include <string.h>

void api_config_get(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_SETTINGS, AUTHZ_READ, 0, 0, AUTHZ_NOBODY) == 0)
        api_result(c, ops_config_get(c->db, &err), &err);
}

/* Members not named keep their values; null resets one to its default. */
void api_config_set(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_SETTINGS, AUTHZ_UPDATE, 0, 0, AUTHZ_NOBODY) == 0)
        api_result(c, ops_config_set(c->db, c->body, &err), &err);
}

static struct json_object *node_target(struct api_ctx *c, enum authz_op op)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_NODE, op, 0, 0, AUTHZ_NOBODY) != 0)
        return NULL;
    struct json_object *n = ops_node_get(c->db, c->ids[0], &err);
    if (!n)
        api_ops_error(c, &err);
    return n;
}

void api_nodes_list(struct api_ctx *c)
{
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_NODE, AUTHZ_READ, 0, 0, AUTHZ_NOBODY) != 0 || api_page(c, &l) != 0)
        return;
    api_list_result(c, ops_node_list(c->db, &l, &err), "nodes", &err);
}

void api_nodes_create(struct api_ctx *c)
{
    const char *name, *status, *url;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_NODE, AUTHZ_CREATE, 0, 0, AUTHZ_NOBODY) != 0 ||
        api_body_fields(c, "name status metrics_url") != 0 || api_body_str(c, "name", &name, 1) != 0 ||
        api_body_str(c, "status", &status, 0) != 0 || api_body_str(c, "metrics_url", &url, 0) != 0)
        return;
    api_result(c, ops_node_add(c->db, name, status, url, &err), &err);
}

void api_nodes_get(struct api_ctx *c)
{
    struct json_object *n = node_target(c, AUTHZ_READ);
    if (n)
        api_result(c, n, NULL);
}

void api_nodes_update(struct api_ctx *c)
{
    const char *status, *url;
    struct json_object *v = NULL;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "status metrics_url") != 0 || api_body_str(c, "status", &status, 0) != 0 ||
        api_body_str(c, "metrics_url", &url, 0) != 0)
        return;
    if (json_object_object_get_ex(c->body, "metrics_url", &v) && !v)
        url = "";
    struct json_object *n = node_target(c, AUTHZ_UPDATE);
    if (!n)
        return;
    api_result(c, ops_node_set(c->db, api_json_str(n, "name"), status, url, &err), &err);
    json_object_put(n);
}

void api_nodes_delete(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *n = node_target(c, AUTHZ_DELETE);
    if (!n)
        return;
    api_result(c, ops_node_rm(c->db, api_json_str(n, "name"), &err), &err);
    json_object_put(n);
}

/* R-HC-7: {"gpu_temperature": 71.5} in degrees Celsius. */
void api_nodes_temperature(struct api_ctx *c)
{
    struct json_object *v = NULL;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "gpu_temperature") != 0)
        return;
    if (!json_object_object_get_ex(c->body, "gpu_temperature", &v) ||
        !(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double))) {
        api_error(c, 400, "invalid_type", "gpu_temperature", "gpu_temperature must be a number");
        return;
    }
    double t = json_object_get_double(v);
    if (!isfinite(t) || t < -50 || t > 200) {
        api_error(c, 400, "invalid_value", "gpu_temperature", "gpu_temperature must be -50 to 200");
        return;
    }
    struct json_object *n = node_target(c, AUTHZ_UPDATE);
    if (!n)
        return;
    api_result(c, ops_node_temperature(c->db, api_json_str(n, "name"), (int64_t)llround(t * 10),
                                       c->conf->state_file, &err), &err);
    json_object_put(n);
}

/* Issue 16: every signed-in role reads the schema (names, types, ranges, defaults: what
 * the README says too); the current values only a role that may read the settings
 * (R-ADM-2: the guard's rules and CORS origins are not a member's to see). */
void api_settings_schema(struct api_ctx *c)
{
    struct ops_error err;
    char why[256];
    struct authz_target t = {0, 0, AUTHZ_NOBODY};
    ops_error_clear(&err);
    struct json_object *res = ops_settings_schema(c->db, &err), *rows = NULL;
    if (res && authz_check(&c->actor, AUTHZ_SETTINGS, AUTHZ_READ, &t, why, sizeof why) != 0 &&
        json_object_object_get_ex(res, "settings", &rows))
        for (size_t i = 0; i < json_object_array_length(rows); i++)
            json_object_object_del(json_object_array_get_idx(rows, i), "value");
    api_list_result(c, res, "settings", &err);
}
