/* gate.c: places under a cap and the pool-wide wait queue; see gate.h. */
#include "gate.h"

#include "fairq.h"
#include "redis_bus.h"
#include "util.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define OFF_REP offsetof(struct shm_proc, rep_held)
#define OFF_EP offsetof(struct shm_proc, ep_held)
#define OFF_QUOTA offsetof(struct shm_proc, quota_active)
#define TAG_PROBES 32
#define TAG_TENANT 1
#define TAG_USER 2
#define TAG_TENANT_VNOW 3               /* a tenant's own virtual time, for its users' tags */
#define REMOTE_FULL_MS 500              /* a cap full across hosts is not tried here for this long, unless news */

/* ---- futex on a shared mapping: a sleeper of one process, a waker of another */

static void futex_wait(_Atomic uint32_t *word, uint32_t val, int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* ---- room ---------------------------------------------------------------- */

/* Did the count across hosts refuse this cap a moment ago? */
static int remote_full(const _Atomic int64_t *until)
{
    int64_t u = atomic_load_explicit(until, memory_order_relaxed);
    return u != 0 && mono_ms() < u;
}

static int quota_room(const struct shm *s, int q)
{
    if (q < 0)
        return 1;
    int cap = atomic_load(&s->r->quotas[q].cap);
    return cap <= 0 || (shm_row_sum(s, OFF_QUOTA, q) < cap && !remote_full(&s->r->quotas[q].remote_full_ms));
}

static int ep_room(const struct shm *s, int ep)
{
    if (ep < 0)
        return 1;
    int cap = atomic_load(&s->r->endpoints[ep].cap);
    return cap <= 0 || (shm_row_sum(s, OFF_EP, ep) < cap && !remote_full(&s->r->endpoints[ep].remote_full_ms));
}

/* Free places on a replica; INT_MAX when it has no cap. */
static int rep_free(const struct shm *s, int rep)
{
    int cap = atomic_load(&s->r->replicas[rep].cap);
    if (cap <= 0)
        return INT_MAX;
    return remote_full(&s->r->replicas[rep].remote_full_ms) ? 0 : cap - shm_row_sum(s, OFF_REP, rep);
}

/* Does anyone wait who could use a place of a's endpoint or quota layers? (A
 * release then runs a grant pass; a false yes costs one pass.) */
static int queued_ahead(const struct shm *s, const struct gate_ask *a)
{
    if (a->ep_slot >= 0 && atomic_load(&s->r->endpoints[a->ep_slot].waiting) > 0)
        return 1;
    for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
        if (a->quota_slot[i] >= 0 && atomic_load(&s->r->quotas[a->quota_slot[i]].waiting) > 0)
            return 1;
    return 0;
}

int gate_full_part(const struct shm *s, const struct gate_ask *a, int rep_slot)
{
    for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
        if (!quota_room(s, a->quota_slot[i]))
            return 1 + i;
    if ((rep_slot >= 0 && rep_free(s, rep_slot) <= 0) || !ep_room(s, a->ep_slot))
        return -1;
    return 0;
}

int gate_room(const struct shm *s, const struct gate_ask *a, int rep_slot)
{
    return gate_full_part(s, a, rep_slot) == 0;
}

/* ---- fairness tags ------------------------------------------------------- */

static uint64_t tag_key(int ep, int kind, int64_t id)
{
    uint64_t k = ((uint64_t)(uint32_t)ep << 40) ^ ((uint64_t)kind << 60) ^ (uint64_t)id * 0x9e3779b97f4a7c15ULL;
    return k ? k : 1;
}

/* The finish tag of (ep, kind, id); 0 when it has none (it starts at vnow). */
static int64_t tag_finish(const struct shm_gate *g, uint64_t key)
{
    for (int k = 0; k < TAG_PROBES; k++) {
        const struct shm_fair *e = &g->fair[(key + (uint64_t)k) % SHM_FAIR_SLOTS];
        if (e->key == key)
            return e->finish;
        if (e->key == 0)
            return 0;
    }
    return 0;
}

/* Sets a finish tag, reusing the least recently used probed entry when the
 * table is full around it (a forgotten tag only forgets credit, nothing held). */
static void tag_set(struct shm_gate *g, uint64_t key, int64_t finish, int64_t now)
{
    struct shm_fair *victim = NULL;
    for (int k = 0; k < TAG_PROBES; k++) {
        struct shm_fair *e = &g->fair[(key + (uint64_t)k) % SHM_FAIR_SLOTS];
        if (e->key == key || e->key == 0) {
            victim = e;
            break;
        }
        if (!victim || e->used_ms < victim->used_ms)
            victim = e;
    }
    victim->key = key;
    victim->finish = finish;
    victim->used_ms = now;
}

struct tags {
    uint64_t tenant_key, user_key, user_vnow_key;
    int64_t tenant_start, user_start, user_vnow;
};

/* Two levels of start-time fair queueing: tenants against the endpoint's
 * virtual time, a tenant's users against that tenant's own (each level's
 * virtual time is the start tag last served at that level, so a user's tag
 * and its tenant's clock move at the same pace). */
static void tags_of(const struct shm_gate *g, int ep, int64_t tenant, int64_t user, struct tags *t)
{
    int64_t vnow = ep >= 0 ? g->vnow[ep] : 0;
    t->tenant_key = tag_key(ep, TAG_TENANT, tenant);
    t->user_key = tag_key(ep, TAG_USER, user);
    t->user_vnow_key = tag_key(ep, TAG_TENANT_VNOW, tenant);
    t->tenant_start = fairq_start(tag_finish(g, t->tenant_key), vnow);
    t->user_vnow = tag_finish(g, t->user_vnow_key);
    t->user_start = fairq_start(tag_finish(g, t->user_key), t->user_vnow);
}

/* The tags as they were before a serving, to put back when the place it was for
 * is refused across hosts (issue 19: a refusal must not cost the tenant its share). */
struct tags_undo {
    int64_t tenant, user, user_vnow, vnow, tenant_start, user_start;
};

static void tags_keep(const struct shm_gate *g, int ep, const struct tags *t, struct tags_undo *u)
{
    u->tenant = tag_finish(g, t->tenant_key);
    u->user = tag_finish(g, t->user_key);
    u->user_vnow = t->user_vnow;
    u->vnow = ep >= 0 ? g->vnow[ep] : 0;
    u->tenant_start = t->tenant_start;
    u->user_start = t->user_start;
}

/* Puts back what a serving of (ep, tenant, user) set, where nobody moved it since. */
static void tags_unserve(struct shm_gate *g, int ep, int64_t tenant, int64_t user, int weight,
                         const struct tags_undo *u, int64_t now)
{
    uint64_t tk = tag_key(ep, TAG_TENANT, tenant), uk = tag_key(ep, TAG_USER, user),
             vk = tag_key(ep, TAG_TENANT_VNOW, tenant);
    if (tag_finish(g, tk) == fairq_finish(u->tenant_start, weight))
        tag_set(g, tk, u->tenant, now);
    if (tag_finish(g, uk) == fairq_finish(u->user_start, 1))
        tag_set(g, uk, u->user, now);
    if (u->user_start > u->user_vnow && tag_finish(g, vk) == u->user_start)
        tag_set(g, vk, u->user_vnow, now);
    if (ep >= 0 && g->vnow[ep] == u->tenant_start && u->vnow < u->tenant_start)
        g->vnow[ep] = u->vnow;
}

/* One request of (tenant, user) is served on ep: its tags move on. */
static void tags_served(struct shm_gate *g, int ep, const struct tags *t, int weight, int64_t now)
{
    tag_set(g, t->tenant_key, fairq_finish(t->tenant_start, weight), now);
    tag_set(g, t->user_key, fairq_finish(t->user_start, 1), now);
    if (t->user_start > t->user_vnow)
        tag_set(g, t->user_vnow_key, t->user_start, now);
    if (ep >= 0 && t->tenant_start > g->vnow[ep])
        g->vnow[ep] = t->tenant_start;
}

/* ---- the lock and the counts --------------------------------------------- */

static void waiting_add(struct shm *s, const struct shm_waiter *w, int d)
{
    if (w->ep_slot >= 0)
        atomic_fetch_add(&s->r->endpoints[w->ep_slot].waiting, d);
    for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
        if (w->quota_slot[i] >= 0)
            atomic_fetch_add(&s->r->quotas[w->quota_slot[i]].waiting, d);
    if (w->queue_quota >= 0)
        atomic_fetch_add(&s->r->quotas[w->queue_quota].queued, d);
}

/* After a holder died inside the lock: the queue lengths are counted again
 * from the entries (the places themselves are in the process rows). */
static void recount(struct shm *s)
{
    for (int i = 0; i < SHM_MAX_ENDPOINTS; i++)
        atomic_store(&s->r->endpoints[i].waiting, 0);
    for (int i = 0; i < SHM_MAX_QUOTAS; i++) {
        atomic_store(&s->r->quotas[i].waiting, 0);
        atomic_store(&s->r->quotas[i].queued, 0);
    }
    struct shm_gate *g = &s->r->gate;
    for (int i = 0; i < g->hi; i++)
        if (atomic_load(&g->waiters[i].state) == WAIT_WAITING)
            waiting_add(s, &g->waiters[i], 1);
}

static int gate_lock(struct shm *s)
{
    int died = 0;
    if (shm_robust_lock(&s->r->gate.lock, &died) != 0)
        return -1;
    if (died || s->r->gate.recount) {
        recount(s);
        s->r->gate.recount = 0;
    }
    return 0;
}

static void gate_unlock(struct shm *s) { pthread_mutex_unlock(&s->r->gate.lock); }

static void held_add(struct shm *s, int row, int rep, int ep, const int32_t *quota, int d)
{
    struct shm_proc *p = &s->r->procs[row];
    if (rep >= 0)
        atomic_fetch_add(&p->rep_held[rep], d);
    if (ep >= 0)
        atomic_fetch_add(&p->ep_held[ep], d);
    for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
        if (quota[i] >= 0)
            atomic_fetch_add(&p->quota_active[quota[i]], d);
}

static void grant_pass(struct shm *s);
static void release_here(struct shm *s, struct gate_hold *h);

/* ---- the count across hosts (gate_redis.h) -------------------------------- */

/* The shared-state mark of a cap the hold counts against. */
static _Atomic int64_t *mark_of(struct shm *s, const struct gate_hold *h, const struct gate_cap *c)
{
    if (c->kind == 'r')
        return &s->r->replicas[h->rep_slot].remote_full_ms;
    if (c->kind == 'e')
        return &s->r->endpoints[h->ep_slot].remote_full_ms;
    for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
        if (h->quota_slot[i] >= 0 && atomic_load(&s->r->quotas[h->quota_slot[i]].id) == c->id)
            return &s->r->quotas[h->quota_slot[i]].remote_full_ms;
    return NULL;
}

static void cap_add(struct gate_cap *caps, int *n, char kind, int64_t id, int cap)
{
    if (cap > 0 && id > 0 && *n < GATE_REDIS_MAX_CAPS)
        caps[(*n)++] = (struct gate_cap){kind, id, cap};
}

/* The caps a place of h counts against (those set now), in caps. */
static int caps_of(const struct shm *s, const struct gate_hold *h, struct gate_cap *caps)
{
    int n = 0;
    struct shm_region *r = s->r;
    if (h->rep_slot >= 0)
        cap_add(caps, &n, 'r', atomic_load(&r->replicas[h->rep_slot].id), atomic_load(&r->replicas[h->rep_slot].cap));
    if (h->ep_slot >= 0)
        cap_add(caps, &n, 'e', atomic_load(&r->endpoints[h->ep_slot].id), atomic_load(&r->endpoints[h->ep_slot].cap));
    for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
        if (h->quota_slot[i] >= 0)
            cap_add(caps, &n, 'q', atomic_load(&r->quotas[h->quota_slot[i]].id),
                    atomic_load(&r->quotas[h->quota_slot[i]].cap));
    return n;
}

_Static_assert(offsetof(struct shm_replica, remote_clears) == offsetof(struct shm_replica, remote_full_ms) + 8 &&
               offsetof(struct shm_endpoint, remote_clears) == offsetof(struct shm_endpoint, remote_full_ms) + 8 &&
               offsetof(struct shm_quota, remote_clears) == offsetof(struct shm_quota, remote_full_ms) + 8,
               "a mark's clear count is the field after it");

/* The mark's clear count of a mark pointer (the field after it). */
static _Atomic int64_t *clears_of(_Atomic int64_t *mark)
{
    return mark + 1;
}

/* A place just taken or granted here is taken across hosts too. 0: held (or the
 * store did not answer: this host's count alone); 1: full across hosts, marked,
 * nothing taken there (the caller gives the place back here). */
static int take_across(struct shm *s, struct gate_hold *h)
{
    h->n_across = 0;
    if (!gate_redis_on())
        return 0;
    struct gate_cap caps[GATE_REDIS_MAX_CAPS];
    int n = caps_of(s, h, caps);
    if (n == 0)
        return 0;
    int64_t clears[GATE_REDIS_MAX_CAPS];
    for (int i = 0; i < n; i++) {
        _Atomic int64_t *mark = mark_of(s, h, &caps[i]);
        clears[i] = mark ? atomic_load(clears_of(mark)) : 0;
    }
    int rc = gate_redis_take(caps, n, h->lease, sizeof h->lease);
    if (rc == 0) {
        memcpy(h->across, caps, sizeof caps[0] * (size_t)n);
        h->n_across = n;
    }
    if (rc <= 0)
        return 0;
    /* A clear since the refusal was asked for (a release here, or its news) is
     * newer than the refusal: the mark would hide a free place. */
    _Atomic int64_t *mark = mark_of(s, h, &caps[rc - 1]);
    if (mark) {
        int64_t until = mono_ms() + REMOTE_FULL_MS;
        atomic_store(mark, until);
        if (atomic_load(clears_of(mark)) != clears[rc - 1])
            atomic_compare_exchange_strong(mark, &until, 0);    /* a clear came meanwhile: it wins */
    }
    return 1;
}

/* Clears a mark; 1 when it was set. */
static int mark_clear(_Atomic int64_t *mark)
{
    atomic_fetch_add(clears_of(mark), 1);
    return atomic_exchange(mark, 0) != 0;
}

static void release_across_now(struct shm *s, struct gate_hold *h)
{
    gate_redis_release(h->across, h->n_across, h->lease);
    for (int i = 0; i < h->n_across; i++) {
        _Atomic int64_t *mark = mark_of(s, h, &h->across[i]);
        if (mark)
            mark_clear(mark);
    }
    h->n_across = 0;
}

/* ---- releases off the stream loop ----------------------------------------- */

/* A thread that must never wait on Redis (the stream loop) hands releases
 * across hosts, with the local release after them, to one thread of its own:
 * the order stays (across first, so the waiter handed the place finds it free
 * there too), and the loop does not wait. */
static _Thread_local int no_waiting;
#define RELEASE_RING 256
static struct {
    struct shm *s;
    struct gate_hold h;
} release_ring[RELEASE_RING];
static int ring_head, ring_len, releaser_started;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ring_cond = PTHREAD_COND_INITIALIZER;

void gate_thread_never_waits(void) { no_waiting = 1; }

static void *releaser_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&ring_lock);
        while (!ring_len)
            pthread_cond_wait(&ring_cond, &ring_lock);
        struct shm *s = release_ring[ring_head].s;
        struct gate_hold h = release_ring[ring_head].h;
        ring_head = (ring_head + 1) % RELEASE_RING;
        ring_len--;
        pthread_mutex_unlock(&ring_lock);
        release_across_now(s, &h);
        release_here(s, &h);
    }
    return NULL;
}

