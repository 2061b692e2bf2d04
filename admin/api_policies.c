/* api_policies.c: /api/v1/models/routing-policies — per-model policy for automatic
 * routing (SPEC §0, R-AUTO-2..4). Names with '/' go in ?name= (R-ADM-1). */
#include "api.h"

#include <string.h>

#define POLICY_FIELDS "purpose routing_enabled quality_score price_input_per_1k" \
    " price_output_per_1k supports_tools supports_vision max_context max_output description" \
    " shrink_max_tokens cache cache_ttl_s default_greedy clamp_max_tokens semantic_threshold tenants labels"

/* The model named by the path segment, ?name=, or (POST) the body's "model". NULL with
 * the answer set. */
static const char *policy_name(struct api_ctx *c, char *buf, size_t cap)
{
    const char *name = NULL;
    if (c->nnames > 0)
        return c->names[0];
    if (api_query_str(c, "name", buf, cap, &name) != 0)
        return NULL;
    if (!name && c->body && api_body_str(c, "model", &name, 0) != 0)
        return NULL;
    if (!name || !*name) {
        api_error(c, 400, "missing_field", "name",
                  "name the model: /models/routing-policies/NAME, ?name=NAME, or \"model\"");
        return NULL;
    }
    return name;
}

/* An integer member that null clears (-1). */
static int policy_int(struct api_ctx *c, const char *name, struct ops_i64 *out)
{
    struct json_object *v = NULL;
    if (json_object_object_get_ex(c->body, name, &v) && !v) {
        out->set = 1;
        out->v = -1;
        return 0;
    }
    if (api_body_int(c, name, out) != 0)
        return -1;
    if (out->set && out->v < 0) {
        api_error(c, 400, "invalid_value", name, "%s must not be negative (null clears it)", name);
        return -1;
    }
    return 0;
}

/* A string member that null clears (""). */
static int policy_str(struct api_ctx *c, const char *name, const char **out)
{
    struct json_object *v = NULL;
    if (json_object_object_get_ex(c->body, name, &v) && !v) {
        *out = "";
        return 0;
    }
    return api_body_str(c, name, out, 0);
}

void api_policies_list(struct api_ctx *c)
{
    char name[API_NAME_MAX];
    const char *one;
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_POLICY, AUTHZ_READ, 0, 0, AUTHZ_NOBODY) != 0 ||
        api_query_str(c, "name", name, sizeof name, &one) != 0)
        return;
    if (one) {
        api_result(c, ops_policy_get(c->db, one, &err), &err);
        return;
    }
    if (api_page(c, &l) != 0)
        return;
    api_list_result(c, ops_policy_list(c->db, &l, &err), "policies", &err);
}

void api_policies_get(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_POLICY, AUTHZ_READ, 0, 0, AUTHZ_NOBODY) != 0)
        return;
    api_result(c, ops_policy_get(c->db, c->names[0], &err), &err);
}

void api_policies_set(struct api_ctx *c)
{
    char buf[API_NAME_MAX];
    struct ops_policy_opts o;
    struct ops_error err;
    ops_error_clear(&err);
    memset(&o, 0, sizeof o);
    if (api_allow(c, AUTHZ_POLICY, AUTHZ_UPDATE, 0, 0, AUTHZ_NOBODY) != 0 ||
        api_body_fields(c, "model " POLICY_FIELDS) != 0)
        return;
    const char *name = policy_name(c, buf, sizeof buf);
    if (!name || policy_str(c, "purpose", &o.purpose) != 0 ||
        api_body_bool(c, "routing_enabled", &o.routing_enabled) != 0 ||
        api_body_scaled(c, "quality_score", 1e3, &o.quality_milli) != 0 ||
        api_body_scaled(c, "price_input_per_1k", 1e6, &o.price_input_micro) != 0 ||
        api_body_scaled(c, "price_output_per_1k", 1e6, &o.price_output_micro) != 0 ||
        api_body_bool(c, "supports_tools", &o.supports_tools) != 0 ||
        api_body_bool(c, "supports_vision", &o.supports_vision) != 0 ||
        policy_int(c, "max_context", &o.max_context) != 0 ||
        policy_int(c, "max_output", &o.max_output) != 0 ||
        policy_str(c, "description", &o.description) != 0 ||
        api_body_bool(c, "shrink_max_tokens", &o.shrink_max_tokens) != 0 ||
        api_body_str(c, "cache", &o.cache, 0) != 0 ||                       /* R-CACHE-2 */
        api_body_int(c, "cache_ttl_s", &o.cache_ttl_s) != 0 ||
        api_body_bool(c, "default_greedy", &o.default_greedy) != 0 ||       /* R-CACHE-1 */
        api_body_bool(c, "clamp_max_tokens", &o.clamp_max_tokens) != 0 ||   /* R-GUARD-1 */
        api_body_scaled(c, "semantic_threshold", 1e3, &o.semantic_threshold_milli) != 0 ||  /* R-CACHE-4 */
        policy_str(c, "tenants", &o.tenants) != 0 || policy_str(c, "labels", &o.labels) != 0)   /* R-SEM-1 */
        return;
    api_result(c, ops_policy_set(c->db, name, &o, &err), &err);
}

void api_policies_delete(struct api_ctx *c)
{
    char buf[API_NAME_MAX];
    struct ops_error err;
    ops_error_clear(&err);
    if (api_allow(c, AUTHZ_POLICY, AUTHZ_DELETE, 0, 0, AUTHZ_NOBODY) != 0 ||
        api_body_fields(c, "model") != 0)
        return;
    const char *name = policy_name(c, buf, sizeof buf);
    if (name)
        api_result(c, ops_policy_rm(c->db, name, &err), &err);
}
