/* relay.c: upstream headers and body to the client, byte for byte where the spec asks. */
#include "relay.h"

#include "auto.h"
#include "proto.h"
#include "reply.h"
#include "screen.h"
#include "sticky.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Is the pass-through's path this operation (query aside)? */
static int proxy_path_is(const struct request *r, const char *op)
{
    size_t n = strlen(op);
    return r->kind == REQ_PROXY && r->upstream_path && strncmp(r->upstream_path, op, n) == 0 &&
           (r->upstream_path[n] == '\0' || r->upstream_path[n] == '?');
}

/* The protocol of the events the client receives: the caller's (an adapter
 * translates into it), or for the pass-through what its path speaks. */
static enum dialect relay_dialect(const struct request *r)
{
    if (r->ingress == INGRESS_ANTHROPIC || proxy_path_is(r, "/v1/messages"))
        return DIALECT_MESSAGES;
    if (r->kind == REQ_RESPONSES || r->kind == REQ_RESPONSE_OP || proxy_path_is(r, "/v1/responses"))
        return DIALECT_RESPONSES;
    return DIALECT_CHAT;
}

void relay_init(struct relay *x, struct request *r)
{
    memset(x, 0, sizeof *x);
    x->r = r;
    x->dialect = relay_dialect(r);
    buf_init(&x->headers, 64 * 1024);
    buf_init(&x->held, (size_t)r->conf->max_sse_event_bytes);
    buf_init(&x->early_error, (size_t)r->conf->max_sse_event_bytes);
    sse_init(&x->sse, (size_t)r->conf->max_sse_event_bytes);
    buf_reset(&r->w->resp);
    r->w->resp.max = (size_t)r->conf->max_response_bytes;
    x->last_upstream_ms = x->last_client_ms = mono_ms();
    if (r->route && r->route->target_model && r->snap->rewrite_response_model &&
        strcmp(r->route->target_model, r->model) != 0) {
        struct buf q;
        buf_init(&q, 0);
        buf_json_str(&q, r->routed_model, strlen(r->routed_model));
        x->model_from = arena_strdup(r->arena, q.data);
        buf_reset(&q);
        buf_json_str(&q, r->model, strlen(r->model));
        x->model_to = arena_strdup(r->arena, q.data);
        buf_free(&q);
    }
}

void relay_free(struct relay *x)
{
    buf_free(&x->headers);
    buf_free(&x->held);
    buf_free(&x->early_error);
    sse_free(&x->sse);
}

/* Headers that describe the hop, not the response, or that sluice owns (R-API-6). */
static int header_dropped(const char *name, size_t n)
{
    static const char *drop[] = {"connection", "keep-alive", "transfer-encoding", "content-length",
                                 "proxy-connection", "proxy-authenticate", "te", "trailer", "upgrade",
                                 "date", "server", "x-request-id", "content-type", "status",
                                 /* the operator's upstream account, not the caller's business */
                                 "set-cookie", "openai-organization", "openai-project", "anthropic-organization-id"};
    if (n >= 15 && strncasecmp(name, "access-control-", 15) == 0)
        return 1;
    /* The operator's upstream account's limits are not the caller's (sluice sends its own). */
    if ((n >= 12 && strncasecmp(name, "x-ratelimit-", 12) == 0) ||
        (n >= 20 && strncasecmp(name, "anthropic-ratelimit-", 20) == 0))
        return 1;
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        if (strlen(drop[i]) == n && strncasecmp(name, drop[i], n) == 0)
            return 1;
    return 0;
}

