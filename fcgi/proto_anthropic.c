/* proto_anthropic.c: the adapter for Anthropic Messages upstreams (R-ANT-1..4):
 * OpenAI chat in, Messages out, and the answer back in OpenAI's shape. The
 * translation itself is pure and lives in anthropic.c. */
#include "proto.h"

#include "anthropic.h"
#include "pathcheck.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

static int anthropic_build(struct request *r, struct proto_request *out, struct proto_refusal *why)
{
    /* R-ANT-2: only chat completions map onto Messages. */
    if (r->kind != REQ_CHAT || !r->json) {
        why->code = ERR_UNSUPPORTED_ENDPOINT_FOR_UPSTREAM_PROTOCOL;
        why->message = arena_printf(r->arena, "%s cannot be served by endpoint %s: it speaks the Anthropic "
                                    "Messages API, which maps only /v1/chat/completions", r->path, r->ep->name);
        return -1;
    }
    struct buf b;
    struct xlate_fail f;
    buf_init(&b, 0);
    memset(&f, 0, sizeof f);
    const char *model = r->routed_model ? r->routed_model : r->model;
    int rc = anthropic_request(r->json, model, r->ep->default_max_tokens, r->stream, &b, &f);
    if (proto_translated(r, rc, &b, &f, out, why) != 0)
        return -1;
    out->path = "/v1/messages";
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, arena_printf(r->arena, "X-Request-Id: %s", r->request_id));
    h = curl_slist_append(h, "Expect:");
    h = curl_slist_append(h, arena_printf(r->arena, "anthropic-version: %s", r->ep->anthropic_version));
    /* R-ANT-4: the endpoint's own credential, never the caller's. */
    if (r->ep->upstream_auth && *r->ep->upstream_auth)
        h = curl_slist_append(h, arena_printf(r->arena, "x-api-key: %s", r->ep->upstream_auth));
    /* The caller's beta flags travel; nothing else of its headers does (the
     * trace context is forward.c's: one traceparent per attempt). */
    static const char *const pass[] = {"anthropic-beta"};
    for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++) {
        const char *v = request_header(r, pass[i]);
        if (v && pathcheck_header_ok(v, 1024))
            h = curl_slist_append(h, arena_printf(r->arena, "%s: %s", pass[i], v));
    }
    out->headers = h;
    return 0;
}

/* 529 overloaded is a 503 to OpenAI's SDKs: retried before the first byte like any 503. */
static long anthropic_status(long s)
{
    return s == 529 ? 503 : s;
}

struct anthropic_relay {
    struct anthropic_stream s;
    struct proto_frame frame;     /* "data: ...\n\n" of the event being emitted */
};

static void *anthropic_stream_new(struct request *r)
{
    struct anthropic_relay *st = arena_alloc(r->arena, sizeof *st);
    memset(st, 0, sizeof *st);
    anthropic_stream_init(&st->s, r->routed_model ? r->routed_model : r->model, r->start_ms / 1000);
    proto_frame_init(&st->frame, r);
    return st;
}

/* OpenAI payloads have no event: line. */
static int frame_emit(void *frame, const char *data, size_t len)
{
    return proto_frame_emit(frame, NULL, data, len);
}

static int anthropic_event(struct request *r, void *state, const struct sse_event *ev, proto_emit_fn emit,
                           void *ctx)
{
    struct anthropic_relay *st = state;
    if (ev->comment_only || !ev->has_data)
        return 0;                 /* sluice sends its own keep-alives (R-SSE-2) */
    st->frame.emit = emit;
    st->frame.ctx = ctx;
    struct usage u = r->usage;
    int rc = anthropic_stream_event(&st->s, ev->event ? ev->event : "", ev->event_len, ev->data, ev->data_len, &u,
                                    frame_emit, &st->frame);
    /* The upstream's usage, final once message_stop was handled (R-USE-1). */
    if (u.found) {
        r->usage = u;
        r->usage_partial = !st->s.done;
    }
    /* R-USE-3 / R-SSE-4: an error event after the first byte ended the stream failed, and the
     * usage event says so, as for a stream that breaks (relay.c); one before it was failed
     * over by the relay (R-SSE-5) and leaves nothing behind. */
    if (st->s.failed && r->data_sent && !r->error_code)
        r->error_code = errors_get(ERR_UPSTREAM_ERROR)->code;
    /* message_start told the real prompt size: a stream that ends before its
     * usage chunk (the client left, the upstream cut it) is charged that. */
    if (st->s.input_tokens + st->s.cache_read + st->s.cache_creation > 0)
        r->prompt_estimate = st->s.input_tokens + st->s.cache_read + st->s.cache_creation;
    return rc;
}

static int anthropic_stream_complete(const void *state)
{
    const struct anthropic_relay *st = state;
    return st->s.done || st->s.failed;
}

static void anthropic_stream_free(void *state)
{
    struct anthropic_relay *st = state;
    proto_frame_free(&st->frame);
}

static void anthropic_body(struct request *r, long *status, const char *in, size_t len, struct buf *out,
                           const char **content_type, int *retry_after)
{
    *content_type = "application/json";
    if (*status >= 200 && *status < 300) {
        struct usage u = {0};
        char finish[32];
        if (anthropic_response(in, len, r->routed_model ? r->routed_model : r->model, now_ms() / 1000, out, &u,
                               finish, sizeof finish) == 0) {
            str_copy(r->finish_reason, sizeof r->finish_reason, finish);
            if (u.found)
                r->usage = u;
            return;
        }
        buf_reset(out);
        errors_body(out, errors_get(ERR_UPSTREAM_BAD_RESPONSE), "the upstream answer is not a Messages response",
                    NULL);
        r->error_code = errors_get(ERR_UPSTREAM_BAD_RESPONSE)->code;
        *status = 502;
        return;
    }
    *status = anthropic_error(*status, in, len, out, retry_after);
}

const struct proto_ops proto_anthropic = {
    .name = "anthropic",
    .build = anthropic_build,
    .status = anthropic_status,
    .stream_new = anthropic_stream_new,
    .stream_event = anthropic_event,
    .stream_free = anthropic_stream_free,
    .stream_complete = anthropic_stream_complete,
    .body = anthropic_body,
};