/* 1 when the release was handed to the releaser, or (its ring full) done here
 * without Redis; h is given back either way. 0: the caller may wait. */
static int release_later(struct shm *s, struct gate_hold *h)
{
    if (!no_waiting || !releaser_started)
        return 0;
    int queued = 0;
    pthread_mutex_lock(&ring_lock);
    if (ring_len < RELEASE_RING) {
        int at = (ring_head + ring_len) % RELEASE_RING;
        release_ring[at].s = s;
        release_ring[at].h = *h;
        ring_len++;
        pthread_cond_signal(&ring_cond);
        queued = 1;
    }
    pthread_mutex_unlock(&ring_lock);
    if (!queued) {
        /* The releaser is that far behind (Redis slow or down): the loop still
         * does not wait; the places across hosts end with their lease. */
        gate_redis_abandon(h->across, h->n_across, h->lease);
        release_here(s, h);
    }
    h->held = 0;
    h->n_across = 0;
    return 1;
}

/* The news of a place freed on some host: its caps may be handed out here
 * again. Only a cap marked here can hold a waiter back, so only then a poke. */
static void on_news(const char *msg, size_t n, void *arg)
{
    struct shm *s = arg;
    struct gate_cap caps[8];
    int k = gate_news_parse(msg, n, caps, 8);
    int cleared = 0;
    for (int i = 0; i < k; i++) {
        int slot = caps[i].kind == 'r'   ? shm_replica_find(s, caps[i].id)
                   : caps[i].kind == 'e' ? shm_endpoint_find(s, caps[i].id)
                                         : shm_quota_find(s, caps[i].id);
        if (slot >= 0)
            cleared |= mark_clear(caps[i].kind == 'r'   ? &s->r->replicas[slot].remote_full_ms
                                  : caps[i].kind == 'e' ? &s->r->endpoints[slot].remote_full_ms
                                                        : &s->r->quotas[slot].remote_full_ms);
    }
    if (cleared && s->r->gate.hi > 0)
        gate_poke(s);
}