size_t relay_header_cb(char *p, size_t size, size_t n, void *ud)
{
    struct relay *x = ud;
    size_t len = size * n;
    x->upstream_bytes = 1;
    x->last_upstream_ms = mono_ms();
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        const char *sp = memchr(p, ' ', len);
        long status = sp ? strtol(sp + 1, NULL, 10) : 0;
        /* R-API-6: an interim 1xx response and its headers are dropped. */
        x->in_1xx = status >= 100 && status < 200;
        if (!x->in_1xx)
            x->status = status;
        buf_reset(&x->headers);
        x->content_type[0] = '\0';
        return len;
    }
    if (x->in_1xx)
        return len;
    const char *colon = memchr(p, ':', len);
    if (!colon)
        return len;
    size_t name_len = (size_t)(colon - p);
    const char *v = colon + 1, *end = p + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    if (name_len == 12 && strncasecmp(p, "content-type", 12) == 0) {
        snprintf(x->content_type, sizeof x->content_type, "%.*s", (int)(end - v), v);
        return len;
    }
    if (header_dropped(p, name_len))
        return len;
    buf_append(&x->headers, p, name_len);
    buf_puts(&x->headers, ": ");
    buf_append(&x->headers, v, (size_t)(end - v));
    buf_puts(&x->headers, "\r\n");
    return len;
}

/* The response head's extra lines: upstream headers and sluice's own. */
static const char *relay_extra_headers(struct relay *x, int stream)
{
    struct request *r = x->r;
    const char *routed = r->routed_model ? r->routed_model : "";
    const char *up = x->headers.data ? x->headers.data : "";
    /* R-SSE-1: nothing between sluice and the client may buffer a stream. */
    const char *nocache = stream && !strcasestr(up, "cache-control:") ? "Cache-Control: no-cache\r\n" : "";
    const char *noaccel = stream && !strcasestr(up, "x-accel-buffering:") ? "X-Accel-Buffering: no\r\n" : "";
    const struct auto_plan *ap = r->auto_plan;
    /* R-OBS-4, R-KEY-6: how far the request stepped down. For auto each later
     * candidate is a level (and a max_tokens a quota layer shrank one more);
     * otherwise the furthest step of the layers' degrade order: 1 a cheaper
     * model, 2 queued for the model, 3 max_tokens shrunk (also saying to what). */
    int fell = ap && r->plan.pos > 0;
    int level = ap ? (fell ? r->plan.pos : 0) + (r->shrunk_max_tokens ? 1 : 0) : r->degrade_level;
    /* Built with appends, not printf: this runs for every answer. */
    struct buf h;
    char num[24];
    buf_init(&h, 0);
    buf_puts(&h, up);
    buf_puts(&h, nocache);
    buf_puts(&h, noaccel);
    if (r->affinity_header[0]) {
        buf_puts(&h, "X-Session-Id: ");
        buf_puts(&h, r->session_id);
        buf_puts(&h, "\r\nX-Session-Affinity: ");
        buf_puts(&h, r->affinity_header);
        buf_puts(&h, "\r\n");
    }
    if (fell)
        buf_puts(&h, "X-Fallback: true\r\n");
    if (level) {
        buf_puts(&h, "X-Degradation-Level: ");
        buf_append(&h, num, fmt_i64(num, level));
        buf_puts(&h, "\r\n");
    }
    if (ap && ap->purpose_fallback)
        buf_puts(&h, "X-Routing-Purpose-Fallback: unlabeled\r\n");
    if (r->routing_reason) {                  /* R-SEM: which layer chose, and why */
        buf_puts(&h, "X-Routing-Reason: ");
        buf_puts(&h, r->routing_reason);
        buf_puts(&h, "\r\n");
    }
    if (r->shrunk_max_tokens) {
        buf_puts(&h, "X-Max-Tokens-Shrunk: ");
        buf_append(&h, num, fmt_i64(num, r->shrunk_max_tokens));
        buf_puts(&h, "\r\n");
    }
    /* R-CACHE-2: a cacheable request the cache could not answer says so. */
    if (r->obs.cache) {
        buf_puts(&h, "X-Cache: ");
        buf_puts(&h, r->obs.cache);
        buf_puts(&h, "\r\n");
    }
    /* R-GUARD-3: the flag rules the request's text matched. */
    if (r->obs.content_flag) {
        buf_puts(&h, "X-Content-Flag: ");
        buf_puts(&h, r->obs.content_flag);
        buf_puts(&h, "\r\n");
    }
    buf_puts(&h, "X-Routed-Endpoint: ");
    buf_puts(&h, r->ep ? r->ep->name : "");
    buf_puts(&h, "\r\n");
    if (*routed) {
        buf_puts(&h, "X-Routed-Model: ");
        buf_puts(&h, routed);
        buf_puts(&h, "\r\n");
    }
    const char *out = arena_strndup(r->arena, h.data ? h.data : "", h.len);
    buf_free(&h);
    return out;
}

