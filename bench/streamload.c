/* streamload.c: SSE load client for bench/run (time to first token, many concurrent streams). */

/*
 * streamload --port P [--key K] [--behavior B] [--n N] [--conc C] [--warmup W]
 *            [--chunks K] [--timeout S] [--samples FILE] [--model M]
 *
 * Sends N streaming POST /v1/chat/completions requests to 127.0.0.1:P with C of
 * them in flight at once (C = 1: sequential, each on the same kept-alive
 * connection), after W unmeasured warm-up requests.  One epoll loop, no threads,
 * so 450 streams cost one process and a few MB.
 *
 * For every request it records the time from writing the request to reading
 * the first SSE "data:" event whose delta carries non-empty content (TTFT),
 * to the first "data:" event of any kind (the first event: a role-only chunk counts),
 * the whole duration, and whether the stream is a success: status 200, no
 * error event, a "data: [DONE]" event, and (with --chunks K) the concatenated
 * content exactly equal to "w1 w2 ... wK", what the stand-in upstream sends.
 *
 * Prints key=value lines: requests ok failed ttft_p50_ms ttft_p99_ms ttft_max_ms
 * event_p50_ms event_p99_ms dur_p50_ms dur_max_ms, fail_REASON=count, and one example failure.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { HEAD_MAX = 16384, LINE_MAX_LEN = 256, CONTENT_MAX = 65536, ERRTEXT_MAX = 200 };

enum cstate { C_IDLE, C_CONNECTING, C_SENDING, C_READING };
enum bstate { B_HEAD, B_LEN, B_EOF, B_CH_SIZE, B_CH_DATA, B_CH_CRLF, B_CH_TRAILER, B_DONE };

struct result {
    double t_send, t_first, t_event, t_end;
    bool measured, ok;
    const char *reason;
};

struct conn {
    int fd;
    enum cstate st;
    int req;                 /* index into results, -1 when none */
    bool reused;             /* the request went out on a kept-alive connection */
    bool got_bytes;
    int resends;
    size_t out_off;
    /* response parsing */
    enum bstate bs;
    char head[HEAD_MAX];
    size_t head_len;
    int status;
    long left;               /* B_LEN and B_CH_DATA */
    bool keep_alive;
    char line[LINE_MAX_LEN];
    size_t line_len;
    /* SSE */
    char *ev;
    size_t ev_len, ev_cap;
    char content[CONTENT_MAX];
    size_t content_len;
    bool done, err_event, overflow;
    char errtext[ERRTEXT_MAX + 1];
    size_t errtext_len;
};