int gate_share_start(struct shm *s, const char *url)
{
    if (!url || !*url)
        return 0;
    if (gate_redis_start(url) != 0 || redis_bus_listen(on_news, s) != 0 || redis_bus_start(url) != 0)
        return -1;
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    releaser_started = pthread_create(&t, &at, releaser_main, NULL) == 0;
    pthread_attr_destroy(&at);
    return 0;
}

/* ---- taking a place ------------------------------------------------------ */

int gate_take(struct shm *s, const struct gate_ask *a, int rep_slot, struct gate_hold *h)
{
    struct tags_undo undo;
    h->held = 0;
    if (s->row < 0)
        return 1;                   /* no row to count in: the cap cannot be kept (logged at start) */
    if (gate_lock(s) != 0)
        return 1;
    /* Waiters first: after the pass no waiter can use a place that is still
     * free, so a newcomer taking it jumps nobody (and a restricted waiter, or
     * one held back by a full layer, does not block its endpoint). */
    if (s->r->gate.hi > 0)
        grant_pass(s);
    int ok = rep_free(s, rep_slot) > 0 && ep_room(s, a->ep_slot);
    for (int i = 0; ok && i < SHM_WAIT_QUOTAS; i++)
        ok = quota_room(s, a->quota_slot[i]);
    if (ok) {
        int32_t q[SHM_WAIT_QUOTAS];
        for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
            q[i] = a->quota_slot[i];
        held_add(s, s->row, rep_slot, a->ep_slot, q, 1);
        struct tags t;
        tags_of(&s->r->gate, a->ep_slot, a->tenant_id, a->user_id, &t);
        tags_keep(&s->r->gate, a->ep_slot, &t, &undo);
        tags_served(&s->r->gate, a->ep_slot, &t, a->weight, now_ms());
        h->held = 1;
        h->seq = 0;
        h->rep_slot = rep_slot;
        h->ep_slot = a->ep_slot;
        h->n_across = 0;
        for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
            h->quota_slot[i] = a->quota_slot[i];
    }
    gate_unlock(s);
    if (ok && take_across(s, h)) {
        if (gate_lock(s) == 0) {    /* not served after all: its tags as they were */
            tags_unserve(&s->r->gate, a->ep_slot, a->tenant_id, a->user_id, a->weight, &undo, now_ms());
            gate_unlock(s);
        }
        release_here(s, h);         /* full across hosts: this host's place goes back (or on) */
        return 0;
    }
    return ok;
}

