/* spans.c: trace context and span output (spans.h).
 *
 * The spans of one request, all in the request's trace:
 *   request     SERVER, sluice's span (obs.span_id), parent = the caller's span
 *   route       INTERNAL, child of request: route_plan (wake waits included)
 *   upstream    CLIENT, child of request, one per attempt; its id is the span
 *               id the upstream got in traceparent (obs.attempts[i].span_id)
 *   connect     INTERNAL, child of its upstream: the attempt's start until the
 *               connection was ready; only when one was made (not reused)
 *   first_byte  INTERNAL, child of its upstream: connection ready until the
 *               first upstream byte (the upstream's queue and prefill)
 *   stream      INTERNAL, child of its upstream: first byte to the attempt's
 *               end, for a streamed 2xx
 *   queue       INTERNAL, child of request: the (last) wait in the pool-wide
 *               queue when every candidate was full (R-PRIO-1); only when it waited
 * Child spans (rather than span events) so that a JSON line reader and every
 * trace viewer show connect and first byte as bars of their own.
 *
 * Times are mono_us() values turned into wall-clock ns by one offset taken at
 * spans_begin, so the spans of a request never move relative to each other
 * when the wall clock is stepped. With trace_log and otlp off spans_end returns
 * at once; spans_begin always sets the trace context (the upstream and the
 * access log get it either way), which costs a header parse or three PRNG draws. */
#include "spans.h"

#include "arena.h"         /* xmalloc */
#include "buf.h"
#include "linelog.h"
#include "log.h"
#include "otlp.h"
#include "pathcheck.h"
#include "traceparent.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TRACESTATE_MAX 8192          /* the forwarded header limit (the spec asks 512 at least) */
#define SPAN_MAX (4 + 4 * OBS_MAX_ATTEMPTS)
#define SPAN_MAX_ATTRS 14

enum span_kind { KIND_INTERNAL = 1, KIND_SERVER = 2, KIND_CLIENT = 3 };   /* OTLP's numbers */

struct attr {
    const char *key;
    const char *s;               /* NULL: the integer i */
    int64_t i;
};

struct span {
    const char *name;
    char id[17];
    const char *parent;          /* "" for a root without a caller */
    enum span_kind kind;
    int64_t start_us, end_us;    /* mono_us() */
    const char *error;           /* NULL: ok, else the status message */
    struct attr attrs[SPAN_MAX_ATTRS];
    int n_attrs;
};

static struct linelog T;          /* trace_log, written by its own thread (linelog.c) */

/* Per worker thread: the spans and text of the request it is ending. The spans are taken
 * from the heap at the thread's first traced request end (span_add sets every field it
 * reads): as a thread-local array their ~15 KB were cleared, so made resident, in every
 * thread glibc starts, a grown thread holding a stream too. */
static __thread struct span *spans;
static __thread struct buf lines, otlp_text;

static int spans_on(void) { return linelog_on(&T) || otlp_enabled(); }

int spans_start(const struct conf *c)
{
    if (linelog_open(&T, "trace log", c->trace_log, MET_SPANS_DROPPED) != 0)
        return -1;
    return otlp_start(c);
}

int spans_move(const char *path) { return linelog_move(&T, path); }

void spans_reopen(void) { linelog_reopen(&T); }

void spans_thread_end(void)
{
    free(spans);
    spans = NULL;
    buf_free(&lines);
    buf_free(&otlp_text);
}

void spans_stop(void)
{
    otlp_stop();
    linelog_close(&T);
}

/* ---- trace context ---- */

/* request_random changes the worker's PRNG state only, never the request. */
static uint64_t random_of(const struct request *r)
{
    return request_random((struct request *)r);
}

/* 16 hex digits per draw; xorshift64* never yields 0, so no id is all zeros. */
static void new_id(const struct request *r, char *out, int draws)
{
    static const char hex[] = "0123456789abcdef";
    for (int d = 0; d < draws; d++) {
        uint64_t x = random_of(r);
        for (int i = 0; i < 16; i++)
            out[d * 16 + i] = hex[(x >> (60 - 4 * i)) & 15];
    }
    out[draws * 16] = '\0';
}

void spans_new_span_id(struct request *r, char out[17])
{
    new_id(r, out, 1);
}

