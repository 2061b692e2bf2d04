/* fcgiconn.c: a FastCGI connection from the front server (see fcgiconn.h). */
#include "fcgiconn.h"

#include "arena.h"
#include "fcgiwire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum {
    IN_SIZE = 8192,             /* read buffer; larger records stream through it */
    PARAMS_MAX = 1 << 20,       /* the params of one request: headers beyond this are an attack */
    FLUSH_AT = 16384,           /* small writes gather up to this before a syscall */
    DIRECT_AT = 8192,           /* a write this large goes out at once, without a copy */
    LINGER_MS = 2000,           /* how long a close waits for the front server's when input was left */
};

enum until { UNTIL_PARAMS, UNTIL_STDIN, UNTIL_NOTHING };

void fcgi_conn_init(struct fcgi_conn *c)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->rec_at = -1;
    buf_init(&c->params, PARAMS_MAX);
    buf_init(&c->env, 0);
    buf_init(&c->mgmt, FCGI_MAX_CONTENT);
    buf_init(&c->out, 0);
}

void fcgi_conn_free(struct fcgi_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    free(c->envp);
    free(c->name_len);
    buf_free(&c->params);
    buf_free(&c->env);
    buf_free(&c->mgmt);
    buf_free(&c->out);
    c->fd = -1;
}

/* ---- writing ---------------------------------------------------------- */

