/* route.c: choose the route and replica for a request (SPEC §3-5, DESIGN.md stage 5). */
#include "route.h"

#include "auto.h"
#include "gate.h"
#include "serving.h"
#include "balance.h"
#include "sticky.h"
#include "log.h"
#include "pathcheck.h"
#include "pick.h"
#include "reply.h"
#include "util.h"
#include "wake.h"

#include <stdlib.h>
#include <string.h>

#define MAX_CANDIDATES PLAN_MAX_ROUTES

static int excluded(const struct request *r, int replica_index)
{
    for (int i = 0; i < r->plan.n_excluded; i++)
        if (r->plan.excluded[i] == replica_index)
            return 1;
    return 0;
}

static void exclude(struct request *r, int replica_index)
{
    if (r->plan.n_excluded < PLAN_MAX_EXCLUDED)
        r->plan.excluded[r->plan.n_excluded++] = replica_index;
}

/* R-PRIO-1 / R-KEY-6: what a place on endpoint e asks of the gate; 0 when no
 * cap and no concurrency layer applies (no gate work at all). */
static int ask_for(const struct request *r, const struct snap_endpoint *e, struct gate_ask *a)
{
    const struct snap_quota *mq = r->snap->n_quotas ? snapshot_quota(r->snap, QSCOPE_MODEL, 0, r->model) : NULL;
    const struct snap_quota *eq = r->snap->n_quotas ? snapshot_quota(r->snap, QSCOPE_ENDPOINT, e->id, NULL) : NULL;
    int model_layer = mq && mq->concurrency > 0 && mq->slot >= 0;
    int ep_layer = eq && eq->concurrency > 0 && eq->slot >= 0;
    if (!e->capped && !model_layer && !ep_layer)
        return 0;
    const struct snap_tenant *t = snapshot_tenant(r->snap, r->caller.tenant_id);
    a->ep_slot = e->slot;
    a->quota_slot[0] = model_layer ? mq->slot : -1;
    a->quota_slot[1] = ep_layer ? eq->slot : -1;
    a->queue_quota = a->quota_slot[0];
    a->only_rep = -1;
    a->priority = r->priority;
    a->weight = t ? t->weight : 1;
    a->tenant_id = r->caller.tenant_id;
    /* An endpoint key is one user of its own (R-PRIO-2). */
    a->user_id = r->caller.user_id ? r->caller.user_id
                 : r->caller.endpoint >= 0 ? -r->snap->endpoints[r->caller.endpoint].id : 0;
    return e->slot >= 0;
}

#define LAYER_MODEL 1
#define LAYER_ENDPOINT 2

/* Has the replica a free place? When not, remember why: a queue to wait in
 * (the first full endpoint in route order), or a refusing layer. */
static int replica_has_room(struct request *r, int idx)
{
    const struct snap_replica *rep = &r->snap->replicas[idx];
    const struct snap_endpoint *e = &r->snap->endpoints[rep->endpoint];
    struct gate_ask a;
    if (rep->slot < 0 || !ask_for(r, e, &a))
        return 1;
    int part = gate_full_part(r->shm, &a, rep->slot);
    if (part == 0)
        return 1;
    if (part == 2) {
        if (!(r->plan.layer_full & LAYER_ENDPOINT))
            r->plan.layer_ep = rep->endpoint;
        r->plan.layer_full |= LAYER_ENDPOINT;
        return 0;
    }
    if (part == 1)
        r->plan.layer_full |= LAYER_MODEL;
    if (r->wait_ep < 0) {
        r->wait_ep = rep->endpoint;
        r->wait_model_layer = part == 1;
        r->plan.wait_pos = r->plan.pos;
    }
    return 0;
}

/* May this replica take the request? strict also honours bans and circuits. */
static int replica_usable(struct request *r, int idx, int strict, int64_t now)
{
    const struct snap_replica *rep = &r->snap->replicas[idx];
    if (excluded(r, idx) || !serving_replica_up(r, rep, now))
        return 0;
    if (strict && !serving_replica_open(r, rep, now))
        return 0;
    return replica_has_room(r, idx);
}