/* ---- handing places to waiters ------------------------------------------- */

static int owner_alive(const struct shm *s, const struct shm_waiter *w)
{
    return w->row >= 0 && w->row < SHM_MAX_PROCS && atomic_load(&s->r->procs[w->row].pid) == w->pid;
}

static int excluded(const struct shm_waiter *w, int rep)
{
    for (int i = 0; i < SHM_WAIT_EXCLUDED; i++)
        if (w->excluded[i] == rep)
            return 1;
    return 0;
}

/* Would the shared state hand this replica out: not removed by health checks,
 * not banned, circuit closed (the waiter's own serving view has the last word). */
static int rep_serving(const struct shm *s, int rep, int64_t now)
{
    const struct shm_replica *r = &s->r->replicas[rep];
    return atomic_load(&r->removed) != SHM_RM_REMOVED && atomic_load(&r->circuit) == CIRCUIT_CLOSED &&
           atomic_load(&r->ban_until_ms) <= now;
}

/* The replica with the most free places the waiter may have, or -1. */
static int room_for(const struct shm *s, const struct shm_waiter *w, int64_t now)
{
    if (!ep_room(s, w->ep_slot))
        return -1;
    for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
        if (!quota_room(s, w->quota_slot[i]))
            return -1;
    const struct shm_endpoint *e = &s->r->endpoints[w->ep_slot];
    int n = atomic_load(&e->n_reps);
    /* Replicas that serve first; only when none of the waiter's does (all banned
     * or open) one that is merely not removed, as R-HC-5 uses them anyway, so a
     * circuit's trial can come from the queue too. */
    for (int healthy = 1; healthy >= 0; healthy--) {
        int best = -1, best_free = 0, candidates = 0;
        for (int i = 0; i < n && i < SHM_EP_REPLICAS; i++) {
            int rep = atomic_load(&e->rep_slots[i]);
            if (rep < 0 || rep >= SHM_MAX_REPLICAS || excluded(w, rep) || (w->only_rep >= 0 && rep != w->only_rep))
                continue;
            if (healthy ? !rep_serving(s, rep, now) : atomic_load(&s->r->replicas[rep].removed) == SHM_RM_REMOVED)
                continue;
            candidates++;
            int f = rep_free(s, rep);
            if (f > best_free) {
                best = rep;
                best_free = f;
            }
        }
        if (candidates)
            return best;
    }
    return -1;
}

