/* fake_control.c: the control routes (/_fake/...) a test uses to set up this upstream, and the stats it reads back. */
#include "fake.h"

#include <ctype.h>
#include <limits.h>

struct fake_stats S;

/* Trims the request body, for control bodies such as "on". */
static const char *body_trimmed(const struct request *r, size_t *n)
{
    const char *s = r->body, *e = r->body + r->blen;
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    *n = (size_t)(e - s);
    return s;
}

enum outcome ctl_behavior(struct conn *c, const struct behavior *b)
{
    (void)b;
    size_t n;
    const char *s = body_trimmed(&c->req, &n);
    pthread_mutex_lock(&G.mu);
    G.dflt = BEHAVIOR_DEFAULT;
    behavior_parse(&G.dflt, s, n);
    atomic_store(&G.has_dflt, n > 0);
    pthread_mutex_unlock(&G.mu);
    return reply_ok(c);
}

enum outcome ctl_reset(struct conn *c, const struct behavior *b)
{
    (void)b;
    pthread_mutex_lock(&G.mu);
    G.sleeping = false;
    G.wake_at_ms = 0;
    G.wake_delay_ms = 0;
    G.n_gpus = 0;
    atomic_store(&S.wake_ups, 0);
    atomic_store(&G.has_dflt, false);
    atomic_store(&G.health_off, false);
    G.waiting = 0;
    G.running = -1;
    G.kv = 0;
    G.legacy = false;
    G.has_last = false;
    atomic_store(&S.requests, 0);
    atomic_store(&S.max_inflight, atomic_load(&S.inflight));   /* in-flight requests still end */
    atomic_store(&S.completed, 0);
    atomic_store(&S.aborted, 0);
    atomic_store(&S.died, 0);
    atomic_store(&S.probes, 0);
    pthread_mutex_unlock(&G.mu);
    prefix_clear();
    responses_clear();
    timeline_clear();
    return reply_ok(c);
}

enum outcome ctl_health(struct conn *c, const struct behavior *b)
{
    (void)b;
    size_t n;
    const char *s = body_trimmed(&c->req, &n);
    if (!mem_is(s, n, "on") && !mem_is(s, n, "off"))
        return reply_error(c, &BEHAVIOR_DEFAULT, 400, "body must be on or off");
    atomic_store(&G.health_off, mem_is(s, n, "off"));
    return reply_ok(c);
}

/* Called with G.mu held. */
static void metrics_set(void *arg, const char *k, size_t kn, const char *v, size_t vn)
{
    long l;
    double d;
    bool *bad = arg;
    if (mem_is(k, kn, "kv") && parse_double(v, vn, &d) == 0 && d >= 0 && d <= 1)
        G.kv = d;
    else if (mem_is(k, kn, "waiting") && parse_long(v, vn, &l) == 0 && l >= 0 && l <= INT_MAX)
        G.waiting = (int)l;
    else if (mem_is(k, kn, "running") && parse_long(v, vn, &l) == 0 && l >= -1 && l <= INT_MAX)
        G.running = (int)l;
    else if (mem_is(k, kn, "legacy") && parse_long(v, vn, &l) == 0 && (l == 0 || l == 1))
        G.legacy = l == 1;
    else
        *bad = true;
}

/* Called with G.mu held. */
static void sleep_config_set(void *arg, const char *k, size_t kn, const char *v, size_t vn)
{
    long l;
    bool *bad = arg;
    if (mem_is(k, kn, "delay_ms") && parse_long(v, vn, &l) == 0 && l >= 0 && l <= 3600000)
        G.wake_delay_ms = (int)l;
    else if (mem_is(k, kn, "sleeping") && parse_long(v, vn, &l) == 0 && (l == 0 || l == 1)) {
        G.sleeping = l == 1;
        G.wake_at_ms = 0;
    } else
        *bad = true;
}

enum outcome ctl_sleep_config(struct conn *c, const struct behavior *b)
{
    (void)b;
    bool bad = false;
    pthread_mutex_lock(&G.mu);
    kv_each(c->req.body, c->req.blen, sleep_config_set, &bad);
    pthread_mutex_unlock(&G.mu);
    if (bad)
        return reply_error(c, &BEHAVIOR_DEFAULT, 400, "expected delay_ms=N sleeping=0|1");
    return reply_ok(c);
}