static int endpoint_usable(struct request *r, const struct snap_endpoint *e, int strict, int64_t now)
{
    for (int i = 0; i < r->plan.n_excluded_ep; i++)
        if (&r->snap->endpoints[r->plan.excluded_ep[i]] == e)
            return 0;
    for (int i = 0; i < e->n_replicas; i++)
        if (replica_usable(r, e->first_replica + i, strict, now))
            return 1;
    return 0;
}

/* R-LB-1 over the endpoint's usable replicas; -1 if none. */
static int choose_replica(struct request *r, const struct snap_endpoint *e, int strict, int64_t now)
{
    struct balance_cand cand[MAX_CANDIDATES];
    int index[MAX_CANDIDATES], n = 0;
    for (int i = 0; i < e->n_replicas && n < MAX_CANDIDATES; i++) {
        int idx = e->first_replica + i;
        if (!replica_usable(r, idx, strict, now))
            continue;
        const struct snap_replica *rep = &r->snap->replicas[idx];
        memset(&cand[n], 0, sizeof cand[n]);
        cand[n].weight = rep->weight;
        cand[n].active = e->algorithm == LB_ROUND_ROBIN || e->algorithm == LB_RANDOM
                             ? 0 : shm_active_sum(r->shm, rep->slot);
        /* R-LB-2/4/5: only a vLLM replica's fresh metrics count as data. */
        if (e->algorithm == LB_ENGINE_AWARE && rep->slot >= 0 && rep->engine &&
            strcmp(rep->engine, "vllm") == 0) {
            const struct shm_replica *s = &r->shm->r->replicas[rep->slot];
            int64_t at = atomic_load(&s->metrics_ms);
            if (at > 0 && now - at <= r->conf->metrics_stale_ms) {
                cand[n].has_metrics = 1;
                cand[n].waiting = atomic_load(&s->waiting);
                cand[n].kv_permille = atomic_load(&s->kv_permille);
            }
        }
        index[n++] = idx;
    }
    if (n == 0)
        return -1;
    int k = -1;
    if (sticky_applies(r, e)) {
        /* R-AFF-3: the load signal is the algorithm's own: queue depth for
         * engine_aware replicas with fresh metrics, else active requests. */
        double load[MAX_CANDIDATES];
        for (int i = 0; i < n; i++)
            load[i] = cand[i].has_metrics ? cand[i].waiting
                                          : shm_active_sum(r->shm, r->snap->replicas[index[i]].slot);
        if (!r->sticky)
            r->sticky = arena_alloc(r->arena, sizeof *r->sticky);
        k = sticky_lookup(r, e, index, load, n, r->sticky);
    }
    if (k < 0) {
        uint64_t rr = e->slot >= 0 ? atomic_fetch_add(&r->shm->r->endpoints[e->slot].rr, 1)
                                   : request_random(r);
        k = balance_pick(e->algorithm, cand, n, rr, request_random(r));
    }
    return k < 0 ? -1 : index[k];
}

/* R-AUTH-3/4: the caller's tenant's routes; an operator acting for another
 * tenant sees default's routes of that name first (platform routes win). */
static int scoped_routes(const struct request *r, const struct snap_route **first)
{
    const struct snapshot *s = r->snap;
    if (r->caller.role == ROLE_OPERATOR && r->caller.tenant_id != s->default_tenant_id) {
        int n = snapshot_routes(s, s->default_tenant_id, r->model, first);
        if (n > 0)
            return n;
    }
    return snapshot_routes(s, r->caller.tenant_id, r->model, first);
}

/* The plan waits for a place on this replica's endpoint (unless it already waits for one). */
static void wait_on(struct request *r, int replica_index)
{
    if (r->wait_ep < 0) {
        r->wait_ep = r->snap->replicas[replica_index].endpoint;
        r->plan.wait_pos = r->plan.pos;
    }
}

/* Takes the replica; -1 when its circuit's last half-open trial went to
 * another request since the choice was made (choose again without it); -2
 * when its last free place went to another request (choose again: it counts
 * as full now). */
