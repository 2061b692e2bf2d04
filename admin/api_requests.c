/* api_requests.c: GET /api/v1/requests and /api/v1/requests/{id}, the usage events one
 * per request (issue 16): members see their own keys', admins their tenant's, the
 * operator all (R-ADM-2). */
#include "api.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Epoch milliseconds, or a day YYYY-MM-DD in the billing time zone (the CGI runs with TZ
 * set to it, as the usage reports' days are): its first millisecond, or with end set its
 * last. -1: error sent. */
static int req_time(struct api_ctx *c, const char *name, int end, struct ops_i64 *out)
{
    char buf[32];
    const char *s;
    if (api_query_str(c, name, buf, sizeof buf, &s) != 0)
        return -1;
    if (!s)
        return 0;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, m, d, n = 0;
    if (strlen(s) == 10 && sscanf(s, "%4d-%2d-%2d%n", &y, &m, &d, &n) == 3 && n == 10 && s[4] == '-' &&
        s[7] == '-' && m >= 1 && m <= 12 && d >= 1 && d <= mdays[m - 1] && y >= 1970 && y <= 9999) {
        struct tm tm = {0};
        tm.tm_year = y - 1900;
        tm.tm_mon = m - 1;
        tm.tm_mday = d + (end ? 1 : 0);
        tm.tm_isdst = -1;
        out->set = 1;
        out->v = (int64_t)mktime(&tm) * 1000 - (end ? 1 : 0);
        return 0;
    }
    if (parse_i64(s, 0, INT64_MAX / 4, &out->v) == 0) {
        out->set = 1;
        return 0;
    }
    api_error(c, 400, "invalid_value", name, "%s must be epoch milliseconds or a date YYYY-MM-DD", name);
    return -1;
}

/* status: an HTTP status (100..599) or a class 1xx..5xx. */
static int req_status(struct api_ctx *c, struct ops_request_filter *f)
{
    char buf[16];
    const char *s;
    if (api_query_str(c, "status", buf, sizeof buf, &s) != 0)
        return -1;
    if (!s)
        return 0;
    if (strlen(s) == 3 && s[0] >= '1' && s[0] <= '5' && (strcmp(s + 1, "xx") == 0 || strcmp(s + 1, "XX") == 0)) {
        f->status_class.set = 1;
        f->status_class.v = s[0] - '0';
        return 0;
    }
    if (parse_i64(s, 100, 599, &f->status.v) == 0) {
        f->status.set = 1;
        return 0;
    }
    api_error(c, 400, "invalid_value", "status", "status must be an HTTP status or 2xx, 4xx, 5xx");
    return -1;
}

void api_requests_list(struct api_ctx *c)
{
    char code[64], model[256], lim[16];
    const char *ls;
    struct ops_request_filter f;
    struct ops_list l = {0};
    struct ops_error err;
    memset(&f, 0, sizeof f);
    ops_error_clear(&err);
    f.limit = API_PAGE_DEFAULT;
    if (api_query_str(c, "limit", lim, sizeof lim, &ls) != 0)
        return;
    if (ls && parse_i64(ls, 1, OPS_REQUEST_LIMIT_MAX, &f.limit) != 0) {
        api_error(c, 400, "invalid_value", "limit", "limit must be 1 to %d", OPS_REQUEST_LIMIT_MAX);
        return;
    }
    if (api_query_id(c, "tenant_id", &l.tenant_id) != 0 || api_query_id(c, "user_id", &l.user_id) != 0 ||
        api_query_id(c, "key_id", &f.key_id) != 0 || api_query_id(c, "endpoint_id", &f.endpoint_id) != 0 ||
        api_query_id(c, "before", &f.before) != 0 ||
        api_query_str(c, "code", code, sizeof code, &f.code) != 0 ||
        api_query_str(c, "model", model, sizeof model, &f.model) != 0 || req_status(c, &f) != 0 ||
        req_time(c, "from", 0, &f.from_ms) != 0 || req_time(c, "to", 1, &f.to_ms) != 0 ||
        api_scope(c, AUTHZ_USAGE, &l) != 0)
        return;
    f.tenant_id = l.tenant_id;
    f.user_id = l.user_id;
    api_list_result(c, ops_request_list(c->db, &f, &err), "requests", &err);
}

void api_requests_get(struct api_ctx *c)
{
    struct ops_error err;
    char why[256];
    ops_error_clear(&err);
    struct json_object *r = ops_request_get(c->db, c->ids[0], &err);
    if (!r) {
        api_ops_error(c, &err);
        return;
    }
    /* Another tenant's or user's request is not found rather than forbidden: ids are
     * sequential and would otherwise tell how busy others are. */
    struct authz_target t = {api_json_i64(r, "tenant_id"), api_json_i64(r, "user_id"), AUTHZ_NOBODY};
    if (authz_check(&c->actor, AUTHZ_USAGE, AUTHZ_READ, &t, why, sizeof why) != 0) {
        json_object_put(r);
        api_error(c, 404, "not_found", NULL, "request not found");
        return;
    }
    api_result(c, r, NULL);
}