static int send_iov(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
        ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                poll(&p, 1, -1);
                continue;
            }
            return -1;
        }
        while (cnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

/* Writes the open record's length into its header; an empty one is dropped
 * (an empty STDOUT record would end the response). */
static void rec_close(struct fcgi_conn *c)
{
    if (c->rec_at < 0)
        return;
    size_t n = c->out.len - (size_t)c->rec_at - FCGI_HEADER_LEN;
    if (n == 0)
        c->out.len = (size_t)c->rec_at;
    else
        fcgi_header_put((unsigned char *)c->out.data + c->rec_at, FCGI_STDOUT, c->id, n);
    c->rec_at = -1;
}

int fcgi_flush(struct fcgi_conn *c)
{
    if (c->dead || c->fd < 0)
        return -1;
    rec_close(c);
    if (c->out.len == 0)
        return 0;
    if (c->nonblock) {
        ssize_t n = send(c->fd, c->out.data, c->out.len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            n = 0;
        if (n < 0) {
            c->dead = 1;
            return -1;
        }
        memmove(c->out.data, c->out.data + n, c->out.len - (size_t)n);
        c->out.len -= (size_t)n;
        return 0;
    }
    struct iovec iov = {.iov_base = c->out.data, .iov_len = c->out.len};
    int rc = send_iov(c->fd, &iov, 1);
    buf_reset(&c->out);     /* after: it writes the first byte */
    if (rc != 0) {
        c->dead = 1;
        return -1;
    }
    return 0;
}

static int send_record(struct fcgi_conn *c, int type, unsigned id, const void *body, size_t len)
{
    unsigned char h[FCGI_HEADER_LEN];
    rec_close(c);
    fcgi_header_put(h, type, id, len);
    if (buf_append(&c->out, h, sizeof h) != 0 || buf_append(&c->out, body, len) != 0)
        return -1;
    return fcgi_flush(c);
}

static int send_end(struct fcgi_conn *c, unsigned id, int protocol_status)
{
    unsigned char b[8];
    fcgi_end_body_put(b, 0, protocol_status);
    return send_record(c, FCGI_END_REQUEST, id, b, sizeof b);
}

int fcgi_write(struct fcgi_conn *c, const char *data, size_t n)
{
    if (c->dead || c->fd < 0)
        return -1;
    if (n >= DIRECT_AT && !c->nonblock) {
        /* Large: what gathered, then the data from where it lies, one syscall
         * per 64 KiB record. */
        rec_close(c);
        while (n > 0) {
            size_t k = n > FCGI_MAX_CONTENT ? FCGI_MAX_CONTENT : n;
            unsigned char h[FCGI_HEADER_LEN];
            fcgi_header_put(h, FCGI_STDOUT, c->id, k);
            struct iovec iov[3] = {{c->out.data, c->out.len}, {h, sizeof h}, {(char *)data, k}};
            int rc = send_iov(c->fd, iov, 3);
            buf_reset(&c->out);
            if (rc != 0) {
                c->dead = 1;
                return -1;
            }
            data += k;
            n -= k;
        }
        return 0;
    }
    while (n > 0) {
        if (c->rec_at < 0) {
            static const unsigned char placeholder[FCGI_HEADER_LEN];
            c->rec_at = (long)c->out.len;
            if (buf_append(&c->out, placeholder, sizeof placeholder) != 0)
                return -1;
        }
        size_t room = FCGI_MAX_CONTENT - (c->out.len - (size_t)c->rec_at - FCGI_HEADER_LEN);
        size_t k = n < room ? n : room;
        if (buf_append(&c->out, data, k) != 0)
            return -1;
        if (k == room)
            rec_close(c);
        data += k;
        n -= k;
    }
    return c->out.len >= FLUSH_AT ? fcgi_flush(c) : 0;
}

void fcgi_set_nonblocking(struct fcgi_conn *c, int on)
{
    int fl = fcntl(c->fd, F_GETFL);
    if (fl >= 0)
        fcntl(c->fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
    c->nonblock = on;
}

size_t fcgi_pending(const struct fcgi_conn *c) { return c->out.len; }

/* ---- reading ---------------------------------------------------------- */

/* More bytes into c->in: > 0 read, 0 end of the connection, -1 error, -2 none
 * yet (not blocking). */
static long fill(struct fcgi_conn *c, int block)
{
    if (c->in_off == c->in_len) {
        c->in_off = c->in_len = 0;
    } else if (c->in_off > 0) {
        memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
        c->in_len -= c->in_off;
        c->in_off = 0;
    }
    for (;;) {
        ssize_t n = recv(c->fd, c->in + c->in_len, IN_SIZE - c->in_len, block ? 0 : MSG_DONTWAIT);
        if (n > 0) {
            c->in_len += (size_t)n;
            return n;
        }
        if (n == 0) {
            c->eof = 1;
            return 0;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!block)
                return -2;
            struct pollfd p = {.fd = c->fd, .events = POLLIN};
            poll(&p, 1, -1);
            continue;
        }
        c->eof = 1;
        return -1;
    }
}

static int answer_get_values(struct fcgi_conn *c)
{
    static const struct {
        const char *name, *value;
    } known[] = {{"FCGI_MAX_CONNS", "1024"}, {"FCGI_MAX_REQS", "1024"}, {"FCGI_MPXS_CONNS", "0"}};
    unsigned char reply[512];
    size_t len = 0, off = 0;
    const unsigned char *p = (const unsigned char *)c->mgmt.data;
    size_t no, nl, vo, vl;
    while (off < c->mgmt.len && fcgi_pair_parse(p + off, c->mgmt.len - off, &no, &nl, &vo, &vl) == 1) {
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strlen(known[i].name) == nl && memcmp(p + off + no, known[i].name, nl) == 0)
                len += fcgi_pair_put(reply + len, sizeof reply - len, known[i].name, nl, known[i].value,
                                     strlen(known[i].value));
        off += vo + vl;
    }
    return send_record(c, FCGI_GET_VALUES_RESULT, 0, reply, len);
}

static int build_env(struct fcgi_conn *c);

/* A record's content has been read: what it means. -1 ends the connection. */
static int record_end(struct fcgi_conn *c)
{
    size_t content = c->rlen;
    const unsigned char *m = (const unsigned char *)c->mgmt.data;
    switch (c->rtype) {
    case FCGI_BEGIN_REQUEST:
        if (c->mgmt.len < 8)
            return -1;
        if (c->id == 0) {
            if (((unsigned)m[0] << 8 | m[1]) != FCGI_RESPONDER) {
                if (send_end(c, c->rid, FCGI_UNKNOWN_ROLE) != 0 || !(m[2] & FCGI_KEEP_CONN))
                    return -1;
                break;
            }
            c->id = c->rid;
            c->keep = m[2] & FCGI_KEEP_CONN;
        } else if (c->rid != c->id && send_end(c, c->rid, FCGI_CANT_MPX_CONN) != 0) {
            return -1;
        }
        break;
    case FCGI_ABORT_REQUEST:
        if (c->id && c->rid == c->id)
            c->aborted = 1;
        break;
    case FCGI_PARAMS:
        if (c->id && c->rid == c->id && content == 0 && !c->params_done) {
            if (build_env(c) != 0)
                return -1;
            c->params_done = 1;
        }
        break;
    case FCGI_STDIN:
        if (c->id && c->rid == c->id && content == 0)
            c->stdin_done = 1;
        break;
    case FCGI_GET_VALUES:
        if (c->rid == FCGI_NULL_REQUEST_ID && answer_get_values(c) != 0)
            return -1;
        break;
    default:
        if (c->rid == FCGI_NULL_REQUEST_ID) {
            unsigned char b[8] = {(unsigned char)c->rtype};
            if (send_record(c, FCGI_UNKNOWN_TYPE, 0, b, sizeof b) != 0)
                return -1;
        }
        break;
    }
    return 0;
}

static int whole_record(int type)
{
    return type == FCGI_BEGIN_REQUEST || type == FCGI_ABORT_REQUEST || type == FCGI_GET_VALUES;
}

/* Reads records until `until` holds: 0 it does, 1 nothing more to read now
 * (not blocking), -1 the connection ended or broke. */
static int pump(struct fcgi_conn *c, int block, enum until until)
{
    for (;;) {
        if (until == UNTIL_PARAMS && c->params_done)
            return 0;
        /* The front server sends nothing more for an aborted request and
         * waits for its END_REQUEST: reading on would wait for good. */
        if (until != UNTIL_NOTHING && c->aborted)
            return 0;
        if (until == UNTIL_STDIN &&
            (c->stdin_done || (c->rstarted && c->rtype == FCGI_STDIN && c->id && c->rid == c->id && c->rleft > 0)))
            return 0;
        size_t avail = c->in_len - c->in_off;
        if (!c->rstarted) {
            if (avail < FCGI_HEADER_LEN) {
                long n = fill(c, block);
                if (n > 0)
                    continue;
                return n == -2 ? 1 : -1;
            }
            struct fcgi_header h;
            fcgi_header_parse(c->in + c->in_off, &h);
            if (h.version != FCGI_VERSION_1)
                return -1;
            c->in_off += FCGI_HEADER_LEN;
            c->rtype = h.type;
            c->rid = h.id;
            c->rleft = c->rlen = h.content;
            c->rpad = h.padding;
            c->rstarted = 1;
            buf_reset(&c->mgmt);
            continue;
        }
        if (c->rleft > 0 || c->rpad > 0) {
            if (avail == 0) {
                long n = fill(c, block);
                if (n > 0)
                    continue;
                return n == -2 ? 1 : -1;
            }
            if (c->rleft > 0) {
                size_t k = avail < c->rleft ? avail : c->rleft;
                const unsigned char *p = c->in + c->in_off;
                int ours = c->id && c->rid == c->id;
                if (c->rtype == FCGI_PARAMS && ours && !c->params_done) {
                    if (buf_append(&c->params, p, k) != 0)
                        return -1;
                } else if (whole_record(c->rtype)) {
                    if (buf_append(&c->mgmt, p, k) != 0)
                        return -1;
                }
                /* else skipped: another request's, DATA, or stdin nobody reads */
                c->in_off += k;
                c->rleft -= k;
            } else {
                size_t k = avail < c->rpad ? avail : c->rpad;
                c->in_off += k;
                c->rpad -= k;
            }
            continue;
        }
        c->rstarted = 0;
        if (record_end(c) != 0)
            return -1;
    }
}

static int build_env(struct fcgi_conn *c)
{
    const unsigned char *p = (const unsigned char *)c->params.data;
    size_t off = 0, n = c->params.len, count = 0, len = 0;
    /* A pair's length bytes (two at least) become its '=' and NUL, so env never outgrows
     * params: its room is made once and the pairs copied in, not four appends a pair. */
    buf_reset(&c->env);
    if (buf_append(&c->env, p, n) != 0)
        return -1;
    char *e = c->env.data;
    while (off < n) {
        size_t no, nl, vo, vl;
        if (fcgi_pair_parse(p + off, n - off, &no, &nl, &vo, &vl) != 1)
            return -1;
        if (count + 2 > c->envp_cap) {
            c->envp_cap = c->envp_cap ? c->envp_cap * 2 : 64;
            c->envp = xrealloc(c->envp, c->envp_cap * sizeof *c->envp);
            c->name_len = xrealloc(c->name_len, c->envp_cap * sizeof *c->name_len);
        }
        /* offsets now, pointers once env stops moving */
        c->envp[count] = (char *)(uintptr_t)len;
        c->name_len[count] = nl;
        if (len + nl + vl + 2 >= c->env.cap)
            return -1;              /* cannot happen (above); never writes past the room */
        memcpy(e + len, p + off + no, nl);
        len += nl;
        e[len++] = '=';
        memcpy(e + len, p + off + vo, vl);
        len += vl;
        e[len++] = '\0';
        count++;
        off += vo + vl;
    }
    if (!c->envp) {
        c->envp_cap = 64;
        c->envp = xmalloc(c->envp_cap * sizeof *c->envp);
        c->name_len = xmalloc(c->envp_cap * sizeof *c->name_len);
    }
    c->env.len = len;
    e[len] = '\0';                   /* len <= n < cap */
    for (size_t i = 0; i < count; i++)
        c->envp[i] = c->env.data + (uintptr_t)c->envp[i];
    c->envp[count] = NULL;
    c->nparams = count;
    return 0;
}

const char *fcgi_param(const struct fcgi_conn *c, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < c->nparams; i++)
        if (c->name_len[i] == n && memcmp(c->envp[i], name, n) == 0)
            return c->envp[i] + n + 1;
    return NULL;
}

