/* fake_anthropic.c: the Anthropic Messages API (POST /v1/messages, count_tokens, GET /v1/models), strict enough to catch translation bugs. */
#include "fake.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * The answer is a list of text pieces, each one output token and one text_delta:
 * one "tool_result[<tool_use_id>]: <content> " per tool_result block of the last
 * user turn, then the words "w1 ", "w2 ", ... "wN" (N = chunks, as for OpenAI).
 * A tool call (below) adds TOOL_PIECES tokens, one input_json_delta each.
 *   input_tokens  = prompt_tokens, else the words of system text, string contents,
 *                   text blocks and tool_result contents (at least 1);
 *   output_tokens = completion_tokens, else the pieces sent (text, then tool);
 *   cache_read_input_tokens / cache_creation_input_tokens = cache_read_tokens /
 *                   cache_write_tokens (0 unless set).
 * stop_sequences: the earliest match in the text cuts it there (stop_sequence, no tool
 * call); then, if more tokens than max_tokens remain, the first max_tokens text pieces
 * are sent, no tool call, output_tokens = max_tokens, stop_reason max_tokens.
 * A tool call happens when tools are given, tool_choice is not none, and tool_choice
 * is any/tool or the last user turn's text holds "use the tool".
 */
enum { TOOL_PIECES = 3 };
static const char *const TOOL_INPUT[TOOL_PIECES] = { "{\\\"q\\\":", "\\\"fa", "ke\\\"}" };

/* ---- the answer ---- */

struct answer {
    unsigned long id;
    const struct anthropic_req *q;
    int npre, nwords, ntext;         /* text pieces: tool_result echoes, words, and how many are sent */
    size_t text_max;                 /* text bytes sent: a stop sequence cuts inside a piece */
    bool tool;
    const char *stop_reason;
    const struct jval *stop;
    long in, out;
};

/* Appends text piece k, cut at text_max; *off counts the text bytes so far. */
static void piece_put(struct buf *o, const struct answer *a, int k, size_t *off)
{
    size_t start = o->len;
    if (k < a->npre) {
        buf_adds(o, "tool_result[");
        buf_add(o, a->q->res_id[k].s, a->q->res_id[k].n);
        buf_adds(o, "]: ");
        anthropic_req_result(o, &a->q->res[k]);
    } else {
        int w = k - a->npre + 1;
        buf_printf(o, "w%d%s", w, w < a->nwords ? " " : "");
    }
    size_t n = o->len - start;
    if (*off + n > a->text_max)
        o->len = start + (a->text_max > *off ? a->text_max - *off : 0);
    *off += n;
}

/* Where s first occurs in the raw JSON text t at a character boundary (never inside an escape), or SIZE_MAX. */
static size_t text_find(const char *t, size_t tn, const char *s, size_t sn)
{
    size_t i = 0;
    while (i + sn <= tn) {
        if (memcmp(t + i, s, sn) == 0)
            return i;
        if (t[i] == '\\' && i + 1 < tn)
            i += t[i + 1] == 'u' ? 6 : 2;
        else
            i++;
    }
    return SIZE_MAX;
}

static void answer_plan(struct answer *a, const struct anthropic_req *q, const struct behavior *b)
{
    *a = (struct answer){ .id = atomic_fetch_add(&S.seq, 1) + 1, .q = q, .npre = q->nres, .nwords = b->chunks,
                           .text_max = SIZE_MAX };
    a->ntext = a->npre + a->nwords;
    a->tool = q->ntools > 0 && q->choice >= 0 && (q->choice > 0 || q->asks);
    if (q->nstops) {
        struct buf t = { 0 };
        size_t off = 0, best = SIZE_MAX;
        for (int k = 0; k < a->ntext; k++)
            piece_put(&t, a, k, &off);
        for (int i = 0; i < q->nstops; i++) {
            size_t at = text_find(t.p, t.len, q->stops[i].s, q->stops[i].n);
            if (at < best) {
                best = at;
                a->stop = &q->stops[i];
            }
        }
        if (a->stop) {   /* the pieces that start before the cut */
            int all = a->ntext;
            for (off = 0, a->ntext = 0; a->ntext < all && off < best; a->ntext++) {
                t.len = 0;
                piece_put(&t, a, a->ntext, &off);
            }
            a->text_max = best;
            a->tool = false;
        }
        free(t.p);
    }
    a->stop_reason = a->stop ? "stop_sequence" : a->tool ? "tool_use" : "end_turn";
    long units = a->ntext + (a->tool ? TOOL_PIECES : 0);
    if (units > q->max_tokens) {
        a->stop_reason = "max_tokens";
        a->stop = NULL;
        a->tool = false;
        a->ntext = a->ntext > q->max_tokens ? (int)q->max_tokens : a->ntext;
        units = q->max_tokens;
    }
    a->in = b->prompt_tokens >= 0 ? b->prompt_tokens : q->words > 0 ? q->words : 1;
    a->out = b->completion_tokens >= 0 ? b->completion_tokens : units;
}

