/* forward.c: one attempt: the adapter's request, a libcurl transfer driven from
 * the worker's loop, the relay to the client (DESIGN.md stage 7). */
#include "forward.h"

#include "log.h"
#include "reply.h"
#include "spans.h"
#include "traceparent.h"
#include "upstream.h"
#include "util.h"

#include <poll.h>
#include <unistd.h>
#include <string.h>
#include <sys/socket.h>

/* The adapter for each pair of caller protocol and upstream protocol. */
static const struct adapter_row {
    enum ingress caller;
    enum upstream_protocol upstream;
    const struct proto_ops *ops;
} adapters[] = {
    {INGRESS_OPENAI, PROTO_OPENAI, &proto_openai},
    {INGRESS_OPENAI, PROTO_ANTHROPIC, &proto_anthropic},
    {INGRESS_ANTHROPIC, PROTO_ANTHROPIC, &proto_messages_native},
    {INGRESS_ANTHROPIC, PROTO_OPENAI, &proto_messages_openai},
};

const struct proto_ops *forward_adapter(const struct request *r)
{
    if (r->kind == REQ_PROXY)
        return &proto_passthrough;          /* the pass-through stays raw */
    for (size_t i = 0; i < sizeof adapters / sizeof adapters[0]; i++)
        if (adapters[i].caller == r->ingress && adapters[i].upstream == r->ep->protocol)
            return adapters[i].ops;
    return &proto_openai;
}

/* curl opens and closes the upstream sockets through these, so the worker
 * knows them: curl 7.88 cannot tell a running transfer's socket, and the
 * stream loop must watch it (park.c). */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    (void)purpose;
    struct worker *w = clientp;
    int fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (fd < 0)
        return CURL_SOCKET_BAD;
    w->up_opened++;
    if (w->n_up_socks >= 0 && w->n_up_socks < (int)(sizeof w->up_socks / sizeof w->up_socks[0]))
        w->up_socks[w->n_up_socks++] = fd;
    else
        w->n_up_socks = -1;
    return fd;
}

static int close_socket(void *clientp, curl_socket_t fd)
{
    struct worker *w = clientp;
    for (int i = 0; i < w->n_up_socks; i++)
        if (w->up_socks[i] == fd) {
            w->up_socks[i] = w->up_socks[--w->n_up_socks];
            break;
        }
    return close(fd);
}

void forward_curl_init(struct worker *w)
{
    CURL *c = w->curl;
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, w);
    curl_easy_setopt(c, CURLOPT_CLOSESOCKETFUNCTION, close_socket);
    curl_easy_setopt(c, CURLOPT_CLOSESOCKETDATA, w);
    /* Options that never change: set once, so no curl_easy_reset (which frees
     * and reallocates curl's buffers) is needed between requests. */
    upstream_safe_defaults(c);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, relay_header_cb);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, relay_write_cb);
}

static void forward_setup(struct request *r, struct relay *x, const struct proto_request *pr)
{
    CURL *c = r->w->curl;
    const char *url = arena_cat(r->arena, r->replica->url, pr->path ? pr->path : "", NULL);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)r->ep->connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, pr->headers);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    /* The method: each request sets every option the previous one may have changed. */
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, NULL);
    curl_easy_setopt(c, CURLOPT_NOBODY, 0L);
    if (strcmp(r->method, "GET") == 0 && pr->len == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(r->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, pr->body ? pr->body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)pr->len);
        if (strcmp(r->method, "POST") != 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
    }
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static void transfer_begin(struct request *r, struct attempt *a)
{
    forward_setup(r, &a->relay, &a->pr);
    curl_multi_add_handle(r->w->multi, r->w->curl);
    a->tr.start = mono_ms();
    a->tr.watch_fcgi = 1;
    a->tr.out = ATTEMPT_DONE;
}