static struct {
    int port;
    const char *key, *behavior, *model, *samples;
    int n, conc, warmup, chunks;
    double timeout_s;
    char *request;
    size_t request_len;
    char expected[CONTENT_MAX];
    int ep;
    struct result *res;
    int total, next, finished;
    char example[512];
} G = { .model = "m", .n = 1, .conc = 1, .chunks = -1, .timeout_s = 60 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "streamload: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void build_request(void)
{
    char body[512];
    int bn = snprintf(body, sizeof body,
                      "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}],"
                      "\"stream\":true}", G.model);
    char auth[512] = "", beh[512] = "";
    if (G.key && *G.key)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", G.key);
    if (G.behavior && *G.behavior)
        snprintf(beh, sizeof beh, "X-Fake-Behavior: %s\r\n", G.behavior);
    size_t cap = 2048 + (size_t)bn;
    G.request = malloc(cap);
    if (!G.request)
        die("malloc");
    int n = snprintf(G.request, cap,
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                     "Content-Type: application/json\r\nAccept: text/event-stream\r\n%s%s"
                     "Content-Length: %d\r\n\r\n%s", G.port, auth, beh, bn, body);
    G.request_len = (size_t)n;
    if (G.chunks >= 0) {
        size_t len = 0;
        G.expected[0] = 0;
        for (int k = 1; k <= G.chunks && len + 32 < sizeof G.expected; k++)
            len += (size_t)snprintf(G.expected + len, sizeof G.expected - len, "w%d%s", k,
                                    k < G.chunks ? " " : "");
    }
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0) {
        epoll_ctl(G.ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1;
    c->st = C_IDLE;
}

static void watch(struct conn *c, uint32_t events, int op)
{
    struct epoll_event e = { .events = events, .data.ptr = c };
    if (epoll_ctl(G.ep, op, c->fd, &e) < 0)
        die("epoll_ctl");
}

static void parse_reset(struct conn *c)
{
    c->bs = B_HEAD;
    c->head_len = 0;
    c->status = 0;
    c->left = 0;
    c->keep_alive = true;
    c->line_len = 0;
    c->ev_len = 0;
    c->content_len = 0;
    c->done = c->err_event = c->overflow = false;
    c->errtext_len = 0;
    c->got_bytes = false;
    c->out_off = 0;
}

static void finish(struct conn *c, bool ok, const char *reason);

static void send_more(struct conn *c)
{
    struct result *r = &G.res[c->req];
    if (c->out_off == 0 && c->resends == 0)
        r->t_send = now_s();
    while (c->out_off < G.request_len) {
        ssize_t n = send(c->fd, G.request + c->out_off, G.request_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            watch(c, EPOLLOUT, EPOLL_CTL_MOD);
            c->st = C_SENDING;
            return;
        }
        if (n < 0) {
            finish(c, false, "send");
            return;
        }
        c->out_off += (size_t)n;
    }
    c->st = C_READING;
    watch(c, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
}

static void open_and_send(struct conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die("socket");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)G.port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->reused = false;
    watch(c, EPOLLOUT, EPOLL_CTL_ADD);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
        finish(c, false, "connect");
        return;
    }
    c->st = C_CONNECTING;
}

static bool start_next(struct conn *c)
{
    if (G.next >= G.total)
        return false;
    c->req = G.next++;
    c->resends = 0;
    parse_reset(c);
    if (c->fd >= 0) {
        c->reused = true;
        send_more(c);
    } else {
        open_and_send(c);
    }
    return true;
}

static void finish(struct conn *c, bool ok, const char *reason)
{
    struct result *r = &G.res[c->req];
    r->t_end = now_s();
    r->ok = ok;
    r->reason = ok ? NULL : reason;
    if (!ok && !G.example[0] && r->measured)
        snprintf(G.example, sizeof G.example, "request %d: %s (status %d, done %d, content %.*s%s; body %.*s)",
                 c->req, reason, c->status, c->done, (int)(c->content_len > 80 ? 80 : c->content_len),
                 c->content, c->content_len > 80 ? "..." : "", (int)c->errtext_len, c->errtext);
    G.finished++;
    c->req = -1;
    if (!ok || !c->keep_alive)
        conn_close(c);
    else
        c->st = C_IDLE;
    start_next(c);
}

/* One SSE event (without its blank line). */
static void sse_event(struct conn *c, char *e, size_t n)
{
    char *end = e + n;
    for (char *l = e; l < end;) {
        char *nl = memchr(l, '\n', (size_t)(end - l));
        char *le = nl ? nl : end;
        size_t len = (size_t)(le - l);
        if (len && l[len - 1] == '\r')
            len--;
        if (len >= 5 && memcmp(l, "data:", 5) == 0) {
            struct result *re = &G.res[c->req];
            if (re->t_event == 0)
                re->t_event = now_s();   /* the first event of any kind (a role-only chunk too) */
            char *p = l + 5;
            size_t pn = len - 5;
            if (pn && *p == ' ')
                p++, pn--;
            if (pn == 6 && memcmp(p, "[DONE]", 6) == 0) {
                c->done = true;
            } else if (pn >= 8 && memcmp(p, "{\"error\"", 8) == 0) {
                c->err_event = true;
                if (!c->errtext_len) {
                    c->errtext_len = pn > ERRTEXT_MAX ? ERRTEXT_MAX : pn;
                    memcpy(c->errtext, p, c->errtext_len);
                }
            } else {
                char *q = memmem(p, pn, "\"content\":\"", 11);
                if (q) {
                    q += 11;
                    char *s = q;
                    while (s < p + pn && *s != '"') {
                        if (*s == '\\' && s + 1 < p + pn)
                            s++;
                        s++;
                    }
                    size_t cn = (size_t)(s - q);
                    if (cn > 0) {
                        struct result *r = &G.res[c->req];
                        if (r->t_first == 0)
                            r->t_first = now_s();
                        if (c->content_len + cn < sizeof c->content) {
                            memcpy(c->content + c->content_len, q, cn);
                            c->content_len += cn;
                        } else {
                            c->overflow = true;
                        }
                    }
                }
            }
        }
        l = nl ? nl + 1 : end;
    }
}

static void body_bytes(struct conn *c, const char *p, size_t n)
{
    if (c->status != 200) {
        size_t room = ERRTEXT_MAX - c->errtext_len;
        size_t k = n < room ? n : room;
        memcpy(c->errtext + c->errtext_len, p, k);
        c->errtext_len += k;
        return;
    }
    if (c->ev_len + n > c->ev_cap) {
        size_t cap = c->ev_cap ? c->ev_cap : 4096;
        while (cap < c->ev_len + n)
            cap *= 2;
        c->ev = realloc(c->ev, cap);
        if (!c->ev)
            die("realloc");
        c->ev_cap = cap;
    }
    memcpy(c->ev + c->ev_len, p, n);
    c->ev_len += n;
    size_t start = 0;
    for (;;) {
        char *b = memmem(c->ev + start, c->ev_len - start, "\n\n", 2);
        char *b2 = memmem(c->ev + start, c->ev_len - start, "\r\n\r\n", 4);
        size_t blen = 2;
        if (b2 && (!b || b2 < b))
            b = b2, blen = 4;
        if (!b)
            break;
        sse_event(c, c->ev + start, (size_t)(b - (c->ev + start)));
        start = (size_t)(b - c->ev) + blen;
    }
    memmove(c->ev, c->ev + start, c->ev_len - start);
    c->ev_len -= start;
}

static void response_done(struct conn *c)
{
    c->bs = B_DONE;
    if (c->status != 200)
        finish(c, false, "status");
    else if (c->err_event)
        finish(c, false, "error_event");
    else if (!c->done)
        finish(c, false, "no_done");
    else if (c->overflow || (G.chunks >= 0 && (c->content_len != strlen(G.expected) ||
                                                memcmp(c->content, G.expected, c->content_len) != 0)))
        finish(c, false, "content");
    else
        finish(c, true, NULL);
}

static bool head_parse(struct conn *c)
{
    /* status line */
    if (c->head_len < 12 || memcmp(c->head, "HTTP/1.", 7) != 0)
        return false;
    c->status = atoi(c->head + 9);
    bool http10 = c->head[7] == '0';
    bool chunked = false;
    long clen = -1;
    c->keep_alive = !http10;
    char *p = memchr(c->head, '\n', c->head_len);
    char *end = c->head + c->head_len;
    while (p && p + 1 < end) {
        char *l = p + 1;
        char *nl = memchr(l, '\n', (size_t)(end - l));
        if (!nl)
            break;
        size_t len = (size_t)(nl - l);
        if (len && l[len - 1] == '\r')
            len--;
        char *colon = memchr(l, ':', len);
        if (colon) {
            size_t kn = (size_t)(colon - l);
            char *v = colon + 1;
            while (v < l + len && (*v == ' ' || *v == '\t'))
                v++;
            size_t vn = (size_t)(l + len - v);
            if (kn == 14 && strncasecmp(l, "content-length", 14) == 0)
                clen = atol(v);
            else if (kn == 17 && strncasecmp(l, "transfer-encoding", 17) == 0 && memmem(v, vn, "chunked", 7))
                chunked = true;
            else if (kn == 10 && strncasecmp(l, "connection", 10) == 0) {
                if (vn >= 5 && strncasecmp(v, "close", 5) == 0)
                    c->keep_alive = false;
                else if (vn >= 10 && strncasecmp(v, "keep-alive", 10) == 0)
                    c->keep_alive = true;
            }
        }
        p = nl;
    }
    if (chunked)
        c->bs = B_CH_SIZE;
    else if (clen >= 0)
        c->bs = B_LEN, c->left = clen;
    else
        c->bs = B_EOF, c->keep_alive = false;
    return true;
}

/* Reads one line into c->line; returns true when complete (without CRLF). */
static bool take_line(struct conn *c, const char **p, const char *end)
{
    while (*p < end) {
        char ch = *(*p)++;
        if (ch == '\n') {
            if (c->line_len && c->line[c->line_len - 1] == '\r')
                c->line_len--;
            c->line[c->line_len] = 0;
            return true;
        }
        if (c->line_len < LINE_MAX_LEN - 1)
            c->line[c->line_len++] = ch;
    }
    return false;
}

/* Feeds received bytes; returns false if the request was finished (c may be reused). */
static bool feed(struct conn *c, const char *p, size_t n)
{
    const char *end = p + n;
    while (p < end || c->bs == B_LEN) {
        switch (c->bs) {
        case B_HEAD: {
            size_t room = HEAD_MAX - c->head_len;
            size_t k = (size_t)(end - p) < room ? (size_t)(end - p) : room;
            memcpy(c->head + c->head_len, p, k);
            size_t old = c->head_len;
            c->head_len += k;
            char *e = memmem(c->head, c->head_len, "\r\n\r\n", 4);
            if (!e) {
                if (c->head_len == HEAD_MAX) {
                    finish(c, false, "head_too_big");
                    return false;
                }
                p += k;
                break;
            }
            size_t hl = (size_t)(e - c->head) + 4;
            p += hl - old;
            c->head_len = hl;
            if (!head_parse(c)) {
                finish(c, false, "bad_head");
                return false;
            }
            if (c->status >= 100 && c->status < 200) {   /* interim response */
                c->head_len = 0;
                c->bs = B_HEAD;
            }
            break;
        }
        case B_LEN: {
            if (c->left == 0) {
                response_done(c);
                return false;
            }
            if (p >= end)
                return true;
            size_t k = (size_t)(end - p) < (size_t)c->left ? (size_t)(end - p) : (size_t)c->left;
            body_bytes(c, p, k);
            p += k;
            c->left -= (long)k;
            break;
        }
        case B_EOF:
            body_bytes(c, p, (size_t)(end - p));
            p = end;
            break;
        case B_CH_SIZE:
            if (!take_line(c, &p, end))
                break;
            c->left = strtol(c->line, NULL, 16);
            c->line_len = 0;
            c->bs = c->left > 0 ? B_CH_DATA : B_CH_TRAILER;
            break;
        case B_CH_DATA: {
            size_t k = (size_t)(end - p) < (size_t)c->left ? (size_t)(end - p) : (size_t)c->left;
            body_bytes(c, p, k);
            p += k;
            c->left -= (long)k;
            if (c->left == 0)
                c->bs = B_CH_CRLF;
            break;
        }
        case B_CH_CRLF:
            if (!take_line(c, &p, end))
                break;
            c->line_len = 0;
            c->bs = B_CH_SIZE;
            break;
        case B_CH_TRAILER:
            if (!take_line(c, &p, end))
                break;
            if (c->line_len == 0) {
                response_done(c);
                return false;
            }
            c->line_len = 0;
            break;
        case B_DONE:
            return false;
        }
    }
    return true;
}

static void on_readable(struct conn *c)
{
    char buf[65536];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (c->bs == B_EOF) {
                c->keep_alive = false;
                response_done(c);
            } else if (c->reused && !c->got_bytes && c->resends == 0) {
                /* the server closed the idle kept-alive connection: resend on a new one */
                conn_close(c);
                c->resends = 1;
                parse_reset(c);
                open_and_send(c);
            } else {
                finish(c, false, n < 0 ? "recv" : "eof");
            }
            return;
        }
        c->got_bytes = true;
        if (!feed(c, buf, (size_t)n))
            return;   /* finished: the connection may carry the next request now */
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    if (n == 0)
        return 0;
    int i = (int)(p * n + 0.999999) - 1;
    if (i < 0)
        i = 0;
    if (i >= n)
        i = n - 1;
    return v[i];
}