static void message_open(struct buf *o, const struct answer *a)
{
    buf_printf(o, "{\"id\":\"msg_fake%lu\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"", a->id);
    buf_add(o, a->q->model.s, a->q->model.n);
    buf_adds(o, "\",\"content\":[");
}

static void usage_put(struct buf *o, const struct answer *a, const struct behavior *b, long out)
{
    buf_printf(o, "\"usage\":{\"input_tokens\":%ld,\"output_tokens\":%ld,\"cache_creation_input_tokens\":%d,"
               "\"cache_read_input_tokens\":%d}", a->in, out, b->cache_write_tokens, b->cache_read_tokens);
}

static void stop_put(struct buf *o, const struct answer *a)
{
    buf_printf(o, "\"stop_reason\":\"%s\",\"stop_sequence\":", a->stop_reason);
    if (!a->stop) {
        buf_adds(o, "null");
        return;
    }
    buf_add(o, "\"", 1);
    buf_add(o, a->stop->s, a->stop->n);
    buf_add(o, "\"", 1);
}

static void tool_block_put(struct buf *o, const struct answer *a, const char *input)
{
    buf_printf(o, "{\"type\":\"tool_use\",\"id\":\"toolu_fake%lu\",\"name\":\"", a->id);
    buf_add(o, a->q->tool.s, a->q->tool.n);
    buf_printf(o, "\",\"input\":%s}", input);
}

static void message_body(struct buf *o, const struct answer *a, const struct behavior *b)
{
    size_t off = 0;
    o->len = 0;
    message_open(o, a);
    buf_adds(o, "{\"type\":\"text\",\"text\":\"");
    for (int k = 0; k < a->ntext; k++)
        piece_put(o, a, k, &off);
    buf_adds(o, "\"}");
    if (a->tool) {
        buf_add(o, ",", 1);
        tool_block_put(o, a, "{\"q\":\"fake\"}");
    }
    buf_adds(o, "],");
    stop_put(o, a);
    buf_add(o, ",", 1);
    usage_put(o, a, b, a->out);
    buf_add(o, "}", 1);
}

/* Every answer carries request-id; a 529 also says the client may retry. */
static void headers_add(struct conn *c, unsigned long id, int status)
{
    int n = snprintf(c->xhead, sizeof c->xhead, "request-id: req_fake%lu\r\n%s", id,
                     status == 529 ? "x-should-retry: true\r\n" : "");
    c->xhead_len = n > 0 && (size_t)n < sizeof c->xhead ? (size_t)n : 0;
}

/* ---- streams: "event: <type>\ndata: <json>\n\n" ---- */

struct stream {
    struct conn *c;
    const struct behavior *b;
    const struct answer *a;
    int units;                       /* gap_ms goes before every ping, delta and message_delta but the first */
    int stage;                       /* 0, text block open, closed, tool block open, closed */
    size_t off;                      /* text bytes sent */
};

static struct buf *ev_begin(struct stream *st, const char *type)
{
    struct buf *o = &st->c->rbody;
    o->len = 0;
    buf_printf(o, "event: %s\ndata: ", type);
    return o;
}

static int ev_end(struct stream *st, bool unit)
{
    buf_adds(&st->c->rbody, "\n\n");
    if (unit && st->units++ > 0 && st->b->gap_ms > 0 && conn_wait(st->c, st->b->gap_ms) < 0)
        return -1;
    return reply_chunk(st->c, st->c->rbody.p, st->c->rbody.len);
}

/* Opens and closes content blocks until the stream is at stage want. */
static int stage_to(struct stream *st, int want)
{
    while (st->stage < want) {
        int s = ++st->stage;
        struct buf *o = ev_begin(st, s == 1 || s == 3 ? "content_block_start" : "content_block_stop");
        buf_printf(o, "{\"type\":\"%s\",\"index\":%d", s == 1 || s == 3 ? "content_block_start" : "content_block_stop",
                   s <= 2 ? 0 : 1);
        if (s == 1)
            buf_adds(o, ",\"content_block\":{\"type\":\"text\",\"text\":\"\"}");
        if (s == 3) {
            buf_adds(o, ",\"content_block\":");
            tool_block_put(o, st->a, "{}");
        }
        buf_add(o, "}", 1);
        if (ev_end(st, false) < 0)
            return -1;
    }
    return 0;
}

static int ev_delta(struct stream *st, int k)
{
    const struct answer *a = st->a;
    bool text = k < a->ntext;
    if (stage_to(st, text ? 1 : 3) < 0)
        return -1;
    struct buf *o = ev_begin(st, "content_block_delta");
    buf_printf(o, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"%s\",\"%s\":\"",
               text ? 0 : 1, text ? "text_delta" : "input_json_delta", text ? "text" : "partial_json");
    if (text)
        piece_put(o, a, k, &st->off);
    else
        buf_adds(o, TOOL_INPUT[k - a->ntext]);
    buf_adds(o, "\"}}");
    return ev_end(st, true);
}

static enum outcome stream_tail(struct stream *st, bool error)
{
    struct buf *o;
    if (error) {
        o = ev_begin(st, "error");
        buf_adds(o, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}");
        if (ev_end(st, true) < 0)
            return OUT_ABORTED;
    } else {
        if (stage_to(st, st->a->tool ? 4 : 2) < 0)
            return OUT_ABORTED;
        o = ev_begin(st, "message_delta");
        buf_adds(o, "{\"type\":\"message_delta\",\"delta\":{");
        stop_put(o, st->a);
        buf_printf(o, "},\"usage\":{\"output_tokens\":%ld}}", st->a->out);
        if (ev_end(st, true) < 0)
            return OUT_ABORTED;
        buf_adds(ev_begin(st, "message_stop"), "{\"type\":\"message_stop\"}");
        if (ev_end(st, false) < 0)
            return OUT_ABORTED;
    }
    return reply_chunk_end(st->c) < 0 ? OUT_ABORTED : OUT_COMPLETE;
}

/* message_start and role_chunks pings, then the content; die/hang/error/bad_json count content deltas. */
static enum outcome stream_run(struct conn *c, const struct behavior *b, const struct answer *a)
{
    static const char BAD[] = "event: content_block_delta\ndata: {not json";
    struct stream st = { c, b, a, 0, 0, 0 };
    if (c->req.minor == 0)
        c->req.keep_alive = false;   /* no chunked encoding: the close ends the body */
    headers_add(c, a->id, 200);
    reply_head(c, b, 200, "text/event-stream", -1);
    if (conn_send(c, c->out.p, c->out.len) < 0)
        return OUT_ABORTED;
    struct buf *o = ev_begin(&st, "message_start");
    buf_adds(o, "{\"type\":\"message_start\",\"message\":");
    message_open(o, a);
    buf_adds(o, "],\"stop_reason\":null,\"stop_sequence\":null,");
    usage_put(o, a, b, 1);
    buf_adds(o, "}}");
    if (ev_end(&st, false) < 0)
        return OUT_ABORTED;
    for (int i = 0; i < b->role_chunks; i++) {   /* the role-only chunks of an OpenAI stream */
        buf_adds(ev_begin(&st, "ping"), "{\"type\":\"ping\"}");
        if (ev_end(&st, true) < 0)
            return OUT_ABORTED;
    }
    int total = a->ntext + (a->tool ? TOOL_PIECES : 0);
    for (int sent = 0;; sent++) {
        if (sent == b->die_after)
            return OUT_DIED;
        if (sent == b->hang_after)
            return conn_hang(c);
        if (sent == b->error_after)
            return stream_tail(&st, true);
        if (b->bad_json && sent == total / 2) {
            c->rbody.len = 0;
            buf_adds(&c->rbody, BAD);
            if (ev_end(&st, true) < 0)
                return OUT_ABORTED;
        }
        if (sent == total)
            break;
        if (ev_delta(&st, sent) < 0)
            return OUT_ABORTED;
    }
    return stream_tail(&st, false);
}

/* ---- routes ---- */

/* Does this client speak Anthropic? Then errors before a route runs are Anthropic-shaped too. */
bool anthropic_wanted(const struct request *r)
{
    return (r->plen >= 12 && memcmp(r->path, "/v1/messages", 12) == 0) || http_header(r, "anthropic-version");
}

static const char *error_type(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 402: return "billing_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 504: return "timeout_error";
    case 529: return "overloaded_error";
    default: return status < 500 ? "invalid_request_error" : "api_error";
    }
}

