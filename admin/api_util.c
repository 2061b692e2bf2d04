/* api_util.c: answers, body and query parsing, and rights checks shared by admin/api_*.c. */
#include "api.h"

#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- answers ------------------------------------------------------------------ */

static const char *api_error_type(int status)
{
    if (status == 403)
        return "permission_error";
    if (status == 401)
        return "authentication_error";
    if (status == 429)
        return "rate_limit_error";
    return status >= 500 ? "server_error" : "invalid_request_error";
}

void api_error(struct api_ctx *c, int status, const char *code, const char *param,
               const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct json_object *e = json_object_new_object(), *o = json_object_new_object();
    json_object_object_add(e, "message", json_object_new_string(msg));
    json_object_object_add(e, "type", json_object_new_string(api_error_type(status)));
    json_object_object_add(e, "param", param && *param ? json_object_new_string(param) : NULL);
    json_object_object_add(e, "code", json_object_new_string(code));
    json_object_object_add(o, "error", e);
    json_object_put(c->out);
    c->out = o;
    c->status = status;
}

void api_ops_error(struct api_ctx *c, const struct ops_error *err)
{
    enum ops_error_kind k = err->kind == OPS_ERR_NONE ? OPS_ERR_INTERNAL : err->kind;
    /* Internal failures say no more than that; the details go to the log. */
    api_error(c, ops_error_status(k), ops_error_code(k), err->param,
              "%s", k == OPS_ERR_INTERNAL ? "internal error" : err->message);
}

void api_forbidden(struct api_ctx *c, const char *why)
{
    api_error(c, 403, "permission_denied", NULL, "%s", why);
}

void api_result(struct api_ctx *c, struct json_object *res, const struct ops_error *err)
{
    if (!res) {
        api_ops_error(c, err);
        return;
    }
    json_object_put(c->out);
    c->out = res;
    c->status = 200;
}

void api_list_result(struct api_ctx *c, struct json_object *res, const char *field,
                     const struct ops_error *err)
{
    if (!res) {
        api_ops_error(c, err);
        return;
    }
    struct json_object *out = json_object_new_object(), *arr = NULL;
    json_object_object_get_ex(res, field, &arr);
    json_object_object_add(out, "data", arr ? json_object_get(arr) : json_object_new_array());
    json_object_object_foreach(res, k, v) {
        if (strcmp(k, field) != 0)
            json_object_object_add(out, k, json_object_get(v));
    }
    json_object_put(res);
    api_result(c, out, err);
}

void api_header(struct api_ctx *c, const char *fmt, ...)
{
    if (c->nheaders >= (int)(sizeof c->headers / sizeof c->headers[0]))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->headers[c->nheaders++], sizeof c->headers[0], fmt, ap);
    va_end(ap);
}

/* ---- body ------------------------------------------------------------------------ */

static int api_word_in(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, " ");
        if (len == n && strncmp(p, w, n) == 0)
            return 1;
        p += len;
        while (*p == ' ')
            p++;
    }
    return 0;
}

int api_body_fields(struct api_ctx *c, const char *allowed)
{
    if (!c->body) {
        api_error(c, 400, "invalid_json", NULL, "the request body must be a JSON object");
        return -1;
    }
    json_object_object_foreach(c->body, k, v) {
        (void)v;
        if (!api_word_in(allowed, k)) {
            /* The name is not echoed: it is client text (R-SEC-4). */
            api_error(c, 400, "unknown_field", NULL,
                      "the body has a member this request does not take (it takes: %s)", allowed);
            return -1;
        }
    }
    return 0;
}

static int api_wrong_type(struct api_ctx *c, const char *name, const char *want)
{
    api_error(c, 400, "invalid_type", name, "%s must be %s", name, want);
    return -1;
}

