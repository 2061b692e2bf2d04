/* gate.h: places under a cap and the pool-wide wait queue (R-PRIO-1, R-PRIO-2,
 * R-KEY-6 model and endpoint layers), in the shared state.
 *
 * A place is counted in the holder's process row (rep_held, ep_held,
 * quota_active), so a process killed at any instruction gives its places back
 * when its row is reaped. Every take and every hand-over happens under the
 * gate's robust lock after summing the rows, so a cap is exact across the
 * pool. A request that finds every candidate full takes a waiter entry; a
 * releasing request hands its place straight to the best waiter (priority,
 * then fair order, lib/fairq.h) by counting it in the waiter's row and waking
 * it through a futex on the entry: no polling, never to two waiters. Requests
 * to uncapped replicas never come here.
 *
 * With a Redis `state` (issue 19), a place this host takes or grants is then
 * also taken across hosts (lib/gate_redis.h), outside the lock. When that count
 * is full the place goes back here, the full cap is marked in the shared state
 * (remote_full_ms: no place of it is handed out on this host meanwhile) and the
 * request waits, keeping its turn, until a release on any host frees one (its
 * news clears the mark and pokes the gate) or the mark expires. A store that
 * does not answer leaves the count to this host alone. */
#ifndef SLUICE_GATE_H
#define SLUICE_GATE_H

#include "gate_redis.h"
#include "shm.h"

#include <stdint.h>

/* What a request asks a place of. Slots are shared-state slots; -1 = none. */
struct gate_ask {
    int ep_slot;                      /* the endpoint: its cap and its queue */
    int quota_slot[SHM_WAIT_QUOTAS];  /* quota layers counted too (model, endpoint) */
    int queue_quota;                  /* the model layer whose queue bounds the wait, -1 = the endpoint's */
    int only_rep;                     /* a waiter that can use only this replica slot, -1 = any */
    int priority;                     /* 0 highest */
    int weight;                       /* the tenant's */
    int64_t tenant_id, user_id;
};

/* A place held; filled by gate_take or a grant, emptied by gate_release. */
struct gate_hold {
    int held;
    int64_t seq;                      /* a grant's: the waiter's arrival order */
    int rep_slot, ep_slot;
    int quota_slot[SHM_WAIT_QUOTAS];
    int n_across;                     /* places also held across hosts, under lease */
    struct gate_cap across[GATE_REDIS_MAX_CAPS];
    char lease[48];
};

/* Has this replica room for a, with nobody queued ahead (read without the
 * lock: a hint for choosing, gate_take decides)? 1 room, 0 full or queued. */
int gate_room(const struct shm *s, const struct gate_ask *a, int rep_slot);

/* Which part is full: 0 none, 1 + i quota_slot[i] (a quota layer), -1 the
 * replica, endpoint or queue. A hint, read without the lock. */
int gate_full_part(const struct shm *s, const struct gate_ask *a, int rep_slot);

/* Takes a place on the replica when it, the endpoint and the quota layers
 * have room and nobody waits in the endpoint's queue. 1 taken (h filled), 0 not. */
int gate_take(struct shm *s, const struct gate_ask *a, int rep_slot, struct gate_hold *h);

/* Gives the place back: to the best waiter that can use it, if any. */
void gate_release(struct shm *s, struct gate_hold *h);

enum gate_queued { GATE_QUEUED, GATE_QUEUE_FULL, GATE_QUOTA_QUEUE_FULL, GATE_NO_ENTRY };
/* Joins the endpoint's queue (bounded by queue_max there, and by the model
 * layer's queue_max when a->queue_quota is set; *ticket is the entry), then
 * grants whoever can go now, perhaps itself. seq_keep > 0 re-joins at an
 * earlier arrival: a waiter that turned a granted replica down (it went down
 * meanwhile) keeps its turn, and is never handed the excluded replicas. */
enum gate_queued gate_enqueue(struct shm *s, const struct gate_ask *a, int queue_max, int64_t seq_keep,
                              const int *excluded, int n_excluded, int *ticket);

/* Sleeps up to wait_ms for a grant. 1: granted, h holds the place and the
 * entry is gone; 0: still waiting. */
int gate_wait(struct shm *s, int ticket, int wait_ms, struct gate_hold *h);

/* Leaves the queue. want: the caller would still use a place that came in the
 * meantime. 1 when one did (h holds it: use it or release it), 0 otherwise (a
 * grant the caller does not want goes on to the next waiter). *seq gets the
 * entry's arrival order. */
int gate_leave(struct shm *s, int ticket, int want, struct gate_hold *h, int64_t *seq);

/* Grants what can go now without a release: places of a process that died
 * (its row reaped), a cap raised. Waiters call it now and then. */
void gate_poke(struct shm *s);

/* The calling thread must never wait on Redis (the stream loop): its releases of
 * places held across hosts go to a thread of the gate's own. */
void gate_thread_never_waits(void);

/* At start: with url (sluice.conf's `state`) a Redis, places count across hosts
 * and the news of a release elsewhere pokes this host's gate. 0, or -1 (logged). */
int gate_share_start(struct shm *s, const char *url);

/* Places held in a quota layer now, pool-wide. */
int gate_quota_held(const struct shm *s, int quota_slot);

/* Requests waiting in an endpoint's queue now. */
int gate_queue_length(const struct shm *s, int ep_slot);

#endif
