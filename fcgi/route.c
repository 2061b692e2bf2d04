/* route.c: choose the route and replica for a request (SPEC §3-5, DESIGN.md stage 5). */
#include "route.h"

#include "auto.h"
#include "balance.h"
#include "sticky.h"
#include "log.h"
#include "pathcheck.h"
#include "pick.h"
#include "reply.h"
#include "util.h"
#include "wake.h"

#include <string.h>

#define MAX_CANDIDATES 64

void route_passive_conf(const struct conf *c, struct passive_conf *pc)
{
    pc->ban_ms = c->ban_ms;
    pc->circuit_failures = c->circuit_failures;
    pc->circuit_open_ms = c->circuit_open_ms;
    pc->half_open_trials = c->half_open_trials;
}

static void passive_read(const struct shm *shm, int slot, struct passive_state *p)
{
    memset(p, 0, sizeof *p);
    if (slot < 0)
        return;
    const struct shm_replica *s = &shm->r->replicas[slot];
    p->ban_until_ms = atomic_load(&s->ban_until_ms);
    p->open_until_ms = atomic_load(&s->open_until_ms);
    p->failures = atomic_load(&s->failures);
    p->trials = atomic_load(&s->trials);
    p->circuit = (enum circuit_state)atomic_load(&s->circuit);
}

static void passive_write(struct shm *shm, int slot, const struct passive_state *p)
{
    struct shm_replica *s = &shm->r->replicas[slot];
    atomic_store(&s->ban_until_ms, p->ban_until_ms);
    atomic_store(&s->open_until_ms, p->open_until_ms);
    atomic_store(&s->failures, p->failures);
    atomic_store(&s->trials, p->trials);
    atomic_store(&s->circuit, (int)p->circuit);
}

static int excluded(const struct request *r, int replica_index)
{
    for (int i = 0; i < r->n_excluded; i++)
        if (r->excluded[i] == replica_index)
            return 1;
    return 0;
}

/* R-LB-6: the node's last GPU temperature, if fresh, is over the threshold. */
static int node_hot(const struct request *r, const struct snap_node *nd, int64_t now)
{
    if (nd->slot < 0)
        return 0;
    const struct shm_node *s = &r->shm->r->nodes[nd->slot];
    int64_t at = atomic_load(&s->temp_ms);
    if (at <= 0 || now - at > r->conf->temperature_stale_ms)
        return 0;
    return atomic_load(&s->temp_decicelsius) > r->snap->gpu_temp_threshold_deci;
}

int route_replica_serving(const struct request *r, const struct snap_replica *rep, int64_t now)
{
    const struct shm_replica *s = rep->slot >= 0 ? &r->shm->r->replicas[rep->slot] : NULL;
    if (rep->state == REPLICA_DISABLED)
        return 0;
    /* R-WAKE-1: a sleeping replica serves once a wake saw it ready. */
    if (rep->state == REPLICA_SLEEPING && !(s && atomic_load(&s->awake)))
        return 0;
    /* R-HC-2: sluice-healthd's word in the shared state is newer than the
     * snapshot's; with none (a fresh state file) the database's decides (R-HC-4). */
    int rm = s ? atomic_load(&s->removed) : SHM_RM_UNKNOWN;
    if (rm == SHM_RM_REMOVED || (rm == SHM_RM_UNKNOWN && !rep->healthy))
        return 0;
    if (rep->node >= 0) {
        const struct snap_node *nd = &r->snap->nodes[rep->node];
        /* An offline node is down; a borrowed one lends its GPUs elsewhere. */
        if (nd->status != NODE_ONLINE || node_hot(r, nd, now))
            return 0;
    }
    return 1;
}

/* May this replica take the request? strict also honours bans and circuits. */
static int replica_usable(const struct request *r, int idx, int strict, int64_t now)
{
    const struct snap_replica *rep = &r->snap->replicas[idx];
    if (excluded(r, idx) || !route_replica_serving(r, rep, now))
        return 0;
    if (!strict)
        return 1;
    struct passive_state ps;
    struct passive_conf pc;
    passive_read(r->shm, rep->slot, &ps);
    route_passive_conf(r->conf, &pc);
    return passive_available(&ps, &pc, now);
}

static int endpoint_usable(const struct request *r, const struct snap_endpoint *e, int strict, int64_t now)
{
    for (int i = 0; i < e->n_replicas; i++)
        if (replica_usable(r, e->first_replica + i, strict, now))
            return 1;
    return 0;
}