int api_body_str(struct api_ctx *c, const char *name, const char **out, int required)
{
    struct json_object *v = NULL;
    *out = NULL;
    if (!c->body || !json_object_object_get_ex(c->body, name, &v) || !v) {
        if (required) {
            api_error(c, 400, "missing_field", name, "%s is required", name);
            return -1;
        }
        return 0;
    }
    if (!json_object_is_type(v, json_type_string))
        return api_wrong_type(c, name, "a string");
    /* json-c keeps embedded NULs; a string with one is refused, not cut short. */
    if (strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v)) {
        api_error(c, 400, "invalid_value", name, "%s must not contain NUL", name);
        return -1;
    }
    *out = json_object_get_string(v);
    return 0;
}

int api_body_int(struct api_ctx *c, const char *name, struct ops_i64 *out)
{
    struct json_object *v = NULL;
    out->set = 0;
    if (!c->body || !json_object_object_get_ex(c->body, name, &v) || !v)
        return 0;
    if (!json_object_is_type(v, json_type_int))
        return api_wrong_type(c, name, "an integer");
    errno = 0;
    out->v = json_object_get_int64(v);
    if (errno) {
        api_error(c, 400, "invalid_value", name, "%s is out of range", name);
        return -1;
    }
    out->set = 1;
    return 0;
}

int api_body_bool(struct api_ctx *c, const char *name, struct ops_i64 *out)
{
    struct json_object *v = NULL;
    out->set = 0;
    if (!c->body || !json_object_object_get_ex(c->body, name, &v) || !v)
        return 0;
    if (!json_object_is_type(v, json_type_boolean))
        return api_wrong_type(c, name, "true or false");
    out->set = 1;
    out->v = json_object_get_boolean(v) ? 1 : 0;
    return 0;
}

int api_body_scaled(struct api_ctx *c, const char *name, double scale, struct ops_i64 *out)
{
    struct json_object *v = NULL;
    out->set = 0;
    if (!c->body || !json_object_object_get_ex(c->body, name, &v))
        return 0;
    if (!v) {                       /* null clears */
        out->set = 1;
        out->v = -1;
        return 0;
    }
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
        return api_wrong_type(c, name, "a number");
    double d = json_object_get_double(v);
    if (!isfinite(d) || d < 0 || d > 1e9) {
        api_error(c, 400, "invalid_value", name, "%s must be a number from 0 to 10^9", name);
        return -1;
    }
    out->set = 1;
    out->v = (int64_t)llround(d * scale);
    return 0;
}

int api_body_limits(struct api_ctx *c, struct json_object *obj, struct ops_key_limits *l)
{
    struct ops_i64 *dst[AUTHZ_NLIMITS] = {&l->qps_limit, &l->concurrency_limit, &l->daily_limit,
                                          &l->monthly_quota, &l->tpm_limit,
                                          &l->monthly_token_quota};
    struct json_object *saved = c->body;
    memset(l, 0, sizeof *l);
    if (obj && !json_object_is_type(obj, json_type_object)) {
        api_error(c, 400, "invalid_type", "key_ceiling", "key_ceiling must be an object");
        return -1;
    }
    c->body = obj ? obj : c->body;
    int rc = 0;
    for (int i = 0; i < AUTHZ_NLIMITS && rc == 0; i++)
        rc = api_body_int(c, authz_limit_names[i], dst[i]);
    c->body = saved;
    return rc;
}

void api_limits_to_authz(const struct ops_key_limits *l, struct authz_limits *a)
{
    const struct ops_i64 *src[AUTHZ_NLIMITS] = {&l->qps_limit, &l->concurrency_limit,
                                                &l->daily_limit, &l->monthly_quota,
                                                &l->tpm_limit, &l->monthly_token_quota};
    for (int i = 0; i < AUTHZ_NLIMITS; i++) {
        a->set[i] = src[i]->set;
        a->v[i] = src[i]->set ? src[i]->v : 0;
    }
}

void api_limits_from_json(struct json_object *o, struct authz_limits *a)
{
    for (int i = 0; i < AUTHZ_NLIMITS; i++) {
        a->v[i] = api_json_i64(o, authz_limit_names[i]);
        a->set[i] = 1;
    }
}

