/* api_keys.c: /api/v1/tenant/api-keys — member keys, their limits (R-KEY-1), queue
 * priority (R-PRIO-2) and routing policy (R-AUTO-1), with the escalation rules of R-SEC-5. */
#include "api.h"

#include <string.h>

#define KEY_LIMIT_FIELDS "qps_limit concurrency_limit daily_limit monthly_quota tpm_limit" \
    " monthly_token_quota"
#define KEY_PRIORITY_FIELDS "priority max_priority"

/* The key by path id after the rights check for op; NULL with the answer set. */
static struct json_object *key_target(struct api_ctx *c, enum authz_op op, struct authz_target *t)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *k = ops_key_get(c->db, c->ids[0], &err), *u = NULL;
    if (k)
        u = ops_user_get(c->db, api_json_i64(k, "user_id"), &err);
    if (!k || !u) {
        json_object_put(k);
        api_ops_error(c, &err);
        return NULL;
    }
    t->tenant_id = api_json_i64(k, "tenant_id");
    t->user_id = api_json_i64(k, "user_id");
    t->owner_role = authz_role_parse(api_json_str(u, "role"));
    json_object_put(u);
    if (api_allow(c, AUTHZ_KEY, op, t->tenant_id, t->user_id, t->owner_role) != 0) {
        json_object_put(k);
        return NULL;
    }
    return k;
}

static int key_limits_ok(struct api_ctx *c, const struct authz_target *t,
                         const struct authz_limits *old, const struct ops_key_limits *want)
{
    char why[256];
    struct authz_limits w;
    api_limits_to_authz(want, &w);
    if (authz_key_limits(&c->actor, t, old, &w, why, sizeof why) == 0)
        return 0;
    api_forbidden(c, why);
    return -1;
}

/* priority 0..9; max_priority 0..9 or null (clears it: -1). -1: answer set. */
static int key_priority_body(struct api_ctx *c, struct ops_key_priority *p)
{
    struct json_object *v = NULL;
    if (api_body_int(c, "priority", &p->priority) != 0 || api_body_int(c, "max_priority", &p->max_priority) != 0)
        return -1;
    if ((p->priority.set && p->priority.v < 0) || (p->max_priority.set && p->max_priority.v < 0)) {
        api_error(c, 400, "invalid_value", p->priority.set && p->priority.v < 0 ? "priority" : "max_priority",
                  "priority and max_priority are 0 (the highest) to 9; max_priority null clears it");
        return -1;
    }
    if (json_object_object_get_ex(c->body, "max_priority", &v) && !v) {
        p->max_priority.set = 1;
        p->max_priority.v = -1;
    }
    return 0;
}

/* R-SEC-5: a non-operator's own key gets no higher priority than it has (k NULL: a new key). */
static int key_priority_ok(struct api_ctx *c, const struct authz_target *t, struct json_object *k,
                           const struct ops_key_priority *p)
{
    char why[256];
    struct json_object *m = NULL;
    int old = k ? (int)api_json_i64(k, "priority") : AUTHZ_PRIORITY_DEFAULT;
    int old_max = k && json_object_object_get_ex(k, "max_priority", &m) && m ? json_object_get_int(m) : old;
    int want = p->priority.set ? (int)p->priority.v : -1;
    int want_max = !p->max_priority.set ? -1 : p->max_priority.v < 0 ? -2 : (int)p->max_priority.v;
    if (want > 9 || want_max > 9)
        return 0;                           /* out of range: ops refuses it with the range */
    if (authz_key_priority(&c->actor, t, old, old_max, want, want_max, why, sizeof why) == 0)
        return 0;
    api_forbidden(c, why);
    return -1;
}

void api_keys_list(struct api_ctx *c)
{
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    char tenant[256], user[256];
    if (api_page(c, &l) != 0 || api_query_str(c, "tenant", tenant, sizeof tenant, &l.tenant) != 0 ||
        api_query_id(c, "tenant_id", &l.tenant_id) != 0 ||
        api_query_str(c, "user", user, sizeof user, &l.user) != 0 ||
        api_query_id(c, "user_id", &l.user_id) != 0 || api_scope(c, AUTHZ_KEY, &l) != 0)
        return;
    struct json_object *res = ops_key_list(c->db, &l, &err);
    if (res && ops_list_status(c->db, res, "keys", ops_key_counters, &err) != 0) {
        json_object_put(res);
        res = NULL;
    }
    api_list_result(c, res, "keys", &err);
}

