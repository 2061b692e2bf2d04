/* auto.c: candidates for model "auto" from the snapshot and the shared state (R-AUTO-1..6). */
#include "auto.h"

#include "reply.h"
#include "serving.h"
#include "util.h"

#include <string.h>

#define AUTO_MAX_CANDIDATES 64
#define AUTO_EWMA_ALPHA 0.2

int auto_enabled_for(const struct request *r, enum auto_strategy *strategy)
{
    const struct snapshot *s = r->snap;
    const struct snap_key *k = r->caller.key;
    enum auto_strategy global = auto_strategy_parse(s->auto_strategy, AUTO_BALANCED);
    if (k && k->id > 0 && k->auto_enabled >= 0) {       /* member keys only */
        *strategy = auto_strategy_parse(k->auto_strategy, global);
        return k->auto_enabled;
    }
    *strategy = k && k->id > 0 ? auto_strategy_parse(k->auto_strategy, global) : global;
    return s->auto_enabled;
}

static enum auto_purpose request_purpose(enum req_kind k)
{
    return k == REQ_EMBEDDINGS ? PURPOSE_EMBEDDING : k == REQ_COMPLETIONS ? PURPOSE_COMPLETION : PURPOSE_CHAT;
}

/* R-AUTO-3: what the request needs of a model. */
static void request_features(const struct request *r, struct auto_request *rq)
{
    memset(rq, 0, sizeof *rq);
    rq->purpose = request_purpose(r->kind);
    rq->prompt_tokens = r->prompt_estimate;
    rq->max_tokens = r->max_tokens;
    struct json_object *v, *msgs;
    if (r->json && json_object_object_get_ex(r->json, "tools", &v) && json_object_get_type(v) == json_type_array &&
        json_object_array_length(v) > 0)
        rq->has_tools = 1;
    if (!r->json || !json_object_object_get_ex(r->json, "messages", &msgs) ||
        json_object_get_type(msgs) != json_type_array)
        return;
    for (size_t i = 0; i < json_object_array_length(msgs) && !rq->has_images; i++) {
        struct json_object *c, *type;
        if (!json_object_object_get_ex(json_object_array_get_idx(msgs, i), "content", &c) ||
            json_object_get_type(c) != json_type_array)
            continue;
        for (size_t j = 0; j < json_object_array_length(c); j++)
            if (json_object_object_get_ex(json_object_array_get_idx(c, j), "type", &type) &&
                json_object_get_type(type) == json_type_string &&
                strcmp(json_object_get_string(type), "image_url") == 0)
                rq->has_images = 1;
    }
}

static void count(struct request *r, int outcome, enum auto_strategy s)
{
    atomic_fetch_add(&r->shm->r->routing.auto_outcomes[outcome][s], 1);
}

int auto_plan_request(struct request *r, struct auto_plan **out)
{
    enum auto_strategy strategy;
    if (!auto_enabled_for(r, &strategy)) {
        reply_error(r, ERR_MODEL_NOT_FOUND, "The model `auto` does not exist or you do not have access to it.", "model");
        return -1;
    }
    /* R-AUTO-2: every model the caller's tenant routes, one candidate per model. */
    struct auto_cand cands[AUTO_MAX_CANDIDATES];
    int n = 0;
    int64_t now = now_ms();
    const struct snapshot *s = r->snap;
    for (int i = 0; i < s->n_routes && n < AUTO_MAX_CANDIDATES; i++) {
        const struct snap_route *rt = &s->routes[i];
        if (rt->tenant_id != r->caller.tenant_id || rt->endpoint < 0 ||
            (r->caller.endpoint >= 0 && rt->endpoint != r->caller.endpoint))
            continue;
        int usable = serving_endpoint_up(r, &s->endpoints[rt->endpoint], now);
        if (n > 0 && strcmp(cands[n - 1].model, rt->model) == 0) {
            cands[n - 1].available |= usable;       /* routes of one model are adjacent */
            continue;
        }
        struct auto_cand *c = &cands[n++];
        memset(c, 0, sizeof *c);
        const struct snap_policy *p = snapshot_policy(s, rt->model);
        const struct snap_endpoint *e = &s->endpoints[rt->endpoint];
        c->model = rt->model;
        c->endpoint_id = e->id;
        c->available = usable;
        c->routing_enabled = p ? p->routing_enabled : 1;
        c->purpose = auto_purpose_parse(p ? p->purpose : NULL);
        c->supports_tools = p ? p->supports_tools : 0;
        c->supports_vision = p ? p->supports_vision : 0;
        c->max_context = p ? p->max_context : 0;
        c->max_output = p ? p->max_output : 0;
        c->quality = p ? p->quality : -1;
        c->price_in = p ? p->price_in : -1;
        c->price_out = p ? p->price_out : -1;
        int64_t us = e->slot >= 0 ? atomic_load(&r->shm->r->routing.ttft_ewma_us[e->slot]) : 0;
        c->ttft_ms = us > 0 ? (double)us / 1000.0 : -1;
    }
    struct auto_request rq;
    request_features(r, &rq);
    struct auto_weights w = {s->auto_w_quality / 100.0, s->auto_w_price / 100.0, s->auto_w_latency / 100.0};
    struct auto_result res;
    auto_choose(cands, n, &rq, strategy, &w, &res);
    if (res.error != ERR_NONE) {
        count(r, 3, strategy);
        reply_error(r, res.error, NULL, NULL);
        return -1;
    }
    struct auto_plan *plan = arena_alloc(r->arena, sizeof *plan);
    plan->strategy = strategy;
    plan->purpose_fallback = res.purpose_fallback;
    for (int i = 0; i < res.n; i++)
        plan->models[plan->n++] = cands[res.order[i]].model;
    *out = plan;
    return 0;
}

void auto_finish(struct request *r)
{
    /* R-AUTO-4: the observed time to first token of the serving endpoint. */
    /* A cached answer says nothing of the endpoint's speed. */
    if (r->ep && r->ep->slot >= 0 && r->data_sent && r->ttft_ms > 0 && !r->cache_hit) {
        _Atomic int64_t *slot = &r->shm->r->routing.ttft_ewma_us[r->ep->slot];
        int64_t old = atomic_load(slot), next;
        do {
            next = (int64_t)auto_ewma(old > 0 ? (double)old : -1, (double)r->ttft_ms * 1000.0, AUTO_EWMA_ALPHA);
        } while (!atomic_compare_exchange_weak(slot, &old, next));
    }
    struct auto_plan *p = r->auto_plan;
    if (!p)
        return;
    int ok = r->status >= 200 && r->status < 400 && !r->error_code;
    count(r, ok ? (r->plan.pos > 0 ? 1 : 0) : 2, p->strategy);
}