int forward_transfer_step(struct request *r, struct attempt *a, int *wait_ms)
{
    struct relay *x = &a->relay;
    int running = 0;
    curl_multi_perform(r->w->multi, &running);
    if (x->abort != ABORT_NONE || !running || a->tr.out != ATTEMPT_DONE)
        return 0;
    if (atomic_load(r->w->cut)) {
        a->tr.out = ATTEMPT_SHUTDOWN;
        return 0;
    }
    int64_t now = mono_ms();
    int64_t wait = 1000;
    if (!x->upstream_bytes) {
        int64_t left = a->tr.start + r->ep->first_byte_timeout_ms - now;
        if (left <= 0) {
            a->tr.out = ATTEMPT_FIRST_BYTE;
            return 0;
        }
        wait = min64(wait, left);
    } else {
        int64_t left = x->last_upstream_ms + r->ep->idle_timeout_ms - now;
        if (left <= 0) {
            a->tr.out = ATTEMPT_IDLE;
            return 0;
        }
        wait = min64(wait, left);
    }
    /* R-SSE-2: comments only on a stream (or before the upstream said what
     * it sends); a buffered answer (an upstream error) must keep its head. */
    if (r->stream && x->mode != RELAY_BUFFER) {
        int64_t left = x->last_client_ms + r->conf->keepalive_ms - now;
        if (left <= 0) {
            if (relay_keepalive(x) != 0) {
                a->tr.out = ATTEMPT_CLIENT_GONE;
                return 0;
            }
            left = r->conf->keepalive_ms;
        }
        wait = min64(wait, left);
    }
    *wait_ms = (int)(wait > 0 ? wait : 1);
    return 1;
}

int forward_client_check(struct request *r, struct attempt *a)
{
    if (reply_client_closed(r)) {
        r->client_gone = 1;
        a->tr.out = ATTEMPT_CLIENT_GONE;
        return 1;
    }
    a->tr.watch_fcgi = 0;     /* a record we do not expect; stop watching rather than spin */
    return 0;
}

static enum attempt_outcome transfer_end(struct request *r, struct attempt *a)
{
    struct relay *x = &a->relay;
    CURLM *m = r->w->multi;
    CURLcode result = CURLE_OK;
    int msgs;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(m, &msgs)))
        if (msg->msg == CURLMSG_DONE)
            result = msg->data.result;
    curl_multi_remove_handle(m, r->w->curl);   /* aborts the transfer if still running */
    if (a->tr.out != ATTEMPT_DONE)
        return a->tr.out;
    if (x->abort == ABORT_CLIENT_GONE || r->client_gone)
        return ATTEMPT_CLIENT_GONE;
    if (x->abort == ABORT_TOO_LARGE)
        return ATTEMPT_TOO_LARGE;
    if (x->abort == ABORT_FAILED_EARLY)
        return ATTEMPT_BROKEN;
    if (x->abort == ABORT_BLOCKED)
        return ATTEMPT_DONE;        /* R-GUARD-3: answered; an output rule ended it */
    if (result == CURLE_OK)
        return ATTEMPT_DONE;
    if (result == CURLE_OPERATION_TIMEDOUT && !x->upstream_bytes)
        return ATTEMPT_CONNECT;
    return x->upstream_bytes && x->status ? ATTEMPT_BROKEN : ATTEMPT_CONNECT;
}

/* Drives one transfer from this thread's loop (curl multi), with the phase
 * timeouts of R-RT-7, keep-alives of R-SSE-2 and the client watch; to its end,
 * or until it may go on without this thread (ATTEMPT_PARKED). */
static enum attempt_outcome forward_transfer(struct request *r, struct attempt *a)
{
    transfer_begin(r, a);
    int wait;
    while (forward_transfer_step(r, a, &wait)) {
        /* A stream, once asked of the upstream, needs nothing of this thread
         * while it runs (minutes, mostly waiting): its turns go to the stream
         * loop, the thread to the next request. A retry it needs later gets
         * a thread again (drive_continue). */
        if (r->may_park && r->stream && r->w->fcgi.stdin_done)
            return ATTEMPT_PARKED;
        int watch = a->tr.watch_fcgi;
        struct curl_waitfd wfd = {.fd = r->w->fcgi.fd, .events = CURL_WAIT_POLLIN, .revents = 0};
        curl_multi_poll(r->w->multi, watch ? &wfd : NULL, watch ? 1 : 0, wait, NULL);
        if (watch && wfd.revents && forward_client_check(r, a))
            break;
    }
    return transfer_end(r, a);
}

