/* queue.c: the driver's wait in the pool-wide queue (queue.h).
 *
 * The waiter sleeps on its entry's futex (lib/gate.c) in slices of at most
 * CLIENT_WATCH_MS: between slices it looks at the FastCGI connection (a
 * client that left is out of the queue at once and its place, if one came,
 * goes to the next), sends a queued stream its keep-alive comment (R-SSE-2),
 * and once a second pokes the gate so that places of a process that died are
 * handed on without waiting for a release. A grant wakes it at once. */
#include "queue.h"

#include "errors.h"
#include "log.h"
#include "reply.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

#define CLIENT_WATCH_MS 50
#define POKE_MS 1000
#define QUEUED_KEEPALIVE_MS 1000

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* A queued stream is committed as a 200 event stream by its first comment;
 * the answer (or the queue's error) then follows as events. */
static int keepalive(struct request *r)
{
    static const char ka[] = ": keep-alive\n\n";
    if (!r->headers_sent &&
        reply_head(r, 200, "text/event-stream", "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n") != 0)
        return -1;
    return reply_body(r, ka, sizeof ka - 1, 1);
}

static void refuse_full(struct request *r, enum gate_queued q)
{
    const struct snap_endpoint *e = r->ep;
    if (q == GATE_QUOTA_QUEUE_FULL) {
        /* R-KEY-6: the model layer is full, no cheaper model was free, its queue is full. */
        const struct snap_quota *mq = snapshot_quota(r->snap, QSCOPE_MODEL, 0, r->model);
        reply_limit_refusal(r, ERR_MODEL_CONCURRENCY_EXCEEDED, "per_model", mq ? mq->concurrency : 0,
                            mq ? gate_quota_held(r->shm, mq->slot) : 0, 1000, 0, NULL);
        return;
    }
    reply_error(r, ERR_QUEUE_FULL,
                arena_printf(r->arena, "Every backend of endpoint %s is at its concurrency limit and its queue is "
                             "full (%d waiting); retry later.", e->name, e->queue_max), NULL);
}

/* Out of the queue without a place: a grant that came meanwhile goes on. */
static void leave(struct request *r, int ticket)
{
    struct gate_hold h;
    if (gate_leave(r->shm, ticket, 0, &h, &r->queue_seq))
        gate_release(r->shm, &h);
}

static void waited(struct request *r, const char *outcome)
{
    r->queue_end_us = mono_us();
    r->queue_ms += (r->queue_end_us - r->queue_start_us) / 1000;
    r->queue_outcome = outcome;
}

int queue_wait(struct request *r)
{
    const struct snap_endpoint *e = r->ep;
    int ticket;
    r->queue_start_us = mono_us();
    enum gate_queued q = gate_enqueue(r->shm, &r->wait_ask, e->queue_max, r->queue_seq, r->queue_excluded,
                                      r->n_queue_excluded, &ticket);
    if (q != GATE_QUEUED) {
        waited(r, "full");
        if (q == GATE_NO_ENTRY)
            log_warn("request %s: no free queue entry (%d waiting pool-wide at most); refused as queue_full",
                     r->request_id, SHM_MAX_WAITERS);
        refuse_full(r, q);
        return -1;
    }
    /* One queue_timeout_ms for the request, however often it waits again. */
    int64_t start = mono_ms(), deadline = start + e->queue_timeout_ms - r->queue_ms, last_poke = start;
    int64_t every = min64(r->conf->keepalive_ms, QUEUED_KEEPALIVE_MS), last_client = start - every;
    for (;;) {
        int64_t now = mono_ms();
        if (now >= deadline) {
            struct gate_hold h;
            if (gate_leave(r->shm, ticket, 1, &h, &r->queue_seq)) {
                r->hold = h;        /* granted just in time */
                break;
            }
            waited(r, "timeout");
            reply_error(r, ERR_QUEUE_TIMEOUT,
                        arena_printf(r->arena, "Waited %d ms for a free backend of endpoint %s; every one is at its "
                                     "concurrency limit. Retry later.", e->queue_timeout_ms, e->name), NULL);
            return -1;
        }
        if (atomic_load(r->w->cut)) {
            leave(r, ticket);
            waited(r, "gone");
            reply_error(r, ERR_SHUTTING_DOWN, NULL, NULL);
            return -1;
        }
        if (r->stream && now - last_client >= every) {
            if (keepalive(r) != 0)
                r->client_gone = 1;
            last_client = now;
        }
        if (!r->client_gone &&
            gate_wait(r->shm, ticket, (int)min64(CLIENT_WATCH_MS, deadline - now), &r->hold))
            break;
        if (r->client_gone || reply_client_closed(r)) {
            leave(r, ticket);
            waited(r, "gone");
            r->client_gone = 1;
            r->error_code = errors_get(ERR_CLIENT_DISCONNECTED)->code;
            snprintf(r->finish_reason, sizeof r->finish_reason, "client_disconnected");
            log_info("request %s: client disconnected while queued for endpoint %s", r->request_id, e->name);
            return -1;
        }
        if (now - last_poke >= POKE_MS) {
            gate_poke(r->shm);
            last_poke = now;
        }
    }
    waited(r, "granted");
    return 0;
}

void queue_turn_down(struct request *r)
{
    if (r->hold.held && r->n_queue_excluded < SHM_WAIT_EXCLUDED)
        r->queue_excluded[r->n_queue_excluded++] = r->hold.rep_slot;
    if (r->hold.seq > 0)
        r->queue_seq = r->hold.seq;
    gate_release(r->shm, &r->hold);
}