int relay_stream_head(struct relay *x)
{
    struct request *r = x->r;
    if (r->headers_sent)
        return r->client_gone ? -1 : 0;
    /* Before the upstream answered, a keep-alive commits a plain 200 stream. */
    int sse = x->mode == RELAY_SSE;
    const char *ct = sse && x->content_type[0] ? x->content_type : "text/event-stream";
    int rc = reply_head(r, sse && x->status >= 200 ? (int)x->status : 200, ct, relay_extra_headers(x, 1));
    x->last_client_ms = mono_ms();
    return rc;
}

/* Rewrites one event or body into w->out when R-USE-2 or R-RT-5 asks; returns
 * the bytes to send (the input itself when nothing changes). */
static const char *relay_rewrite(struct relay *x, const char *p, size_t len, size_t *out_len)
{
    struct request *r = x->r;
    int strip = r->injected_usage && memmem(p, len, "\"usage\"", 7);
    const char *at = NULL;
    size_t from_len = 0;
    if (x->model_from) {
        static const char *keys[] = {"\"model\":", "\"model\": "};
        from_len = strlen(x->model_from);
        for (int i = 0; i < 2 && !at; i++) {
            size_t key_len = strlen(keys[i]);
            const char *k = memmem(p, len, keys[i], key_len);
            if (k && (size_t)(p + len - (k + key_len)) >= from_len &&
                memcmp(k + key_len, x->model_from, from_len) == 0)
                at = k + key_len;
        }
    }
    if (!strip && !at) {
        *out_len = len;
        return p;
    }
    struct buf *o = &r->w->out;
    buf_reset(o);
    if (at) {
        buf_append(o, p, (size_t)(at - p));
        buf_puts(o, x->model_to);
        buf_append(o, at + from_len, len - (size_t)(at - p) - from_len);
    } else {
        buf_append(o, p, len);
    }
    if (strip)
        o->len = usage_strip_null(o->data, o->len);
    *out_len = o->len;
    return o->data;
}

/* Bytes already in their final form to the client, flushed (R-SSE-1). */
static int relay_send_raw(struct relay *x, const char *p, size_t n, int is_data)
{
    struct request *r = x->r;
    if (relay_stream_head(x) != 0 || reply_body(r, p, n, 1) != 0)
        return -1;
    x->last_client_ms = mono_ms();
    if (is_data && !r->data_sent) {
        r->data_sent = 1;
        r->ttft_ms = mono_ms() - r->start_mono;
        r->obs.ttft_us = mono_us() - r->obs.start_us;
    }
    return 0;
}

static int relay_send_event(struct relay *x, const char *raw, size_t len, int is_data)
{
    size_t n;
    const char *p = relay_rewrite(x, raw, len, &n);
    return relay_send_raw(x, p, n, is_data);
}

/* Are the upstream's events another protocol's, turned into the caller's by the adapter? */
static int relay_translates(const struct relay *x)
{
    return x->proto && x->proto->stream_event;
}