/* R-OBS-3: the upstream continues the request's trace under a span of this
 * attempt (a fresh id each), and gets the caller's tracestate as it came. The
 * adapters never forward the caller's own traceparent/tracestate. */
static struct curl_slist *trace_headers(struct request *r, struct curl_slist *h, char span_id[17])
{
    spans_new_span_id(r, span_id);
    char tp[56];
    traceparent_format(tp, r->obs.trace_id, span_id, r->obs.trace_flags);
    h = curl_slist_append(h, arena_cat(r->arena, "traceparent: ", tp, NULL));
    if (r->obs.tracestate)
        h = curl_slist_append(h, arena_cat(r->arena, "tracestate: ", r->obs.tracestate, NULL));
    return h;
}

/* What follows the transfer: its timings, the status as the caller sees it. */
static void attempt_end(struct request *r, struct attempt *a)
{
    shm_active_add(r->shm, r->replica->slot, -1);
    int64_t t1 = mono_us();
    r->obs.upstream_us += t1 - a->tr.t0;
    r->obs.attempt_start_us = 0;
    struct obs_attempt *oa = a->tr.oa;
    if (oa) {
        curl_off_t connect = 0, first = 0;
        curl_easy_getinfo(r->w->curl, CURLINFO_CONNECT_TIME_T, &connect);
        curl_easy_getinfo(r->w->curl, CURLINFO_STARTTRANSFER_TIME_T, &first);
        oa->end_us = t1;
        oa->connect_us = (int64_t)connect;
        oa->first_byte_us = a->relay.upstream_bytes ? (int64_t)first : 0;
        oa->status = a->relay.status;
        a->obs = oa;
    }
    curl_slist_free_all(a->pr.headers);
    a->pr.headers = NULL;
    a->status = a->proto->status ? a->proto->status(a->relay.status) : a->relay.status;
    a->sse = a->relay.mode == RELAY_SSE;
}

void forward_resume(struct request *r, struct attempt *a)
{
    a->outcome = transfer_end(r, a);
    attempt_end(r, a);
}

void forward_attempt(struct request *r, struct attempt *a)
{
    memset(a, 0, sizeof *a);
    a->proto = forward_adapter(r);
    relay_init(&a->relay, r);
    struct proto_request *pr = &a->pr;
    if (a->proto->build(r, pr, &a->refusal) != 0) {
        curl_slist_free_all(pr->headers);
        pr->headers = NULL;
        a->outcome = ATTEMPT_REFUSED;
        return;
    }
    char span_id[17];
    pr->headers = trace_headers(r, pr->headers, span_id);
    a->relay.proto = a->proto;
    a->relay.proto_state = a->proto->stream_new ? a->proto->stream_new(r) : NULL;
    struct obs_attempt *oa = r->obs.n_attempts < OBS_MAX_ATTEMPTS ? &r->obs.attempts[r->obs.n_attempts++] : NULL;
    int64_t t0 = mono_us();
    if (oa) {
        memset(oa, 0, sizeof *oa);
        oa->ep = r->ep;
        oa->replica = r->replica;
        oa->start_us = t0;
        memcpy(oa->span_id, span_id, sizeof oa->span_id);
    }
    r->obs.attempt_start_us = t0;
    a->tr.t0 = t0;
    a->tr.oa = oa;
    shm_active_add(r->shm, r->replica->slot, 1);
    a->outcome = forward_transfer(r, a);
    if (a->outcome != ATTEMPT_PARKED)
        attempt_end(r, a);
}

void forward_deliver(struct request *r, struct attempt *a)
{
    (void)r;
    if (a->sse)
        relay_finish_sse(&a->relay);
    else
        relay_send_buffered(&a->relay);
}

void forward_attempt_free(struct attempt *a)
{
    if (a->relay.proto_state && a->proto->stream_free)
        a->proto->stream_free(a->relay.proto_state);
    relay_free(&a->relay);
}
