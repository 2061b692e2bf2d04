/* fake_conn.c: one client connection: its buffers, blocking socket I/O, and the thread that serves it. */
#include "fake.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

pthread_attr_t conn_attr;   /* detached, small stack; set up once in loop_run() */

struct conn *conn_new(int fd)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        abort();
    c->fd = fd;
    c->in_cap = 16384;
    c->in = xrealloc(NULL, c->in_cap);
    buf_reserve(&c->rbody, 4096);
    buf_reserve(&c->out, 4096);
    buf_reserve(&c->chunked, 4096);
    return c;
}

void conn_drop(struct conn *c)
{
    close(c->fd);   /* plain close: for die_* this is the abrupt end the client must handle */
    free(c->in);
    free(c->chunked.p);
    free(c->rbody.p);
    free(c->out.p);
    free(c->pending.p);
    free(c);
}

/* ---- socket I/O ---- */

/* Reads more input, growing the buffer up to limit; >0 bytes, 0 EOF, -1 error or full. */
ssize_t conn_fill(struct conn *c, size_t limit)
{
    if (c->in_len == c->in_cap) {
        if (c->in_cap >= limit)
            return -1;
        size_t cap = c->in_cap * 2 < limit ? c->in_cap * 2 : limit;
        c->in = xrealloc(c->in, cap);
        c->in_cap = cap;
    }
    for (;;) {
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0)
            c->in_len += (size_t)n;
        return n;
    }
}

/* Writes all of p; on an event loop, what the socket won't take now is parked in c->pending. */
int conn_send(struct conn *c, const char *p, size_t n)
{
    if (c->tl_open)
        timeline_send(c);
    while (n > 0) {
        if (c->loop && c->pending.len) {
            buf_add(&c->pending, p, n);   /* keep the order behind what is already parked */
            return 0;
        }
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | (c->loop ? MSG_DONTWAIT : 0));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && c->loop && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            buf_add(&c->pending, p, n);
            return 0;
        }
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static long elapsed_ms(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Sleeps ms but returns -1 as soon as the client hangs up, so a client timeout counts as aborted. */
int conn_wait(struct conn *c, int ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        long left = ms - elapsed_ms(&t0);
        if (left <= 0)
            return 0;
        struct pollfd p = { .fd = c->fd, .events = POLLRDHUP };
        int n = poll(&p, 1, (int)left);
        if (n > 0 || (n < 0 && errno != EINTR))
            return -1;
    }
}

/* Holds the connection without answering until the client gives up; what it sends is discarded. */
enum outcome conn_hang(struct conn *c)
{
    char sink[4096];
    for (;;) {
        struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLRDHUP };
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            break;
        ssize_t n = recv(c->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
            break;
    }
    return OUT_ABORTED;
}

/*
 * Closing with unread input makes the kernel send RST, which can destroy the
 * reply we just wrote (e.g. a 431 while the client still sends headers). So,
 * after a complete answer, stop writing and drain input briefly before closing.
 */
void conn_linger(struct conn *c)
{
    char sink[16384];
    size_t drained = 0;
    shutdown(c->fd, SHUT_WR);
    while (drained < 16 * 1024 * 1024) {
        struct pollfd p = { .fd = c->fd, .events = POLLIN };
        if (poll(&p, 1, 1000) <= 0)
            return;
        ssize_t n = recv(c->fd, sink, sizeof sink, 0);
        if (n <= 0)
            return;
        drained += (size_t)n;
    }
}

/* ---- connection threads ---- */

/* Takes over from an event loop: sends what it parked, then settles the request it answered. */
static int conn_resume(struct conn *c)
{
    bool served = c->served;
    c->loop = c->served = false;
    if (!served)
        return 0;   /* nothing answered yet: route_serve reads the buffered request again */
    int rc = conn_send(c, c->pending.p, c->pending.len);
    c->pending.len = 0;
    buf_trim(&c->pending);
    if (c->owed)
        stats_end(c, rc == 0 ? OUT_COMPLETE : OUT_ABORTED);
    c->owed = false;
    if (rc == 0 && !c->keep_after)
        conn_linger(c);
    return rc == 0 && c->keep_after ? 0 : -1;
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    if (conn_resume(c) == 0)
        while (route_serve(c) == 0)
            ;
    conn_drop(c);
    return NULL;
}

void conn_thread_start(struct conn *c)
{
    pthread_t t;
    if (pthread_create(&t, &conn_attr, conn_main, c) != 0)
        conn_drop(c);
}