/* ---- query ------------------------------------------------------------------------- */

int api_query_str(struct api_ctx *c, const char *name, char *buf, size_t cap, const char **out)
{
    *out = NULL;
    int rc = cgi_query(c->req, name, buf, cap);
    if (rc < 0) {
        api_error(c, 400, "invalid_value", name, "query parameter %s is malformed or too long", name);
        return -1;
    }
    if (rc == 1)
        *out = buf;
    return 0;
}

int api_query_id(struct api_ctx *c, const char *name, struct ops_i64 *out)
{
    char buf[32];
    const char *s;
    out->set = 0;
    if (api_query_str(c, name, buf, sizeof buf, &s) != 0)
        return -1;
    if (!s)
        return 0;
    if (parse_i64(s, 1, INT64_MAX, &out->v) != 0) {
        api_error(c, 400, "invalid_value", name, "%s must be a positive integer", name);
        return -1;
    }
    out->set = 1;
    return 0;
}

int api_page(struct api_ctx *c, struct ops_list *l)
{
    char buf[32];
    const char *s;
    l->limit = API_PAGE_DEFAULT;
    l->offset = 0;
    if (api_query_str(c, "limit", buf, sizeof buf, &s) != 0)
        return -1;
    if (s && parse_i64(s, 1, OPS_LIST_LIMIT_MAX, &l->limit) != 0) {
        api_error(c, 400, "invalid_value", "limit", "limit must be 1 to %d", OPS_LIST_LIMIT_MAX);
        return -1;
    }
    if (api_query_str(c, "offset", buf, sizeof buf, &s) != 0)
        return -1;
    if (s && parse_i64(s, 0, INT64_MAX / 2, &l->offset) != 0) {
        api_error(c, 400, "invalid_value", "offset", "offset must be 0 or more");
        return -1;
    }
    return 0;
}

/* ---- rights -------------------------------------------------------------------------- */

int api_allow(struct api_ctx *c, enum authz_res r, enum authz_op op, int64_t tenant_id,
              int64_t user_id, enum authz_role owner_role)
{
    char why[256];
    struct authz_target t = {tenant_id, user_id, owner_role};
    if (authz_check(&c->actor, r, op, &t, why, sizeof why) == 0)
        return 0;
    api_forbidden(c, why);
    return -1;
}

int api_scope(struct api_ctx *c, enum authz_res r, struct ops_list *l)
{
    char why[256];
    /* Names are resolved to ids first, so a name cannot slip past the narrowing. */
    struct ops_error err;
    struct ops_i64 tid, uid, eid;
    ops_error_clear(&err);
    if (ops_list_ids(c->db, l, &tid, &uid, &eid, &err) != 0) {
        api_ops_error(c, &err);
        return -1;
    }
    l->tenant = l->user = l->endpoint = NULL;
    l->tenant_id = tid;
    l->user_id = uid;
    l->endpoint_id = eid;
    struct authz_scope asked = {tid.set ? tid.v : 0, uid.set ? uid.v : 0}, got;
    if (authz_list(&c->actor, r, &asked, &got, why, sizeof why) != 0) {
        api_forbidden(c, why);
        return -1;
    }
    if (got.tenant_id) {
        l->tenant_id.set = 1;
        l->tenant_id.v = got.tenant_id;
    }
    if (got.user_id) {
        l->user_id.set = 1;
        l->user_id.v = got.user_id;
    }
    return 0;
}

int64_t api_json_i64(struct json_object *o, const char *name)
{
    struct json_object *v;
    if (o && json_object_object_get_ex(o, name, &v) && v)
        return json_object_get_int64(v);
    return 0;
}

const char *api_json_str(struct json_object *o, const char *name)
{
    struct json_object *v;
    if (o && json_object_object_get_ex(o, name, &v) && v && json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return NULL;
}