static int relay_event(struct relay *x, const struct sse_event *ev)
{
    struct request *r = x->r;
    if (x->abort == ABORT_BLOCKED)
        return -1;              /* R-GUARD-3: an adapter's later events of the same upstream one */
    if (ev->comment_only || !ev->has_data) {
        if (x->holding)
            return buf_append(&x->held, ev->raw, ev->raw_len) == 0 ? 0 : -1;
        return relay_send_event(x, ev->raw, ev->raw_len, 0);
    }
    struct event_facts f;
    /* Parsing JSON costs; a chat chunk is parsed only when it can matter. */
    dialect_classify(x->dialect, x->holding, ev->event, ev->event_len, ev->data, ev->data_len, &f);
    enum chunk_kind kind = f.kind;
    /* A stream may report usage in pieces (Anthropic's message_start, then
     * cumulative message_delta counts): keep the most each counter has reached.
     * A translating adapter reports the upstream's own usage itself: the
     * counts it writes into the caller's events are not evidence of any. */
    if (f.usage.found && !relay_translates(x)) {
        struct usage *u = &f.usage;
        if (r->usage.found) {
            if (u->prompt_tokens < r->usage.prompt_tokens)
                u->prompt_tokens = r->usage.prompt_tokens;
            if (u->completion_tokens < r->usage.completion_tokens)
                u->completion_tokens = r->usage.completion_tokens;
            if (u->cache_read_tokens < r->usage.cache_read_tokens)
                u->cache_read_tokens = r->usage.cache_read_tokens;
            if (u->cache_creation_tokens < r->usage.cache_creation_tokens)
                u->cache_creation_tokens = r->usage.cache_creation_tokens;
            if (u->reasoning_tokens < r->usage.reasoning_tokens)
                u->reasoning_tokens = r->usage.reasoning_tokens;
        }
        r->usage = *u;
        r->usage_partial = !f.usage_final;
    }
    /* R-API-8: later calls naming this response go to this replica. */
    if (f.response_id[0] && r->replica)
        sticky_pin_store(r, f.response_id, r->replica->id);
    /* R-USE-2: sluice asked for the usage chunk (or the adapter made one):
     * the client gets it only when it asked itself. */
    if (kind == CHUNK_USAGE_ONLY && (relay_translates(x) ? !r->want_usage_chunk : r->injected_usage))
        return 0;
    /* R-SSE-5: a server-side error before anything went out may be failed over
     * invisibly; a caller's own mistake (and any pass-through) goes on as sent. */
    if (x->holding && kind == CHUNK_ERROR && !r->data_sent && r->kind != REQ_PROXY && f.server_error) {
        buf_reset(&x->early_error);
        size_t n;
        const char *p = relay_rewrite(x, ev->raw, ev->raw_len, &n);
        buf_append(&x->early_error, p, n);
        x->abort = ABORT_FAILED_EARLY;
        return -1;
    }
    /* R-GUARD-3: output rules read the answer as it goes, every event of it (an error
     * key or a role-only opening can carry text too; [DONE] checks the held-back last
     * words); a block ends it here. */
    if (kind != CHUNK_USAGE_ONLY && screen_output_event(r, ev->data, ev->data_len) != 0) {
        x->abort = ABORT_BLOCKED;
        return -1;
    }
    if (x->holding) {
        if (kind == CHUNK_ROLE_ONLY) {  /* R-SSE-5: hold until real content */
            size_t n;                   /* rewritten one event at a time (R-RT-5) */
            const char *p = relay_rewrite(x, ev->raw, ev->raw_len, &n);
            return buf_append(&x->held, p, n) == 0 ? 0 : -1;
        }
        x->holding = 0;
        if (x->held.len && relay_send_raw(x, x->held.data, x->held.len, 1) != 0)
            return -1;
        buf_reset(&x->held);
    }
    /* R-USE-3: an upstream error event that reaches the client ends the request failed
     * (and an idempotent retry must not replay it). */
    if (kind == CHUNK_ERROR && !r->error_code)
        r->error_code = errors_get(ERR_UPSTREAM_ERROR)->code;
    if (kind == CHUNK_CONTENT) {
        if (f.counts)
            r->content_chunks++;
        if (f.finish[0])
            str_copy(r->finish_reason, sizeof r->finish_reason, f.finish);
    }
    return relay_send_event(x, ev->raw, ev->raw_len, 1);
}

/* The adapter's events in the caller's protocol enter the same path. */
static int relay_emit(void *ctx, const struct sse_event *ev)
{
    return relay_event(ctx, ev);
}