void spans_begin(struct request *r)
{
    struct obs *o = &r->obs;
    int flags = 0;
    if (traceparent_parse(request_header(r, "traceparent"), o->trace_id, o->parent_span_id, &flags) == 0) {
        /* Version 00 defines the sampled bit only, and 00 is what sluice sends on. */
        o->trace_flags = flags & 0x01;
        /* The spec: tracestate means something only beside a valid traceparent. */
        const char *ts = request_header(r, "tracestate");
        if (ts && *ts && pathcheck_header_ok(ts, TRACESTATE_MAX))
            o->tracestate = ts;
    } else {
        new_id(r, o->trace_id, 2);
        o->parent_span_id[0] = '\0';
        o->trace_flags = 0x01;   /* sluice records every request it starts a trace for */
    }
    new_id(r, o->span_id, 1);
    if (spans_on()) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        o->wall_offset_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - mono_us() * 1000;
    }
}

/* ---- collecting the spans ---- */

static struct span *span_add(int *n, const char *name, enum span_kind kind, const char *parent, int64_t start,
                             int64_t end)
{
    if (*n >= SPAN_MAX)
        return NULL;
    struct span *s = &spans[(*n)++];
    s->name = name;
    s->id[0] = '\0';
    s->parent = parent;
    s->kind = kind;
    s->start_us = start;
    s->end_us = end > start ? end : start;
    s->error = NULL;
    s->n_attrs = 0;
    return s;
}

static void attr_str(struct span *s, const char *key, const char *v)
{
    if (s && v && *v && s->n_attrs < SPAN_MAX_ATTRS)
        s->attrs[s->n_attrs++] = (struct attr){key, v, 0};
}

static void attr_int(struct span *s, const char *key, int64_t v)
{
    if (s && s->n_attrs < SPAN_MAX_ATTRS)
        s->attrs[s->n_attrs++] = (struct attr){key, NULL, v};
}

/* gen_ai.system: who serves the model, from the endpoint's protocol and the
 * replica's engine (OpenTelemetry's well-known values where there is one). */
static const char *gen_ai_system(const struct snap_endpoint *ep, const struct snap_replica *rep)
{
    if (ep && ep->protocol == PROTO_ANTHROPIC)
        return "anthropic";
    if (rep && rep->engine && (strcmp(rep->engine, "vllm") == 0 || strcmp(rep->engine, "ollama") == 0))
        return rep->engine;
    return ep ? "openai" : NULL;
}

static const char *operation_name(enum req_kind k)
{
    switch (k) {
    case REQ_CHAT: case REQ_MESSAGES: case REQ_RESPONSES: return "chat";
    case REQ_COMPLETIONS: return "text_completion";
    case REQ_EMBEDDINGS: return "embeddings";
    default: return NULL;
    }
}

/* server.address and server.port of a replica URL (scheme://host[:port][/...]). */
static void attr_server(const struct request *r, struct span *s, const struct snap_replica *rep)
{
    if (!s || !rep || !rep->url)
        return;
    const char *h = strstr(rep->url, "://");
    h = h ? h + 3 : rep->url;
    size_t n = strcspn(h, "/");
    const char *colon = NULL;
    if (*h == '[') {                             /* [v6]:port */
        const char *close = memchr(h, ']', n);
        colon = close && close + 1 < h + n && close[1] == ':' ? close + 1 : NULL;
    } else {
        colon = memchr(h, ':', n);
    }
    size_t hn = colon ? (size_t)(colon - h) : n;
    attr_str(s, "server.address", arena_strndup(r->arena, h, hn));
    int https = strncmp(rep->url, "https:", 6) == 0;
    attr_int(s, "server.port", colon ? atoi(colon + 1) : https ? 443 : 80);
}

static void root_span(const struct request *r, int *n, int64_t end)
{
    const struct obs *o = &r->obs;
    struct span *s = span_add(n, "request", KIND_SERVER, o->parent_span_id, o->start_us, end);
    memcpy(s->id, o->span_id, sizeof s->id);
    attr_str(s, "http.request.method", r->method);
    attr_str(s, "url.path", r->path);
    attr_int(s, "http.response.status_code", r->status);
    attr_str(s, "gen_ai.operation.name", operation_name(r->kind));
    attr_str(s, "gen_ai.request.model", r->model);
    if (o->n_attempts > 0) {
        const struct obs_attempt *last = &o->attempts[o->n_attempts - 1];
        attr_str(s, "gen_ai.system", gen_ai_system(last->ep, last->replica));
        attr_str(s, "gen_ai.response.model", r->routed_model);
        attr_server(r, s, last->replica);
        attr_int(s, "sluice.attempts", o->n_attempts);
    }
    if (r->usage.found) {
        attr_int(s, "gen_ai.usage.input_tokens", r->usage.prompt_tokens);
        attr_int(s, "gen_ai.usage.output_tokens", r->usage.completion_tokens);
    }
    attr_str(s, "error.type", r->error_code);
    /* A server span is in error for 5xx only: a 4xx is the caller's mistake. */
    if (r->status >= 500 || r->status == 0)
        s->error = r->error_code ? r->error_code : r->status ? "server error" : "no response";
}

