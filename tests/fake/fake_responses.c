/* fake_responses.c: the OpenAI Responses API's POST /v1/responses, with its typed SSE events. */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/*
 * The answer is one message with one output_text, a list of pieces, each one output
 * token and one response.output_text.delta: "continuing <previous_response_id> " when
 * the request names one (so a test sees the link), then "w1 ", ... "wN" (N = chunks).
 *   input_tokens     = prompt_tokens, else the words of instructions and of the input's
 *                      text (the string, string contents, text parts, tool outputs), at least 1;
 *   output_tokens    = completion_tokens, else the pieces sent + reasoning_tokens;
 *   cached_tokens    = cache_read_tokens, reasoning_tokens = reasoning_tokens (0 unless set).
 * max_output_tokens below pieces + reasoning_tokens cuts the text: status "incomplete",
 * incomplete_details {"reason":"max_output_tokens"}, and a stream ends in response.incomplete.
 * Ids are resp_<name>_<n> and msg_<name>_<n>, so a test can tell which replica made one.
 * A response is remembered (unless "store":false, as the real API) in a ring of the last
 * STORE_MAX, with its JSON and its input text: GET, DELETE, cancel, input_items and
 * previous_response_id know only those (fake_responses_store.c). A stream is remembered just
 * before response.completed, so one that dies, hangs or errors earlier is not.
 */

/* ---- the answer ---- */

struct answer {
    char id[RESP_ID_MAX], msg_id[RESP_ID_MAX], input_id[RESP_ID_MAX];
    const struct responses_req *q;
    long created;
    int npre, nsent;                 /* the "continuing" piece (0 or 1), and the pieces sent */
    bool cut;                        /* max_output_tokens cut it: incomplete */
    bool no_usage;
    long in, out, cached, reasoning;
};

static void id_make(char *dst, const char *kind)
{
    snprintf(dst, RESP_ID_MAX, "%s_%s_%lu", kind, G.name, atomic_fetch_add(&S.seq, 1) + 1);
}

static void answer_plan(struct answer *a, const struct responses_req *q, const struct behavior *b)
{
    *a = (struct answer){ .q = q, .created = (long)time(NULL), .npre = q->prev.t == JT_STR, .no_usage = b->no_usage,
                          .cached = b->cache_read_tokens, .reasoning = b->reasoning_tokens };
    id_make(a->id, "resp");
    id_make(a->msg_id, "msg");
    id_make(a->input_id, "msg");
    long pieces = a->npre + b->chunks;
    if (q->max_out >= 0 && pieces + a->reasoning > q->max_out) {
        a->cut = true;
        pieces = q->max_out > a->reasoning ? q->max_out - a->reasoning : 0;
    }
    a->nsent = (int)pieces;
    a->in = b->prompt_tokens >= 0 ? b->prompt_tokens : q->words > 0 ? q->words : 1;
    a->out = b->completion_tokens >= 0 ? b->completion_tokens : pieces + a->reasoning;
}

static void piece_put(struct buf *o, const struct answer *a, int k)
{
    if (k < a->npre) {
        buf_adds(o, "continuing ");
        buf_add(o, a->q->prev.s, a->q->prev.n);   /* a stored id: plain characters */
    } else {
        buf_printf(o, "w%d", k - a->npre + 1);
    }
    if (k + 1 < a->nsent)
        buf_add(o, " ", 1);
}

static void str_or_null(struct buf *o, const struct jval *v)
{
    if (v->t != JT_STR) {
        buf_adds(o, "null");
        return;
    }
    buf_add(o, "\"", 1);
    buf_add(o, v->s, v->n);
    buf_add(o, "\"", 1);
}

static const char *done_status(const struct answer *a)
{
    return a->cut ? "incomplete" : "completed";
}

static void part_put(struct buf *o, const struct answer *a, bool full)
{
    buf_adds(o, "{\"type\":\"output_text\",\"text\":\"");
    for (int k = 0; full && k < a->nsent; k++)
        piece_put(o, a, k);
    buf_adds(o, "\",\"annotations\":[]}");
}

static void item_put(struct buf *o, const struct answer *a, bool done)
{
    buf_printf(o, "{\"type\":\"message\",\"id\":\"%s\",\"status\":\"%s\",\"role\":\"assistant\",\"content\":[",
               a->msg_id, done ? done_status(a) : "in_progress");
    if (done)
        part_put(o, a, true);
    buf_adds(o, "]}");
}