long fcgi_read(struct fcgi_conn *c, char *buf, size_t n)
{
    if (c->stdin_done)
        return 0;
    if (n == 0 || pump(c, 1, UNTIL_STDIN) != 0)
        return c->stdin_done ? 0 : -1;
    if (c->stdin_done)
        return 0;
    if (c->aborted)
        return -1;
    size_t avail = c->in_len - c->in_off, k;
    if (avail > 0) {
        k = avail < c->rleft ? avail : c->rleft;
        if (k > n)
            k = n;
        memcpy(buf, c->in + c->in_off, k);
        c->in_off += k;
    } else {
        /* nothing buffered: straight into the caller's memory */
        size_t want = c->rleft < n ? c->rleft : n;
        ssize_t got;
        do
            got = recv(c->fd, buf, want, 0);
        while (got < 0 && errno == EINTR);
        if (got <= 0) {
            c->eof = 1;
            return -1;
        }
        k = (size_t)got;
    }
    c->rleft -= k;
    return (long)k;
}

int fcgi_gone(struct fcgi_conn *c)
{
    if (c->fd < 0 || c->eof || c->aborted || c->dead)
        return 1;
    if (pump(c, 0, UNTIL_NOTHING) < 0)
        return 1;
    return c->aborted;
}

/* ---- the connection's life -------------------------------------------- */