static int hand_out(struct request *r, int replica_index, int strict)
{
    const struct snap_replica *rep = &r->snap->replicas[replica_index];
    const struct snap_endpoint *e = &r->snap->endpoints[rep->endpoint];
    struct gate_ask a;
    r->replica = rep;
    if (rep->slot >= 0 && ask_for(r, e, &a) && !gate_take(r->shm, &a, rep->slot, &r->hold)) {
        r->replica = NULL;
        if (++r->plan.take_misses > 8)
            wait_on(r, replica_index);        /* the hint keeps saying room: wait for it instead */
        return -2;
    }
    if (serving_take(r, rep) == 0)
        return 0;
    if (strict && r->plan.n_excluded < PLAN_MAX_EXCLUDED) {
        gate_release(r->shm, &r->hold);
        exclude(r, replica_index);
        return -1;
    }
    return 0;                       /* used anyway (R-HC-5): with the place it holds */
}

/* The pass-through's endpoint, visible to the caller (R-AUTH-5). */
static int plan_proxy(struct request *r)
{
    char name[129];
    const char *rest;
    enum pathcheck_result pr = pathcheck_proxy(r->uri, name, sizeof name, &rest);
    if (pr != PATH_OK) {
        reply_error(r, pr == PATH_NO_ENDPOINT ? ERR_ENDPOINT_NOT_FOUND : ERR_INVALID_PATH, NULL, NULL);
        return -1;
    }
    const struct snap_endpoint *e = snapshot_endpoint_by_name(r->snap, name);
    int visible = e && (r->caller.endpoint >= 0 ? &r->snap->endpoints[r->caller.endpoint] == e
                                                : e->tenant_id == r->caller.tenant_id ||
                                                      r->caller.role == ROLE_OPERATOR);
    if (!visible) {
        reply_error(r, ERR_ENDPOINT_NOT_FOUND, arena_printf(r->arena, "no endpoint named %s", name), NULL);
        return -1;
    }
    r->plan.proxy = e;
    r->upstream_path = rest;            /* affinity looks at the pass-through path */
    return 0;
}

/* The replica index of a replica id, or -1. */
static int replica_index(const struct request *r, int64_t id)
{
    for (int i = 0; i < r->snap->n_replicas; i++)
        if (r->snap->replicas[i].id == id)
            return i;
    return -1;
}

/* R-API-8: the replica holding r->response_ref, when the table knows it for
 * the caller's tenant. 0 (plan.pinned set, or -1 when unknown), or -1 after
 * replying 404 (another tenant's id, or a call that can go nowhere else). */
static int plan_pin(struct request *r)
{
    int64_t id = 0;
    enum pin_result pin = sticky_pin_lookup(r, r->response_ref, &id);
    int idx = pin == PIN_FOUND ? replica_index(r, id) : -1;
    const struct snap_endpoint *e = idx >= 0 ? &r->snap->endpoints[r->snap->replicas[idx].endpoint] : NULL;
    /* R-AUTH-5: an endpoint key reaches only its own endpoint. */
    if (e && r->caller.endpoint >= 0 && &r->snap->endpoints[r->caller.endpoint] != e)
        e = NULL, idx = -1;
    if (pin == PIN_OTHER_TENANT || (!e && r->kind == REQ_RESPONSE_OP)) {
        reply_error(r, ERR_RESPONSE_NOT_FOUND,
                    arena_printf(r->arena, "Response with id '%s' not found.", r->response_ref),
                    r->kind == REQ_RESPONSES ? "previous_response_id" : NULL);
        return -1;
    }
    r->plan.pinned = idx;
    if (r->kind == REQ_RESPONSE_OP) {
        r->plan.proxy = e;
        r->upstream_path = r->query && *r->query ? arena_cat(r->arena, r->path, "?", r->query, NULL) : r->path;
    }
    return 0;
}

/* The current model's routes the caller may use (R-AUTH-3..5). */
static void plan_routes(struct request *r)
{
    const struct snap_route *first;
    r->model = r->plan.models[r->plan.pos];
    int n = scoped_routes(r, &first);
    r->plan.n_routes = 0;
    for (int i = 0; i < n && r->plan.n_routes < PLAN_MAX_ROUTES; i++) {
        /* R-AUTH-5: an endpoint key reaches only its own endpoint's routes. */
        if (first[i].endpoint < 0 || (r->caller.endpoint >= 0 && first[i].endpoint != r->caller.endpoint))
            continue;
        r->plan.routes[r->plan.n_routes++] = &first[i];
    }
}

