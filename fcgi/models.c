/* models.c: the models a caller could route to, in OpenAI's list shape, or
 * Anthropic's when the caller sent anthropic-version (R-AUTH-6, R-ANT-7). */
#include "models.h"

#include "auto.h"
#include "reply.h"

#include <string.h>
#include <time.h>

/* One model object in the caller's protocol. */
static void model_object(struct request *r, struct buf *b, const char *id, int64_t created, const char *owner)
{
    if (r->ingress == INGRESS_ANTHROPIC) {
        time_t t = (time_t)created;
        struct tm tm;
        char when[32];
        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        buf_puts(b, "{\"type\":\"model\",\"id\":");
        buf_json_str(b, id, strlen(id));
        buf_puts(b, ",\"display_name\":");
        buf_json_str(b, id, strlen(id));
        buf_printf(b, ",\"created_at\":\"%s\"}", when);
        return;
    }
    buf_puts(b, "{\"id\":");
    buf_json_str(b, id, strlen(id));
    buf_printf(b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":", (long long)created);
    buf_json_str(b, owner, strlen(owner));
    buf_puts(b, "}");
}

/* May this route serve the caller? Same scoping as route.c (R-AUTH-3..5). */
static int model_visible(const struct request *r, const struct snap_route *rt)
{
    if (rt->endpoint < 0)
        return 0;
    if (r->caller.endpoint >= 0)
        return rt->endpoint == r->caller.endpoint;
    return 1;
}

static void models_add(struct request *r, struct buf *b, const struct snap_route *rt, int *count,
                       const char **first, const char **last)
{
    const struct snap_tenant *t = snapshot_tenant(r->snap, rt->tenant_id);
    if (*count)
        buf_puts(b, ",");
    model_object(r, b, rt->model, rt->created_at, t ? t->name : "sluice");
    if (!*first)
        *first = rt->model;
    *last = rt->model;
    (*count)++;
}

/* Appends each distinct visible model of one tenant, skipping names in skip_tenant. */
static void models_of_tenant(struct request *r, struct buf *b, int64_t tenant, int64_t skip_tenant,
                             const char *only, int *count, const char **first, const char **final)
{
    const struct snapshot *s = r->snap;
    const char *last = NULL;
    for (int i = 0; i < s->n_routes; i++) {
        const struct snap_route *rt = &s->routes[i];
        if (rt->tenant_id != tenant || !model_visible(r, rt))
            continue;
        if (last && strcmp(last, rt->model) == 0)
            continue;
        if (only && strcmp(only, rt->model) != 0)
            continue;
        const struct snap_route *dup;
        if (skip_tenant && snapshot_routes(s, skip_tenant, rt->model, &dup) > 0)
            continue;       /* R-AUTH-4: the platform's route of that name wins */
        last = rt->model;
        models_add(r, b, rt, count, first, final);
    }
}

void models_reply(struct request *r)
{
    if (strcmp(r->method, "GET") != 0) {
        reply_error(r, ERR_METHOD_NOT_ALLOWED, NULL, NULL);
        return;
    }
    const char *only = strncmp(r->path, "/v1/models/", 11) == 0 ? r->path + 11 : NULL;
    struct buf *b = &r->w->out;
    buf_reset(b);
    int count = 0;
    int64_t def = r->snap->default_tenant_id;
    const char *first = NULL, *last = NULL;
    int anthropic = r->ingress == INGRESS_ANTHROPIC;
    if (!only)
        buf_puts(b, anthropic ? "{\"data\":[" : "{\"object\":\"list\",\"data\":[");
    /* R-AUTH-6: "auto" first when auto routing is on for this caller. */
    enum auto_strategy strategy;
    if (auto_enabled_for(r, &strategy) && (!only || strcmp(only, "auto") == 0)) {
        model_object(r, b, "auto", 0, "sluice-router");
        first = last = "auto";
        count++;
    }
    int cross = r->caller.role == ROLE_OPERATOR && r->caller.tenant_id != def;
    if (cross)
        models_of_tenant(r, b, def, 0, only, &count, &first, &last);
    models_of_tenant(r, b, r->caller.tenant_id, cross ? def : 0, only, &count, &first, &last);
    if (only) {
        if (count == 0) {
            reply_error(r, ERR_MODEL_NOT_FOUND,
                        arena_printf(r->arena, "The model `%s` does not exist or you do not have access to it.", only),
                        "model");
            return;
        }
    } else if (anthropic) {
        /* One page holds every model: has_more is false, so SDK pagination stops. */
        buf_puts(b, "],\"has_more\":false,\"first_id\":");
        first ? buf_json_str(b, first, strlen(first)) : buf_puts(b, "null");
        buf_puts(b, ",\"last_id\":");
        last ? buf_json_str(b, last, strlen(last)) : buf_puts(b, "null");
        buf_puts(b, "}");
    } else {
        buf_puts(b, "]}");
    }
    r->model = only;
    if (reply_head(r, 200, "application/json", NULL) == 0)
        reply_body(r, b->data, b->len, 0);
}