static void entry_free(struct shm_gate *g, struct shm_waiter *w)
{
    atomic_store(&w->state, WAIT_FREE);
    while (g->hi > 0 && atomic_load(&g->waiters[g->hi - 1].state) == WAIT_FREE)
        g->hi--;
}

/* Under the lock: hands free places to the best waiters that can use them,
 * one at a time, until none can; drops the entries of processes gone. */
static void grant_pass(struct shm *s)
{
    struct shm_gate *g = &s->r->gate;
    int64_t now = now_ms();
    for (;;) {
        int best = -1, best_rep = -1;
        struct fairq_cand pair[2];
        struct tags best_tags = {0};
        for (int i = 0; i < g->hi; i++) {
            struct shm_waiter *w = &g->waiters[i];
            uint32_t st = atomic_load(&w->state);
            if (st == WAIT_FREE)
                continue;
            if (!owner_alive(s, w)) {
                if (st == WAIT_WAITING)
                    waiting_add(s, w, -1);
                entry_free(g, w);
                continue;
            }
            if (st != WAIT_WAITING)
                continue;
            int rep = room_for(s, w, now);
            if (rep < 0)
                continue;
            struct tags t;
            tags_of(g, w->ep_slot, w->tenant_id, w->user_id, &t);
            struct fairq_cand c = {w->priority, w->tenant_id, t.tenant_start, t.user_start, w->seq};
            pair[1] = c;
            if (best < 0 || fairq_pick(pair, 2) == 1) {
                pair[0] = c;
                best = i;
                best_rep = rep;
                best_tags = t;
            }
        }
        if (best < 0)
            return;
        struct shm_waiter *w = &g->waiters[best];
        held_add(s, w->row, best_rep, w->ep_slot, w->quota_slot, 1);
        struct tags_undo u;
        tags_keep(g, w->ep_slot, &best_tags, &u);
        w->undo_tenant = u.tenant, w->undo_user = u.user, w->undo_user_vnow = u.user_vnow;
        w->undo_vnow = u.vnow, w->undo_tenant_start = u.tenant_start, w->undo_user_start = u.user_start;
        tags_served(g, w->ep_slot, &best_tags, w->weight, now);
        waiting_add(s, w, -1);
        w->granted_rep = best_rep;
        atomic_store(&w->state, WAIT_GRANTED);
        futex_wake(&w->state);
    }
}