static void attempt_spans(const struct request *r, int *n, int i)
{
    const struct obs *o = &r->obs;
    const struct obs_attempt *a = &o->attempts[i];
    if (!a->span_id[0])
        return;
    struct span *u = span_add(n, "upstream", KIND_CLIENT, o->span_id, a->start_us, a->end_us);
    if (!u)
        return;
    memcpy(u->id, a->span_id, sizeof u->id);
    attr_str(u, "gen_ai.system", gen_ai_system(a->ep, a->replica));
    if (i == o->n_attempts - 1)
        attr_str(u, "gen_ai.request.model", r->routed_model);   /* the name this backend was sent */
    attr_server(r, u, a->replica);
    if (a->status)
        attr_int(u, "http.response.status_code", a->status);
    attr_str(u, "sluice.endpoint", a->ep ? a->ep->name : NULL);
    if (a->replica)
        attr_int(u, "sluice.replica_id", a->replica->id);
    attr_str(u, "sluice.outcome", a->outcome);
    attr_str(u, "sluice.next", a->next);
    if (!a->status || a->status >= 400)
        u->error = a->outcome ? a->outcome : "failed";
    const char *parent = u->id;                  /* spans[] does not move */
    int64_t ready = a->start_us + a->connect_us;
    if (a->connect_us > 0) {
        struct span *c = span_add(n, "connect", KIND_INTERNAL, parent, a->start_us, ready);
        if (c)
            new_id(r, c->id, 1);
    }
    if (a->first_byte_us > 0) {
        int64_t first = a->start_us + a->first_byte_us;
        struct span *f = span_add(n, "first_byte", KIND_INTERNAL, parent, ready, first);
        if (f)
            new_id(r, f->id, 1);
        if (r->stream && a->status >= 200 && a->status < 300) {
            struct span *st = span_add(n, "stream", KIND_INTERNAL, parent, first, a->end_us);
            if (st)
                new_id(r, st->id, 1);
        }
    }
}

static int collect(const struct request *r, int64_t end)
{
    int n = 0;
    root_span(r, &n, end);
    const struct obs *o = &r->obs;
    if (o->route_start_us > 0 && o->route_end_us >= o->route_start_us) {
        struct span *s = span_add(&n, "route", KIND_INTERNAL, o->span_id, o->route_start_us, o->route_end_us);
        if (s)
            new_id(r, s->id, 1);
    }
    if (r->queue_start_us > 0 && r->queue_end_us >= r->queue_start_us) {
        struct span *s = span_add(&n, "queue", KIND_INTERNAL, o->span_id, r->queue_start_us, r->queue_end_us);
        if (s)
            new_id(r, s->id, 1);
    }
    for (int i = 0; i < o->n_attempts && i < OBS_MAX_ATTEMPTS; i++)
        attempt_spans(r, &n, i);
    return n;
}

/* ---- writing them ---- */

/* The writers below avoid printf: its format parsing was most of a request's
 * span cost (the benchmark with traces on must stay within 5 % of off). */

/* The request's own offset, not the thread's: a parked stream ends on the
 * stream loop, a thread that never began it (park.h). */
static int64_t wall_ns(const struct request *r, int64_t mono) { return mono * 1000 + r->obs.wall_offset_ns; }

#define PUT(b, lit) buf_append((b), (lit), sizeof(lit) - 1)

static void put_str(struct buf *b, const char *s) { buf_append(b, s, strlen(s)); }

static void put_int(struct buf *b, int64_t v)
{
    char tmp[24];
    int i = sizeof tmp;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do
        tmp[--i] = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        tmp[--i] = '-';
    buf_append(b, tmp + i, sizeof tmp - (size_t)i);
}

/* sluice's own words (names, keys, hex ids) need no escaping; what came
 * with the request (model, path, request id, endpoint name) does. */
static void put_word(struct buf *b, const char *s)
{
    PUT(b, "\"");
    put_str(b, s);
    PUT(b, "\"");
}

static void json_str(struct buf *b, const char *s)
{
    buf_json_str(b, s, strlen(s));
}