int route_endpoint_serving(const struct request *r, const struct snap_endpoint *e)
{
    return endpoint_usable(r, e, 0, now_ms());
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

/* Takes the replica; -1 when its circuit's last half-open trial went to
 * another request since the choice was made (choose again without it). */
static int hand_out(struct request *r, int replica_index, int strict)
{
    const struct snap_replica *rep = &r->snap->replicas[replica_index];
    r->replica = rep;
    if (rep->slot < 0)
        return 0;
    struct passive_state ps;
    struct passive_conf pc;
    passive_read(r->shm, rep->slot, &ps);
    if (ps.circuit == CIRCUIT_CLOSED)
        return 0;
    /* Half-open trials are counted under the pool lock so at most N go out. */
    route_passive_conf(r->conf, &pc);
    int rc = 0;
    if (shm_lock(r->shm) == 0) {
        passive_read(r->shm, rep->slot, &ps);
        rc = passive_on_pick(&ps, &pc, now_ms());
        if (rc > 0)
            passive_write(r->shm, rep->slot, &ps);
        shm_unlock(r->shm);
    }
    if (rc < 0 && strict && r->n_excluded < (int)(sizeof r->excluded / sizeof r->excluded[0])) {
        r->excluded[r->n_excluded++] = replica_index;
        return -1;
    }
    return 0;
}

static int route_proxy(struct request *r, int reply_on_fail)
{
    char name[129];
    const char *rest;
    enum pathcheck_result pr = pathcheck_proxy(r->uri, name, sizeof name, &rest);
    if (pr != PATH_OK) {
        if (reply_on_fail)
            reply_error(r, pr == PATH_NO_ENDPOINT ? "endpoint_not_found" : "invalid_path", NULL, NULL);
        return -1;
    }
    const struct snap_endpoint *e = snapshot_endpoint_by_name(r->snap, name);
    int visible = e && (r->caller.endpoint >= 0 ? &r->snap->endpoints[r->caller.endpoint] == e
                                                : e->tenant_id == r->caller.tenant_id ||
                                                      r->caller.role == ROLE_OPERATOR);
    if (!visible) {
        if (reply_on_fail)
            reply_error(r, "endpoint_not_found", arena_printf(r->arena, "no endpoint named %s", name), NULL);
        return -1;
    }
    int idx, strict, woke = 0;
    r->upstream_path = rest;            /* affinity looks at the pass-through path */
again:;
    int64_t now = now_ms();
    do {
        strict = 1;
        idx = choose_replica(r, e, 1, now);
        if (idx < 0) {
            strict = 0;
            idx = choose_replica(r, e, 0, now);
        }
    } while (idx >= 0 && hand_out(r, idx, strict) != 0);
    /* R-WAKE-1: nothing serves but replicas sleep: wake them and choose again. */
    if (idx < 0 && reply_on_fail && !woke && wake_needed(r, e)) {
        if (wake_endpoint(r, e) != 0)
            return -1;
        woke = 1;
        goto again;
    }
    if (idx < 0) {
        if (reply_on_fail)
            reply_error(r, "no_backends_available", NULL, NULL);
        return -1;
    }
    r->ep = e;
    if (r->sticky)
        sticky_commit(r, e, idx, r->sticky);
    return 0;
}

int route_choose(struct request *r, int reply_on_fail)
{
    if (r->kind == REQ_PROXY)
        return route_proxy(r, reply_on_fail);
    /* R-AUTO: "auto" becomes the plan's first candidate model here. */
    if (!r->auto_plan && strcmp(r->model, "auto") == 0 && auto_plan_request(r) != 0)
        return -1;
    const struct snap_route *first;
    int n = scoped_routes(r, &first);
    const struct snap_route *cands[MAX_CANDIDATES];
    int nc = 0;
    for (int i = 0; i < n && nc < MAX_CANDIDATES; i++) {
        /* R-AUTH-5: an endpoint key reaches only its own endpoint's routes. */
        if (first[i].endpoint < 0 || (r->caller.endpoint >= 0 && first[i].endpoint != r->caller.endpoint))
            continue;
        cands[nc++] = &first[i];
    }
    if (nc == 0) {
        if (reply_on_fail)
            reply_error(r, "model_not_found",
                        arena_printf(r->arena, "The model `%s` does not exist or you do not have access to it.", r->model),
                        "model");
        return -1;
    }
    int woke = 0;
again:;
    int64_t now = now_ms();
    /* First pass honours bans and circuits; if that leaves nothing, use them
     * anyway rather than fail (R-HC-5). */
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
        if (hand_out(r, idx, strict) != 0) {
            strict++;           /* the same pass again, without that replica */
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
    /* R-WAKE-1: a route exists but its replicas sleep: wake the first such
     * endpoint in route order (one wake for the pool, R-WAKE-3), then choose
     * again. A retry (reply_on_fail 0) never waits for a wake. */
    for (int i = 0; reply_on_fail && !woke && i < nc; i++) {
        const struct snap_endpoint *e = &r->snap->endpoints[cands[i]->endpoint];
        if (!wake_needed(r, e))
            continue;
        if (wake_endpoint(r, e) != 0)
            return -1;
        woke = 1;
        goto again;
    }
    if (reply_on_fail)
        reply_error(r, "no_backends_available",
                    arena_printf(r->arena, "No healthy backend is available for model `%s`.", r->model), NULL);
    return -1;
}

void route_report(struct request *r, const struct snap_replica *rep, int ok)
{
    if (!rep || rep->slot < 0)
        return;
    /* R-HC-2: a real success on a replica sluice-healthd removed brings it
     * back at once; healthd records the recovery (database, alert, audit) on
     * its next round. */
    _Atomic int *removed = &r->shm->r->replicas[rep->slot].removed;
    int expect = SHM_RM_REMOVED;
    if (ok && atomic_load(removed) == SHM_RM_REMOVED &&
        atomic_compare_exchange_strong(removed, &expect, SHM_RM_DATA_OK))
        log_info("request %s: replica %lld answered while removed; back in service",
                 r->request_id, (long long)rep->id);
    struct passive_state ps;
    struct passive_conf pc;
    passive_read(r->shm, rep->slot, &ps);
    if (ok && ps.circuit == CIRCUIT_CLOSED && ps.failures == 0)
        return;                 /* the common case touches no lock */
    route_passive_conf(r->conf, &pc);
    if (shm_lock(r->shm) != 0)
        return;
    passive_read(r->shm, rep->slot, &ps);
    if (ok)
        passive_on_success(&ps);
    else
        passive_on_failure(&ps, &pc, now_ms());
    passive_write(r->shm, rep->slot, &ps);
    shm_unlock(r->shm);
    if (!ok)
        log_warn("request %s: replica %lld failed (%d in a row)%s", r->request_id, (long long)rep->id,
                 ps.failures, ps.circuit == CIRCUIT_OPEN ? "; circuit open" : "");
}
