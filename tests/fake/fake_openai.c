/* fake_openai.c: the OpenAI data routes (chat, completions, embeddings, models), with SSE streaming. */
#include "fake.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* ---- completions ---- */

struct gen {
    bool chat;                     /* chat.completion, else text_completion */
    bool stream, include_usage, no_usage;
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
    g->no_usage = b->no_usage;
    g->include_usage = j.include_usage && !b->no_usage;
    g->id = atomic_fetch_add(&S.seq, 1) + 1;
    g->created = (long)time(NULL);
    g->model = j.model ? j.model : G.model;
    g->model_len = j.model ? j.model_len : strlen(G.model);
    g->chunks = b->chunks;
    g->ptok = b->prompt_tokens >= 0 ? b->prompt_tokens : (j.words > 0 ? j.words : 1);
    g->ctok = b->completion_tokens >= 0 ? b->completion_tokens : b->chunks;
}

void openai_words(struct buf *o, int first, int last)
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
    openai_words(o, 1, g->chunks);
    buf_adds(o, g->chat ? "\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":\"stop\"}]"
                        : "\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"stop\"}]");
    if (!g->no_usage) {
        buf_add(o, ",", 1);
        usage_add(o, g);
    }
    buf_add(o, "}", 1);
}

/* ---- streams (SSE) ---- */

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
    return reply_chunk(c, p, n);
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
    return reply_chunk_end(st->c);
}

static enum outcome stream_run(struct conn *c, const struct behavior *b, const struct gen *g)
{
    static const char BAD[] = "data: {not json\n\n";
    /* error_after=N: an error event after N content chunks, then the body ends;
     * client_error=1 makes it the caller's mistake instead of the server's. */
    static const char SERVER_ERR[] = "data: {\"error\":{\"message\":\"The server had an error\",\"type\":"
                                     "\"server_error\",\"param\":null,\"code\":null}}\n\n";
    static const char CLIENT_ERR[] = "data: {\"error\":{\"message\":\"This model's maximum context length is "
                                     "exceeded\",\"type\":\"invalid_request_error\",\"param\":\"messages\","
                                     "\"code\":\"context_length_exceeded\"}}\n\n";
    struct stream st = { c, b, g, false };
    if (c->req.minor == 0)
        c->req.keep_alive = false;   /* no chunked encoding: the close ends the body */
    reply_head(c, b, 200, "text/event-stream", -1);
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
        if (sent == b->error_after) {
            const char *e = b->client_error ? CLIENT_ERR : SERVER_ERR;
            size_t n = b->client_error ? sizeof CLIENT_ERR - 1 : sizeof SERVER_ERR - 1;
            return stream_send(&st, e, n) < 0 || reply_chunk_end(c) < 0 ? OUT_ABORTED : OUT_COMPLETE;
        }
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

/* ---- routes ---- */

enum outcome openai_chat(struct conn *c, const struct behavior *b)
{
    if (b->prefix_cache && prefix_prefill(c, b) < 0)
        return OUT_ABORTED;
    return completion_serve(c, b, true);
}

enum outcome openai_text(struct conn *c, const struct behavior *b)
{
    return completion_serve(c, b, false);
}

/* A deterministic, text-dependent vector so cosine similarity means something in tests:
 * 64 buckets of hashed lower-cased words (letters and digits; punctuation and JSON
 * syntax separate words) of everything after "input", normalised to unit length.
 * "what is the capital of France" and "What is the capital of France?" give the same
 * vector; an unrelated sentence lands far away. Every input item gets this vector. */
enum { EMBED_DIMS = 64 };

static void embed_text(const char *body, size_t blen, double v[EMBED_DIMS])
{
    for (int i = 0; i < EMBED_DIMS; i++)
        v[i] = 0;
    const char *end = body + blen, *p = body;
    static const char key[] = "\"input\"";
    for (; p + sizeof key - 1 <= end; p++)
        if (!memcmp(p, key, sizeof key - 1)) { p += sizeof key - 1; break; }
    if (p + sizeof key - 1 > end)
        p = body;
    while (p < end) {
        while (p < end && !isalnum((unsigned char)*p))
            p++;
        if (p >= end)
            break;
        uint32_t h = 2166136261u;          /* FNV-1a over the lower-cased word */
        while (p < end && isalnum((unsigned char)*p)) {
            h = (h ^ (uint32_t)tolower((unsigned char)*p)) * 16777619u;
            p++;
        }
        v[h % EMBED_DIMS] += 1;
    }
    double n = 0;
    for (int i = 0; i < EMBED_DIMS; i++)
        n += v[i] * v[i];
    if (n == 0) { v[0] = 1; return; }
    n = sqrt(n);
    for (int i = 0; i < EMBED_DIMS; i++)
        v[i] /= n;
}

enum outcome openai_embeddings(struct conn *c, const struct behavior *b)
{
    double v[EMBED_DIMS];
    embed_text(c->req.body, c->req.blen, v);
    struct jscan j;
    json_scan(&j, c->req.body, c->req.blen);
    long items = j.inputs > 0 ? j.inputs : 1;
    long ptok = b->prompt_tokens >= 0 ? b->prompt_tokens : (j.words > 0 ? j.words : 1);
    struct buf *o = &c->rbody;
    o->len = 0;
    buf_adds(o, "{\"object\":\"list\",\"data\":[");
    for (long i = 0; i < items; i++)
    {
        buf_printf(o, "%s{\"object\":\"embedding\",\"index\":%ld,\"embedding\":[", i ? "," : "", i);
        for (int d = 0; d < EMBED_DIMS; d++)
            buf_printf(o, "%s%.6f", d ? "," : "", v[d]);
        buf_adds(o, "]}");
    }
    buf_adds(o, "],\"model\":\"");
    if (j.model)
        buf_add(o, j.model, j.model_len);
    else
        buf_adds(o, G.model);
    buf_printf(o, "\",\"usage\":{\"prompt_tokens\":%ld,\"total_tokens\":%ld}}", ptok, ptok);
    return reply_send(c, b, 200, CT_JSON);
}

enum outcome openai_models(struct conn *c, const struct behavior *b)
{
    c->rbody.len = 0;
    buf_printf(&c->rbody, "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\","
               "\"created\":1700000000,\"owned_by\":\"fake\"}]}", G.model);
    return reply_send(c, b, 200, CT_JSON);
}