/* FCGI_WEB_SERVER_ADDRS (as libfcgi reads it): the addresses a TCP front
 * server may connect from; unset, any. A Unix socket's peer is always let in
 * (its file's permissions decide). */
static int peer_allowed(int fd)
{
    static const char *allowed;
    static int read_env;
    if (!read_env) {
        allowed = getenv("FCGI_WEB_SERVER_ADDRS");
        read_env = 1;
    }
    if (!allowed || !*allowed)
        return 1;
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (getpeername(fd, (struct sockaddr *)&sa, &len) != 0)
        return 0;
    char addr[INET6_ADDRSTRLEN];
    if (sa.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, addr, sizeof addr);
    else if (sa.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, addr, sizeof addr);
    else
        return 1;
    size_t n = strlen(addr);
    for (const char *p = allowed; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if ((size_t)(e - p) == n && memcmp(p, addr, n) == 0)
            return 1;
        p = e;
    }
    return 0;
}

static void drop(struct fcgi_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

int fcgi_accept(struct fcgi_conn *c, int listen_fd)
{
    if (!c->in)
        c->in = xmalloc(IN_SIZE);
    for (;;) {
        if (c->fd < 0) {
            int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    struct pollfd p = {.fd = listen_fd, .events = POLLIN};
                    poll(&p, 1, -1);
                    continue;
                }
                return -1;
            }
            if (!peer_allowed(fd)) {
                close(fd);
                continue;
            }
            c->fd = fd;
            c->in_off = c->in_len = 0;
            c->rstarted = 0;
            c->keep = 0;
        }
        c->id = 0;
        c->params_done = c->stdin_done = c->aborted = c->eof = c->dead = 0;
        c->nparams = 0;
        c->nonblock = 0;
        buf_reset(&c->params);
        buf_reset(&c->out);
        c->rec_at = -1;
        if (pump(c, 1, UNTIL_PARAMS) == 0) {
            if (c->params_done)
                return 0;
            /* aborted before its params ended: answered, the connection kept if asked */
            if (send_end(c, c->id, FCGI_REQUEST_COMPLETE) == 0 && c->keep)
                continue;
        }
        drop(c);
    }
}