/* {"type":"error","error":{...},"request_id":...}; a 429 always carries retry-after (1 unless retry_after=N). */
enum outcome anthropic_error(struct conn *c, const struct behavior *b, int status, const char *msg)
{
    unsigned long id = atomic_fetch_add(&S.seq, 1) + 1;
    struct behavior eb = *b;
    if (status == 429 && eb.retry_after < 0)
        eb.retry_after = 1;
    struct buf *o = &c->rbody;
    o->len = 0;
    buf_printf(o, "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":", error_type(status));
    if (msg)
        json_put_str(o, msg, strlen(msg));
    else if (status == 529)
        buf_adds(o, "\"Overloaded\"");
    else
        buf_printf(o, "\"fake error %d\"", status);
    buf_printf(o, "},\"request_id\":\"req_fake%lu\"}", id);
    headers_add(c, id, status);
    return reply_send(c, &eb, status, CT_JSON);
}

/* No Authorization (a credential leak), a non-empty x-api-key and a known anthropic-version; 0 if all hold. */
static int headers_check(struct conn *c, const struct behavior *b, enum outcome *o)
{
    const struct hdr *key = http_header(&c->req, "x-api-key"), *ver = http_header(&c->req, "anthropic-version");
    if (http_header(&c->req, "authorization"))
        *o = anthropic_error(c, b, 400, "unexpected authorization header");
    else if (!key || key->vlen == 0)
        *o = anthropic_error(c, b, 401, "x-api-key header is required");
    else if (!ver || ver->vlen == 0)
        *o = anthropic_error(c, b, 400, "anthropic-version: header is required");
    else if (!mem_is(ver->val, ver->vlen, "2023-06-01") && !mem_is(ver->val, ver->vlen, "2023-01-01"))
        *o = anthropic_error(c, b, 400, "anthropic-version: invalid version");
    else
        return 0;
    return -1;
}

enum outcome anthropic_messages(struct conn *c, const struct behavior *b)
{
    enum outcome o;
    struct anthropic_req q = { 0 };
    if (headers_check(c, b, &o) < 0)
        return o;
    if (anthropic_req_parse(&q, c->req.body, c->req.blen) < 0)
        return anthropic_error(c, b, 400, q.err);
    if (b->prefix_cache && prefix_prefill(c, b) < 0)
        return OUT_ABORTED;
    struct answer a;
    answer_plan(&a, &q, b);
    if (q.stream)
        return stream_run(c, b, &a);
    message_body(&c->rbody, &a, b);
    headers_add(c, a.id, 200);
    return reply_send(c, b, 200, CT_JSON);
}

/* The Messages body without max_tokens; {"input_tokens":N} as input_tokens above. */
enum outcome anthropic_count_tokens(struct conn *c, const struct behavior *b)
{
    enum outcome o;
    struct anthropic_req q = { .count_only = true };
    if (headers_check(c, b, &o) < 0)
        return o;
    if (anthropic_req_parse(&q, c->req.body, c->req.blen) < 0)
        return anthropic_error(c, b, 400, q.err);
    c->rbody.len = 0;
    buf_printf(&c->rbody, "{\"input_tokens\":%ld}", b->prompt_tokens >= 0 ? b->prompt_tokens : q.words > 0 ? q.words : 1);
    headers_add(c, atomic_fetch_add(&S.seq, 1) + 1, 200);
    return reply_send(c, b, 200, CT_JSON);
}

enum outcome anthropic_models(struct conn *c, const struct behavior *b)
{
    enum outcome o;
    if (headers_check(c, b, &o) < 0)
        return o;
    c->rbody.len = 0;
    buf_printf(&c->rbody, "{\"data\":[{\"type\":\"model\",\"id\":\"%s\",\"display_name\":\"Fake %s\","
               "\"created_at\":\"2025-01-01T00:00:00Z\"}],\"has_more\":false,\"first_id\":\"%s\",\"last_id\":\"%s\"}",
               G.model, G.name, G.model, G.model);
    headers_add(c, atomic_fetch_add(&S.seq, 1) + 1, 200);
    return reply_send(c, b, 200, CT_JSON);
}
