/* fake_route.c: the route table, and how each request class (data, probe, control) is answered and counted. */
#include "fake.h"

#include <stdio.h>

static enum outcome route_echo(struct conn *c, const struct behavior *b)
{
    c->rbody.len = 0;
    http_request_json(&c->rbody, &c->req, c->req.body, c->req.blen);
    return reply_send(c, b, 200, CT_JSON);
}

/* GET /v1/models is asked in both protocols; an anthropic-version header says which. */
static enum outcome route_models(struct conn *c, const struct behavior *b)
{
    return http_header(&c->req, "anthropic-version") ? anthropic_models(c, b) : openai_models(c, b);
}

/* Errors answered before a route runs take the shape of the protocol the client speaks. */
static enum outcome route_error(struct conn *c, const struct behavior *b, int status, const char *msg)
{
    return anthropic_wanted(&c->req) ? anthropic_error(c, b, status, msg) : reply_error(c, b, status, msg);
}

enum route_kind { ROUTE_DATA, ROUTE_PROBE, ROUTE_CONTROL };

typedef enum outcome (*route_fn)(struct conn *, const struct behavior *);

/*
 * path:    exact match, or prefix match when prefix is set (/echo, /echo/x, ...)
 * method:  NULL accepts any method; "GET" also accepts HEAD
 * kind:    what is counted and whether directives apply (see the top of fake_upstream.c)
 */
static const struct route {
    const char *path;
    bool prefix;
    const char *method;
    enum route_kind kind;
    route_fn fn;
} ROUTES[] = {
    { "/v1/chat/completions", false, "POST", ROUTE_DATA, openai_chat },
    { "/v1/completions", false, "POST", ROUTE_DATA, openai_text },
    { "/v1/embeddings", false, "POST", ROUTE_DATA, openai_embeddings },
    { "/v1/models", false, "GET", ROUTE_DATA, route_models },
    { "/v1/messages", false, "POST", ROUTE_DATA, anthropic_messages },
    { "/v1/messages/count_tokens", false, "POST", ROUTE_DATA, anthropic_count_tokens },
    { "/v1/responses", false, "POST", ROUTE_DATA, responses_create },
    { "/v1/responses/", true, NULL, ROUTE_DATA, responses_item },   /* {id}, {id}/cancel, {id}/input_items */
    { "/echo", true, NULL, ROUTE_DATA, route_echo },
    { "/health", false, "GET", ROUTE_PROBE, vllm_health },
    { "/metrics", false, "GET", ROUTE_PROBE, vllm_metrics },
    { "/_fake/behavior", false, "POST", ROUTE_CONTROL, ctl_behavior },
    { "/_fake/reset", false, "POST", ROUTE_CONTROL, ctl_reset },
    { "/_fake/stats", false, "GET", ROUTE_CONTROL, ctl_stats },
    { "/_fake/timeline", false, "GET", ROUTE_CONTROL, ctl_timeline },
    { "/_fake/health", false, "POST", ROUTE_CONTROL, ctl_health },
    { "/_fake/metrics", false, "POST", ROUTE_CONTROL, ctl_metrics },
    { "/sleep", false, "POST", ROUTE_CONTROL, vllm_sleep },
    { "/wake_up", false, "POST", ROUTE_CONTROL, vllm_wake_up },
    { "/is_sleeping", false, "GET", ROUTE_PROBE, vllm_is_sleeping },
    { "/tokenize", false, "POST", ROUTE_DATA, vllm_tokenize },
    { "/_fake/sleep-config", false, "POST", ROUTE_CONTROL, ctl_sleep_config },
    { "/dcgm/metrics", false, "GET", ROUTE_PROBE, vllm_dcgm },
    { "/_fake/dcgm", false, "POST", ROUTE_CONTROL, ctl_dcgm },
};

static const struct route *route_find(const struct request *r, bool *method_ok)
{
    for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) {
        const struct route *rt = &ROUTES[i];
        size_t l = strlen(rt->path);
        if (rt->prefix ? (r->plen < l || memcmp(r->path, rt->path, l) != 0) : !mem_is(r->path, r->plen, rt->path))
            continue;
        *method_ok = !rt->method || mem_is(r->method, r->mlen, rt->method)
                     || (r->is_head && strcmp(rt->method, "GET") == 0);
        return rt;
    }
    *method_ok = false;
    return NULL;
}

