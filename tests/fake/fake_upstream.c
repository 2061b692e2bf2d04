/* fake_upstream.c: a stand-in OpenAI/vLLM upstream whose behaviour the request chooses (tests, bench, demo). */

/*
 * sluice-fake-upstream --port N [--host 127.0.0.1] [--name NAME] [--pidfile F]
 *
 * Serves what a vLLM replica serves (chat, completions, embeddings, models,
 * /health, /metrics) plus /echo, with byte-correct HTTP/1.1 framing, so the
 * end-to-end tests and benchmarks can run sluice where there is no GPU.
 *
 * A request picks how the "model" misbehaves with directives (struct behavior),
 * gathered in this order, later wins:
 *   1. the default set by POST /_fake/behavior            k=v k=v
 *   2. the request header X-Fake-Behavior                  k=v;k=v
 *   3. the first "[[fake k=v k=v]]" in the raw request body, which reaches us
 *      through the gateway untouched because it sits inside the prompt.
 * GET /_fake/stats then tells the test what this upstream saw.
 *
 * Prefix cache (prefix_cache=1, prefix_miss_ms=N default 150, prefix_hit_ms=N
 * default 10): chat requests answer faster when this replica has seen the
 * conversation so far, as an engine's prefix (KV) cache does. The prefix of a
 * request is its messages minus the last one; it hits if a bounded LRU set
 * (4096 hashes of role + raw content per message) holds it, and the first byte
 * waits prefix_hit_ms, else prefix_miss_ms (on top of ttfb_ms). Before
 * answering, the set takes the hash of the request's messages and of those plus
 * the assistant answer being sent, so a next turn that appends that answer and a
 * new user message hits (as does one that appends only a user message). A first
 * turn always misses. Stats: prefix_hits, prefix_misses; /_fake/reset empties it.
 *
 * vLLM sleep mode (R-WAKE): POST /sleep puts the model to sleep; POST /wake_up
 * answers at once and the model is awake delay_ms later (POST /_fake/sleep-config
 * "delay_ms=N sleeping=0|1"); GET /is_sleeping says which. While asleep /health
 * and data requests answer 503. A DCGM exporter stand-in (R-HC-7): GET
 * /dcgm/metrics serves DCGM_FI_DEV_GPU_TEMP per GPU as set by POST /_fake/dcgm
 * "temps=64/90/blank" ("blank" is DCGM's int64 no-data sentinel).
 *
 * Request classes (they decide what is counted):
 *   data     /v1/..., /echo..., unknown paths: directives apply, counted in stats;
 *   probe    GET /health, GET /metrics: no directives, counted only as "probes",
 *            so a health daemon polling us does not disturb a test's counts;
 *   control  /_fake/...: never counted.
 *
 * Concurrency: all request handling is written as plain blocking code for one
 * connection on one thread.  A thread switch per request would make this server,
 * not the gateway, the bottleneck of a benchmark, so one epoll loop per CPU
 * answers the requests that need no waiting (complete in the buffer, no delays,
 * not a stream) inline, and hands any other connection to its own thread for
 * the rest of its life (see "event loops" below).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

enum {
    HEAD_MAX = 64 * 1024,                        /* request line + headers */
    BODY_MAX = 64 * 1024 * 1024,                 /* decoded request body */
    IN_MAX = HEAD_MAX + BODY_MAX + 1024 * 1024,  /* raw input incl. chunk framing */
    HDRS_MAX = 128,
    CHUNK_LINE_MAX = 4096,                       /* chunk-size and trailer lines */
    JSON_DEPTH_MAX = 32,                         /* the scanner recurses on a small stack */
    THREAD_STACK = 256 * 1024,
    BUF_KEEP = 64 * 1024,                        /* buffer size a connection keeps between requests */
    LOOP_IN_MAX = 2 * HEAD_MAX,                  /* larger requests are read by a connection thread */
    LOOPS_MAX = 16,
    NAME_MAX_LEN = 64,
};

static const char CT_JSON[] = "application/json";
static const char CONTINUE_100[] = "HTTP/1.1 100 Continue\r\n\r\n";

/* ---- growable buffers: allocation failure aborts (the test harness restarts us) ---- */

struct buf {
    char *p;
    size_t len, cap;
};

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fputs("sluice-fake-upstream: out of memory\n", stderr);
        abort();
    }
    return q;
}

static void buf_reserve(struct buf *b, size_t more)
{
    if (b->cap - b->len >= more)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more)
        cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

static void buf_add(struct buf *b, const void *s, size_t n)
{
    if (n == 0)
        return;
    buf_reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void buf_adds(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3)))
