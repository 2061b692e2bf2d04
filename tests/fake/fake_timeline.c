/* fake_timeline.c: when each data request arrived, was answered and finished (GET /_fake/timeline, bench/queue.py). */
#include "fake.h"

#include <time.h>

/*
 * A ring of the last TIMELINE_MAX data requests, in microseconds of
 * CLOCK_MONOTONIC: arrival (the request read in full), answered (the start of
 * its last write) and finish (that write returned, the request ended). A
 * client can see the answer before "finish" is stamped, if this thread is
 * preempted after send(); never before "answered". A request holds its slot
 * number and the generation it was taken in; /_fake/reset starts a new
 * generation, so a request still in flight then does not write into the new
 * one. Lock-free: the slot comes from one atomic counter.
 */
enum { TIMELINE_MAX = 65536 };

struct span {
    atomic_llong arrival_us, answered_us, finish_us;   /* 0: not yet */
};

static struct {
    atomic_ulong n;                    /* slots taken in this generation */
    atomic_ulong gen;                  /* starts at 1: a new connection's 0 never matches */
    struct span s[TIMELINE_MAX];
} T = { .gen = 1 };

static long long timeline_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* The request's span, or NULL when a reset or TIMELINE_MAX newer requests have dropped it. */
static struct span *timeline_span(const struct conn *c)
{
    if (!c->tl_open || c->tl_gen != atomic_load(&T.gen) || atomic_load(&T.n) - c->tl_slot > TIMELINE_MAX)
        return NULL;
    return &T.s[c->tl_slot % TIMELINE_MAX];
}

void timeline_begin(struct conn *c)
{
    long long now = timeline_now_us();
    c->tl_gen = atomic_load(&T.gen);
    c->tl_slot = atomic_fetch_add(&T.n, 1);
    c->tl_open = true;
    struct span *sp = &T.s[c->tl_slot % TIMELINE_MAX];
    atomic_store(&sp->answered_us, 0);
    atomic_store(&sp->finish_us, 0);
    atomic_store(&sp->arrival_us, now);
}

void timeline_send(struct conn *c)
{
    struct span *sp = timeline_span(c);
    if (sp)
        atomic_store(&sp->answered_us, timeline_now_us());
}

void timeline_end(struct conn *c)
{
    struct span *sp = timeline_span(c);
    if (sp)
        atomic_store(&sp->finish_us, timeline_now_us());
    c->tl_open = false;
}

/* Called by /_fake/reset, when no request is expected in flight. */
void timeline_clear(void)
{
    atomic_fetch_add(&T.gen, 1);
    atomic_store(&T.n, 0);
}

/* {"requests":N,"kept":K,"spans":[[arrival_us,answered_us,finish_us],...]}, oldest first. */
enum outcome ctl_timeline(struct conn *c, const struct behavior *b)
{
    (void)b;
    struct buf *o = &c->rbody;
    o->len = 0;
    unsigned long n = atomic_load(&T.n), kept = n < TIMELINE_MAX ? n : TIMELINE_MAX;
    buf_printf(o, "{\"requests\":%lu,\"kept\":%lu,\"spans\":[", n, kept);
    for (unsigned long i = n - kept; i < n; i++) {
        const struct span *sp = &T.s[i % TIMELINE_MAX];
        buf_printf(o, "%s[%lld,%lld,%lld]", i == n - kept ? "" : ",", atomic_load(&sp->arrival_us),
                   atomic_load(&sp->answered_us), atomic_load(&sp->finish_us));
    }
    buf_adds(o, "]}");
    return reply_send(c, &BEHAVIOR_DEFAULT, 200, CT_JSON);
}
