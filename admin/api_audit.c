/* api_audit.c: GET /api/v1/audit-log and /api/v1/alerts (R-ADM-5, R-HC-2): the operator
 * sees all, an admin its tenant's. */
#include "api.h"

void api_audit_list(struct api_ctx *c)
{
    char type[64];
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    if (api_page(c, &l) != 0 || api_query_id(c, "tenant_id", &l.tenant_id) != 0 ||
        api_query_str(c, "object_type", type, sizeof type, &l.object_type) != 0 ||
        api_scope(c, AUTHZ_AUDIT, &l) != 0)
        return;
    api_list_result(c, ops_audit_list(c->db, &l, &err), "audit", &err);
}

void api_alerts_list(struct api_ctx *c)
{
    char status[16];
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    if (api_page(c, &l) != 0 || api_query_id(c, "tenant_id", &l.tenant_id) != 0 ||
        api_query_str(c, "status", status, sizeof status, &l.status) != 0 ||
        api_scope(c, AUTHZ_ALERT, &l) != 0)
        return;
    api_list_result(c, ops_alert_list(c->db, &l, &err), "alerts", &err);
}

static struct json_object *alert_target(struct api_ctx *c, enum authz_op op)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *a = ops_alert_get(c->db, c->ids[0], &err);
    if (!a) {
        api_ops_error(c, &err);
        return NULL;
    }
    if (api_allow(c, AUTHZ_ALERT, op, api_json_i64(a, "tenant_id"), 0, AUTHZ_NOBODY) != 0) {
        json_object_put(a);
        return NULL;
    }
    return a;
}

void api_alerts_get(struct api_ctx *c)
{
    struct json_object *a = alert_target(c, AUTHZ_READ);
    if (a)
        api_result(c, a, NULL);
}

void api_alerts_resolve(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    if (api_body_fields(c, "") != 0)
        return;
    struct json_object *a = alert_target(c, AUTHZ_UPDATE);
    if (!a)
        return;
    json_object_put(a);
    api_result(c, ops_alert_resolve(c->db, c->ids[0], &err), &err);
}