/* "temps=64/90/blank": one reading per GPU ("," already separates directives). Called with G.mu held. */
static void dcgm_set(void *arg, const char *k, size_t kn, const char *v, size_t vn)
{
    bool *bad = arg;
    if (!mem_is(k, kn, "temps")) {
        *bad = true;
        return;
    }
    G.n_gpus = 0;
    for (size_t i = 0; i < vn && G.n_gpus < (int)ARRAY_LEN(G.gpu_temps);) {
        size_t j = i;
        while (j < vn && v[j] != '/')
            j++;
        long t;
        if (mem_is(v + i, j - i, "blank"))
            G.gpu_temps[G.n_gpus++] = -1;
        else if (parse_long(v + i, j - i, &t) == 0 && t >= 0 && t <= 200)
            G.gpu_temps[G.n_gpus++] = t;
        else
            *bad = true;
        i = j + 1;
    }
}

enum outcome ctl_dcgm(struct conn *c, const struct behavior *b)
{
    (void)b;
    bool bad = false;
    pthread_mutex_lock(&G.mu);
    kv_each(c->req.body, c->req.blen, dcgm_set, &bad);
    pthread_mutex_unlock(&G.mu);
    if (bad)
        return reply_error(c, &BEHAVIOR_DEFAULT, 400, "expected temps=N/N/blank");
    return reply_ok(c);
}

enum outcome ctl_metrics(struct conn *c, const struct behavior *b)
{
    (void)b;
    bool bad = false;
    pthread_mutex_lock(&G.mu);
    kv_each(c->req.body, c->req.blen, metrics_set, &bad);
    pthread_mutex_unlock(&G.mu);
    if (bad)
        return reply_error(c, &BEHAVIOR_DEFAULT, 400, "expected waiting=N kv=F legacy=0|1 running=N");
    return reply_ok(c);
}

/* ---- stats ---- */

void stats_begin(struct conn *c)
{
    c->settled = false;
    c->counted = true;
    atomic_fetch_add(&S.requests, 1);
    timeline_begin(c);
    long now = atomic_fetch_add(&S.inflight, 1) + 1;
    long max = atomic_load(&S.max_inflight);
    while (now > max && !atomic_compare_exchange_weak(&S.max_inflight, &max, now))
        ;
    pthread_mutex_lock(&G.mu);
    G.last_head.len = G.last_body.len = 0;
    buf_add(&G.last_head, c->in, c->req.head_len);
    buf_add(&G.last_body, c->req.body, c->req.blen);
    G.has_last = true;
    pthread_mutex_unlock(&G.mu);
}

void stats_settle(struct conn *c)
{
    if (!c->settled && c->counted) {
        c->settled = true;
        atomic_fetch_sub(&S.inflight, 1);
    }
}

void stats_end(struct conn *c, enum outcome o)
{
    timeline_end(c);
    if (!c->settled)
        atomic_fetch_sub(&S.inflight, 1);
    c->settled = false;
    c->counted = false;
    atomic_fetch_add(o == OUT_COMPLETE ? &S.completed : o == OUT_ABORTED ? &S.aborted : &S.died, 1);
}

/* Called with G.mu held. */
static void stats_last_json(struct buf *o)
{
    struct request r;
    if (!G.has_last || http_head_parse(&r, G.last_head.p, G.last_head.len) != 0) {
        buf_adds(o, "null");
        return;
    }
    http_request_json(o, &r, G.last_body.p, G.last_body.len);
}

enum outcome ctl_stats(struct conn *c, const struct behavior *b)
{
    (void)b;
    struct buf *o = &c->rbody;
    o->len = 0;
    pthread_mutex_lock(&G.mu);
    buf_printf(o, "{\"requests\":%ld,\"inflight\":%ld,\"max_inflight\":%ld,\"completed\":%ld,"
               "\"aborted\":%ld,\"died\":%ld,\"probes\":%ld,\"wake_ups\":%ld,\"prefix_hits\":%ld,"
               "\"prefix_misses\":%ld,\"sleeping\":%s,\"last\":",
               atomic_load(&S.requests), atomic_load(&S.inflight), atomic_load(&S.max_inflight),
               atomic_load(&S.completed), atomic_load(&S.aborted), atomic_load(&S.died),
               atomic_load(&S.probes), atomic_load(&S.wake_ups),
               atomic_load(&S.prefix_hits), atomic_load(&S.prefix_misses),
               vllm_asleep_locked() ? "true" : "false");
    stats_last_json(o);
    pthread_mutex_unlock(&G.mu);
    buf_add(o, "}", 1);
    return reply_send(c, &BEHAVIOR_DEFAULT, 200, CT_JSON);
}
