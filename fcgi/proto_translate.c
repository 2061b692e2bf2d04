/* proto_translate.c: what the two translating adapters share (proto_anthropic.c:
 * OpenAI callers -> Anthropic upstreams; proto_messages.c: Anthropic callers ->
 * OpenAI upstreams): the end of a translated build, and each translated stream
 * event framed as SSE for the relay. */
#include "proto.h"

#include "xlate.h"

#include <string.h>

int proto_translated(struct request *r, int rc, struct buf *b, const struct xlate_fail *f, struct proto_request *out,
                     struct proto_refusal *why)
{
    if (rc != 0) {
        why->code = f->code;
        why->param = f->param ? arena_strdup(r->arena, f->param) : NULL;
        why->message = arena_strdup(r->arena, f->message[0] ? f->message : "the request cannot be translated");
    } else {
        out->len = b->len;
        out->body = arena_strndup(r->arena, b->data ? b->data : "", b->len);
    }
    buf_free(b);
    return rc != 0 ? -1 : 0;
}

void proto_frame_init(struct proto_frame *fr, const struct request *r)
{
    memset(fr, 0, sizeof *fr);
    buf_init(&fr->buf, (size_t)r->conf->max_sse_event_bytes * 2);
}

int proto_frame_emit(void *frame, const char *event, const char *data, size_t len)
{
    struct proto_frame *fr = frame;
    size_t en = event ? strlen(event) : 0;
    buf_reset(&fr->buf);
    if (event && (buf_puts(&fr->buf, "event: ") != 0 || buf_append(&fr->buf, event, en) != 0 ||
                  buf_puts(&fr->buf, "\n") != 0))
        return -1;
    size_t at = fr->buf.len + 6;        /* where the data starts, after "data: " */
    if (buf_puts(&fr->buf, "data: ") != 0 || buf_append(&fr->buf, data, len) != 0 || buf_puts(&fr->buf, "\n\n") != 0)
        return -1;
    struct sse_event ev = {
        .raw = fr->buf.data, .raw_len = fr->buf.len,
        .event = event ? fr->buf.data + 7 : NULL, .event_len = en,
        .data = fr->buf.data + at, .data_len = len, .has_data = 1, .comment_only = 0,
    };
    return fr->emit(fr->ctx, &ev);
}

void proto_frame_free(struct proto_frame *fr) { buf_free(&fr->buf); }