/* The pass-through's next attempt: a replica of its endpoint. */
static int choose_proxy(struct request *r)
{
    const struct snap_endpoint *e = r->plan.proxy;
    int64_t now = now_ms();
    int idx, strict;
    if (r->kind == REQ_RESPONSE_OP) {
        /* Only the replica that holds the response can answer for it. */
        idx = r->plan.pinned;
        if (idx < 0 || excluded(r, idx) || !serving_replica_up(r, &r->snap->replicas[idx], now))
            return -1;
        if (!replica_has_room(r, idx) || hand_out(r, idx, 0) == -2) {
            r->wait_only_rep = r->snap->replicas[idx].slot;   /* only that replica holds the response */
            wait_on(r, idx);
            return -1;
        }
        r->ep = e;
        return 0;
    }
    int rc = 0;
    do {
        strict = 1;
        idx = choose_replica(r, e, 1, now);
        if (idx < 0) {
            strict = 0;
            idx = choose_replica(r, e, 0, now);
        }
    } while (idx >= 0 && (rc = hand_out(r, idx, strict)) != 0 && (rc != -2 || r->plan.take_misses <= 8));
    if (idx < 0 || (rc == -2))
        return -1;
    r->ep = e;
    if (r->sticky)
        sticky_commit(r, e, idx, r->sticky);
    return 0;
}

/* The current model's next attempt: a route by priority and weight among
 * endpoints with a usable replica, then a replica by the endpoint's algorithm.
 * The first pass honours bans and circuits; if that leaves nothing, use them
 * anyway rather than fail (R-HC-5). */
static int choose_routed(struct request *r)
{
    int nc = r->plan.n_routes;
    const struct snap_route *const *cands = r->plan.routes;
    int64_t now = now_ms();
    int pin = r->plan.pinned;
    /* R-API-8: previous_response_id goes to the replica that made it when one
     * of this model's routes reaches it; no other replica holds the response,
     * so when that one cannot serve (or failed) nothing else is tried. */
    for (int i = 0; pin >= 0 && i < nc; i++) {
        const struct snap_endpoint *e = &r->snap->endpoints[cands[i]->endpoint];
        if (pin < e->first_replica || pin >= e->first_replica + e->n_replicas)
            continue;
        if (excluded(r, pin) || !serving_replica_up(r, &r->snap->replicas[pin], now))
            return -1;
        if (!replica_has_room(r, pin) || hand_out(r, pin, 0) == -2) {
            r->wait_only_rep = r->snap->replicas[pin].slot;   /* only that replica holds the response */
            wait_on(r, pin);
            return -1;
        }
        r->route = cands[i];
        r->ep = e;
        r->routed_model = cands[i]->target_model ? cands[i]->target_model : r->model;
        r->upstream_path = r->path;
        return 0;
    }
    for (int strict = 1; strict >= 0; strict--) {
        struct pick_route pr[MAX_CANDIDATES];
        for (int i = 0; i < nc; i++) {
            pr[i].priority = cands[i]->priority;
            pr[i].weight = cands[i]->weight;
            pr[i].available = endpoint_usable(r, &r->snap->endpoints[cands[i]->endpoint], strict, now);
        }
        int k = pick_route(pr, nc, request_random(r));
        if (k < 0)
            continue;
        const struct snap_route *route = cands[k];
        const struct snap_endpoint *e = &r->snap->endpoints[route->endpoint];
        int idx = choose_replica(r, e, strict, now);
        if (idx < 0)
            continue;
        int rc = hand_out(r, idx, strict);
        if (rc == -2 && r->plan.take_misses > 8)
            return -1;
        if (rc != 0) {
            strict++;           /* the same pass again, without that replica (or with it full) */
            continue;
        }
        if (!strict)
            log_info("request %s: every replica of model %s is banned or open; using replica %lld anyway",
                     r->request_id, r->model, (long long)r->snap->replicas[idx].id);
        r->route = route;
        r->ep = e;
        r->routed_model = route->target_model ? route->target_model : r->model;
        r->upstream_path = r->path;
        if (r->sticky && sticky_applies(r, e))
            sticky_commit(r, e, idx, r->sticky);
        return 0;
    }
    return -1;
}

