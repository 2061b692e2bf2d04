/* proto_messages.c: the adapters for Anthropic callers (POST /v1/messages and
 * count_tokens, R-ANT-6/7). To an anthropic endpoint the request goes as it
 * came (a native pass-through: only "model" may change, the caller's
 * anthropic-version / anthropic-beta and query travel, the answer comes back
 * byte for byte with the upstream's request-id); to an OpenAI-compatible one
 * it is translated both ways by the pure messages.c. */
#include "proto.h"

#include "messages.h"
#include "pathcheck.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

/* ---- native: Anthropic upstreams ------------------------------------------- */

static int native_build(struct request *r, struct proto_request *out, struct proto_refusal *why)
{
    (void)why;
    proto_model_body(r, out);
    const char *op = r->kind == REQ_COUNT_TOKENS ? "/v1/messages/count_tokens" : "/v1/messages";
    /* Claude Code calls /v1/messages?beta=true: the query is the upstream's. */
    out->path = r->query && *r->query ? arena_printf(r->arena, "%s?%s", op, r->query) : op;
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, arena_printf(r->arena, "X-Request-Id: %s", r->request_id));
    h = curl_slist_append(h, "Expect:");
    const char *version = request_header(r, "anthropic-version");
    if (!version || !*version || !pathcheck_header_ok(version, 64))
        version = r->ep->anthropic_version;
    h = curl_slist_append(h, arena_printf(r->arena, "anthropic-version: %s", version));
    /* R-ANT-4: the endpoint's own credential, never the caller's. */
    if (r->ep->upstream_auth && *r->ep->upstream_auth)
        h = curl_slist_append(h, arena_printf(r->arena, "x-api-key: %s", r->ep->upstream_auth));
    /* Beta flags unchanged (unknown ones included) and trace context. */
    static const char *const pass[] = {"anthropic-beta"};   /* trace context: forward.c's */
    for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++) {
        const char *v = request_header(r, pass[i]);
        if (v && pathcheck_header_ok(v, 4096))
            h = curl_slist_append(h, arena_printf(r->arena, "%s: %s", pass[i], v));
    }
    out->headers = h;
    return 0;
}

const struct proto_ops proto_messages_native = {
    .name = "anthropic-native",
    .build = native_build,
};

/* ---- translated: OpenAI-compatible upstreams ------------------------------- */

static const char *upstream_model(const struct request *r)
{
    return r->routed_model ? r->routed_model : r->model;
}

static int openai_build(struct request *r, struct proto_request *out, struct proto_refusal *why)
{
    if (r->kind != REQ_MESSAGES || !r->json) {
        why->code = ERR_UNSUPPORTED_ENDPOINT_FOR_UPSTREAM_PROTOCOL;
        why->message = arena_printf(r->arena, "%s cannot be served by endpoint %s", r->path, r->ep->name);
        return -1;
    }
    struct buf b;
    struct xlate_fail f;
    buf_init(&b, (size_t)r->conf->max_body_bytes * 2);
    memset(&f, 0, sizeof f);
    int rc = messages_request(r->json, upstream_model(r), r->stream, &b, &f);
    if (proto_translated(r, rc, &b, &f, out, why) != 0)
        return -1;
    out->path = "/v1/chat/completions";
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, arena_printf(r->arena, "X-Request-Id: %s", r->request_id));
    h = curl_slist_append(h, "Expect:");
    if (r->ep->upstream_auth && *r->ep->upstream_auth)
        h = curl_slist_append(h, arena_printf(r->arena, "Authorization: Bearer %s", r->ep->upstream_auth));
    out->headers = h;   /* the trace context is forward.c's (one traceparent per attempt) */
    return 0;
}

struct messages_relay {
    struct messages_stream s;
    struct proto_frame frame;     /* "event: ...\ndata: ...\n\n" being emitted */
};

static void *openai_stream_new(struct request *r)
{
    struct messages_relay *st = arena_alloc(r->arena, sizeof *st);
    memset(st, 0, sizeof *st);
    messages_stream_init(&st->s, upstream_model(r));
    proto_frame_init(&st->frame, r);
    return st;
}

static int openai_event(struct request *r, void *state, const struct sse_event *ev, proto_emit_fn emit, void *ctx)
{
    struct messages_relay *st = state;
    if (ev->comment_only || !ev->has_data)
        return 0;                 /* sluice sends its own keep-alives (R-SSE-2) */
    st->frame.emit = emit;
    st->frame.ctx = ctx;
    struct usage u = r->usage;
    int rc = messages_stream_chunk(&st->s, ev->data, ev->data_len, &u, proto_frame_emit, &st->frame);
    /* The upstream's own usage (the include_usage chunk), final at [DONE];
     * the counts in the events sluice writes are not evidence of any. */
    if (u.found) {
        r->usage = u;
        r->usage_partial = !messages_stream_done(&st->s);
    }
    /* R-USE-3 / R-SSE-4: an error after the first byte ended the stream failed. */
    if (messages_stream_failed(&st->s) && r->data_sent && !r->error_code)
        r->error_code = errors_get(ERR_UPSTREAM_ERROR)->code;
    return rc;
}

static int openai_stream_complete(const void *state)
{
    const struct messages_relay *st = state;
    return messages_stream_done(&st->s) || messages_stream_failed(&st->s);
}

static void openai_stream_free(void *state)
{
    struct messages_relay *st = state;
    proto_frame_free(&st->frame);
}

static void openai_body(struct request *r, long *status, const char *in, size_t len, struct buf *out,
                        const char **content_type, int *retry_after)
{
    (void)retry_after;
    *content_type = "application/json";
    if (*status >= 200 && *status < 300) {
        struct usage u = {0};
        char stop[32];
        if (messages_response(in, len, upstream_model(r), out, &u, stop, sizeof stop) == 0) {
            str_copy(r->finish_reason, sizeof r->finish_reason, stop);
            if (u.found)
                r->usage = u;
            return;
        }
        buf_reset(out);
        errors_body_anthropic(out, "api_error", "the upstream answer is not a chat completion");
        r->error_code = errors_get(ERR_UPSTREAM_BAD_RESPONSE)->code;
        *status = 502;
        return;
    }
    *status = messages_error(*status, in, len, out);
}

const struct proto_ops proto_messages_openai = {
    .name = "anthropic-to-openai",
    .build = openai_build,
    .stream_new = openai_stream_new,
    .stream_event = openai_event,
    .stream_free = openai_stream_free,
    .stream_complete = openai_stream_complete,
    .body = openai_body,
};