/* Gives a place back on this host only: to the best waiter that can use it. */
static void release_here(struct shm *s, struct gate_hold *h)
{
    h->held = 0;
    int32_t q[SHM_WAIT_QUOTAS];
    for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
        q[i] = h->quota_slot[i];
    /* Sequentially consistent with the waiter's count-then-check: either it
     * sees this place free, or this sees it waiting and hands the place over. */
    held_add(s, s->row, h->rep_slot, h->ep_slot, q, -1);
    struct gate_ask a = {.ep_slot = h->ep_slot};
    for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
        a.quota_slot[i] = h->quota_slot[i];
    if (!queued_ahead(s, &a) || gate_lock(s) != 0)
        return;
    grant_pass(s);
    gate_unlock(s);
}

void gate_release(struct shm *s, struct gate_hold *h)
{
    if (!h->held)
        return;
    if (h->n_across) {
        if (release_later(s, h))
            return;
        release_across_now(s, h);   /* first, so the waiter this hands it to finds it free there too */
    }
    release_here(s, h);
}

void gate_poke(struct shm *s)
{
    if (gate_lock(s) != 0)
        return;
    grant_pass(s);
    gate_unlock(s);
}

/* ---- the queue ----------------------------------------------------------- */

enum gate_queued gate_enqueue(struct shm *s, const struct gate_ask *a, int queue_max, int64_t seq_keep,
                              const int *excl, int n_excl, int *ticket)
{
    *ticket = -1;
    if (s->row < 0 || a->ep_slot < 0)
        return GATE_NO_ENTRY;
    if (gate_lock(s) != 0)
        return GATE_NO_ENTRY;
    struct shm_gate *g = &s->r->gate;
    enum gate_queued rc = GATE_QUEUED;
    if (g->hi > 0)
        grant_pass(s);              /* the lengths below then count only who still waits */
    if (atomic_load(&s->r->endpoints[a->ep_slot].waiting) >= queue_max)
        rc = GATE_QUEUE_FULL;
    if (rc == GATE_QUEUED && a->queue_quota >= 0) {
        const struct shm_quota *q = &s->r->quotas[a->queue_quota];
        int qmax = atomic_load(&q->queue_max);
        if (atomic_load(&q->queued) >= (qmax >= 0 ? qmax : queue_max))
            rc = GATE_QUOTA_QUEUE_FULL;
    }
    int i = 0;
    while (rc == GATE_QUEUED && i < SHM_MAX_WAITERS && atomic_load(&g->waiters[i].state) != WAIT_FREE)
        i++;
    if (rc == GATE_QUEUED && i == SHM_MAX_WAITERS)
        rc = GATE_NO_ENTRY;
    if (rc == GATE_QUEUED) {
        struct shm_waiter *w = &g->waiters[i];
        w->row = s->row;
        w->pid = atomic_load(&s->r->procs[s->row].pid);
        w->ep_slot = a->ep_slot;
        for (int k = 0; k < SHM_WAIT_QUOTAS; k++)
            w->quota_slot[k] = a->quota_slot[k];
        w->queue_quota = a->queue_quota;
        w->priority = a->priority;
        w->weight = a->weight;
        w->tenant_id = a->tenant_id;
        w->user_id = a->user_id;
        w->granted_rep = -1;
        w->only_rep = a->only_rep;
        for (int k = 0; k < SHM_WAIT_EXCLUDED; k++)
            w->excluded[k] = k < n_excl ? excl[k] : -1;
        w->seq = seq_keep > 0 ? seq_keep : ++g->seq;
        if (i >= g->hi)
            g->hi = i + 1;
        waiting_add(s, w, 1);
        atomic_store(&w->state, WAIT_WAITING);
        *ticket = i;
        grant_pass(s);
    }
    gate_unlock(s);
    return rc;
}

