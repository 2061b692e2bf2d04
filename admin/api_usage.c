/* api_usage.c: GET /api/v1/tenant/usage — reports from the daily aggregates: members see
 * their own, admins their tenant, the operator everything (R-USE-6, R-USE-7). */
#include "api.h"

void api_usage(struct api_ctx *c)
{
    char tenant[256], from_buf[16], to_buf[16], group_buf[16];
    const char *from, *to, *group_by;
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    if (api_page(c, &l) != 0 || api_query_str(c, "tenant", tenant, sizeof tenant, &l.tenant) != 0 ||
        api_query_id(c, "tenant_id", &l.tenant_id) != 0 ||
        api_query_id(c, "user_id", &l.user_id) != 0 ||
        api_query_str(c, "from", from_buf, sizeof from_buf, &from) != 0 ||
        api_query_str(c, "to", to_buf, sizeof to_buf, &to) != 0 ||
        api_query_str(c, "group_by", group_buf, sizeof group_buf, &group_by) != 0 ||
        api_scope(c, AUTHZ_USAGE, &l) != 0)
        return;
    api_list_result(c, ops_usage(c->db, &l, group_by, from, to, &err), "rows", &err);
}
