/* auto.c: candidates for model "auto" from the snapshot and the shared state (R-AUTO-1..6). */
#include "auto.h"

#include "metrics.h"
#include "reply.h"
#include "semindex.h"
#include "semroute.h"
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

/* R-SEM-1..3: the semantic strategy over the candidates that passed R-AUTO-2/3
 * (idx, m of them): 0 with res's order set, or -1 when no candidate is left. */
static int sem_choose(struct request *r, const struct auto_cand *cands, const int *idx, int m,
                      struct auto_result *res)
{
    const struct snapshot *s = r->snap;
    /* semvec_prepare holds the index (with the embeddings it fetched); else our own */
    struct semindex *ix = r->semindex ? r->semindex : semindex_acquire(r);
    struct sem_cand *sc = arena_alloc(r->arena, sizeof *sc * (size_t)(m ? m : 1));
    int *pol = arena_alloc(r->arena, sizeof *pol * (size_t)(m ? m : 1));
    for (int k = 0; k < m; k++) {
        const struct auto_cand *c = &cands[idx[k]];
        const struct snap_policy *p = snapshot_policy(s, c->model);
        pol[k] = p ? (int)(p - s->policies) : -1;
        sc[k] = (struct sem_cand){.model = c->model, .endpoint_id = c->endpoint_id, .doc = pol[k]};
        if (p) {
            sc[k].tenants = p->tenants, sc[k].n_tenants = p->n_tenants;
            sc[k].labels = p->labels, sc[k].n_labels = p->n_labels;
        }
    }
    struct buf text;
    buf_init(&text, 0);             /* as long as the body: a rule reads all of it */
    int have_text = semroute_last_user(r->json, &text) == 0;
    const struct snap_tenant *t = snapshot_tenant(s, r->caller.tenant_id);
    const struct snap_key *key = r->caller.key;
    struct sem_input in = {
        .text = have_text ? text.data : NULL, .len = have_text ? text.len : 0,
        .tenant = t ? t->name : "", .tenant_id = r->caller.tenant_id,
        .require_labels = key ? key->require_labels : NULL, .n_require = key ? key->n_require_labels : 0,
        .rules = ix->rules, .n_rules = ix->n_rules, .match_limit = (uint32_t)r->conf->rule_match_limit,
        .bm25 = ix->bm25, .w_bm25 = s->sem_w_bm25, .w_embedding = s->sem_w_embedding,
        .threshold = s->sem_threshold, .default_model = s->sem_default_model};
    /* R-SEM-2: the embeddings fcgi/semvec.c fetched before route, when it could. */
    if (r->sem_qvec) {
        in.qvec = r->sem_qvec;
        in.dims = r->sem_qdims;
        for (int k = 0; k < m; k++)
            semindex_vec_get(ix, pol[k], &sc[k].vec, &sc[k].dims);
    }
    struct sem_result sr;
    semroute_decide(sc, m, &in, &sr);
    buf_free(&text);
    if (ix != r->semindex)
        semindex_release(ix);
    if (sr.n == 0)
        return -1;
    res->n = 0;
    for (int k = 0; k < sr.n; k++)
        res->order[res->n++] = idx[sr.order[k]];
    r->routing_reason = arena_strdup(r->arena, sr.reason);
    char l[32];
    metrics_label(l, sizeof l, 0, "layer", semroute_layer_name(sr.layer));
    metrics_add(r->shm, MET_SEMANTIC_ROUTING, l, 1);
    return 0;
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
    if (strategy == AUTO_SEMANTIC) {
        int idx[AUTO_MAX_CANDIDATES];
        int m = auto_eligible(cands, n, &rq, idx, &res);
        if (m > 0 && sem_choose(r, cands, idx, m, &res) != 0)
            res.error = ERR_NO_AUTO_CANDIDATES;   /* R-SEM-1: allow-lists, labels and forbids left none */
    } else {
        auto_choose(cands, n, &rq, strategy, &w, &res);
    }
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