static void hold_of(const struct shm_waiter *w, struct gate_hold *h)
{
    h->held = 1;
    h->n_across = 0;
    h->seq = w->seq;
    h->rep_slot = w->granted_rep;
    h->ep_slot = w->ep_slot;
    for (int i = 0; i < SHM_WAIT_QUOTAS; i++)
        h->quota_slot[i] = w->quota_slot[i];
}

int gate_wait(struct shm *s, int ticket, int wait_ms, struct gate_hold *h)
{
    struct shm_waiter *w = &s->r->gate.waiters[ticket];
    if (atomic_load(&w->state) == WAIT_WAITING && wait_ms > 0)
        futex_wait(&w->state, WAIT_WAITING, wait_ms);
    if (atomic_load(&w->state) != WAIT_GRANTED)
        return 0;
    if (gate_lock(s) != 0)
        return 0;
    hold_of(w, h);
    if (gate_redis_on()) {
        /* The entry stays granted (its places counted) while the count across
         * hosts is asked, outside the lock. */
        gate_unlock(s);
        int full = take_across(s, h);
        if (gate_lock(s) != 0) {
            if (h->n_across)
                release_across_now(s, h);
            h->held = 0;
            return 0;
        }
        if (full) {
            /* Full on another host: back to waiting, with its turn and its
             * tenant's share; this host's place goes to a waiter that does not
             * need the full cap. */
            struct tags_undo u = {w->undo_tenant, w->undo_user, w->undo_user_vnow, w->undo_vnow,
                                  w->undo_tenant_start, w->undo_user_start};
            tags_unserve(&s->r->gate, w->ep_slot, w->tenant_id, w->user_id, w->weight, &u, now_ms());
            held_add(s, w->row, h->rep_slot, h->ep_slot, w->quota_slot, -1);
            w->granted_rep = -1;
            waiting_add(s, w, 1);
            atomic_store(&w->state, WAIT_WAITING);
            grant_pass(s);
            gate_unlock(s);
            h->held = 0;
            return 0;
        }
    }
    entry_free(&s->r->gate, w);
    gate_unlock(s);
    return 1;
}

