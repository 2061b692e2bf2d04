/* serving.c: the serving view over the snapshot and the shared state (R-HC-2, R-HC-5, R-LB-6). */
#include "serving.h"

#include "passive_share.h"

#include "log.h"
#include "util.h"

#include <string.h>

static void passive_conf_of(const struct conf *c, struct passive_conf *pc)
{
    pc->ban_ms = c->ban_ms;
    pc->circuit_failures = c->circuit_failures;
    pc->circuit_open_ms = c->circuit_open_ms;
    pc->half_open_trials = c->half_open_trials;
}

/* R-LB-6: the node's last GPU temperature, if fresh, is over the threshold. A
 * pushed reading lands in the shared state at once (the admin API writes it
 * there), a scraped one with healthd's round. */
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

int serving_replica_up(const struct request *r, const struct snap_replica *rep, int64_t now)
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

int serving_replica_open(const struct request *r, const struct snap_replica *rep, int64_t now)
{
    struct passive_state ps;
    struct passive_conf pc;
    passive_load(r->shm, rep->slot, &ps);
    passive_conf_of(r->conf, &pc);
    return passive_available(&ps, &pc, now);
}

int serving_endpoint_up(const struct request *r, const struct snap_endpoint *e, int64_t now)
{
    for (int i = 0; i < e->n_replicas; i++)
        if (serving_replica_up(r, &r->snap->replicas[e->first_replica + i], now))
            return 1;
    return 0;
}

int serving_take(struct request *r, const struct snap_replica *rep)
{
    if (rep->slot < 0)
        return 0;
    struct passive_state ps;
    struct passive_conf pc;
    passive_load(r->shm, rep->slot, &ps);
    if (ps.circuit == CIRCUIT_CLOSED)
        return 0;
    /* Half-open trials are counted under the pool lock so at most N go out. */
    passive_conf_of(r->conf, &pc);
    int rc = 0;
    if (shm_lock(r->shm) == 0) {
        passive_load(r->shm, rep->slot, &ps);
        rc = passive_on_pick(&ps, &pc, now_ms());
        if (rc > 0)
            passive_store(r->shm, rep->slot, &ps);
        shm_unlock(r->shm);
    }
    if (rc > 0 && ps.circuit == CIRCUIT_HALF_OPEN)
        r->trial_rep = rep;
    return rc < 0 ? -1 : 0;
}

void serving_unused(struct request *r, const struct snap_replica *rep)
{
    if (!rep || rep != r->trial_rep || rep->slot < 0)
        return;
    r->trial_rep = NULL;
    struct passive_state ps;
    if (shm_lock(r->shm) != 0)
        return;
    passive_load(r->shm, rep->slot, &ps);
    if (passive_on_unused(&ps))
        passive_store(r->shm, rep->slot, &ps);
    shm_unlock(r->shm);
}

void serving_report(struct request *r, const struct snap_replica *rep, int ok, const char *why)
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
        log_info("request %s: replica %lld (%s) answered while removed; back in service",
                 r->request_id, (long long)rep->id, rep->url);
    struct passive_state ps;
    struct passive_conf pc;
    passive_load(r->shm, rep->slot, &ps);
    if (ok && ps.circuit == CIRCUIT_CLOSED && ps.failures == 0)
        return;                 /* the common case touches no lock */
    passive_conf_of(r->conf, &pc);
    if (shm_lock(r->shm) != 0)
        return;
    passive_load(r->shm, rep->slot, &ps);
    int changed = 1;
    if (ok)
        changed = passive_on_success(&ps);
    else
        passive_on_failure(&ps, &pc, now_ms());
    passive_store(r->shm, rep->slot, &ps);
    shm_unlock(r->shm);
    /* the other gateway hosts ban it too, or take it back (issue 19) */
    if (changed)
        passive_share_tell(rep->id, &ps, !ok, r->snap->state_timeout_ms > 0 ? r->snap->state_timeout_ms : 200);
    if (!ok && ps.circuit != CIRCUIT_OPEN)
        log_warn("request %s: endpoint %s replica %lld (%s) failed: %s (%d in a row)", r->request_id,
                 r->snap->endpoints[rep->endpoint].name, (long long)rep->id, rep->url, why ? why : "error",
                 ps.failures);
    else if (!ok)   /* no running count here: identical lines collapse into "repeated N times" */
        log_warn("request %s: endpoint %s replica %lld (%s) failed: %s; circuit open: no request goes there"
                 " until it passes a trial (check the replica's server and network)", r->request_id,
                 r->snap->endpoints[rep->endpoint].name, (long long)rep->id, rep->url, why ? why : "error");
}