static int choose(struct request *r)
{
    return r->plan.proxy ? choose_proxy(r) : choose_routed(r);
}

/* R-WAKE-1: nothing serves but replicas sleep: wake the first such endpoint in
 * route order (one wake for the pool, R-WAKE-3). 1: woken, choose again; 0:
 * nothing to wake; -1: replied (the wake's own 503). */
static int plan_wake(struct request *r)
{
    if (r->plan.proxy)
        return wake_needed(r, r->plan.proxy) ? (wake_endpoint(r, r->plan.proxy) == 0 ? 1 : -1) : 0;
    for (int i = 0; i < r->plan.n_routes; i++) {
        const struct snap_endpoint *e = &r->snap->endpoints[r->plan.routes[i]->endpoint];
        if (wake_needed(r, e))
            return wake_endpoint(r, e) == 0 ? 1 : -1;
    }
    return 0;
}

/* A new choice: nothing found full yet. */
static void wait_reset(struct request *r)
{
    r->wait_ep = -1;
    r->wait_model_layer = 0;
    r->wait_only_rep = -1;
    r->plan.layer_full = 0;
    r->plan.take_misses = 0;
}

/* The route of the current model that leads to endpoint index ep. */
static const struct snap_route *route_to(const struct request *r, int ep)
{
    for (int i = 0; i < r->plan.n_routes; i++)
        if (r->plan.routes[i]->endpoint == ep)
            return r->plan.routes[i];
    return NULL;
}

/* R-PRIO-1: every candidate is full: the request waits in the queue of the
 * first full endpoint (route order) and the driver takes the attempt from
 * the grant. 0 (r->replica NULL, r->ep that endpoint), or -1 when nothing was full. */
static int plan_wait(struct request *r)
{
    if (r->wait_ep < 0)
        return -1;
    if (!r->plan.proxy && r->plan.pos != r->plan.wait_pos) {
        r->plan.pos = r->plan.wait_pos;
        plan_routes(r);
    }
    r->replica = NULL;
    r->ep = &r->snap->endpoints[r->wait_ep];
    if (!r->plan.proxy) {
        r->route = route_to(r, r->wait_ep);
        r->routed_model = r->route && r->route->target_model ? r->route->target_model : r->model;
        r->upstream_path = r->path;
    }
    if (!ask_for(r, r->ep, &r->wait_ask))
        return -1;
    r->wait_ask.only_rep = r->wait_only_rep;
    /* The model layer's queue bound applies when it is the model layer that is full. */
    if (!r->wait_model_layer)
        r->wait_ask.queue_quota = -1;
    /* Replicas this request already failed on are never handed to it. */
    for (int i = 0; i < r->plan.n_excluded && r->n_queue_excluded < SHM_WAIT_EXCLUDED; i++) {
        int slot = r->snap->replicas[r->plan.excluded[i]].slot;
        int seen = slot < 0;
        for (int k = 0; k < r->n_queue_excluded && !seen; k++)
            seen = r->queue_excluded[k] == slot;
        if (!seen)
            r->queue_excluded[r->n_queue_excluded++] = slot;
    }
    if (r->wait_model_layer && r->degrade_level < 2)
        r->degrade_level = 2;       /* R-KEY-6: queued for the model */
    return 0;
}

/* R-KEY-6 step 1: the model layer is full: a cheaper model of the same group
 * (the model policies' purpose, priced there) that the caller has routes
 * for, before waiting. The dearest of the cheaper ones goes first: the least
 * loss. 0 (the attempt chosen), or -1. */