/* The directives in the order a request meets them: before, instead of, or shaping the answer. */
static enum outcome data_run(struct conn *c, const struct route *rt, bool method_ok, const struct behavior *b)
{
    if (b->die_before)
        return OUT_DIED;
    if (b->hang)
        return conn_hang(c);
    if (b->info100 && c->req.minor >= 1 && conn_send(c, CONTINUE_100, sizeof CONTINUE_100 - 1) < 0)
        return OUT_ABORTED;
    if (b->ttfb_ms > 0 && conn_wait(c, b->ttfb_ms) < 0)
        return OUT_ABORTED;
    if (b->status && b->status != 200)
        return route_error(c, b, b->status, NULL);
    if (vllm_sleeping())
        return route_error(c, b, 503, "the model is sleeping (POST /wake_up)");
    if (!rt || !method_ok) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s: %.*s %.*s", rt ? "method not allowed" : "no such route",
                 (int)(c->req.mlen > 16 ? 16 : c->req.mlen), c->req.method,
                 (int)(c->req.plen > 200 ? 200 : c->req.plen), c->req.path);
        return route_error(c, b, rt ? 405 : 404, msg);
    }
    return rt->fn(c, b);
}

static enum outcome data_serve(struct conn *c, const struct route *rt, bool method_ok, const struct behavior *b)
{
    stats_begin(c);
    enum outcome o = data_run(c, rt, method_ok, b);
    if (c->loop && c->pending.len)
        c->owed = true;   /* not fully written yet: the connection thread counts it */
    else
        stats_end(c, o);
    return o;
}

static enum outcome plain_serve(struct conn *c, const struct route *rt, bool method_ok)
{
    if (rt && rt->kind == ROUTE_PROBE)
        atomic_fetch_add(&S.probes, 1);
    if (!rt)
        return reply_error(c, &BEHAVIOR_DEFAULT, 404, "no such control route");
    if (!method_ok)
        return reply_error(c, &BEHAVIOR_DEFAULT, 405, "method not allowed");
    return rt->fn(c, &BEHAVIOR_DEFAULT);
}

static bool is_data(const struct request *r, const struct route *rt)
{
    if (rt)
        return rt->kind == ROUTE_DATA;
    return !(r->plen >= 7 && memcmp(r->path, "/_fake/", 7) == 0);
}

/* Would this data request be answered at once: no sleeping, hanging, dying or streaming? */
static bool fast_enough(const struct request *r, const struct route *rt, bool method_ok, const struct behavior *b)
{
    if (b->die_before || b->hang || b->info100 || b->ttfb_ms > 0 || b->die_after >= 0 || b->hang_after >= 0
        || b->prefix_cache)
        return false;
    bool may_stream = rt && (rt->fn == openai_chat || rt->fn == openai_text || rt->fn == anthropic_messages
                             || rt->fn == responses_create);
    if (!may_stream || !method_ok || (b->status && b->status != 200))
        return true;
    struct jscan j;
    json_scan(&j, r->body, r->blen);
    return !j.stream;
}

/* Answers the request in c->req; on an event loop, declines what would block. */
enum outcome route_answer(struct conn *c)
{
    bool method_ok;
    const struct route *rt = route_find(&c->req, &method_ok);
    if (!is_data(&c->req, rt))
        return plain_serve(c, rt, method_ok);
    struct behavior b;
    behavior_for(&c->req, &b);
    if (c->loop && !fast_enough(&c->req, rt, method_ok, &b))
        return OUT_HANDOFF;
    return data_serve(c, rt, method_ok, &b);
}

/* Serves one request; 0 to read the next one on this connection, -1 to close it. */
int route_serve(struct conn *c)
{
    int rc = http_read(c);
    if (rc < 0)
        return -1;
    if (rc > 0) {
        c->req.keep_alive = false;
        if (reply_error(c, &BEHAVIOR_DEFAULT, rc, reply_reason(rc)) == OUT_COMPLETE)
            conn_linger(c);
        return -1;
    }
    enum outcome o = route_answer(c);
    if (o == OUT_COMPLETE && !c->req.keep_alive)
        conn_linger(c);
    if (o != OUT_COMPLETE || !c->req.keep_alive)
        return -1;
    http_consume(c);
    return 0;
}