size_t relay_write_cb(char *p, size_t size, size_t n, void *ud)
{
    struct relay *x = ud;
    struct request *r = x->r;
    size_t len = size * n;
    x->upstream_bytes = 1;
    x->last_upstream_ms = mono_ms();
    if (x->mode == RELAY_UNDECIDED) {
        int sse = x->status >= 200 && x->status < 300 &&
                  strncasecmp(x->content_type, "text/event-stream", 17) == 0;
        x->mode = sse ? RELAY_SSE : RELAY_BUFFER;
        x->holding = sse && r->ep && r->ep->stream_guard && !r->data_sent;
    }
    if (x->mode == RELAY_BUFFER) {
        if (buf_append(&r->w->resp, p, len) != 0) {
            x->abort = ABORT_TOO_LARGE;
            return 0;
        }
        return len;
    }
    if (sse_feed(&x->sse, p, len) != 0) {
        x->abort = ABORT_TOO_LARGE;
        return 0;
    }
    struct sse_event ev;
    int got;
    while ((got = sse_next(&x->sse, &ev)) == 1) {
        int rc = relay_translates(x)
                     ? x->proto->stream_event(r, x->proto_state, &ev, relay_emit, x)
                     : relay_event(x, &ev);
        if (rc != 0) {
            if (x->abort == ABORT_NONE)
                x->abort = r->client_gone ? ABORT_CLIENT_GONE : ABORT_TOO_LARGE;
            return 0;
        }
    }
    if (got < 0) {
        x->abort = ABORT_TOO_LARGE;
        return 0;
    }
    return len;
}

int relay_keepalive(struct relay *x)
{
    static const char ka[] = ": keep-alive\n\n";
    if (relay_stream_head(x) != 0 || reply_body(x->r, ka, sizeof ka - 1, 1) != 0)
        return -1;
    x->last_client_ms = mono_ms();
    return 0;
}

void relay_finish_sse(struct relay *x)
{
    struct sse_event ev;
    if (x->abort == ABORT_BLOCKED)
        return;                 /* R-GUARD-3: ended by its error event, nothing more */
    if (x->held.len)
        relay_send_raw(x, x->held.data, x->held.len, 1);
    buf_reset(&x->held);
    x->holding = 0;
    /* Unterminated trailing bytes go on only when they are the caller's protocol. */
    if (sse_finish(&x->sse, &ev) && !relay_translates(x))
        relay_send_event(x, ev.raw, ev.raw_len, 1);
    relay_stream_head(x);
    /* R-SSE-4: a translated stream the upstream closed before its end would
     * leave the caller waiting for closing events that never come. */
    if (relay_translates(x) && x->proto->stream_complete && !x->proto->stream_complete(x->proto_state) &&
        !x->r->client_gone)
        reply_error(x->r, ERR_UPSTREAM_ERROR, "the upstream ended the stream before its end", NULL);
}

void relay_finish_failed(struct relay *x)
{
    if (x->held.len)
        relay_send_raw(x, x->held.data, x->held.len, 1);
    buf_reset(&x->held);
    x->holding = 0;
    if (x->early_error.len)
        relay_send_raw(x, x->early_error.data, x->early_error.len, 1);
    x->r->error_code = errors_get(ERR_UPSTREAM_ERROR)->code;
}

/* R-API-8: a created response's id (the body's top-level "id") is pinned to this replica. */
static void relay_pin_response(struct request *r, const char *body, size_t len)
{
    struct json_object *o = len ? json_tokener_parse(body) : NULL, *id;
    if (o && r->replica && json_object_object_get_ex(o, "id", &id) && json_object_is_type(id, json_type_string) &&
        json_object_get_string_len(id) <= 128)
        sticky_pin_store(r, json_object_get_string(id), r->replica->id);
    json_object_put(o);
}