static int plan_cheaper(struct request *r)
{
    /* A stored response (previous_response_id) lives on its replica: no other model can go on from it. */
    if (!(r->plan.layer_full & LAYER_MODEL) || r->plan.proxy || r->auto_plan || r->plan.n_models != 1 ||
        r->plan.pinned >= 0)
        return -1;
    const char *asked = r->plan.models[0];
    const struct snap_policy *p = snapshot_policy(r->snap, asked);
    if (!p || !p->purpose || p->price_in < 0 || p->price_out < 0)
        return -1;
    double price = p->price_in + p->price_out, last = price;
    while (r->plan.n_models < PLAN_MAX_MODELS) {
        const struct snap_policy *next = NULL;
        for (int i = 0; i < r->snap->n_policies; i++) {
            const struct snap_policy *q = &r->snap->policies[i];
            double qp = q->price_in + q->price_out;
            if (q == p || !q->purpose || strcmp(q->purpose, p->purpose) != 0 || !q->routing_enabled ||
                q->price_in < 0 || q->price_out < 0 || qp >= last || (next && qp <= next->price_in + next->price_out))
                continue;
            next = q;
        }
        if (!next)
            break;
        r->plan.models[r->plan.n_models++] = next->model;
        last = next->price_in + next->price_out;
    }
    if (r->plan.n_models == 1)
        return -1;
    int pos = r->plan.pos;
    if (route_next_model(r) != 0) {
        r->plan.n_models = 1;       /* none was free: wait for the model asked for */
        r->plan.pos = pos;
        plan_routes(r);
        return -1;
    }
    if (r->degrade_level < 1)
        r->degrade_level = 1;
    r->degraded_from = asked;
    log_info("request %s: model %s is at its concurrency limit; served by the cheaper %s", r->request_id, asked,
             r->model);
    return 0;
}

/* R-KEY-6: an endpoint's concurrency layer refuses (it never queues). */
static void refuse_endpoint_layer(struct request *r)
{
    const struct snap_endpoint *e = &r->snap->endpoints[r->plan.layer_ep];
    const struct snap_quota *q = snapshot_quota(r->snap, QSCOPE_ENDPOINT, e->id, NULL);
    reply_limit_refusal(r, ERR_ENDPOINT_CONCURRENCY_EXCEEDED, "per_endpoint", q ? q->concurrency : 0,
                        q ? gate_quota_held(r->shm, q->slot) : 0, 1000, 0, NULL);
}

/* R-PRIO-2: the key's tier, or the one X-Priority asks for, never better
 * (lower) than the key's maximum. 0, or -1 after a 400. */
static int plan_priority(struct request *r)
{
    const struct snap_key *k = r->caller.key;
    int p = k ? k->priority : 5, best = k ? k->max_priority : 5;
    const char *h = request_header(r, "X-Priority");
    if (h) {
        char *end;
        long v = strtol(h, &end, 10);
        if (end == h || *end || v < 0 || v > 9) {
            reply_error(r, ERR_INVALID_HEADER, "X-Priority must be an integer from 0 (highest) to 9.", NULL);
            return -1;
        }
        p = (int)v;
    }
    r->priority = p < best ? best : p;
    return 0;
}

static int route_plan_stage(struct request *r)
{
    if (plan_priority(r) != 0)
        return -1;
    if (r->response_ref && plan_pin(r) != 0)
        return -1;
    if (r->kind == REQ_RESPONSE_OP) {
        /* planned by plan_pin */
    } else if (r->kind == REQ_PROXY) {
        if (plan_proxy(r) != 0)
            return -1;
    } else {
        /* R-AUTO: "auto" becomes the plan's chain of candidate models. */
        struct auto_plan *ap = NULL;
        if (strcmp(r->model, "auto") == 0) {
            if (auto_plan_request(r, &ap) != 0)
                return -1;
            for (int i = 0; i < ap->n && i < PLAN_MAX_MODELS; i++)
                r->plan.models[r->plan.n_models++] = ap->models[i];
            r->auto_plan = ap;
        } else {
            r->plan.models[r->plan.n_models++] = r->model;
        }
        plan_routes(r);
        if (r->plan.n_routes == 0) {
            reply_error(r, ERR_MODEL_NOT_FOUND,
                        arena_printf(r->arena, "The model `%s` does not exist or you do not have access to it.",
                                     r->model), "model");
            return -1;
        }
    }
    wait_reset(r);
    if (choose(r) == 0 || route_next_model(r) == 0 || plan_cheaper(r) == 0 || plan_wait(r) == 0)
        return 0;
    if (r->plan.layer_full & LAYER_ENDPOINT) {
        refuse_endpoint_layer(r);
        return -1;
    }
    if (!r->plan.proxy && r->plan.pos != 0) {
        r->plan.pos = 0;            /* a wake is for the first candidate */
        plan_routes(r);
    }
    int woke = plan_wake(r);
    if (woke < 0)
        return -1;
    if (woke > 0 && choose(r) == 0)
        return 0;
    if (r->plan.proxy)
        reply_error(r, ERR_NO_BACKENDS_AVAILABLE, NULL, NULL);
    else
        reply_error(r, ERR_NO_BACKENDS_AVAILABLE,
                    arena_printf(r->arena, "No healthy backend is available for model `%s`.", r->model), NULL);
    return -1;
}

