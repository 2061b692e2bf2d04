/* fake_loop.c: the epoll event loops, one per CPU: the fast path for requests that need no waiting. */
#include "fake.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum fast { FAST_SERVED, FAST_WAIT, FAST_HANDOFF, FAST_CLOSE };

static int listen_fd = -1;

/* Parses a fully buffered request: 1 ready, 0 more bytes needed, -1 for the blocking path. */
static int loop_parse(struct conn *c)
{
    struct request *r = &c->req;
    struct framing f;
    http_head_skip_blank(c);
    size_t end = c->in_len ? http_head_find_end(c->in, c->in_len, c->scanned) : 0;
    if (!end) {
        c->scanned = c->in_len > 2 ? c->in_len - 2 : 0;
        return c->in_len >= HEAD_MAX ? -1 : 0;
    }
    r->nh = 0;
    r->minor = 1;
    r->keep_alive = false;
    r->head_len = end;
    /* errors, chunked bodies and Expect are rare: the blocking code answers them */
    if (end > HEAD_MAX || http_head_parse(r, c->in, end) != 0 || http_framing_get(r, &f) != 0 || f.chunked || f.expect)
        return -1;
    size_t need = end + (size_t)(f.clen > 0 ? f.clen : 0);
    if (need > LOOP_IN_MAX)
        return -1;
    if (c->in_len < need)
        return 0;
    r->body = c->in + end;
    r->blen = need - end;
    r->total_len = need;
    return 1;
}

static enum fast loop_serve(struct conn *c)
{
    int rc = loop_parse(c);
    if (rc <= 0)
        return rc == 0 ? FAST_WAIT : FAST_HANDOFF;
    enum outcome o = route_answer(c);
    if (o == OUT_HANDOFF)
        return FAST_HANDOFF;
    if (o != OUT_COMPLETE)
        return FAST_CLOSE;
    c->keep_after = c->req.keep_alive;
    http_consume(c);
    if (c->pending.len || !c->keep_after) {
        c->served = true;   /* a thread may block on the flush or the lingering close */
        return FAST_HANDOFF;
    }
    return FAST_SERVED;
}

static ssize_t loop_recv(struct conn *c)
{
    if (c->in_len == c->in_cap) {
        if (c->in_cap >= LOOP_IN_MAX) {
            errno = EAGAIN;   /* full of complete requests: serve them first */
            return -1;
        }
        c->in_cap = c->in_cap * 2 < LOOP_IN_MAX ? c->in_cap * 2 : LOOP_IN_MAX;
        c->in = xrealloc(c->in, c->in_cap);
    }
    return recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
}

static void loop_ready(int ep, struct conn *c)
{
    ssize_t n = loop_recv(c);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        conn_drop(c);
        return;
    }
    if (n > 0)
        c->in_len += (size_t)n;
    enum fast f;
    while ((f = loop_serve(c)) == FAST_SERVED)
        ;   /* pipelined requests */
    if (f == FAST_WAIT)
        return;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    if (f == FAST_HANDOFF)
        conn_thread_start(c);
    else
        conn_drop(c);
}

static void loop_accept(int ep)
{
    for (int i = 0; i < 16; i++) {   /* a few at a time, so the other loops get their share */
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);   /* let connections drain */
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = conn_new(fd);
        c->loop = true;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            conn_drop(c);
    }
}

/* Sockets stay blocking (a connection thread may inherit them); the loop uses MSG_DONTWAIT. */
static void *loop_main(void *arg)
{
    (void)arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL };
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &lev) < 0) {
        fprintf(stderr, "sluice-fake-upstream: epoll: %s\n", strerror(errno));
        exit(1);
    }
    for (;;) {
        struct epoll_event ev[64];
        int n = epoll_wait(ep, ev, (int)ARRAY_LEN(ev), -1);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr)
                loop_ready(ep, ev[i].data.ptr);
            else
                loop_accept(ep);
        }
    }
    return NULL;
}

/* One loop per CPU; the calling thread becomes the last one. */
void loop_run(int lfd)
{
    listen_fd = lfd;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cpus < 1 ? 1 : cpus > LOOPS_MAX ? LOOPS_MAX : (int)cpus;
    pthread_attr_init(&conn_attr);
    pthread_attr_setdetachstate(&conn_attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&conn_attr, THREAD_STACK);
    fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);   /* another loop may win the accept */
    for (int i = 1; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, &conn_attr, loop_main, NULL) != 0) {
            fputs("sluice-fake-upstream: cannot start event loops\n", stderr);
            exit(1);
        }
    }
    loop_main(NULL);
}
