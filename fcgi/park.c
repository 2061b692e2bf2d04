/* park.c: the responder's stream loop (see park.h). One thread, one epoll set:
 * each parked stream has its upstream socket in it (a turn when the upstream
 * sent something) and its FastCGI socket (the client watch, and room to write
 * when the client reads slowly). Writes to the front server never wait here:
 * what the socket does not take stays in the connection's buffer, and a
 * stream whose buffer passes PENDING_MAX stops reading its upstream until the
 * client catches up, so one slow reader holds up only its own stream. */
#include "park.h"

#include "arena.h"
#include "forward.h"
#include "gate.h"
#include "log.h"
#include "util.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

enum {
    PENDING_MAX = 65536,            /* bytes waiting for a slow client before its upstream is paused */
    DRAIN_MS = 60000,               /* how long the end of a stream waits for a client that stopped reading */
    EVENTS = 256,
    NO_SOCKET_TURN_MS = 20,         /* a transfer whose socket curl did not tell is turned this often */
};

enum { UP_SLOTS = 4 };              /* = sizeof worker.up_socks */

struct parked {
    struct worker *w;
    void (*resume)(struct worker *w);
    /* The worker's upstream sockets in the set: the transfer's, and idle
     * kept-alive ones to other replicas (curl cannot say which is which). */
    int up_fd[UP_SLOTS], n_up;
    int idle_fd[UP_SLOTS], n_idle;  /* ended by their server while idle: no longer watched */
    unsigned up_fired;              /* slots with an event in this round */
    int up_unknown;                 /* curl has sockets the worker does not know: turned by the clock */
    unsigned opened_seen;           /* the worker's up_opened when the set last followed it */
    uint32_t up_events, fcgi_events;    /* what each is watched for now */
    int due;                        /* a turn is due now */
    int client_event;               /* the FastCGI socket became readable or hung up */
    int client_hup;                 /* it hung up (or failed): reported whether watched or not */
    int64_t deadline;               /* mono ms: the next turn at the latest */
    struct parked *next;            /* on the incoming list */
};

/* The end of a stream the client has not read yet: its connection, given
 * away by the worker (fcgi_finish_unsent), sent as the socket takes it. */
struct drain {
    int fd;
    char *data;
    size_t len, off;
    int64_t deadline;
    int fired;                      /* the socket has room again */
    struct drain *next;
};