/* The response object: in progress (no output, usage null), or done. */
static void response_put(struct buf *o, const struct answer *a, bool done)
{
    const struct responses_req *q = a->q;
    buf_printf(o, "{\"id\":\"%s\",\"object\":\"response\",\"created_at\":%ld,\"status\":\"%s\",\"model\":",
               a->id, a->created, done ? done_status(a) : "in_progress");
    str_or_null(o, &q->model);
    buf_adds(o, ",\"output\":[");
    if (done)
        item_put(o, a, true);
    buf_adds(o, "],\"previous_response_id\":");
    str_or_null(o, &q->prev);
    buf_adds(o, ",\"instructions\":");
    str_or_null(o, &q->instructions);
    if (q->max_out >= 0)
        buf_printf(o, ",\"max_output_tokens\":%ld", q->max_out);
    else
        buf_adds(o, ",\"max_output_tokens\":null");
    buf_printf(o, ",\"store\":%s", q->store ? "true" : "false");
    if (!a->no_usage && !done)
        buf_adds(o, ",\"usage\":null");
    if (!a->no_usage && done)
        buf_printf(o, ",\"usage\":{\"input_tokens\":%ld,\"input_tokens_details\":{\"cached_tokens\":%ld},"
                   "\"output_tokens\":%ld,\"output_tokens_details\":{\"reasoning_tokens\":%ld},\"total_tokens\":%ld}",
                   a->in, a->cached, a->out, a->reasoning, a->in + a->out);
    buf_printf(o, ",\"error\":null,\"incomplete_details\":%s}",
               done && a->cut ? "{\"reason\":\"max_output_tokens\"}" : "null");
}

/* Remembers the done response, unless the request said "store":false. */
static void answer_store(const struct answer *a, const char *json, size_t n)
{
    const struct responses_req *q = a->q;
    if (q->store)
        responses_store(a->id, a->input_id, json, n, q->has_input ? (q->text.p ? q->text.p : "") : NULL, q->text.len);
}

/* ---- streams: "event: <type>\ndata: {"type":<type>,"sequence_number":n,...}\n\n" ---- */

struct stream {
    struct conn *c;
    const struct behavior *b;
    const struct answer *a;
    int seq, deltas;
};

static struct buf *ev_open(struct stream *st, const char *type)
{
    struct buf *o = &st->c->rbody;
    o->len = 0;
    buf_printf(o, "event: %s\ndata: {\"type\":\"%s\",\"sequence_number\":%d", type, type, st->seq++);
    return o;
}

/* Closes the event and sends it; gap_ms goes before every delta but the first. */
static int ev_send(struct stream *st, bool delta)
{
    buf_adds(&st->c->rbody, "}\n\n");
    if (delta && st->deltas++ > 0 && st->b->gap_ms > 0 && conn_wait(st->c, st->b->gap_ms) < 0)
        return -1;
    return reply_chunk(st->c, st->c->rbody.p, st->c->rbody.len);
}

/* The members that place a content event: item_id, output_index, content_index. */
static struct buf *ev_content(struct stream *st, const char *type)
{
    struct buf *o = ev_open(st, type);
    buf_printf(o, ",\"item_id\":\"%s\",\"output_index\":0,\"content_index\":0", st->a->msg_id);
    return o;
}

static int ev_response(struct stream *st, const char *type)
{
    buf_adds(ev_open(st, type), ",\"response\":");
    response_put(&st->c->rbody, st->a, false);
    return ev_send(st, false);
}

static int ev_item(struct stream *st, const char *type, bool done)
{
    buf_adds(ev_open(st, type), ",\"output_index\":0,\"item\":");
    item_put(&st->c->rbody, st->a, done);
    return ev_send(st, false);
}

static int ev_part(struct stream *st, const char *type, bool done)
{
    buf_adds(ev_content(st, type), ",\"part\":");
    part_put(&st->c->rbody, st->a, done);
    return ev_send(st, false);
}

static int ev_delta(struct stream *st, int k)
{
    struct buf *o = ev_content(st, "response.output_text.delta");
    buf_adds(o, ",\"delta\":\"");
    piece_put(o, st->a, k);
    buf_adds(o, "\",\"logprobs\":[]");
    return ev_send(st, true);
}