/* One JSON line: {"trace_id",...,"attributes":{...}}. */
static void line_of(const struct request *r, const struct span *s, struct buf *b)
{
    static const char *kinds[] = {"", "internal", "server", "client"};
    PUT(b, "{\"trace_id\":");
    put_word(b, r->obs.trace_id);
    PUT(b, ",\"span_id\":");
    put_word(b, s->id);
    PUT(b, ",\"parent_span_id\":");
    put_word(b, s->parent);
    PUT(b, ",\"name\":");
    put_word(b, s->name);
    PUT(b, ",\"kind\":");
    put_word(b, kinds[s->kind]);
    PUT(b, ",\"start_time_unix_nano\":");
    put_int(b, wall_ns(r, s->start_us));
    PUT(b, ",\"end_time_unix_nano\":");
    put_int(b, wall_ns(r, s->end_us));
    PUT(b, ",\"request_id\":");
    json_str(b, r->request_id);
    if (s->error) {
        PUT(b, ",\"status\":\"error\",\"status_message\":");
        json_str(b, s->error);
    } else {
        PUT(b, ",\"status\":\"ok\"");
    }
    PUT(b, ",\"attributes\":{");
    for (int i = 0; i < s->n_attrs; i++) {
        if (i)
            PUT(b, ",");
        put_word(b, s->attrs[i].key);
        PUT(b, ":");
        if (s->attrs[i].s)
            json_str(b, s->attrs[i].s);
        else
            put_int(b, s->attrs[i].i);
    }
    PUT(b, "}}\n");
}

/* One OTLP/JSON span object: ids as lowercase hex, times and integers as
 * decimal strings (int64 in the protobuf JSON mapping). */
static void otlp_of(const struct request *r, const struct span *s, struct buf *b)
{
    PUT(b, "{\"traceId\":");
    put_word(b, r->obs.trace_id);
    PUT(b, ",\"spanId\":");
    put_word(b, s->id);
    if (s->parent[0]) {
        PUT(b, ",\"parentSpanId\":");
        put_word(b, s->parent);
    }
    PUT(b, ",\"name\":");
    put_word(b, s->name);
    PUT(b, ",\"kind\":");
    put_int(b, s->kind);
    PUT(b, ",\"startTimeUnixNano\":\"");
    put_int(b, wall_ns(r, s->start_us));
    PUT(b, "\",\"endTimeUnixNano\":\"");
    put_int(b, wall_ns(r, s->end_us));
    PUT(b, "\",\"attributes\":[{\"key\":\"sluice.request_id\",\"value\":{\"stringValue\":");
    json_str(b, r->request_id);
    PUT(b, "}}");
    for (int i = 0; i < s->n_attrs; i++) {
        PUT(b, ",{\"key\":");
        put_word(b, s->attrs[i].key);
        if (s->attrs[i].s) {
            PUT(b, ",\"value\":{\"stringValue\":");
            json_str(b, s->attrs[i].s);
            PUT(b, "}}");
        } else {
            PUT(b, ",\"value\":{\"intValue\":\"");
            put_int(b, s->attrs[i].i);
            PUT(b, "\"}}");
        }
    }
    PUT(b, "],\"status\":{");
    if (s->error) {                              /* STATUS_CODE_ERROR; ok stays unset */
        PUT(b, "\"code\":2,\"message\":");
        json_str(b, s->error);
    }
    PUT(b, "}}");
}

void spans_end(const struct request *r)
{
    if (!spans_on())
        return;
    if (!spans)
        spans = xmalloc(SPAN_MAX * sizeof *spans);
    int n = collect(r, mono_us());
    if (linelog_on(&T)) {
        buf_reset(&lines);
        for (int i = 0; i < n; i++)
            line_of(r, &spans[i], &lines);
        linelog_put(&T, r->shm, lines.data, lines.len);   /* the request's lines stay together */
    }
    if (otlp_enabled()) {
        buf_reset(&otlp_text);
        for (int i = 0; i < n; i++) {
            if (i)
                PUT(&otlp_text, ",");
            otlp_of(r, &spans[i], &otlp_text);
        }
        otlp_enqueue(r->shm, otlp_text.data, otlp_text.len, n);
    }
    /* A rare huge request (long model names) must not keep its buffers per thread. */
    if (lines.cap > (1u << 20))
        buf_free(&lines);
    if (otlp_text.cap > (1u << 20))
        buf_free(&otlp_text);
}