static struct {
    int ep, ev;
    struct drain *drains;
    int running;
    pthread_mutex_t lock;
    struct parked *incoming;        /* handed over, not yet in the set (under lock) */
    struct drain *drains_in;        /* stream ends given from other threads, not yet in the set (under lock) */
    struct parked **live;           /* the loop's own */
    int n, cap;
    atomic_int draining;            /* drains handed over and not closed yet (the shutdown waits for them) */
} P = {.ep = -1, .ev = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

/* An event's tag: the entry (16-byte aligned), bit 0 the FastCGI socket,
 * bits 1-2 the upstream slot. */
static uint64_t tag(struct parked *e, int fcgi, int slot)
{
    return (uint64_t)(uintptr_t)e | (uint64_t)(fcgi != 0) | (uint64_t)slot << 1;
}

static void set_fcgi_events(struct parked *e, uint32_t want)
{
    if (e->fcgi_events == want)
        return;
    struct epoll_event ev = {.events = want, .data.u64 = tag(e, 1, 0)};
    epoll_ctl(P.ep, EPOLL_CTL_MOD, e->w->fcgi.fd, &ev);
    e->fcgi_events = want;
}

static void set_up_events(struct parked *e, uint32_t want)
{
    if (e->up_events == want)
        return;
    for (int k = 0; k < e->n_up; k++) {
        struct epoll_event ev = {.events = want, .data.u64 = tag(e, 0, k)};
        epoll_ctl(P.ep, EPOLL_CTL_MOD, e->up_fd[k], &ev);
    }
    e->up_events = want;
}

static int has(const int *fds, int n, int fd)
{
    for (int i = 0; i < n; i++)
        if (fds[i] == fd)
            return 1;
    return 0;
}

/* The set follows the worker's sockets: a socket curl closed left the set
 * with its close (it was never duplicated); one it opened joins. */
static void sync_sockets(struct parked *e)
{
    const struct worker *w = e->w;
    if (w->up_opened != e->opened_seen) {
        /* curl opened a socket since: it may have the number of one it closed
         * (a connection it gave up and made again within one turn), which
         * then left the set with its close. Every socket joins again. */
        e->opened_seen = w->up_opened;
        for (int k = 0; k < e->n_up; k++) {
            struct epoll_event ev = {.events = e->up_events, .data.u64 = tag(e, 0, k)};
            if (has(w->up_socks, w->n_up_socks, e->up_fd[k]))
                epoll_ctl(P.ep, EPOLL_CTL_ADD, e->up_fd[k], &ev);   /* EEXIST when it is the same socket */
        }
        e->n_idle = 0;              /* an idle one that closed may be a new one now; it fires again if not */
    }
    int keep[UP_SLOTS], n = 0;
    for (int k = 0; k < e->n_up; k++)
        if (has(w->up_socks, w->n_up_socks, e->up_fd[k]))
            keep[n++] = e->up_fd[k];
    int idle[UP_SLOTS], m = 0;
    for (int k = 0; k < e->n_idle; k++)
        if (has(w->up_socks, w->n_up_socks, e->idle_fd[k]))
            idle[m++] = e->idle_fd[k];
    for (int i = 0; i < w->n_up_socks; i++) {
        int fd = w->up_socks[i];
        if (has(keep, n, fd) || has(idle, m, fd) || n == UP_SLOTS)
            continue;
        struct epoll_event ev = {.events = e->up_events, .data.u64 = tag(e, 0, n)};
        if (epoll_ctl(P.ep, EPOLL_CTL_ADD, fd, &ev) == 0)
            keep[n++] = fd;
    }
    /* slots are positions: re-tag the ones that moved */
    for (int k = 0; k < n; k++)
        if (k >= e->n_up || e->up_fd[k] != keep[k]) {
            struct epoll_event ev = {.events = e->up_events, .data.u64 = tag(e, 0, k)};
            epoll_ctl(P.ep, EPOLL_CTL_MOD, keep[k], &ev);
        }
    memcpy(e->up_fd, keep, sizeof keep);
    e->n_up = n;
    memcpy(e->idle_fd, idle, sizeof idle);
    e->n_idle = m;
    e->up_unknown = w->n_up_socks < 0;
}

/* After a turn with the transfer still running: a socket that fired and
 * still reads as closed is no socket of the transfer (curl would have seen
 * its end): an idle connection its server closed. Not watched any more, or
 * level-triggered epoll would turn this stream without end. */
static void drop_idle_closed(struct parked *e)
{
    for (int k = e->n_up - 1; k >= 0; k--) {
        if (!(e->up_fired & 1u << k))
            continue;
        char c;
        if (recv(e->up_fd[k], &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0)
            continue;
        epoll_ctl(P.ep, EPOLL_CTL_DEL, e->up_fd[k], NULL);
        if (e->n_idle < UP_SLOTS)
            e->idle_fd[e->n_idle++] = e->up_fd[k];
        e->up_fd[k] = e->up_fd[--e->n_up];
        if (k < e->n_up) {
            struct epoll_event ev = {.events = e->up_events, .data.u64 = tag(e, 0, k)};
            epoll_ctl(P.ep, EPOLL_CTL_MOD, e->up_fd[k], &ev);
        }
    }
    e->up_fired = 0;
}

static void add(struct parked *e)
{
    struct request *r = e->w->req;
    e->up_events = EPOLLIN;
    sync_sockets(e);
    fcgi_set_nonblocking(&e->w->fcgi, 1);
    e->fcgi_events = r->parked_attempt->tr.watch_fcgi ? EPOLLIN | EPOLLRDHUP : 0;
    struct epoll_event ev = {.events = e->fcgi_events, .data.u64 = tag(e, 1, 0)};
    epoll_ctl(P.ep, EPOLL_CTL_ADD, e->w->fcgi.fd, &ev);
    if (e->up_unknown || e->n_up == 0) {
        static atomic_int warned;
        if (!atomic_exchange(&warned, 1))
            log_warn("stream loop: a transfer whose upstream socket is not known is turned every %d ms "
                     "(logged once)", NO_SOCKET_TURN_MS);
    }
    e->due = 1;
    if (P.n == P.cap) {
        P.cap = P.cap ? P.cap * 2 : 64;
        P.live = xrealloc(P.live, (size_t)P.cap * sizeof *P.live);
    }
    P.live[P.n++] = e;
}

/* The transfer ended: out of the set, and the request finishes as its
 * thread would have finished it. Its last writes do not wait either: what
 * the client has not taken yet goes to park_drain. */
static void end(int i)
{
    struct parked *e = P.live[i];
    P.live[i] = P.live[--P.n];
    sync_sockets(e);                /* only sockets still open leave by a DEL */
    for (int k = 0; k < e->n_up; k++)
        epoll_ctl(P.ep, EPOLL_CTL_DEL, e->up_fd[k], NULL);
    epoll_ctl(P.ep, EPOLL_CTL_DEL, e->w->fcgi.fd, NULL);
    e->resume(e->w);
    free(e);
}

/* One turn of live[i]: 0 it goes on, 1 it ended (live[i] is another now). */
static int turn(int i, int64_t now)
{
    struct parked *e = P.live[i];
    struct request *r = e->w->req;
    struct attempt *a = r->parked_attempt;
    struct fcgi_conn *c = &e->w->fcgi;
    e->due = 0;
    if (e->client_event) {
        e->client_event = 0;
        /* A hang-up is gone for good, even with the watch stopped (an odd
         * record): epoll reports it always, and it would turn this stream
         * without end until its next write failed. */
        if (e->client_hup && !a->tr.watch_fcgi) {
            r->client_gone = 1;
            a->tr.out = ATTEMPT_CLIENT_GONE;
            end(i);
            return 1;
        }
        if (a->tr.watch_fcgi && forward_client_check(r, a)) {
            end(i);
            return 1;
        }
    }
    if (fcgi_pending(c) && fcgi_flush(c) != 0) {
        r->client_gone = 1;
        a->tr.out = ATTEMPT_CLIENT_GONE;
        end(i);
        return 1;
    }
    uint32_t client_watch = a->tr.watch_fcgi ? EPOLLIN | EPOLLRDHUP : 0;
    if (fcgi_pending(c) > PENDING_MAX) {
        /* The client reads slower than the upstream writes: the upstream waits
         * (TCP holds it back) and that is no upstream silence. */
        set_up_events(e, 0);
        set_fcgi_events(e, client_watch | EPOLLOUT);
        a->relay.last_upstream_ms = now;
        if (atomic_load(e->w->cut)) {
            a->tr.out = ATTEMPT_SHUTDOWN;
            end(i);
            return 1;
        }
        e->deadline = now + 1000;
        return 0;
    }
    set_up_events(e, EPOLLIN);
    int wait = 1000;
    if (!forward_transfer_step(r, a, &wait)) {
        end(i);
        return 1;
    }
    sync_sockets(e);
    drop_idle_closed(e);
    long curl_wait = -1;
    curl_multi_timeout(e->w->multi, &curl_wait);
    if (curl_wait >= 0 && curl_wait < wait)
        wait = (int)curl_wait;
    if ((e->up_unknown || e->n_up == 0) && wait > NO_SOCKET_TURN_MS)
        wait = NO_SOCKET_TURN_MS;
    e->deadline = now + wait;
    if (wait == 0)
        e->due = 1;
    set_fcgi_events(e, client_watch | (fcgi_pending(c) ? EPOLLOUT : 0));
    return 0;
}

enum { DRAIN_TAG = 3 };             /* bit 0 with slot 1: no FastCGI socket of an entry has it */

static void drain_add(struct drain *d);

static void take_incoming(void)
{
    uint64_t n;
    while (read(P.ev, &n, sizeof n) > 0)
        ;
    pthread_mutex_lock(&P.lock);
    struct parked *in = P.incoming;
    P.incoming = NULL;
    struct drain *din = P.drains_in;
    P.drains_in = NULL;
    pthread_mutex_unlock(&P.lock);
    while (in) {
        struct parked *next = in->next;
        add(in);
        in = next;
    }
    while (din) {
        struct drain *next = din->next;
        drain_add(din);
        din = next;
    }
}

static void wake(void)
{
    uint64_t one = 1;
    if (write(P.ev, &one, sizeof one) < 0 && errno != EAGAIN)
        log_warn("stream loop: wake-up failed: %s", strerror(errno));
}

static void drain_close(struct drain *d)
{
    epoll_ctl(P.ep, EPOLL_CTL_DEL, d->fd, NULL);
    close(d->fd);
    free(d->data);
    free(d);
    atomic_fetch_sub(&P.draining, 1);
}

/* On the loop: the drain joins the set and the list. */
static void drain_add(struct drain *d)
{
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = (uint64_t)(uintptr_t)d | DRAIN_TAG};
    if (epoll_ctl(P.ep, EPOLL_CTL_MOD, d->fd, &ev) != 0 && epoll_ctl(P.ep, EPOLL_CTL_ADD, d->fd, &ev) != 0) {
        close(d->fd);
        free(d->data);
        free(d);
        atomic_fetch_sub(&P.draining, 1);
        return;
    }
    d->next = P.drains;
    P.drains = d;
}

void park_drain(int fd, char *data, size_t len)
{
    struct drain *d = xcalloc(1, sizeof *d);
    d->fd = fd;
    d->data = data;
    d->len = len;
    d->deadline = mono_ms() + DRAIN_MS;
    atomic_fetch_add(&P.draining, 1);
    pthread_mutex_lock(&P.lock);
    d->next = P.drains_in;
    P.drains_in = d;
    pthread_mutex_unlock(&P.lock);
    wake();
}

/* Sends what the socket takes; 1 when the drain is over (sent, failed, or
 * out of time), its entry then freed. */
static int drain_turn(struct drain *d, int64_t now)
{
    while (d->off < d->len) {
        ssize_t n = send(d->fd, d->data + d->off, d->len - d->off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            d->off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && now < d->deadline)
            return 0;
        break;
    }
    drain_close(d);
    return 1;
}

static void drains_turn(int64_t now)
{
    for (struct drain **p = &P.drains; *p;) {
        struct drain *d = *p;
        struct drain *next = d->next;
        int due = d->fired || now >= d->deadline;
        d->fired = 0;
        if (due && drain_turn(d, now))
            *p = next;              /* d is freed */
        else
            p = &d->next;
    }
}

static void *loop(void *arg)
{
    (void)arg;
    gate_thread_never_waits();      /* a place's release across hosts goes to the gate's own thread */
    struct epoll_event evs[EVENTS];
    for (;;) {
        int64_t now = mono_ms();
        int timeout = 1000;
        for (int i = 0; i < P.n && timeout > 0; i++) {
            int64_t left = P.live[i]->due ? 0 : P.live[i]->deadline - now;
            if (left < timeout)
                timeout = left < 0 ? 0 : (int)left;
        }
        int n = epoll_wait(P.ep, evs, EVENTS, timeout);
        /* Flags first, turns after: a turn may end (free) a stream that has
         * another event further down this list. */
        for (int k = 0; k < n; k++) {
            uint64_t t = evs[k].data.u64;
            if (t == 0) {
                take_incoming();
                continue;
            }
            if ((t & 7) == DRAIN_TAG) {
                ((struct drain *)(uintptr_t)(t & ~(uint64_t)7))->fired = 1;
                continue;
            }
            struct parked *e = (struct parked *)(uintptr_t)(t & ~(uint64_t)7);
            if (!(t & 1)) {
                e->due = 1;
                e->up_fired |= 1u << ((t >> 1) & 3);
            } else {
                if (evs[k].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                    e->client_event = 1;
                if (evs[k].events & (EPOLLHUP | EPOLLERR))
                    e->client_hup = 1;
                e->due = 1;
            }
        }
        now = mono_ms();
        drains_turn(now);
        for (int i = 0; i < P.n;)
            if (!(P.live[i]->due || now >= P.live[i]->deadline) || !turn(i, now))
                i++;
    }
    return NULL;
}

int park_start(const struct conf *c)
{
    if (!c->pool_park_streams)
        return 0;
    P.ep = epoll_create1(EPOLL_CLOEXEC);
    P.ev = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    pthread_t t;
    if (P.ep < 0 || P.ev < 0 || epoll_ctl(P.ep, EPOLL_CTL_ADD, P.ev, &ev) != 0 ||
        pthread_create(&t, NULL, loop, NULL) != 0) {
        log_error("stream loop not started (%s): each stream keeps its thread", strerror(errno));
        return -1;
    }
    pthread_detach(t);
    P.running = 1;
    return 0;
}

int park_running(void) { return P.running; }

int park_draining(void) { return atomic_load(&P.draining); }

void park_hand(struct worker *w, void (*resume)(struct worker *w))
{
    struct parked *e = xcalloc(1, sizeof *e);
    e->w = w;
    e->resume = resume;
    pthread_mutex_lock(&P.lock);
    e->next = P.incoming;
    P.incoming = e;
    pthread_mutex_unlock(&P.lock);
    wake();
}