static void usage(void)
{
    fputs("usage: streamload --port P [--key K] [--behavior B] [--n N] [--conc C] [--warmup W]\n"
          "                  [--chunks K] [--timeout S] [--samples FILE] [--model M]\n", stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (!strcmp(a, "--port")) G.port = atoi(v);
        else if (!strcmp(a, "--key")) G.key = v;
        else if (!strcmp(a, "--behavior")) G.behavior = v;
        else if (!strcmp(a, "--model")) G.model = v;
        else if (!strcmp(a, "--n")) G.n = atoi(v);
        else if (!strcmp(a, "--conc")) G.conc = atoi(v);
        else if (!strcmp(a, "--warmup")) G.warmup = atoi(v);
        else if (!strcmp(a, "--chunks")) G.chunks = atoi(v);
        else if (!strcmp(a, "--timeout")) G.timeout_s = atof(v);
        else if (!strcmp(a, "--samples")) G.samples = v;
        else usage();
        i++;
    }
    if (G.port <= 0 || G.n <= 0 || G.conc <= 0 || G.warmup < 0)
        usage();
    build_request();
    G.total = G.warmup + G.n;
    G.res = calloc((size_t)G.total, sizeof *G.res);
    int nconn = G.conc < G.total ? G.conc : G.total;
    struct conn *conns = calloc((size_t)nconn, sizeof *conns);
    if (!G.res || !conns)
        die("calloc");
    for (int i = 0; i < G.total; i++)
        G.res[i].measured = i >= G.warmup;
    G.ep = epoll_create1(EPOLL_CLOEXEC);
    if (G.ep < 0)
        die("epoll_create1");
    for (int i = 0; i < nconn; i++)
        conns[i].fd = -1, conns[i].req = -1;
    /* Warm-up requests run one at a time before the measured ones. */
    int warm_conc = G.warmup > 0 ? 1 : nconn;
    for (int i = 0; i < warm_conc; i++)
        start_next(&conns[i]);
    bool all_started = warm_conc == nconn;
    double deadline = now_s() + G.timeout_s;
    struct epoll_event evs[256];
    while (G.finished < G.total) {
        if (!all_started && G.finished >= G.warmup) {
            for (int i = 1; i < nconn; i++)
                start_next(&conns[i]);
            all_started = true;
        }
        if (now_s() > deadline)
            break;
        int n = epoll_wait(G.ep, evs, 256, 100);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c->req < 0 || c->fd < 0) {
                if (c->fd >= 0 && c->st == C_IDLE)
                    conn_close(c);   /* the server closed an idle connection */
                continue;
            }
            if (c->st == C_CONNECTING) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err) {
                    errno = err;
                    finish(c, false, "connect");
                    continue;
                }
                send_more(c);
            } else if (c->st == C_SENDING) {
                send_more(c);
            } else if (c->st == C_READING) {
                on_readable(c);
            }
        }
    }
    for (int i = 0; i < nconn; i++)
        if (conns[i].req >= 0) {
            struct result *r = &G.res[conns[i].req];
            r->ok = false;
            r->reason = "timeout";
            r->t_end = now_s();
            if (!G.example[0])
                snprintf(G.example, sizeof G.example, "request %d: timeout after %.0fs (status %d, %zu content bytes)",
                         conns[i].req, G.timeout_s, conns[i].status, conns[i].content_len);
        }
    /* Requests never started count as failed too. */
    int ok = 0, failed = 0;
    double *ttft = calloc((size_t)G.n + 1, sizeof *ttft), *dur = calloc((size_t)G.n + 1, sizeof *dur);
    double *first = calloc((size_t)G.n + 1, sizeof *first);
    int nt = 0, nd = 0, ne = 0;
    const char *reasons[32];
    int counts[32], nr = 0;
    FILE *sf = G.samples ? fopen(G.samples, "w") : NULL;
    for (int i = G.warmup; i < G.total; i++) {
        struct result *r = &G.res[i];
        const char *why = r->ok ? NULL : (r->reason ? r->reason : (r->t_send ? "timeout" : "not_started"));
        if (r->ok) {
            ok++;
            if (r->t_first > 0)
                ttft[nt++] = (r->t_first - r->t_send) * 1000;
            if (r->t_event > 0)
                first[ne++] = (r->t_event - r->t_send) * 1000;
            dur[nd++] = (r->t_end - r->t_send) * 1000;
            if (sf)
                fprintf(sf, "%.3f %.3f\n", r->t_first > 0 ? (r->t_first - r->t_send) * 1000 : -1,
                        (r->t_end - r->t_send) * 1000);
        } else {
            failed++;
            int k;
            for (k = 0; k < nr && strcmp(reasons[k], why); k++)
                ;
            if (k == nr && nr < 32)
                reasons[nr] = why, counts[nr++] = 0;
            if (k < nr)
                counts[k]++;
        }
    }
    if (sf)
        fclose(sf);
    qsort(ttft, (size_t)nt, sizeof *ttft, cmp_double);
    qsort(dur, (size_t)nd, sizeof *dur, cmp_double);
    qsort(first, (size_t)ne, sizeof *first, cmp_double);
    printf("requests=%d\nok=%d\nfailed=%d\n", G.n, ok, failed);
    printf("ttft_p50_ms=%.3f\nttft_p99_ms=%.3f\nttft_max_ms=%.3f\n", pct(ttft, nt, 0.5), pct(ttft, nt, 0.99),
           nt ? ttft[nt - 1] : 0);
    printf("event_p50_ms=%.3f\nevent_p99_ms=%.3f\n", pct(first, ne, 0.5), pct(first, ne, 0.99));
    printf("dur_p50_ms=%.1f\ndur_max_ms=%.1f\n", pct(dur, nd, 0.5), nd ? dur[nd - 1] : 0);
    for (int k = 0; k < nr; k++)
        printf("fail_%s=%d\n", reasons[k], counts[k]);
    if (G.example[0])
        printf("example_failure=%s\n", G.example);
    return 0;
}