static void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    buf_reserve(b, 128);
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= b->cap - b->len) {
        buf_reserve(b, (size_t)n + 1);
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

/* Gives back memory a big request grew, so idle keep-alive connections stay small. */
static void buf_trim(struct buf *b)
{
    if (b->cap <= BUF_KEEP)
        return;
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    buf_reserve(b, 4096);
}

/* ---- JSON output ---- */

/* Length of the valid UTF-8 sequence at u, 0 if it is not one (overlongs and surrogates rejected). */
static size_t utf8_len(const unsigned char *u, size_t n)
{
    unsigned char c = u[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        lo = c == 0xE0 ? 0xA0 : lo;
        hi = c == 0xED ? 0x9F : hi;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        lo = c == 0xF0 ? 0x90 : lo;
        hi = c == 0xF4 ? 0x8F : hi;
    } else {
        return 0;
    }
    if (n < len || u[1] < lo || u[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((u[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* Bytes at u that can be copied into a JSON string as they are. */
static size_t json_plain_len(const unsigned char *u, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = u[i];
        if (c < 0x80) {
            if (c < 0x20 || c == '"' || c == '\\')
                break;
            i++;
            continue;
        }
        size_t k = utf8_len(u + i, n - i);
        if (k == 0)
            break;
        i += k;
    }
    return i;
}

/* Escapes one byte; a byte that is not UTF-8 becomes \u00XX so the output always parses. */
static void json_escape_byte(struct buf *b, unsigned char c)
{
    switch (c) {
    case '"': buf_add(b, "\\\"", 2); break;
    case '\\': buf_add(b, "\\\\", 2); break;
    case '\n': buf_add(b, "\\n", 2); break;
    case '\r': buf_add(b, "\\r", 2); break;
    case '\t': buf_add(b, "\\t", 2); break;
    default: buf_printf(b, "\\u%04x", c); break;
    }
}

/* Appends s escaped for the inside of a JSON string (no quotes). */
static void buf_json_chars(struct buf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t k = json_plain_len(u + i, n - i);
        buf_add(b, s + i, k);
        i += k;
        if (i < n)
            json_escape_byte(b, u[i++]);
    }
}

static void buf_json_str(struct buf *b, const char *s, size_t n)
{
    buf_add(b, "\"", 1);
    buf_json_chars(b, s, n);
    buf_add(b, "\"", 1);
}

/* ---- small parsing helpers ---- */

static bool mem_is(const char *s, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n == l && memcmp(s, lit, l) == 0;
}

static bool mem_case_is(const char *s, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n == l && strncasecmp(s, lit, l) == 0;
}

/* Parses all of s[0..n) as a base-10 long. */
static int parse_long(const char *s, size_t n, long *out)
{
    char tmp[32];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    long v = strtol(tmp, &end, 10);
    if (errno || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, size_t n, double *out)
{
    char tmp[64];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    if (errno || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static bool is_sep(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == ',';
}

/* Calls fn for each "k=v" token of a directive string (separated by spaces, ';' or ','). */
static void kv_each(const char *s, size_t n, void (*fn)(void *, const char *, size_t, const char *, size_t), void *arg)
{
    const char *end = s + n;
    while (s < end) {
        while (s < end && is_sep(*s))
            s++;
        const char *tok = s;
        while (s < end && !is_sep(*s))
            s++;
        const char *eq = memchr(tok, '=', (size_t)(s - tok));
        if (eq)
            fn(arg, tok, (size_t)(eq - tok), eq + 1, (size_t)(s - eq - 1));
    }
}

/* ---- behaviour directives ---- */

struct behavior {
    int status;            /* not 0/200: answer with this status and an OpenAI error body */
    int ttfb_ms;           /* delay before the response headers */
    int chunks;            /* content chunks in a stream, words in a reply */
    int gap_ms;            /* delay between stream events */
    int die_after;         /* >= 0: close abruptly after this many content chunks */
    int die_before;        /* close right after reading the request */
    int hang;              /* read the request, then never answer */
    int hang_after;        /* >= 0: stall after this many content chunks */
    int bad_json;          /* send malformed JSON */
    int role_chunks;       /* role-only chunks opening a chat stream */
    int prompt_tokens;     /* >= 0: override the reported usage */
    int completion_tokens;
    int retry_after;       /* >= 0: add Retry-After */
    int cors;              /* add CORS headers the gateway must strip */
    int info100;           /* send 100 Continue before the response */
    int prefix_cache;      /* chat: simulate a prefix cache (see the top of the file) */
    int prefix_miss_ms;    /* prefix_cache: first-byte delay when the prefix is new here */
    int prefix_hit_ms;     /* prefix_cache: first-byte delay when it was seen */
};

static const struct behavior BEHAVIOR_DEFAULT = {
    .chunks = 3, .die_after = -1, .hang_after = -1, .role_chunks = 1,
    .prompt_tokens = -1, .completion_tokens = -1, .retry_after = -1,
    .prefix_miss_ms = 150, .prefix_hit_ms = 10,
};

/* Directive name, field, accepted range; a value out of range is ignored. */
#define BKEY(k, lo, hi) { #k, offsetof(struct behavior, k), lo, hi }
static const struct behavior_key {
    const char *name;
    size_t off;
    long min, max;
} BEHAVIOR_KEYS[] = {
    BKEY(status, 200, 599),       BKEY(ttfb_ms, 0, 3600000),
    BKEY(chunks, 0, 1000000),     BKEY(gap_ms, 0, 3600000),
    BKEY(die_after, 0, INT_MAX),  BKEY(die_before, 0, 1),
    BKEY(hang, 0, 1),             BKEY(hang_after, 0, INT_MAX),
    BKEY(bad_json, 0, 1),         BKEY(role_chunks, 0, 1000),
    BKEY(prompt_tokens, 0, INT_MAX / 2), BKEY(completion_tokens, 0, INT_MAX / 2),
    BKEY(retry_after, 0, INT_MAX), BKEY(cors, 0, 1),
    BKEY(info100, 0, 1),          BKEY(prefix_cache, 0, 1),
    BKEY(prefix_miss_ms, 0, 3600000), BKEY(prefix_hit_ms, 0, 3600000),
};

static void behavior_set(void *arg, const char *k, size_t kn, const char *v, size_t vn)
{
    struct behavior *b = arg;
    long val;
    if (parse_long(v, vn, &val) < 0)
        return;
    for (size_t i = 0; i < ARRAY_LEN(BEHAVIOR_KEYS); i++) {
        const struct behavior_key *bk = &BEHAVIOR_KEYS[i];
        if (!mem_is(k, kn, bk->name))
            continue;
        if (val >= bk->min && val <= bk->max)
            *(int *)((char *)b + bk->off) = (int)val;
        return;
    }
}

static void behavior_parse(struct behavior *b, const char *s, size_t n)
{
    kv_each(s, n, behavior_set, b);
}

/* Finds "[[fake k=v ...]]" in a body; returns the inside or NULL. */
static const char *behavior_in_body(const char *body, size_t n, size_t *len)
{
    const char *p = memmem(body, n, "[[fake", 6);
    if (!p)
        return NULL;
    p += 6;
    const char *end = body + n;
    if (p < end && *p != ' ' && *p != ']')
        return NULL;
    const char *close = memmem(p, (size_t)(end - p), "]]", 2);
    if (!close)
        return NULL;
    *len = (size_t)(close - p);
    return p;
}

/* ---- process-wide state ---- */

/* Lives for the whole run; mu guards everything except the atomics. */
static struct {
    char name[NAME_MAX_LEN + 1];
    char model[NAME_MAX_LEN + 8];
    const char *pidfile;
    pthread_mutex_t mu;
    struct behavior dflt;
    atomic_bool has_dflt;          /* lets requests skip mu when no default is set */
    atomic_bool health_off;
    int waiting, running;          /* running < 0: report the live in-flight count */
    double kv;
    bool legacy;
    bool has_last;
    struct buf last_head, last_body;   /* raw copy of the last data request */
    bool sleeping;                 /* vLLM sleep mode */
    long long wake_at_ms;          /* sleeping: awake from this monotonic time, 0 = not waking */
    int wake_delay_ms;             /* /wake_up takes this long */
    int n_gpus;
    long long gpu_temps[16];       /* DCGM stand-in readings; < 0 = blank sentinel */
} G = { .mu = PTHREAD_MUTEX_INITIALIZER, .running = -1 };

static struct {
    atomic_long requests, inflight, max_inflight, completed, aborted, died, probes, wake_ups;
    atomic_long prefix_hits, prefix_misses;
    atomic_ulong seq;              /* completion ids */
} S;

/* ---- HTTP requests ---- */

struct hdr {
    const char *name, *val;
    size_t nlen, vlen;
};

struct request {
    const char *method, *path, *query;
    size_t mlen, plen, qlen;
    int minor;                     /* HTTP/1.<minor> */
    bool keep_alive, is_head;
    struct hdr h[HDRS_MAX];
    int nh;
    size_t head_len;               /* request line + headers + blank line */
    size_t total_len;              /* bytes of input this request used */
    const char *body;
    size_t blen;
};

struct framing {
    long long clen;
    bool chunked, expect, close, keep;
};

struct conn {
    int fd;
    char *in;                      /* raw input; may hold the start of a pipelined request */
    size_t in_len, in_cap;
    size_t scanned;                /* where the search for the end of the head resumes */
    struct buf chunked;            /* decoded chunked body */
    struct buf rbody;              /* response body, or one SSE event */
    struct buf out;                /* bytes on their way to the socket */
    struct request req;
    /* Event-loop hand-over: a loop never blocks, so it parks what the socket won't take. */
    bool loop;                     /* served by an event loop: I/O must not block */
    bool served;                   /* handed over after answering: flush, then keep-alive or close */
    bool owed;                     /* that answer was a data request whose stats await the flush */
    bool keep_after;               /* that answer allowed keep-alive */
    struct buf pending;            /* bytes the loop could not send */
};

static const struct hdr *req_header(const struct request *r, const char *name)
{
    for (int i = 0; i < r->nh; i++)
        if (mem_case_is(r->h[i].name, r->h[i].nlen, name))
            return &r->h[i];
    return NULL;
}

/* True if the comma-separated header value lists token (case-insensitive). */
static bool value_has_token(const char *v, size_t n, const char *token, bool last_only)
{
    const char *end = v + n;
    bool found = false;
    while (v < end) {
        while (v < end && (*v == ' ' || *v == '\t' || *v == ','))
            v++;
        const char *t = v;
        while (v < end && *v != ',')
            v++;
        const char *te = v;
        while (te > t && (te[-1] == ' ' || te[-1] == '\t'))
            te--;
        if (te == t)
            continue;
        bool match = mem_case_is(t, (size_t)(te - t), token);
        found = last_only ? match : (found || match);
    }
    return found;
}

static bool is_tchar(unsigned char c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int request_line_parse(struct request *r, const char *s, const char *e)
{
    const char *sp1 = memchr(s, ' ', (size_t)(e - s));
    if (!sp1 || sp1 == s)
        return 400;
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', (size_t)(e - t));
    if (!sp2 || sp2 == t || e - sp2 != 9 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)sp2[8]))
        return 400;
    for (const char *m = s; m < sp1; m++)
        if (!is_tchar((unsigned char)*m))
            return 400;
    r->method = s;
    r->mlen = (size_t)(sp1 - s);
    r->is_head = mem_is(s, r->mlen, "HEAD");
    r->minor = sp2[8] - '0';
    r->path = t;
    const char *q = memchr(t, '?', (size_t)(sp2 - t));
    r->plen = (size_t)((q ? q : sp2) - t);
    r->query = q ? q + 1 : sp2;
    r->qlen = q ? (size_t)(sp2 - q - 1) : 0;
    return 0;
}

static int header_parse(struct request *r, const char *s, const char *e)
{
    const char *colon = memchr(s, ':', (size_t)(e - s));
    if (!colon || colon == s)
        return 400;
    for (const char *p = s; p < colon; p++)
        if (!is_tchar((unsigned char)*p))
            return 400;   /* also rejects obsolete line folding */
    if (r->nh == HDRS_MAX)
        return 431;
    const char *v = colon + 1;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    r->h[r->nh++] = (struct hdr){ s, v, (size_t)(colon - s), (size_t)(e - v) };
    return 0;
}

/* Parses p[0..n), which ends in a blank line; returns 0 or an HTTP error status. */
static int head_parse(struct request *r, const char *p, size_t n)
{
    const char *end = p + n;
    const char *eol = memchr(p, '\n', n);
    const char *le = (eol > p && eol[-1] == '\r') ? eol - 1 : eol;
    r->nh = 0;
    int rc = request_line_parse(r, p, le);
    for (const char *s = eol + 1; rc == 0 && s < end; s = eol + 1) {
        eol = memchr(s, '\n', (size_t)(end - s));
        le = (eol > s && eol[-1] == '\r') ? eol - 1 : eol;
        if (le == s)
            break;
        rc = header_parse(r, s, le);
    }
    return rc;
}

static int framing_header(const struct hdr *h, struct framing *f)
{
    if (mem_case_is(h->name, h->nlen, "content-length")) {
        long v;
        if (h->vlen > 18 || !isdigit((unsigned char)h->val[0]) || parse_long(h->val, h->vlen, &v) < 0)
            return 400;
        if (f->clen >= 0 && f->clen != v)
            return 400;
        f->clen = v;
    } else if (mem_case_is(h->name, h->nlen, "transfer-encoding")) {
        if (!value_has_token(h->val, h->vlen, "chunked", true))
            return 501;
        f->chunked = true;
    } else if (mem_case_is(h->name, h->nlen, "expect")) {
        f->expect = value_has_token(h->val, h->vlen, "100-continue", false);
    } else if (mem_case_is(h->name, h->nlen, "connection")) {
        f->close |= value_has_token(h->val, h->vlen, "close", false);
        f->keep |= value_has_token(h->val, h->vlen, "keep-alive", false);
    }
    return 0;
}

static int framing_get(struct request *r, struct framing *f)
{
    *f = (struct framing){ .clen = -1 };
    for (int i = 0; i < r->nh; i++) {
        int rc = framing_header(&r->h[i], f);
        if (rc)
            return rc;
    }
    r->keep_alive = r->minor >= 1 ? !f->close : (f->keep && !f->close);
    if (f->chunked && f->clen >= 0)
        r->keep_alive = false;   /* both framings: RFC 9112 says close after answering */
    if (!f->chunked && f->clen > BODY_MAX)
        return 413;
    return 0;
}

/* Reads more input, growing the buffer up to limit; >0 bytes, 0 EOF, -1 error or full. */
static ssize_t conn_fill(struct conn *c, size_t limit)
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
static int conn_send(struct conn *c, const char *p, size_t n)
{
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

/* End of the head (just past the blank line) in p[0..n), searching from `from`; 0 if absent. */
static size_t head_find_end(const char *p, size_t n, size_t from)
{
    const char *s = p + from, *end = p + n;
    while ((s = memchr(s, '\n', (size_t)(end - s))) != NULL) {
        if (s + 1 < end && s[1] == '\n')
            return (size_t)(s + 2 - p);
        if (s + 2 < end && s[1] == '\r' && s[2] == '\n')
            return (size_t)(s + 3 - p);
        s++;
    }
    return 0;
}

/* Clients may send a stray CRLF after a body; RFC 9112 says to ignore it. */
static void head_skip_blank(struct conn *c)
{
    size_t k = 0;
    while (k < c->in_len && (c->in[k] == '\r' || c->in[k] == '\n'))
        k++;
    if (k == 0)
        return;
    memmove(c->in, c->in + k, c->in_len - k);
    c->in_len -= k;
    c->scanned = 0;
}

static int head_read(struct conn *c)
{
    for (;;) {
        head_skip_blank(c);
        size_t end = c->in_len ? head_find_end(c->in, c->in_len, c->scanned) : 0;
        if (end) {
            c->req.head_len = end;
            return end > HEAD_MAX ? 431 : 0;
        }
        if (c->in_len >= HEAD_MAX)
            return 431;
        c->scanned = c->in_len > 2 ? c->in_len - 2 : 0;
        if (conn_fill(c, HEAD_MAX) <= 0)
            return -1;
    }
}

static int body_read_length(struct conn *c, size_t clen)
{
    size_t need = c->req.head_len + clen;
    if (c->in_cap < need) {
        c->in = xrealloc(c->in, need);
        c->in_cap = need;
    }
    while (c->in_len < need)
        if (conn_fill(c, need) <= 0)
            return -1;
    c->req.body = c->in + c->req.head_len;
    c->req.blen = clen;
    c->req.total_len = need;
    return 0;
}

enum step { STEP_MORE, STEP_NEED, STEP_DONE, STEP_BAD, STEP_BIG };

/* Decodes one "size CRLF data CRLF" unit at *pos. */
static enum step chunk_step(struct conn *c, size_t *pos, bool *last)
{
    const char *s = c->in + *pos, *end = c->in + c->in_len;
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl)
        return end - s > CHUNK_LINE_MAX ? STEP_BAD : STEP_NEED;
    size_t size = 0;
    const char *p = s;
    for (; p < nl && isxdigit((unsigned char)*p); p++) {
        size = size * 16 + (size_t)(isdigit((unsigned char)*p) ? *p - '0' : (tolower((unsigned char)*p) - 'a' + 10));
        if (size > BODY_MAX)
            return STEP_BIG;
    }
    if (p == s || (p < nl && *p != ';' && *p != ' ' && *p != '\t' && *p != '\r'))
        return STEP_BAD;
    size_t data = (size_t)(nl + 1 - c->in);
    if (size == 0) {
        *pos = data;
        *last = true;
        return STEP_MORE;
    }
    if (c->chunked.len + size > BODY_MAX)
        return STEP_BIG;
    if (c->in_len < data + size + 2)
        return STEP_NEED;
    if (c->in[data + size] != '\r' || c->in[data + size + 1] != '\n')
        return STEP_BAD;
    buf_add(&c->chunked, c->in + data, size);
    *pos = data + size + 2;
    return STEP_MORE;
}

/* Skips one trailer line; the blank line ends the body. */
static enum step chunk_trailer(struct conn *c, size_t *pos)
{
    const char *s = c->in + *pos, *end = c->in + c->in_len;
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl)
        return end - s > CHUNK_LINE_MAX ? STEP_BAD : STEP_NEED;
    *pos = (size_t)(nl + 1 - c->in);
    return (nl == s || (nl == s + 1 && s[0] == '\r')) ? STEP_DONE : STEP_MORE;
}

static int body_read_chunked(struct conn *c)
{
    size_t pos = c->req.head_len;
    bool last = false;
    c->chunked.len = 0;
    for (;;) {
        enum step st = last ? chunk_trailer(c, &pos) : chunk_step(c, &pos, &last);
        if (st == STEP_DONE)
            break;
        if (st == STEP_BAD || st == STEP_BIG)
            return st == STEP_BAD ? 400 : 413;
        if (st == STEP_NEED && conn_fill(c, IN_MAX) <= 0)
            return c->in_len == c->in_cap && c->in_cap >= IN_MAX ? 413 : -1;
    }
    c->req.body = c->chunked.len ? c->chunked.p : "";
    c->req.blen = c->chunked.len;
    c->req.total_len = pos;
    return 0;
}

/* Reads one request into c->req; 0 ok, -1 connection gone, else the HTTP error status to answer. */
static int req_read(struct conn *c)
{
    struct request *r = &c->req;
    r->nh = 0;
    r->keep_alive = false;
    r->minor = 1;
    int rc = head_read(c);
    if (rc == 0)
        rc = head_parse(r, c->in, r->head_len);
    struct framing f;
    if (rc == 0)
        rc = framing_get(r, &f);
    if (rc)
        return rc;
    bool waiting = f.chunked ? c->in_len == r->head_len : c->in_len < r->head_len + (size_t)(f.clen > 0 ? f.clen : 0);
    /* curl waits a second for this before sending a large body anyway */
    if (f.expect && waiting && r->minor >= 1 && conn_send(c, CONTINUE_100, sizeof CONTINUE_100 - 1) < 0)
        return -1;
    const char *before = c->in;
    rc = f.chunked ? body_read_chunked(c) : body_read_length(c, (size_t)(f.clen > 0 ? f.clen : 0));
    if (rc == 0 && c->in != before)
        head_parse(r, c->in, r->head_len);   /* the buffer moved: re-point the header fields */
    return rc;
}

/* Drops the request just served, keeping any pipelined bytes that follow it. */
static void req_consume(struct conn *c)
{
    size_t used = c->req.total_len, left = c->in_len - used;
    memmove(c->in, c->in + used, left);
    c->in_len = left;
    c->scanned = 0;
    if (c->in_cap > BUF_KEEP && left <= 16384) {
        c->in_cap = 16384;
        c->in = xrealloc(c->in, c->in_cap);
    }
    buf_trim(&c->chunked);
    buf_trim(&c->rbody);
    buf_trim(&c->out);
}

/* ---- request as JSON (/echo and /_fake/stats) ---- */

static bool header_seen_before(const struct request *r, int i)
{
    for (int j = 0; j < i; j++)
        if (r->h[j].nlen == r->h[i].nlen && strncasecmp(r->h[j].name, r->h[i].name, r->h[i].nlen) == 0)
            return true;
    return false;
}

/* Header names are lowercased; repeated headers are joined with ", " as HTTP allows. */
static void headers_json(struct buf *o, const struct request *r)
{
    buf_add(o, "{", 1);
    bool first = true;
    for (int i = 0; i < r->nh; i++) {
        if (header_seen_before(r, i))
            continue;
        buf_adds(o, first ? "\"" : ",\"");
        first = false;
        buf_reserve(o, r->h[i].nlen);
        for (size_t k = 0; k < r->h[i].nlen; k++)   /* names are tokens: nothing to escape */
            o->p[o->len++] = (char)tolower((unsigned char)r->h[i].name[k]);
        buf_adds(o, "\":\"");
        bool more = false;
        for (int j = i; j < r->nh; j++) {
            if (r->h[j].nlen != r->h[i].nlen || strncasecmp(r->h[j].name, r->h[i].name, r->h[i].nlen) != 0)
                continue;
            if (more)
                buf_add(o, ", ", 2);
            more = true;
            buf_json_chars(o, r->h[j].val, r->h[j].vlen);
        }
        buf_add(o, "\"", 1);
    }
    buf_add(o, "}", 1);
}

static void request_json(struct buf *o, const struct request *r, const char *body, size_t blen)
{
    buf_adds(o, "{\"method\":");
    buf_json_str(o, r->method, r->mlen);
    buf_adds(o, ",\"path\":");
    buf_json_str(o, r->path, r->plen);
    buf_adds(o, ",\"query\":");
    buf_json_str(o, r->query, r->qlen);
    buf_adds(o, ",\"headers\":");
    headers_json(o, r);
    buf_adds(o, ",\"body\":");
    buf_json_str(o, body, blen);
    buf_add(o, "}", 1);
}

/* ---- responses ---- */

/* OUT_HANDOFF: an event loop declined the request before answering it (it would block). */
enum outcome { OUT_COMPLETE, OUT_ABORTED, OUT_DIED, OUT_HANDOFF };

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return status < 400 ? "OK" : "Error";
    }
}

static long elapsed_ms(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Sleeps ms but returns -1 as soon as the client hangs up, so a client timeout counts as aborted. */
static int conn_wait(struct conn *c, int ms)
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
static enum outcome conn_hang(struct conn *c)
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

/* Status line and headers into c->out; clen < 0 means a stream. */
static void head_build(struct conn *c, const struct behavior *b, int status, const char *ctype, long long clen)
{
    struct buf *o = &c->out;
    const struct hdr *rid = req_header(&c->req, "x-request-id");
    o->len = 0;
    buf_printf(o, "HTTP/1.1 %d %s\r\n", status, reason(status));
    if (ctype)
        buf_printf(o, "Content-Type: %s\r\n", ctype);
    if (clen >= 0)
        buf_printf(o, "Content-Length: %lld\r\n", clen);
    else
        buf_adds(o, c->req.minor >= 1 ? "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n"
                                      : "Cache-Control: no-cache\r\n");   /* HTTP/1.0: the close ends it */
    buf_printf(o, "x-fake-upstream: %s\r\nx-fake-request-id: ", G.name);
    if (rid && rid->vlen)
        buf_add(o, rid->val, rid->vlen);
    else
        buf_add(o, "-", 1);
    buf_add(o, "\r\n", 2);
    if (b->retry_after >= 0)
        buf_printf(o, "Retry-After: %d\r\n", b->retry_after);
    if (b->cors)
        buf_adds(o, "Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Credentials: true\r\n");
    if (!c->req.keep_alive)
        buf_adds(o, "Connection: close\r\n");
    else if (c->req.minor == 0)
        buf_adds(o, "Connection: keep-alive\r\n");
    buf_add(o, "\r\n", 2);
}

/* Sends c->rbody as a Content-Length response, shaped by the die/hang/bad_json directives. */
static enum outcome reply_send(struct conn *c, const struct behavior *b, int status, const char *ctype)
{
    if (status == 200 && b->bad_json) {
        c->rbody.len = 0;
        buf_adds(&c->rbody, "{\"id\": broken");
        ctype = CT_JSON;
    }
    head_build(c, b, status, ctype, (long long)c->rbody.len);
    bool partial = b->die_after >= 0 || b->hang_after >= 0;
    if (!c->req.is_head)
        buf_add(&c->out, c->rbody.p, partial ? c->rbody.len / 2 : c->rbody.len);
    if (conn_send(c, c->out.p, c->out.len) < 0)
        return OUT_ABORTED;
    if (b->die_after >= 0)
        return OUT_DIED;
    return b->hang_after >= 0 ? conn_hang(c) : OUT_COMPLETE;
}

static enum outcome reply_error(struct conn *c, const struct behavior *b, int status, const char *msg)
{
    struct buf *o = &c->rbody;
    o->len = 0;
    buf_adds(o, "{\"error\":{\"message\":");
    if (msg)
        buf_json_str(o, msg, strlen(msg));
    else
        buf_printf(o, "\"fake error %d\"", status);
    buf_printf(o, ",\"type\":\"%s\",\"param\":null,\"code\":null}}",
               status >= 400 && status < 500 ? "invalid_request_error" : "server_error");
    return reply_send(c, b, status, CT_JSON);
}

static enum outcome reply_ok(struct conn *c)
{
    c->rbody.len = 0;
    buf_adds(&c->rbody, "{\"ok\":true}");
    return reply_send(c, &BEHAVIOR_DEFAULT, 200, CT_JSON);
}

/* ---- a minimal JSON scanner: just what the routes need from a request body ---- */

enum jtype { JT_ERR, JT_OBJ, JT_ARR, JT_STR, JT_NUM, JT_TRUE, JT_FALSE, JT_NULL };
enum jctx { JC_NONE, JC_TEXT, JC_STREAM_OPTS };   /* JC_TEXT: strings here count as prompt words */

struct jscan {
    const char *p, *end;
    const char *model;             /* raw (still JSON-escaped) top-level "model" */
    size_t model_len;
    bool stream, include_usage;
    long words;                    /* prompt token estimate */
    long inputs;                   /* embeddings: number of inputs */
};

struct jval {
    enum jtype t;
    const char *s;
    size_t n;
    long elems;
    bool num_elems;                /* an array of numbers: token ids, i.e. one input */
};

static enum jtype js_value(struct jscan *j, int depth, enum jctx ctx, const char *key, size_t kn, struct jval *v);

static void js_ws(struct jscan *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

/* Whitespace-separated words of a raw JSON string; \n \t \r escapes separate too. */
static long words_in(const char *s, size_t n)
{
    long w = 0;
    bool in = false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool sp = ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
        if (ch == '\\' && i + 1 < n) {
            ch = s[++i];
            sp = ch == 'n' || ch == 't' || ch == 'r';
        }
        if (!sp && !in)
            w++;
        in = !sp;
    }
    return w;
}

static bool js_string(struct jscan *j, struct jval *v)
{
    const char *q = ++j->p;
    while (q < j->end && *q != '"')
        q += (*q == '\\' && q + 1 < j->end) ? 2 : 1;
    if (q >= j->end)
        return false;
    v->s = j->p;
    v->n = (size_t)(q - j->p);
    j->p = q + 1;
    return true;
}

static enum jtype js_scalar(struct jscan *j)
{
    static const struct { const char *lit; enum jtype t; } LITS[] = {
        { "true", JT_TRUE }, { "false", JT_FALSE }, { "null", JT_NULL },
    };
    for (size_t i = 0; i < ARRAY_LEN(LITS); i++) {
        size_t l = strlen(LITS[i].lit);
        if ((size_t)(j->end - j->p) >= l && memcmp(j->p, LITS[i].lit, l) == 0) {
            j->p += l;
            return LITS[i].t;
        }
    }
    const char *s = j->p;
    while (j->p < j->end && *j->p && strchr("+-.eE0123456789", *j->p))
        j->p++;
    return j->p > s ? JT_NUM : JT_ERR;
}

static long js_inputs(const struct jval *v)
{
    if (v->t == JT_STR)
        return 1;
    if (v->t == JT_ARR)
        return v->num_elems ? 1 : v->elems;
    return 0;
}

/* One object member: picks the context its value is read in and records what the routes need. */
static enum jtype js_member(struct jscan *j, int depth, enum jctx ctx, const char *k, size_t kn)
{
    bool top = depth == 1;
    enum jctx child = ctx == JC_TEXT ? JC_TEXT : JC_NONE;
    if (mem_is(k, kn, "content") || (top && (mem_is(k, kn, "prompt") || mem_is(k, kn, "input"))))
        child = JC_TEXT;
    if (top && mem_is(k, kn, "stream_options"))
        child = JC_STREAM_OPTS;
    struct jval v = { .t = JT_ERR };
    if (js_value(j, depth, child, k, kn, &v) == JT_ERR)
        return JT_ERR;
    if (top && mem_is(k, kn, "model") && v.t == JT_STR) {
        j->model = v.s;
        j->model_len = v.n;
    }
    if (top && mem_is(k, kn, "stream"))
        j->stream = v.t == JT_TRUE;
    if (top && mem_is(k, kn, "input"))
        j->inputs = js_inputs(&v);
    if (ctx == JC_STREAM_OPTS && mem_is(k, kn, "include_usage"))
        j->include_usage = v.t == JT_TRUE;
    return v.t;
}

/* Reads the separator after a member or element: 1 at the closing bracket, 0 after ',', -1 bad. */
static int js_next(struct jscan *j, char close)
{
    js_ws(j);
    if (j->p >= j->end)
        return -1;
    char ch = *j->p++;
    return ch == close ? 1 : ch == ',' ? 0 : -1;
}

static enum jtype js_object(struct jscan *j, int depth, enum jctx ctx)
{
    if (depth > JSON_DEPTH_MAX)
        return JT_ERR;
    j->p++;
    js_ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        return JT_OBJ;
    }
    for (;;) {
        struct jval key;
        js_ws(j);
        if (j->p >= j->end || *j->p != '"' || !js_string(j, &key))
            return JT_ERR;
        js_ws(j);
        if (j->p >= j->end || *j->p++ != ':')
            return JT_ERR;
        if (js_member(j, depth, ctx, key.s, key.n) == JT_ERR)
            return JT_ERR;
        int r = js_next(j, '}');
        if (r != 0)
            return r > 0 ? JT_OBJ : JT_ERR;
    }
}

static enum jtype js_array(struct jscan *j, int depth, enum jctx ctx, struct jval *v)
{
    if (depth > JSON_DEPTH_MAX)
        return JT_ERR;
    j->p++;
    js_ws(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        return JT_ARR;
    }
    for (;;) {
        struct jval e = { .t = JT_ERR };
        enum jtype t = js_value(j, depth, ctx, NULL, 0, &e);
        if (t == JT_ERR)
            return JT_ERR;
        if (v->elems++ == 0)
            v->num_elems = t == JT_NUM;
        int r = js_next(j, ']');
        if (r != 0)
            return r > 0 ? JT_ARR : JT_ERR;
    }
}

/* Prompt text is a "content"/"text"/"prompt"/"input" string or an array element; "type" etc. are not. */
static bool js_counts(enum jctx ctx, const char *key, size_t kn)
{
    return ctx == JC_TEXT && (!key || mem_is(key, kn, "content") || mem_is(key, kn, "text")
                              || mem_is(key, kn, "prompt") || mem_is(key, kn, "input"));
}

static enum jtype js_value(struct jscan *j, int depth, enum jctx ctx, const char *key, size_t kn, struct jval *v)
{
    js_ws(j);
    if (j->p >= j->end)
        return v->t = JT_ERR;
    if (*j->p == '{')
        return v->t = js_object(j, depth + 1, ctx);
    if (*j->p == '[')
        return v->t = js_array(j, depth + 1, ctx, v);
    if (*j->p == '"') {
        if (!js_string(j, v))
            return v->t = JT_ERR;
        if (js_counts(ctx, key, kn))
            j->words += words_in(v->s, v->n);
        return v->t = JT_STR;
    }
    v->t = js_scalar(j);
    if (v->t == JT_NUM && ctx == JC_TEXT && !key)
        j->words++;   /* a token id */
    return v->t;
}

/* Best effort: a malformed body keeps whatever was read before the error. */
static void json_scan(struct jscan *j, const char *body, size_t n)
{
    *j = (struct jscan){ .p = body, .end = body + n };
    js_ws(j);
    if (j->p < j->end && *j->p == '{')
        js_object(j, 1, JC_NONE);
}

/* ---- completions ---- */

struct gen {
    bool chat;                     /* chat.completion, else text_completion */
    bool stream, include_usage;
    unsigned long id;
    long created;
    const char *model;             /* JSON-escaped, copied as is */
    size_t model_len;
    long ptok, ctok;
    int chunks;
};

static void gen_prepare(struct conn *c, const struct behavior *b, bool chat, struct gen *g)
{
    struct jscan j;
    json_scan(&j, c->req.body, c->req.blen);
    g->chat = chat;
    g->stream = j.stream;
    g->include_usage = j.include_usage;
    g->id = atomic_fetch_add(&S.seq, 1) + 1;
    g->created = (long)time(NULL);
    g->model = j.model ? j.model : G.model;
    g->model_len = j.model ? j.model_len : strlen(G.model);
    g->chunks = b->chunks;
    g->ptok = b->prompt_tokens >= 0 ? b->prompt_tokens : (j.words > 0 ? j.words : 1);
    g->ctok = b->completion_tokens >= 0 ? b->completion_tokens : b->chunks;
}

static void words_add(struct buf *o, int first, int last)
{
    for (int k = first; k <= last; k++)
        buf_printf(o, "w%d%s", k, k < last ? " " : "");
}

static void usage_add(struct buf *o, const struct gen *g)
{
    buf_printf(o, "\"usage\":{\"prompt_tokens\":%ld,\"completion_tokens\":%ld,\"total_tokens\":%ld}",
               g->ptok, g->ctok, g->ptok + g->ctok);
}

/* {"id":..,"object":..,"created":..,"model":..,"choices":[  shared by replies and chunks */
static void completion_open(struct buf *o, const struct gen *g, const char *object)
{
    buf_printf(o, "{\"id\":\"%s%lu\",\"object\":\"%s\",\"created\":%ld,\"model\":\"",
               g->chat ? "chatcmpl-fake" : "cmpl-fake", g->id, object, g->created);
    buf_add(o, g->model, g->model_len);
    buf_adds(o, "\",\"choices\":[");
}

static void completion_body(struct buf *o, const struct gen *g)
{
    o->len = 0;
    completion_open(o, g, g->chat ? "chat.completion" : "text_completion");
    buf_adds(o, g->chat ? "{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"" : "{\"text\":\"");
    words_add(o, 1, g->chunks);
    buf_adds(o, g->chat ? "\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":\"stop\"}],"
                        : "\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"stop\"}],");
    usage_add(o, g);
    buf_add(o, "}", 1);
}

enum event { EV_ROLE, EV_CONTENT, EV_FINISH, EV_USAGE };

/* One SSE event "data: {...}\n\n" into o; k is the 1-based content chunk. */
static void event_build(struct buf *o, const struct gen *g, enum event ev, int k)
{
    o->len = 0;
    buf_adds(o, "data: ");
    completion_open(o, g, g->chat ? "chat.completion.chunk" : "text_completion");
    if (ev == EV_ROLE)
        buf_adds(o, "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                    "\"logprobs\":null,\"finish_reason\":null}");
    if (ev == EV_CONTENT) {
        buf_adds(o, g->chat ? "{\"index\":0,\"delta\":{\"content\":\"" : "{\"text\":\"");
        buf_printf(o, "w%d%s", k, k < g->chunks ? " " : "");
        buf_adds(o, g->chat ? "\"},\"logprobs\":null,\"finish_reason\":null}"
                            : "\",\"index\":0,\"logprobs\":null,\"finish_reason\":null}");
    }
    if (ev == EV_FINISH)
        buf_adds(o, g->chat ? "{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}"
                            : "{\"text\":\"\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"stop\"}");
    buf_add(o, "]", 1);
    if (ev == EV_USAGE) {
        buf_add(o, ",", 1);
        usage_add(o, g);
    } else if (g->include_usage) {
        buf_adds(o, ",\"usage\":null");
    }
    buf_adds(o, "}\n\n");
}

struct stream {
    struct conn *c;
    const struct behavior *b;
    const struct gen *g;
    bool started;
};

/* Writes p as one HTTP chunk (raw on HTTP/1.0), after gap_ms if it is not the first event. */
static int stream_send(struct stream *st, const char *p, size_t n)
{
    struct conn *c = st->c;
    if (st->started && st->b->gap_ms > 0 && conn_wait(c, st->b->gap_ms) < 0)
        return -1;
    st->started = true;
    struct buf *o = &c->out;
    o->len = 0;
    if (c->req.minor >= 1)
        buf_printf(o, "%zx\r\n", n);
    buf_add(o, p, n);
    if (c->req.minor >= 1)
        buf_add(o, "\r\n", 2);
    return conn_send(c, o->p, o->len);
}

static int stream_event(struct stream *st, enum event ev, int k)
{
    event_build(&st->c->rbody, st->g, ev, k);
    return stream_send(st, st->c->rbody.p, st->c->rbody.len);
}

static int stream_tail(struct stream *st)
{
    static const char DONE[] = "data: [DONE]\n\n";
    if (stream_event(st, EV_FINISH, 0) < 0)
        return -1;
    if (st->g->include_usage && stream_event(st, EV_USAGE, 0) < 0)
        return -1;
    if (stream_send(st, DONE, sizeof DONE - 1) < 0)
        return -1;
    return st->c->req.minor >= 1 ? conn_send(st->c, "0\r\n\r\n", 5) : 0;
}

static enum outcome stream_run(struct conn *c, const struct behavior *b, const struct gen *g)
{
    static const char BAD[] = "data: {not json\n\n";
    struct stream st = { c, b, g, false };
    if (c->req.minor == 0)
        c->req.keep_alive = false;   /* no chunked encoding: the close ends the body */
    head_build(c, b, 200, "text/event-stream", -1);
    if (conn_send(c, c->out.p, c->out.len) < 0)
        return OUT_ABORTED;
    for (int i = 0; g->chat && i < b->role_chunks; i++)
        if (stream_event(&st, EV_ROLE, 0) < 0)
            return OUT_ABORTED;
    for (int sent = 0;; sent++) {
        if (sent == b->die_after)
            return OUT_DIED;
        if (sent == b->hang_after)
            return conn_hang(c);
        if (b->bad_json && sent == g->chunks / 2 && stream_send(&st, BAD, sizeof BAD - 1) < 0)
            return OUT_ABORTED;
        if (sent == g->chunks)
            break;
        if (stream_event(&st, EV_CONTENT, sent + 1) < 0)
            return OUT_ABORTED;
    }
    return stream_tail(&st) < 0 ? OUT_ABORTED : OUT_COMPLETE;
}

static enum outcome completion_serve(struct conn *c, const struct behavior *b, bool chat)
{
    struct gen g;
    gen_prepare(c, b, chat, &g);
    if (g.stream)
        return stream_run(c, b, &g);
    completion_body(&c->rbody, &g);
    return reply_send(c, b, 200, CT_JSON);
}

/* ---- prefix cache simulation (prefix_cache=1) ---- */

enum { PREFIX_SET_MAX = 4096 };
static const uint64_t FNV_OFFSET = 14695981039346656037ULL;

/* The hashes of prefixes served here, least recently used replaced first. */
static struct {
    pthread_mutex_t mu;
    uint64_t hash[PREFIX_SET_MAX];
    unsigned long long used[PREFIX_SET_MAX];   /* tick of the last use; 0 = empty slot */
    unsigned long long tick;
} P = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* FNV-1a: a stand-in needs no cryptographic hash, and 64 bits make collisions moot here. */
static uint64_t prefix_mix(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* One message into the running hash; NUL closes each part because raw JSON text never holds one. */
static uint64_t prefix_message(uint64_t h, const char *role, size_t rn, const char *content, size_t cn)
{
    h = prefix_mix(h, role, rn);
    h = prefix_mix(h, "", 1);
    h = prefix_mix(h, content, cn);
    return prefix_mix(h, "", 1);
}

/* One element of "messages": role (unescaped bytes) and content (raw JSON value, quotes included). */
static int prefix_element(struct jscan *j, uint64_t *h)
{
    const char *role = "", *content = "null";
    size_t rn = 0, cn = 4;
    js_ws(j);
    if (j->p >= j->end || *j->p != '{')
        return -1;
    j->p++;
    js_ws(j);
    if (j->p < j->end && *j->p == '}')
        j->p++;
    else
        for (;;) {
            struct jval key, v = { .t = JT_ERR };
            js_ws(j);
            if (j->p >= j->end || *j->p != '"' || !js_string(j, &key))
                return -1;
            js_ws(j);
            if (j->p >= j->end || *j->p++ != ':')
                return -1;
            js_ws(j);
            const char *start = j->p;
            if (js_value(j, 3, JC_NONE, NULL, 0, &v) == JT_ERR)
                return -1;
            if (mem_is(key.s, key.n, "role") && v.t == JT_STR) {
                role = v.s;
                rn = v.n;
            }
            if (mem_is(key.s, key.n, "content")) {
                content = start;
                cn = (size_t)(j->p - start);
            }
            int r = js_next(j, '}');
            if (r < 0)
                return -1;
            if (r > 0)
                break;
        }
    *h = prefix_message(*h, role, rn, content, cn);
    return 0;
}

/* Hashes of a chat body's messages without the last one and with all; -1 if there are none. */
static int prefix_scan(const char *body, size_t n, uint64_t *before_last, uint64_t *all)
{
    struct jscan j = { .p = body, .end = body + n };
    js_ws(&j);
    if (j.p >= j.end || *j.p++ != '{')
        return -1;
    for (;;) {
        struct jval key, v = { .t = JT_ERR };
        js_ws(&j);
        if (j.p >= j.end || *j.p != '"' || !js_string(&j, &key))
            return -1;
        js_ws(&j);
        if (j.p >= j.end || *j.p++ != ':')
            return -1;
        js_ws(&j);
        if (mem_is(key.s, key.n, "messages") && j.p < j.end && *j.p == '[')
            break;
        if (js_value(&j, 1, JC_NONE, NULL, 0, &v) == JT_ERR || js_next(&j, '}') != 0)
            return -1;
    }
    uint64_t h = FNV_OFFSET, prev = h;
    j.p++;
    js_ws(&j);
    if (j.p < j.end && *j.p == ']')
        return -1;
    for (;;) {
        prev = h;
        if (prefix_element(&j, &h) < 0)
            return -1;
        int r = js_next(&j, ']');
        if (r < 0)
            return -1;
        if (r > 0)
            break;
    }
    *before_last = prev;
    *all = h;
    return 0;
}

/* The conversation after the answer this request gets (the content the stream or reply carries). */
static uint64_t prefix_answered(uint64_t all, int chunks)
{
    struct buf a = { 0 };
    buf_add(&a, "\"", 1);
    words_add(&a, 1, chunks);
    buf_add(&a, "\"", 1);
    uint64_t h = prefix_message(all, "assistant", 9, a.p, a.len);
    free(a.p);
    return h;
}

/* Is h in the set? A hit counts as a use. */
static bool prefix_seen(uint64_t h)
{
    bool hit = false;
    pthread_mutex_lock(&P.mu);
    for (int i = 0; i < PREFIX_SET_MAX && !hit; i++)
        if (P.used[i] && P.hash[i] == h) {
            P.used[i] = ++P.tick;
            hit = true;
        }
    pthread_mutex_unlock(&P.mu);
    return hit;
}

static void prefix_store(uint64_t h)
{
    pthread_mutex_lock(&P.mu);
    int slot = 0;
    for (int i = 0; i < PREFIX_SET_MAX; i++) {
        if (P.used[i] && P.hash[i] == h) {
            slot = i;
            break;
        }
        if (P.used[i] < P.used[slot])
            slot = i;   /* an empty slot (0) or the least recently used */
    }
    P.hash[slot] = h;
    P.used[slot] = ++P.tick;
    pthread_mutex_unlock(&P.mu);
}

static void prefix_clear(void)
{
    pthread_mutex_lock(&P.mu);
    memset(P.used, 0, sizeof P.used);
    P.tick = 0;
    pthread_mutex_unlock(&P.mu);
    atomic_store(&S.prefix_hits, 0);
    atomic_store(&S.prefix_misses, 0);
}

/* ---- data routes ---- */

static enum outcome route_chat(struct conn *c, const struct behavior *b)
{
    uint64_t before_last, all;
    if (!b->prefix_cache || prefix_scan(c->req.body, c->req.blen, &before_last, &all) < 0)
        return completion_serve(c, b, true);
    bool hit = prefix_seen(before_last);
    atomic_fetch_add(hit ? &S.prefix_hits : &S.prefix_misses, 1);
    /* Stored at "prefill", before any byte goes out, so a client's next turn can never outrun it. */
    prefix_store(all);
    prefix_store(prefix_answered(all, b->chunks));
    int ms = hit ? b->prefix_hit_ms : b->prefix_miss_ms;
    if (ms > 0 && conn_wait(c, ms) < 0)
        return OUT_ABORTED;
    return completion_serve(c, b, true);
}

static enum outcome route_text(struct conn *c, const struct behavior *b)
{
    return completion_serve(c, b, false);
}

static enum outcome route_embeddings(struct conn *c, const struct behavior *b)
{
    struct jscan j;
    json_scan(&j, c->req.body, c->req.blen);
    long items = j.inputs > 0 ? j.inputs : 1;
    long ptok = b->prompt_tokens >= 0 ? b->prompt_tokens : (j.words > 0 ? j.words : 1);
    struct buf *o = &c->rbody;
    o->len = 0;
    buf_adds(o, "{\"object\":\"list\",\"data\":[");
    for (long i = 0; i < items; i++)
        buf_printf(o, "%s{\"object\":\"embedding\",\"index\":%ld,\"embedding\":[0.1,0.2,0.3,0.4]}", i ? "," : "", i);
    buf_adds(o, "],\"model\":\"");
    if (j.model)
        buf_add(o, j.model, j.model_len);
    else
        buf_adds(o, G.model);
    buf_printf(o, "\",\"usage\":{\"prompt_tokens\":%ld,\"total_tokens\":%ld}}", ptok, ptok);
    return reply_send(c, b, 200, CT_JSON);
}

static enum outcome route_models(struct conn *c, const struct behavior *b)
{
    c->rbody.len = 0;
    buf_printf(&c->rbody, "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\","
               "\"created\":1700000000,\"owned_by\":\"fake\"}]}", G.model);
    return reply_send(c, b, 200, CT_JSON);
}

static enum outcome route_echo(struct conn *c, const struct behavior *b)
{
    c->rbody.len = 0;
    request_json(&c->rbody, &c->req, c->req.body, c->req.blen);
    return reply_send(c, b, 200, CT_JSON);
}

/* ---- probes ---- */

static long long mono_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Asleep right now? A wake in progress ends on its own time. */
static bool fake_sleeping(void)
{
    pthread_mutex_lock(&G.mu);
    if (G.sleeping && G.wake_at_ms && mono_now_ms() >= G.wake_at_ms)
        G.sleeping = false;
    bool s = G.sleeping;
    pthread_mutex_unlock(&G.mu);
    return s;
}

static enum outcome route_health(struct conn *c, const struct behavior *b)
{
    c->rbody.len = 0;
    return reply_send(c, b, atomic_load(&G.health_off) || fake_sleeping() ? 503 : 200, NULL);
}

/* ---- vLLM sleep mode ---- */

static enum outcome route_sleep(struct conn *c, const struct behavior *b)
{
    (void)b;
    pthread_mutex_lock(&G.mu);
    G.sleeping = true;
    G.wake_at_ms = 0;
    pthread_mutex_unlock(&G.mu);
    return reply_ok(c);
}

static enum outcome route_wake_up(struct conn *c, const struct behavior *b)
{
    (void)b;
    atomic_fetch_add(&S.wake_ups, 1);
    pthread_mutex_lock(&G.mu);
    if (G.sleeping && !G.wake_at_ms)
        G.wake_at_ms = mono_now_ms() + (G.wake_delay_ms > 0 ? G.wake_delay_ms : 0);
    pthread_mutex_unlock(&G.mu);
    return reply_ok(c);
}

static enum outcome route_is_sleeping(struct conn *c, const struct behavior *b)
{
    c->rbody.len = 0;
    buf_printf(&c->rbody, "{\"is_sleeping\":%s}", fake_sleeping() ? "true" : "false");
    return reply_send(c, b, 200, CT_JSON);
}

/* ---- DCGM exporter stand-in ---- */

static enum outcome route_dcgm(struct conn *c, const struct behavior *b)
{
    struct buf *o = &c->rbody;
    o->len = 0;
    buf_adds(o, "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n");
    pthread_mutex_lock(&G.mu);
    for (int i = 0; i < G.n_gpus; i++)
        buf_printf(o, "DCGM_FI_DEV_GPU_TEMP{gpu=\"%d\",UUID=\"GPU-fake-%d\",device=\"nvidia%d\",Hostname=\"%s\"} %lld\n",
                   i, i, i, G.name, G.gpu_temps[i] < 0 ? 9223372036854775794LL : G.gpu_temps[i]);
    pthread_mutex_unlock(&G.mu);
    return reply_send(c, b, 200, "text/plain; version=0.0.4; charset=utf-8");
}

/* Prometheus text: integers still print as "3.0", as vLLM's client library does. */
static void metric_add(struct buf *o, const char *name, const char *help, double v)
{
    char num[64];
    int n = snprintf(num, sizeof num, "%.6g", v);
    if (!strpbrk(num, ".eEn") && n > 0 && (size_t)n + 3 <= sizeof num)
        memcpy(num + n, ".0", 3);
    buf_printf(o, "# HELP %s %s\n# TYPE %s gauge\n%s{engine=\"0\",model_name=\"%s\"} %s\n",
               name, help, name, name, G.model, num);
}

static enum outcome route_metrics(struct conn *c, const struct behavior *b)
{
    pthread_mutex_lock(&G.mu);
    double running = G.running >= 0 ? G.running : (double)atomic_load(&S.inflight);
    double waiting = G.waiting, kv = G.kv;
    bool legacy = G.legacy;
    pthread_mutex_unlock(&G.mu);
    struct buf *o = &c->rbody;
    o->len = 0;
    metric_add(o, "vllm:num_requests_running", "Number of requests in model execution batches.", running);
    metric_add(o, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", waiting);
    if (legacy)
        metric_add(o, "vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", kv);
    else
        metric_add(o, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv);
    return reply_send(c, b, 200, "text/plain; version=0.0.4; charset=utf-8");
}

/* ---- control routes (/_fake/...) ---- */

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

static enum outcome ctl_behavior(struct conn *c, const struct behavior *b)
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

static enum outcome ctl_reset(struct conn *c, const struct behavior *b)
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
    return reply_ok(c);
}

static enum outcome ctl_health(struct conn *c, const struct behavior *b)
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

static enum outcome ctl_sleep_config(struct conn *c, const struct behavior *b)
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

static enum outcome ctl_dcgm(struct conn *c, const struct behavior *b)
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

static enum outcome ctl_metrics(struct conn *c, const struct behavior *b)
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

/* Called with G.mu held. */
static void stats_last_json(struct buf *o)
{
    struct request r;
    if (!G.has_last || head_parse(&r, G.last_head.p, G.last_head.len) != 0) {
        buf_adds(o, "null");
        return;
    }
    request_json(o, &r, G.last_body.p, G.last_body.len);
}

static enum outcome ctl_stats(struct conn *c, const struct behavior *b)
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
               G.sleeping && !(G.wake_at_ms && mono_now_ms() >= G.wake_at_ms) ? "true" : "false");
    stats_last_json(o);
    pthread_mutex_unlock(&G.mu);
    buf_add(o, "}", 1);
    return reply_send(c, &BEHAVIOR_DEFAULT, 200, CT_JSON);
}

/* ---- routing ---- */

enum route_kind { ROUTE_DATA, ROUTE_PROBE, ROUTE_CONTROL };

typedef enum outcome (*route_fn)(struct conn *, const struct behavior *);

/*
 * path:    exact match, or prefix match when prefix is set (/echo, /echo/x, ...)
 * method:  NULL accepts any method; "GET" also accepts HEAD
 * kind:    what is counted and whether directives apply (see the top of the file)
 */
static const struct route {
    const char *path;
    bool prefix;
    const char *method;
    enum route_kind kind;
    route_fn fn;
} ROUTES[] = {
    { "/v1/chat/completions", false, "POST", ROUTE_DATA, route_chat },
    { "/v1/completions", false, "POST", ROUTE_DATA, route_text },
    { "/v1/embeddings", false, "POST", ROUTE_DATA, route_embeddings },
    { "/v1/models", false, "GET", ROUTE_DATA, route_models },
    { "/echo", true, NULL, ROUTE_DATA, route_echo },
    { "/health", false, "GET", ROUTE_PROBE, route_health },
    { "/metrics", false, "GET", ROUTE_PROBE, route_metrics },
    { "/_fake/behavior", false, "POST", ROUTE_CONTROL, ctl_behavior },
    { "/_fake/reset", false, "POST", ROUTE_CONTROL, ctl_reset },
    { "/_fake/stats", false, "GET", ROUTE_CONTROL, ctl_stats },
    { "/_fake/health", false, "POST", ROUTE_CONTROL, ctl_health },
    { "/_fake/metrics", false, "POST", ROUTE_CONTROL, ctl_metrics },
    { "/sleep", false, "POST", ROUTE_CONTROL, route_sleep },
    { "/wake_up", false, "POST", ROUTE_CONTROL, route_wake_up },
    { "/is_sleeping", false, "GET", ROUTE_PROBE, route_is_sleeping },
    { "/_fake/sleep-config", false, "POST", ROUTE_CONTROL, ctl_sleep_config },
    { "/dcgm/metrics", false, "GET", ROUTE_PROBE, route_dcgm },
    { "/_fake/dcgm", false, "POST", ROUTE_CONTROL, ctl_dcgm },
};

static const struct route *route_find(const struct request *r, bool *method_ok)
{
    for (size_t i = 0; i < ARRAY_LEN(ROUTES); i++) {
        const struct route *rt = &ROUTES[i];
        size_t l = strlen(rt->path);
        if (rt->prefix ? (r->plen < l || memcmp(r->path, rt->path, l) != 0) : !mem_is(r->path, r->plen, rt->path))
            continue;
        *method_ok = !rt->method || mem_is(r->method, r->mlen, rt->method)
                     || (r->is_head && strcmp(rt->method, "GET") == 0);
        return rt;
    }
    *method_ok = false;
    return NULL;
}

static void behavior_for(const struct request *r, struct behavior *b)
{
    *b = BEHAVIOR_DEFAULT;
    if (atomic_load(&G.has_dflt)) {
        pthread_mutex_lock(&G.mu);
        *b = G.dflt;
        pthread_mutex_unlock(&G.mu);
    }
    const struct hdr *h = req_header(r, "x-fake-behavior");
    if (h)
        behavior_parse(b, h->val, h->vlen);
    size_t n;
    const char *s = behavior_in_body(r->body, r->blen, &n);
    if (s)
        behavior_parse(b, s, n);
}

static void stats_begin(struct conn *c)
{
    atomic_fetch_add(&S.requests, 1);
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

static void stats_end(enum outcome o)
{
    atomic_fetch_sub(&S.inflight, 1);
    atomic_fetch_add(o == OUT_COMPLETE ? &S.completed : o == OUT_ABORTED ? &S.aborted : &S.died, 1);
}

/* The directives in the order a request meets them: before, instead of, or shaping the answer. */
static enum outcome data_run(struct conn *c, const struct route *rt, bool method_ok, const struct behavior *b)
{
    if (b->die_before)
        return OUT_DIED;
    if (b->hang)
        return conn_hang(c);
    if (b->info100 && c->req.minor >= 1 && conn_send(c, CONTINUE_100, sizeof CONTINUE_100 - 1) < 0)
        return OUT_ABORTED;
    if (b->ttfb_ms > 0 && conn_wait(c, b->ttfb_ms) < 0)
        return OUT_ABORTED;
    if (b->status && b->status != 200)
        return reply_error(c, b, b->status, NULL);
    if (fake_sleeping())
        return reply_error(c, b, 503, "the model is sleeping (POST /wake_up)");
    if (!rt || !method_ok) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s: %.*s %.*s", rt ? "method not allowed" : "no such route",
                 (int)(c->req.mlen > 16 ? 16 : c->req.mlen), c->req.method,
                 (int)(c->req.plen > 200 ? 200 : c->req.plen), c->req.path);
        return reply_error(c, b, rt ? 405 : 404, msg);
    }
    return rt->fn(c, b);
}

static enum outcome data_serve(struct conn *c, const struct route *rt, bool method_ok, const struct behavior *b)
{
    stats_begin(c);
    enum outcome o = data_run(c, rt, method_ok, b);
    if (c->loop && c->pending.len)
        c->owed = true;   /* not fully written yet: the connection thread counts it */
    else
        stats_end(o);
    return o;
}

static enum outcome plain_serve(struct conn *c, const struct route *rt, bool method_ok)
{
    if (rt && rt->kind == ROUTE_PROBE)
        atomic_fetch_add(&S.probes, 1);
    if (!rt)
        return reply_error(c, &BEHAVIOR_DEFAULT, 404, "no such control route");
    if (!method_ok)
        return reply_error(c, &BEHAVIOR_DEFAULT, 405, "method not allowed");
    return rt->fn(c, &BEHAVIOR_DEFAULT);
}

static bool is_data(const struct request *r, const struct route *rt)
{
    if (rt)
        return rt->kind == ROUTE_DATA;
    return !(r->plen >= 7 && memcmp(r->path, "/_fake/", 7) == 0);
}

/*
 * Closing with unread input makes the kernel send RST, which can destroy the
 * reply we just wrote (e.g. a 431 while the client still sends headers). So,
 * after a complete answer, stop writing and drain input briefly before closing.
 */
static void conn_linger(struct conn *c)
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

/* Would this data request be answered at once: no sleeping, hanging, dying or streaming? */
static bool fast_enough(const struct request *r, const struct route *rt, bool method_ok, const struct behavior *b)
{
    if (b->die_before || b->hang || b->info100 || b->ttfb_ms > 0 || b->die_after >= 0 || b->hang_after >= 0
        || b->prefix_cache)
        return false;
    if (!rt || !method_ok || (b->status && b->status != 200) || (rt->fn != route_chat && rt->fn != route_text))
        return true;
    struct jscan j;
    json_scan(&j, r->body, r->blen);
    return !j.stream;
}

/* Answers the request in c->req; on an event loop, declines what would block. */
static enum outcome conn_answer(struct conn *c)
{
    bool method_ok;
    const struct route *rt = route_find(&c->req, &method_ok);
    if (!is_data(&c->req, rt))
        return plain_serve(c, rt, method_ok);
    struct behavior b;
    behavior_for(&c->req, &b);
    if (c->loop && !fast_enough(&c->req, rt, method_ok, &b))
        return OUT_HANDOFF;
    return data_serve(c, rt, method_ok, &b);
}

/* Serves one request; 0 to read the next one on this connection, -1 to close it. */
static int conn_serve(struct conn *c)
{
    int rc = req_read(c);
    if (rc < 0)
        return -1;
    if (rc > 0) {
        c->req.keep_alive = false;
        if (reply_error(c, &BEHAVIOR_DEFAULT, rc, reason(rc)) == OUT_COMPLETE)
            conn_linger(c);
        return -1;
    }
    enum outcome o = conn_answer(c);
    if (o == OUT_COMPLETE && !c->req.keep_alive)
        conn_linger(c);
    if (o != OUT_COMPLETE || !c->req.keep_alive)
        return -1;
    req_consume(c);
    return 0;
}

/* ---- connections and threads ---- */

static pthread_attr_t conn_attr;   /* detached, small stack; set up once in main() */

static struct conn *conn_new(int fd)
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

static void conn_drop(struct conn *c)
{
    close(c->fd);   /* plain close: for die_* this is the abrupt end the client must handle */
    free(c->in);
    free(c->chunked.p);
    free(c->rbody.p);
    free(c->out.p);
    free(c->pending.p);
    free(c);
}

/* Takes over from an event loop: sends what it parked, then settles the request it answered. */
static int conn_resume(struct conn *c)
{
    bool served = c->served;
    c->loop = c->served = false;
    if (!served)
        return 0;   /* nothing answered yet: conn_serve reads the buffered request again */
    int rc = conn_send(c, c->pending.p, c->pending.len);
    c->pending.len = 0;
    buf_trim(&c->pending);
    if (c->owed)
        stats_end(rc == 0 ? OUT_COMPLETE : OUT_ABORTED);
    c->owed = false;
    if (rc == 0 && !c->keep_after)
        conn_linger(c);
    return rc == 0 && c->keep_after ? 0 : -1;
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    if (conn_resume(c) == 0)
        while (conn_serve(c) == 0)
            ;
    conn_drop(c);
    return NULL;
}

static void conn_thread_start(struct conn *c)
{
    pthread_t t;
    if (pthread_create(&t, &conn_attr, conn_main, c) != 0)
        conn_drop(c);
}

/* ---- event loops: the fast path for requests that need no waiting ---- */

enum fast { FAST_SERVED, FAST_WAIT, FAST_HANDOFF, FAST_CLOSE };

static int listen_fd = -1;

/* Parses a fully buffered request: 1 ready, 0 more bytes needed, -1 for the blocking path. */
static int fast_request(struct conn *c)
{
    struct request *r = &c->req;
    struct framing f;
    head_skip_blank(c);
    size_t end = c->in_len ? head_find_end(c->in, c->in_len, c->scanned) : 0;
    if (!end) {
        c->scanned = c->in_len > 2 ? c->in_len - 2 : 0;
        return c->in_len >= HEAD_MAX ? -1 : 0;
    }
    r->nh = 0;
    r->minor = 1;
    r->keep_alive = false;
    r->head_len = end;
    /* errors, chunked bodies and Expect are rare: the blocking code answers them */
    if (end > HEAD_MAX || head_parse(r, c->in, end) != 0 || framing_get(r, &f) != 0 || f.chunked || f.expect)
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

static enum fast fast_serve(struct conn *c)
{
    int rc = fast_request(c);
    if (rc <= 0)
        return rc == 0 ? FAST_WAIT : FAST_HANDOFF;
    enum outcome o = conn_answer(c);
    if (o == OUT_HANDOFF)
        return FAST_HANDOFF;
    if (o != OUT_COMPLETE)
        return FAST_CLOSE;
    c->keep_after = c->req.keep_alive;
    req_consume(c);
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
    while ((f = fast_serve(c)) == FAST_SERVED)
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
static void loops_run(void)
{
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

/* ---- start-up ---- */

struct options {
    const char *host, *port, *name, *pidfile;
};

static void usage_exit(const char *why)
{
    if (why)
        fprintf(stderr, "sluice-fake-upstream: %s\n", why);
    fputs("usage: sluice-fake-upstream --port N [--host 127.0.0.1] [--name NAME] [--pidfile F]\n", stderr);
    exit(2);
}

static void options_parse(int argc, char **argv, struct options *o)
{
    *o = (struct options){ .host = "127.0.0.1", .name = "fake" };
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **dst = strcmp(a, "--port") == 0 ? &o->port
                         : strcmp(a, "--host") == 0 ? &o->host
                         : strcmp(a, "--name") == 0 ? &o->name
                         : strcmp(a, "--pidfile") == 0 ? &o->pidfile : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            usage_exit(NULL);
        if (!dst)
            usage_exit("unknown option");
        if (!v)
            usage_exit("option needs a value");
        *dst = v;
    }
    long port;
    if (!o->port || parse_long(o->port, strlen(o->port), &port) < 0 || port < 0 || port > 65535)
        usage_exit("--port must be 0..65535");
    static const char NAME_CHARS[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
    size_t n = strlen(o->name);
    if (n == 0 || n > NAME_MAX_LEN || strspn(o->name, NAME_CHARS) != n)
        usage_exit("--name must be 1-64 characters of [A-Za-z0-9._-] (it goes into headers and JSON)");
}

static int listen_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static int listen_open(const char *host, const char *port)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *res, *ai;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "sluice-fake-upstream: cannot resolve %s: %s\n", host, gai_strerror(rc));
        exit(1);
    }
    int fd = -1, one = 1;
    for (ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        fprintf(stderr, "sluice-fake-upstream: cannot listen on %s:%s: %s\n", host, port, strerror(errno));
        exit(1);
    }
    return fd;
}

static sigset_t stop_signals;

/* Waits for SIGTERM/SIGINT on its own thread, so no worker is interrupted mid-write. */
static void *signal_main(void *arg)
{
    (void)arg;
    int sig;
    sigwait(&stop_signals, &sig);
    if (G.pidfile)
        unlink(G.pidfile);
    _exit(0);
}

static void signals_setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);   /* inherited by every thread */
    pthread_t t;
    if (pthread_create(&t, NULL, signal_main, NULL) != 0) {
        fputs("sluice-fake-upstream: cannot start the signal thread\n", stderr);
        exit(1);
    }
}

static void pidfile_write(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0) {
        fprintf(stderr, "sluice-fake-upstream: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    struct options o;
    options_parse(argc, argv, &o);
    snprintf(G.name, sizeof G.name, "%s", o.name);
    snprintf(G.model, sizeof G.model, "%s-model", o.name);
    signals_setup();
    int lfd = listen_open(o.host, o.port);
    if (o.pidfile) {
        pidfile_write(o.pidfile);
        G.pidfile = o.pidfile;
    }
    printf("listening on %d\n", listen_port(lfd));
    fflush(stdout);
    listen_fd = lfd;
    loops_run();
    return 0;
}