static int64_t mono_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Input left unread: a close now could reset the connection and lose the
 * answer on its way. Say we are done writing, wait for the front server to
 * close its side (bounded), then close. */
static void linger(struct fcgi_conn *c)
{
    shutdown(c->fd, SHUT_WR);
    int64_t end = mono_now_ms() + LINGER_MS;
    for (;;) {
        int64_t left = end - mono_now_ms();
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return;
        if (recv(c->fd, c->in, IN_SIZE, MSG_DONTWAIT) <= 0)
            return;
    }
}

/* The end of stdout and END_REQUEST, sent as far as the socket takes them. */
static void end_request(struct fcgi_conn *c)
{
    if (c->dead || !c->id)
        return;
    unsigned char t[24];
    rec_close(c);
    fcgi_header_put(t, FCGI_STDOUT, c->id, 0);
    fcgi_header_put(t + 8, FCGI_END_REQUEST, c->id, 8);
    fcgi_end_body_put(t + 16, 0, FCGI_REQUEST_COMPLETE);
    if (buf_append(&c->out, t, sizeof t) == 0)
        fcgi_flush(c);
}

int fcgi_finish_unsent(struct fcgi_conn *c, int *fd, char **rest, size_t *len)
{
    if (c->fd < 0 || !c->nonblock) {
        fcgi_finish(c);
        return 0;
    }
    end_request(c);
    if (c->dead || c->out.len == 0) {
        drop(c);            /* all sent (or lost); not kept: the next request comes on a new one */
        return 0;
    }
    *fd = c->fd;
    *len = c->out.len;
    *rest = xmalloc(c->out.len);
    memcpy(*rest, c->out.data, c->out.len);
    buf_reset(&c->out);
    c->fd = -1;
    return 1;
}

void fcgi_finish(struct fcgi_conn *c)
{
    if (c->fd < 0)
        return;
    end_request(c);
    /* An aborted request is over too: the front server sends nothing more for
     * it once it has the END_REQUEST (what is still on the way is skipped). */
    if (c->keep && !c->dead && !c->eof) {
        c->id = 0;          /* the next BEGIN_REQUEST comes on this connection */
        return;
    }
    if (!c->stdin_done && !c->dead && !c->eof)
        linger(c);
    drop(c);
}