/* The route stage, timed for its span (R-OBS-3). */
int route_plan(struct request *r)
{
    r->obs.route_start_us = mono_us();
    int rc = route_plan_stage(r);
    r->obs.route_end_us = mono_us();
    return rc;
}

int route_plan_quiet(struct request *r)
{
    r->plan.pinned = -1;
    r->plan.n_models = 0;
    r->plan.pos = 0;
    r->plan.models[r->plan.n_models++] = r->model;
    plan_routes(r);
    if (r->plan.n_routes == 0)
        return -1;
    wait_reset(r);
    return choose(r) == 0 && r->replica ? 0 : -1;
}

int route_model_speaks(struct request *r, enum upstream_protocol p)
{
    if (strcmp(r->model, "auto") == 0)
        return 1;                   /* auto's candidates are known only to the plan */
    const struct snap_route *first;
    int n = scoped_routes(r, &first), visible = 0;
    for (int i = 0; i < n; i++) {
        if (first[i].endpoint < 0 || (r->caller.endpoint >= 0 && first[i].endpoint != r->caller.endpoint))
            continue;
        visible = 1;
        if (r->snap->endpoints[first[i].endpoint].protocol == p)
            return 1;
    }
    if (visible)
        return 0;
    reply_error(r, ERR_MODEL_NOT_FOUND,
                arena_printf(r->arena, "The model `%s` does not exist or you do not have access to it.", r->model),
                "model");
    return -1;
}

int route_next_replica(struct request *r)
{
    const struct snap_replica *keep = r->replica;
    const struct snap_endpoint *keep_ep = r->ep;
    if (r->plan.n_excluded >= PLAN_MAX_EXCLUDED)
        return -1;
    exclude(r, (int)(r->replica - r->snap->replicas));
    wait_reset(r);
    if (choose(r) == 0 || plan_wait(r) == 0)
        return 0;
    r->replica = keep;
    r->ep = keep_ep;
    return -1;
}

int route_skip_endpoint(struct request *r)
{
    if (r->plan.proxy || r->plan.n_excluded_ep >= PLAN_MAX_EXCLUDED)
        return -1;
    r->plan.excluded_ep[r->plan.n_excluded_ep++] = (int)(r->ep - r->snap->endpoints);
    wait_reset(r);
    if (choose(r) == 0 || route_next_model(r) == 0 || plan_wait(r) == 0)
        return 0;
    return -1;
}

int route_granted(struct request *r)
{
    const struct snap_endpoint *e = r->ep;
    int idx = -1;
    for (int i = 0; i < e->n_replicas && idx < 0; i++)
        if (r->snap->replicas[e->first_replica + i].slot == r->hold.rep_slot)
            idx = e->first_replica + i;
    int64_t now = now_ms();
    /* The gate hands out a banned or open replica only when the waiter has no
     * other (R-HC-5: used anyway); its trial is taken below. */
    if (idx < 0 || excluded(r, idx) || !serving_replica_up(r, &r->snap->replicas[idx], now))
        return -1;
    const struct snap_replica *rep = &r->snap->replicas[idx];
    if (serving_take(r, rep) != 0)
        return -1;
    r->replica = rep;
    if (r->sticky && sticky_applies(r, e))
        sticky_commit(r, e, idx, r->sticky);
    return 0;
}

int route_next_model(struct request *r)
{
    /* A retry never waits for a wake: a candidate that sleeps is skipped. */
    while (!r->plan.proxy && r->plan.pos + 1 < r->plan.n_models) {
        r->plan.pos++;
        r->plan.n_excluded = 0;     /* another model: its replicas are all fresh */
        plan_routes(r);
        if (choose(r) == 0)
            return 0;
    }
    return -1;
}