void api_keys_create(struct api_ctx *c)
{
    const char *user, *name;
    struct ops_i64 user_id;
    struct ops_key_limits lim;
    struct ops_key_priority prio = {{0, 0}, {0, 0}};
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "user user_id name " KEY_LIMIT_FIELDS " " KEY_PRIORITY_FIELDS) != 0 ||
        api_body_str(c, "user", &user, 0) != 0 || api_body_int(c, "user_id", &user_id) != 0 ||
        api_body_str(c, "name", &name, 0) != 0 || api_body_limits(c, NULL, &lim) != 0 ||
        key_priority_body(c, &prio) != 0)
        return;
    /* The owner: named, numbered, or the caller. */
    struct ops_list l = {0};
    struct ops_i64 uid;
    l.user = user;
    l.user_id = user_id;
    if (ops_list_ids(c->db, &l, NULL, &uid, NULL, &err) != 0) {
        api_ops_error(c, &err);
        return;
    }
    if (!uid.set)
        uid.v = c->actor.user_id;
    struct json_object *u = ops_user_get(c->db, uid.v, &err);
    if (!u) {
        api_ops_error(c, &err);
        return;
    }
    struct authz_target t = {api_json_i64(u, "tenant_id"), uid.v,
                             authz_role_parse(api_json_str(u, "role"))};
    if (api_allow(c, AUTHZ_KEY, AUTHZ_CREATE, t.tenant_id, t.user_id, t.owner_role) == 0 &&
        key_limits_ok(c, &t, NULL, &lim) == 0 && key_priority_ok(c, &t, NULL, &prio) == 0)
        api_result(c, ops_key_add(c->db, api_json_str(u, "name"), name, &lim, &prio, &err), &err);
    json_object_put(u);
}

void api_keys_get(struct api_ctx *c)
{
    struct authz_target t;
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *k = key_target(c, AUTHZ_READ, &t);
    if (k && ops_key_counters(c->db, k, &err) != 0) {
        json_object_put(k);
        k = NULL;
    }
    if (k)
        api_result(c, k, NULL);
    else if (err.kind != OPS_ERR_NONE)
        api_ops_error(c, &err);
}

void api_keys_update(struct api_ctx *c)
{
    const char *name;
    struct ops_key_limits lim;
    struct authz_target t;
    struct authz_limits old;
    struct ops_key_priority prio = {{0, 0}, {0, 0}};
    struct ops_error err;
    ops_error_clear(&err);
    const char *labels = NULL;
    struct json_object *lv = NULL;
    if (api_body_fields(c, "name require_labels " KEY_LIMIT_FIELDS " " KEY_PRIORITY_FIELDS) != 0 ||
        api_body_str(c, "name", &name, 0) != 0 || api_body_limits(c, NULL, &lim) != 0 ||
        key_priority_body(c, &prio) != 0)
        return;
    /* R-SEM-1: "require_labels" (comma-separated; null or "" clears) */
    if (c->body && json_object_object_get_ex(c->body, "require_labels", &lv) && !lv)
        labels = "";
    else if (api_body_str(c, "require_labels", &labels, 0) != 0)
        return;
    struct json_object *k = key_target(c, AUTHZ_UPDATE, &t);
    if (!k)
        return;
    api_limits_from_json(k, &old);
    if (key_limits_ok(c, &t, &old, &lim) == 0 && key_priority_ok(c, &t, k, &prio) == 0) {
        /* The labels are checked first and written after the rest succeeded: a refused
         * limit never leaves them changed. */
        if (labels && *labels && ops_check_labels("require_labels", labels, &err) != 0) {
            api_ops_error(c, &err);
        } else {
            struct json_object *res = ops_key_set(c->db, c->ids[0], name, &lim, &prio, &err);
            if (res && labels) {
                json_object_put(res);
                res = ops_key_labels_set(c->db, c->ids[0], labels, &err);
            }
            api_result(c, res, &err);
        }
    }
    json_object_put(k);
}

/* DELETE revokes: the record stays for usage and audit. */
void api_keys_delete(struct api_ctx *c)
{
    struct authz_target t;
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *k = key_target(c, AUTHZ_DELETE, &t);
    if (!k)
        return;
    json_object_put(k);
    api_result(c, ops_key_revoke(c->db, c->ids[0], &err), &err);
}

void api_keys_policy_get(struct api_ctx *c)
{
    struct authz_target t;
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *k = key_target(c, AUTHZ_READ, &t);
    if (!k)
        return;
    json_object_put(k);
    api_result(c, ops_key_policy_get(c->db, c->ids[0], &err), &err);
}

/* R-AUTO-1: members set their own keys' policy; null goes back to the global setting. */
void api_keys_policy_set(struct api_ctx *c)
{
    struct ops_i64 enabled;
    const char *strategy;
    struct authz_target t;
    struct json_object *v = NULL;
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "auto_routing_enabled auto_routing_strategy") != 0 ||
        api_body_bool(c, "auto_routing_enabled", &enabled) != 0 ||
        api_body_str(c, "auto_routing_strategy", &strategy, 0) != 0)
        return;
    if (json_object_object_get_ex(c->body, "auto_routing_enabled", &v) && !v) {
        enabled.set = 1;
        enabled.v = -1;
    }
    if (json_object_object_get_ex(c->body, "auto_routing_strategy", &v) && !v)
        strategy = "";
    else if (strategy && !*strategy) {
        api_error(c, 400, "invalid_value", "auto_routing_strategy",
                  "auto_routing_strategy must be a strategy name or null");
        return;
    }
    struct json_object *k = key_target(c, AUTHZ_UPDATE, &t);
    if (!k)
        return;
    json_object_put(k);
    api_result(c, ops_key_policy_set(c->db, c->ids[0], enabled, strategy, &err), &err);
}