void relay_send_buffered(struct relay *x)
{
    struct request *r = x->r;
    struct buf *b = &r->w->resp;
    const char *ct = x->content_type[0] ? x->content_type : NULL;
    int retry_after = 0;
    if (x->proto && x->proto->body) {
        /* R-ANT-1: the upstream's answer in the caller's protocol. */
        struct buf t;
        buf_init(&t, (size_t)r->conf->max_response_bytes);
        x->proto->body(r, &x->status, b->data ? b->data : "", b->len, &t, &ct, &retry_after);
        buf_reset(b);
        int fits = buf_append(b, t.data ? t.data : "", t.len) == 0;
        buf_free(&t);
        if (!fits) {
            reply_error(r, ERR_UPSTREAM_BAD_RESPONSE, "the translated answer is over the size limit", NULL);
            return;
        }
    }
    int ok = x->status >= 200 && x->status < 300;
    /* A translating adapter set r->usage from the upstream's own answer. */
    int have_usage = x->proto && x->proto->body ? r->usage.found
                                                : usage_from_body(b->data ? b->data : "", b->len, &r->usage);
    if (ok && req_kind_spends_tokens(r->kind) && !have_usage &&
        r->kind != REQ_EMBEDDINGS && r->kind != REQ_PROXY)
        r->content_chunks = (int64_t)(b->len / 4) + 1;   /* R-USE-1: no usage: about 4 bytes a token */
    /* R-GUARD-3: output rules read the whole answer before any of it goes out. */
    if (ok && screen_output_body(r, b->data ? b->data : "", b->len) != 0)
        return;
    if (ok && r->kind == REQ_RESPONSES)
        relay_pin_response(r, b->data ? b->data : "", b->len);
    size_t n = b->len;
    const char *body = b->len ? relay_rewrite(x, b->data, b->len, &n) : "";
    if (r->headers_sent) {
        /* A keep-alive already committed a 200 stream: the answer becomes an
         * event, the upstream's own error object when it sent one (R-SSE-4),
         * and the record keeps the upstream's status (R-USE-4). */
        if (x->status >= 400) {
            struct json_object *obj = json_tokener_parse(b->data ? b->data : "");
            struct json_object *err = NULL;
            if (obj && json_object_object_get_ex(obj, "error", &err) && json_object_is_type(err, json_type_object)) {
                /* The answer is in the caller's protocol already: Anthropic's
                 * whole error object, or OpenAI's {"error":...} part of it. */
                struct buf ev;
                buf_init(&ev, 0);
                struct json_object *m = NULL, *c = NULL, *p = NULL;
                json_object_object_get_ex(err, "message", &m);
                if (!json_object_object_get_ex(err, "code", &c) || !json_object_is_type(c, json_type_string))
                    json_object_object_get_ex(err, "type", &c);
                json_object_object_get_ex(err, "param", &p);
                if (r->ingress == INGRESS_ANTHROPIC)
                    buf_puts(&ev, json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
                                                                          JSON_C_TO_STRING_NOSLASHESCAPE));
                else if (r->kind == REQ_RESPONSES || r->kind == REQ_RESPONSE_OP)
                    errors_body_responses(&ev, c && json_object_is_type(c, json_type_string)
                                                   ? json_object_get_string(c) : "upstream_error",
                                          m && json_object_is_type(m, json_type_string) ? json_object_get_string(m)
                                                                                        : "upstream error",
                                          p && json_object_is_type(p, json_type_string) ? json_object_get_string(p)
                                                                                        : NULL);
                else
                    buf_printf(&ev, "{\"error\":%s}", json_object_to_json_string_ext(err, JSON_C_TO_STRING_PLAIN |
                                                                                       JSON_C_TO_STRING_NOSLASHESCAPE));
                reply_error_event(r, ev.data, ev.len);
                buf_free(&ev);
                r->error_code = errors_get(ERR_UPSTREAM_ERROR)->code;
            } else {
                reply_error(r, ERR_UPSTREAM_ERROR, arena_printf(r->arena, "upstream answered %ld", x->status), NULL);
            }
            json_object_put(obj);
            r->status = (int)x->status;
            return;
        }
        reply_body(r, body, n, 1);
        return;
    }
    char len[24] = "", wait[24] = "";
    len[fmt_i64(len, (int64_t)n)] = '\0';
    int add_retry = retry_after && !strcasestr(x->headers.data ? x->headers.data : "", "retry-after:");
    if (add_retry)
        wait[fmt_i64(wait, r->conf->retry_after_s)] = '\0';
    const char *extra = arena_cat(r->arena, relay_extra_headers(x, 0), add_retry ? "Retry-After: " : "", wait,
                                  add_retry ? "\r\n" : "", "Content-Length: ", len, "\r\n", NULL);
    if (reply_head(r, (int)x->status, ct, extra) == 0 && reply_body(r, body, n, 0) == 0) {
        r->data_sent = 1;
        r->ttft_ms = mono_ms() - r->start_mono;
        r->obs.ttft_us = mono_us() - r->obs.start_us;
    }
}