/* After the deltas: the done events, then the response, remembered first so a follow-up finds it. */
static int stream_tail(struct stream *st)
{
    const struct answer *a = st->a;
    struct buf *o = ev_content(st, "response.output_text.done");
    buf_adds(o, ",\"text\":\"");
    for (int k = 0; k < a->nsent; k++)
        piece_put(o, a, k);
    buf_adds(o, "\",\"logprobs\":[]");
    if (ev_send(st, false) < 0 || ev_part(st, "response.content_part.done", true) < 0
        || ev_item(st, "response.output_item.done", true) < 0)
        return -1;
    struct buf fin = { 0 };
    response_put(&fin, a, true);
    answer_store(a, fin.p, fin.len);
    o = ev_open(st, a->cut ? "response.incomplete" : "response.completed");
    buf_adds(o, ",\"response\":");
    buf_add(o, fin.p, fin.len);
    free(fin.p);
    if (ev_send(st, false) < 0)
        return -1;
    return reply_chunk_end(st->c);
}

/* error_after=N: an error event after N deltas, then the body ends; client_error=1 makes it the caller's. */
static enum outcome stream_error(struct stream *st)
{
    struct buf *o = ev_open(st, "error");
    if (st->b->client_error)
        buf_adds(o, ",\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of "
                    "this model. Please adjust your input and try again.\",\"param\":\"input\"");
    else
        buf_adds(o, ",\"code\":\"server_error\",\"message\":\"The server had an error\",\"param\":null");
    return ev_send(st, true) < 0 || reply_chunk_end(st->c) < 0 ? OUT_ABORTED : OUT_COMPLETE;
}

/* created, in_progress, the item and part opening, then one delta per piece; die/hang/error/bad_json count deltas. */
static enum outcome stream_run(struct conn *c, const struct behavior *b, const struct answer *a)
{
    static const char BAD[] = "event: response.output_text.delta\ndata: {not json\n\n";
    struct stream st = { c, b, a, 0, 0 };
    if (c->req.minor == 0)
        c->req.keep_alive = false;   /* no chunked encoding: the close ends the body */
    reply_head(c, b, 200, "text/event-stream", -1);
    if (conn_send(c, c->out.p, c->out.len) < 0)
        return OUT_ABORTED;
    if (ev_response(&st, "response.created") < 0 || ev_response(&st, "response.in_progress") < 0
        || ev_item(&st, "response.output_item.added", false) < 0
        || ev_part(&st, "response.content_part.added", false) < 0)
        return OUT_ABORTED;
    for (int sent = 0;; sent++) {
        if (sent == b->die_after)
            return OUT_DIED;
        if (sent == b->hang_after)
            return conn_hang(c);
        if (sent == b->error_after)
            return stream_error(&st);
        if (b->bad_json && sent == a->nsent / 2 && reply_chunk(c, BAD, sizeof BAD - 1) < 0)
            return OUT_ABORTED;
        if (sent == a->nsent)
            break;
        if (ev_delta(&st, sent) < 0)
            return OUT_ABORTED;
    }
    return stream_tail(&st) < 0 ? OUT_ABORTED : OUT_COMPLETE;
}

/* ---- routes ---- */

/* {"error":{"message","type","param","code"}} as the real API words its request errors. */
static enum outcome request_error(struct conn *c, const struct behavior *b, const struct responses_req *q)
{
    struct buf *o = &c->rbody;
    o->len = 0;
    buf_adds(o, "{\"error\":{\"message\":");
    json_put_str(o, q->err, strlen(q->err));
    buf_adds(o, ",\"type\":\"invalid_request_error\",\"param\":");
    if (q->param[0])
        json_put_str(o, q->param, strlen(q->param));
    else
        buf_adds(o, "null");
    buf_adds(o, ",\"code\":");
    if (q->code)
        buf_printf(o, "\"%s\"", q->code);
    else
        buf_adds(o, "null");
    buf_adds(o, "}}");
    return reply_send(c, b, q->status ? q->status : 400, CT_JSON);
}

enum outcome responses_create(struct conn *c, const struct behavior *b)
{
    struct responses_req q = { 0 };
    struct answer a;
    enum outcome o;
    if (responses_req_parse(&q, c->req.body, c->req.blen) < 0) {
        o = request_error(c, b, &q);
    } else if (q.prev.t == JT_STR && !responses_stored(q.prev.s, q.prev.n)) {
        q.status = 404;
        responses_req_fail(&q, "previous_response_id", "previous_response_not_found",
                           "Previous response with id '%.*s' not found.", (int)(q.prev.n > 128 ? 128 : q.prev.n),
                           q.prev.s);
        o = request_error(c, b, &q);
    } else {
        answer_plan(&a, &q, b);
        if (q.stream) {
            o = stream_run(c, b, &a);
        } else {
            c->rbody.len = 0;
            response_put(&c->rbody, &a, true);
            answer_store(&a, c->rbody.p, c->rbody.len);
            o = reply_send(c, b, 200, CT_JSON);
        }
    }
    free(q.text.p);
    return o;
}