int gate_leave(struct shm *s, int ticket, int want, struct gate_hold *h, int64_t *seq)
{
    h->held = 0;
    if (gate_lock(s) != 0)
        return 0;
    struct shm_gate *g = &s->r->gate;
    struct shm_waiter *w = &g->waiters[ticket];
    int granted = atomic_load(&w->state) == WAIT_GRANTED;
    if (seq)
        *seq = w->seq;
    if (granted)
        hold_of(w, h);
    else if (atomic_load(&w->state) == WAIT_WAITING)
        waiting_add(s, w, -1);
    struct tags_undo u = {w->undo_tenant, w->undo_user, w->undo_user_vnow, w->undo_vnow,
                          w->undo_tenant_start, w->undo_user_start};
    int ep = w->ep_slot, weight = w->weight;
    int64_t tenant = w->tenant_id, user = w->user_id;
    entry_free(g, w);
    gate_unlock(s);
    /* A grant the leaver does not want (it goes for good), or one full across
     * hosts, was no serving: the tenant's tags as they were, the place on. */
    if (granted && (!want || take_across(s, h))) {
        if (gate_lock(s) == 0) {
            tags_unserve(&s->r->gate, ep, tenant, user, weight, &u, now_ms());
            gate_unlock(s);
        }
        release_here(s, h);
        return 0;
    }
    return granted;
}

int gate_quota_held(const struct shm *s, int quota_slot)
{
    return quota_slot >= 0 ? shm_row_sum(s, OFF_QUOTA, quota_slot) : 0;
}

int gate_queue_length(const struct shm *s, int ep_slot)
{
    return ep_slot >= 0 ? atomic_load(&s->r->endpoints[ep_slot].waiting) : 0;
}
