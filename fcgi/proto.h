/* proto.h: upstream protocol adapters (DESIGN.md stage 7, R-ANT-1..5).
 *
 * One ops struct per upstream protocol, in the manner of curl's per-scheme
 * handler tables: forward.c runs the same transfer for every protocol and
 * calls only these; retries, failover and accounting never branch on the
 * protocol. A new protocol is one file and one row per caller protocol in
 * forward.c's table. */
#ifndef SLUICE_PROTO_H
#define SLUICE_PROTO_H

#include "errors.h"
#include "request.h"
#include "sse.h"

#include <curl/curl.h>

/* The upstream request of one attempt, built by the adapter. */
struct proto_request {
    const char *path;             /* appended to the replica URL, query included */
    const char *body;
    size_t len;
    struct curl_slist *headers;   /* freed by the forward stage */
};

/* Why the adapter cannot send this request (R-ANT-2/3): replied as is, never retried. */
struct proto_refusal {
    enum error_code code;
    const char *param;
    const char *message;          /* arena memory or static */
};

/* Hands one event in the caller's protocol to the relay; -1: stop (client gone). */
typedef int (*proto_emit_fn)(void *ctx, const struct sse_event *ev);

struct proto_ops {
    const char *name;
    /* The upstream path, headers and body for r's current attempt (r->ep,
     * r->replica, r->routed_model). 0, or -1 with *why filled. */
    int (*build)(struct request *r, struct proto_request *out, struct proto_refusal *why);
    /* The upstream status as the caller's SDKs should see it (retry decisions
     * use it too); NULL: unchanged. */
    long (*status)(long upstream_status);
    /* Stream translation, NULL: upstream events are the caller's events. */
    void *(*stream_new)(struct request *r);
    int (*stream_event)(struct request *r, void *state, const struct sse_event *ev, proto_emit_fn emit, void *ctx);
    void (*stream_free)(void *state);     /* at the end of the attempt; may be NULL */
    /* Did the translated stream reach its end (the caller's closing events went
     * out)? A stream the upstream closed early is then ended with an error event. */
    int (*stream_complete)(const void *state);
    /* A buffered upstream answer into what the caller speaks: body appended to
     * out, *status and *content_type (may stay) updated, *retry_after set when
     * a Retry-After should be added. NULL: passed on unchanged. */
    void (*body)(struct request *r, long *status, const char *in, size_t len, struct buf *out,
                 const char **content_type, int *retry_after);
};

/* R-RT-5: the client's parsed body with the name the backend knows as "model"
 * (serialised again only when it differs), into out->body / out->len. */
void proto_model_body(struct request *r, struct proto_request *out);

/* ---- proto_translate.c: what the translating adapters share ---------------- */

struct xlate_fail;

/* The end of a build that translated the body into b with rc (0, or -1 with *f
 * filled): b's bytes become out's body, or *f becomes *why (arena copies). b is
 * freed either way. 0, or -1 when the request cannot be sent. */
int proto_translated(struct request *r, int rc, struct buf *b, const struct xlate_fail *f, struct proto_request *out,
                     struct proto_refusal *why);

/* A translated stream's events, framed for the relay one at a time. */
struct proto_frame {
    struct buf buf;               /* the event being emitted, capped at twice max_sse_event_bytes */
    proto_emit_fn emit;           /* where it goes: set by stream_event before each translation */
    void *ctx;
};

void proto_frame_init(struct proto_frame *fr, const struct request *r);

/* One event (frame: a struct proto_frame) as "event: <event>\n" (none when event is
 * NULL) "data: <data>\n\n" to fr->emit: -1 when it does not fit or emit says stop.
 * The shape of messages_emit_fn, so it serves as one. */
int proto_frame_emit(void *frame, const char *event, const char *data, size_t len);

void proto_frame_free(struct proto_frame *fr);

extern const struct proto_ops proto_openai;       /* proto_openai.c: OpenAI-compatible upstreams */
extern const struct proto_ops proto_passthrough;  /* proto_openai.c: /api/v1/proxy, bytes as they came */
extern const struct proto_ops proto_anthropic;    /* proto_anthropic.c: Anthropic Messages upstreams */
extern const struct proto_ops proto_messages_native;  /* proto_messages.c: Anthropic callers, Anthropic upstreams */
extern const struct proto_ops proto_messages_openai;  /* proto_messages.c: Anthropic callers, OpenAI upstreams */

#endif
