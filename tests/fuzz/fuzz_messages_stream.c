/* fuzz_messages_stream.c: an OpenAI upstream's chunk stream -> Anthropic Messages events
 * (fcgi/messages_stream.c messages_stream_chunk, R-ANT-6, R-SSE-4) on any bytes.
 *
 * The bytes go through the SSE splitter (fcgi/sse.c) and each event's data, copied
 * to a buffer of exactly its length (the header needs no NUL), is one chunk, as
 * fcgi/proto_messages.c feeds it, so the seeds are plain OpenAI chat streams. A
 * stream that ends without [DONE] or an error is then given one [DONE], and a
 * finished one two more chunks, which must change nothing.
 *
 * Invariants: every event is (a known name, strict JSON, UTF-8, NUL-terminated data
 * whose "type" is the name); the first is message_start or error; nothing follows
 * message_stop or error; ping comes once at most, right after the block with index 0
 * starts; content_block_start indexes count up from 0, a block starts only when none
 * is open and stops with its own index; text and thinking deltas go to the open
 * block of their kind, input_json_delta to a tool_use block; message_delta comes
 * once, with every block stopped, a stop_reason from the table, a stop_sequence
 * string exactly for "stop_sequence" and non-negative counts equal to the state's,
 * and message_stop follows it; [DONE] ends the events with message_stop and
 * balanced blocks; the usage given back is non-negative with cache reads within the
 * prompt; the state's done / failed say what was sent; an emit that asks to stop
 * stops the translation with -1. */
#include "fuzz.h"

#include "buf.h"
#include "messages.h"
#include "sse.h"

#define MAX_KINDS 4096

struct sink {
    const char *model;          /* the model message_start must name, or NULL */
    const struct messages_stream *s;
    int events, stop_after;
    int started, ended, delta_sent, pings;
    int blocks, open;           /* blocks started; the open block's index, -1 none */
    char kind[MAX_KINDS];       /* 't' text, 'h' thinking, 'u' tool_use, by block index (when < MAX_KINDS) */
    char prev[32];              /* the previous event's name */
    int prev_index;             /* ... and its index when it was a content_block_start */
};

static int str_is(struct json_object *v, const char *s)
{
    return v && json_object_is_type(v, json_type_string) && strcmp(json_object_get_string(v), s) == 0;
}

static int64_t count(struct json_object *o, const char *key)
{
    struct json_object *v = fuzz_member(o, key, json_type_int);
    FUZZ_CHECK(v && json_object_get_int64(v) >= 0, "count %s", key);
    return json_object_get_int64(v);
}

static void on_message_start(struct sink *k, struct json_object *o)
{
    FUZZ_CHECK(!k->started && k->events == 0, "message_start not first");
    k->started = 1;
    struct json_object *m = fuzz_member(o, "message", json_type_object), *v;
    struct json_object *id = fuzz_member(m, "id", json_type_string);
    FUZZ_CHECK(id && strncmp(json_object_get_string(id), "msg_", 4) == 0, "message id");
    FUZZ_CHECK(str_is(fuzz_member(m, "type", json_type_string), "message") &&
                   str_is(fuzz_member(m, "role", json_type_string), "assistant"),
               "message type, role");
    struct json_object *model = fuzz_member(m, "model", json_type_string);
    FUZZ_CHECK(model, "message model");
    if (k->model)
        FUZZ_CHECK(strcmp(json_object_get_string(model), k->model) == 0, "model %s", json_object_get_string(model));
    struct json_object *content = fuzz_member(m, "content", json_type_array);
    FUZZ_CHECK(content && json_object_array_length(content) == 0, "message_start content not []");
    FUZZ_CHECK(json_object_object_get_ex(m, "stop_reason", &v) && !v, "stop_reason not null");
    struct json_object *u = fuzz_member(m, "usage", json_type_object);
    FUZZ_CHECK(u && count(u, "input_tokens") == 0 && count(u, "output_tokens") == 0, "message_start usage");
}

static void on_block_start(struct sink *k, struct json_object *o)
{
    FUZZ_CHECK(k->started && !k->delta_sent, "content_block_start outside the message");
    FUZZ_CHECK(k->open < 0, "content_block_start while block %d is open", k->open);
    struct json_object *ix = fuzz_member(o, "index", json_type_int);
    FUZZ_CHECK(ix && json_object_get_int64(ix) == k->blocks, "content_block_start index %s, want %d",
               ix ? json_object_get_string(ix) : "(none)", k->blocks);
    struct json_object *b = fuzz_member(o, "content_block", json_type_object);
    struct json_object *type = fuzz_member(b, "type", json_type_string), *in;
    char kind;
    if (str_is(type, "text")) {
        FUZZ_CHECK(str_is(fuzz_member(b, "text", json_type_string), ""), "text block start");
        kind = 't';
    } else if (str_is(type, "thinking")) {
        FUZZ_CHECK(str_is(fuzz_member(b, "thinking", json_type_string), "") &&
                       str_is(fuzz_member(b, "signature", json_type_string), ""),
                   "thinking block start");
        kind = 'h';
    } else {
        FUZZ_CHECK(str_is(type, "tool_use"), "block of type %s", type ? json_object_get_string(type) : "(none)");
        struct json_object *id = fuzz_member(b, "id", json_type_string);
        FUZZ_CHECK(id && json_object_get_string_len(id) > 0 && fuzz_member(b, "name", json_type_string) &&
                       (in = fuzz_member(b, "input", json_type_object)) && json_object_object_length(in) == 0,
                   "tool_use block start");
        kind = 'u';
    }
    if (k->blocks < MAX_KINDS)
        k->kind[k->blocks] = kind;
    k->open = k->blocks++;
}

static void on_block_delta(struct sink *k, struct json_object *o)
{
    struct json_object *ix = fuzz_member(o, "index", json_type_int);
    FUZZ_CHECK(ix, "content_block_delta without an index");
    int64_t i = json_object_get_int64(ix);
    FUZZ_CHECK(i >= 0 && i < k->blocks && !k->delta_sent, "content_block_delta index %lld of %d blocks",
               (long long)i, k->blocks);
    struct json_object *d = fuzz_member(o, "delta", json_type_object);
    struct json_object *type = fuzz_member(d, "type", json_type_string), *t;
    char kind = i < MAX_KINDS ? k->kind[i] : 0;
    if (str_is(type, "text_delta") || str_is(type, "thinking_delta")) {
        int text = str_is(type, "text_delta");
        FUZZ_CHECK(i == k->open, "%s to block %lld, open %d", json_object_get_string(type), (long long)i, k->open);
        FUZZ_CHECK(!kind || kind == (text ? 't' : 'h'), "%s to a '%c' block", json_object_get_string(type), kind);
        t = fuzz_member(d, text ? "text" : "thinking", json_type_string);
        FUZZ_CHECK(t && json_object_get_string_len(t) > 0, "empty %s", json_object_get_string(type));
    } else {
        FUZZ_CHECK(str_is(type, "input_json_delta"), "delta of type %s", type ? json_object_get_string(type) : "?");
        FUZZ_CHECK(!kind || kind == 'u', "input_json_delta to a '%c' block", kind);
        FUZZ_CHECK(i == k->open || kind == 'u', "input_json_delta to closed block %lld", (long long)i);
        t = fuzz_member(d, "partial_json", json_type_string);
        FUZZ_CHECK(t && json_object_get_string_len(t) > 0, "empty partial_json");
    }
}

static void on_message_delta(struct sink *k, struct json_object *o)
{
    FUZZ_CHECK(k->started && !k->delta_sent, "message_delta twice or before message_start");
    FUZZ_CHECK(k->open < 0, "message_delta with block %d open", k->open);
    k->delta_sent = 1;
    struct json_object *d = fuzz_member(o, "delta", json_type_object), *seq;
    struct json_object *sr = fuzz_member(d, "stop_reason", json_type_string);
    static const char *const reasons[] = {"end_turn", "max_tokens", "tool_use", "refusal", "stop_sequence"};
    int known = 0;
    for (size_t i = 0; sr && i < sizeof reasons / sizeof reasons[0]; i++)
        known |= str_is(sr, reasons[i]);
    FUZZ_CHECK(known, "stop_reason %s", sr ? json_object_get_string(sr) : "(none)");
    FUZZ_CHECK(json_object_object_get_ex(d, "stop_sequence", &seq), "no stop_sequence");
    FUZZ_CHECK(str_is(sr, "stop_sequence") ? json_object_is_type(seq, json_type_string) : !seq,
               "stop_sequence for %s", json_object_get_string(sr));
    struct json_object *u = fuzz_member(o, "usage", json_type_object);
    FUZZ_CHECK(u, "message_delta without usage");
    int64_t in = count(u, "input_tokens"), out = count(u, "output_tokens"), cr = count(u, "cache_read_input_tokens");
    FUZZ_CHECK(count(u, "cache_creation_input_tokens") == 0, "cache writes");
    FUZZ_CHECK(in == k->s->prompt - k->s->cached && out == k->s->completion && cr == k->s->cached,
               "message_delta usage %lld/%lld/%lld, state %lld/%lld/%lld", (long long)in, (long long)out,
               (long long)cr, (long long)k->s->prompt, (long long)k->s->completion, (long long)k->s->cached);
}

static void on_error(struct sink *k, struct json_object *o)
{
    static const char *const types[] = {"invalid_request_error", "authentication_error", "billing_error",
                                        "permission_error",      "not_found_error",      "request_too_large",
                                        "rate_limit_error",      "api_error",            "timeout_error",
                                        "overloaded_error"};
    struct json_object *e = fuzz_member(o, "error", json_type_object);
    struct json_object *type = fuzz_member(e, "type", json_type_string);
    struct json_object *msg = fuzz_member(e, "message", json_type_string);
    int known = 0;
    for (size_t i = 0; type && i < sizeof types / sizeof types[0]; i++)
        known |= str_is(type, types[i]);
    FUZZ_CHECK(known, "error type %s", type ? json_object_get_string(type) : "(none)");
    FUZZ_CHECK(msg && json_object_get_string_len(msg) > 0, "error without a message");
    k->ended = 1;
}

static int emit(void *ctx, const char *event, const char *data, size_t len)
{
    struct sink *k = ctx;
    FUZZ_CHECK(event && *event && strlen(event) < sizeof k->prev, "event name");
    FUZZ_CHECK(!k->ended, "%s after the stream ended: %.*s", event, (int)len, data);
    FUZZ_CHECK(data && data[len] == '\0' && !memchr(data, '\0', len), "data not NUL-terminated at its length");
    FUZZ_CHECK(fuzz_utf8(data, len), "not UTF-8: %.*s", (int)len, data);
    struct json_object *o = fuzz_json(data, len, 1);
    FUZZ_CHECK(o && json_object_is_type(o, json_type_object), "not a strict JSON object: %s", data);
    FUZZ_CHECK(str_is(fuzz_member(o, "type", json_type_string), event), "event %s with data %s", event, data);
    if (k->events == 0)
        FUZZ_CHECK(strcmp(event, "message_start") == 0 || strcmp(event, "error") == 0, "first event %s", event);
    if (strcmp(event, "message_start") == 0) {
        on_message_start(k, o);
    } else if (strcmp(event, "content_block_start") == 0) {
        on_block_start(k, o);
    } else if (strcmp(event, "ping") == 0) {
        FUZZ_CHECK(k->pings++ == 0, "a second ping");
        FUZZ_CHECK(strcmp(k->prev, "content_block_start") == 0 && k->prev_index == 0,
                   "ping after %s (index %d)", k->prev, k->prev_index);
        FUZZ_CHECK(json_object_object_length(o) == 1, "ping with fields: %s", data);
    } else if (strcmp(event, "content_block_delta") == 0) {
        on_block_delta(k, o);
    } else if (strcmp(event, "content_block_stop") == 0) {
        struct json_object *ix = fuzz_member(o, "index", json_type_int);
        FUZZ_CHECK(k->open >= 0 && ix && json_object_get_int64(ix) == k->open, "content_block_stop %s, open %d",
                   ix ? json_object_get_string(ix) : "(none)", k->open);
        k->open = -1;
    } else if (strcmp(event, "message_delta") == 0) {
        on_message_delta(k, o);
    } else if (strcmp(event, "message_stop") == 0) {
        FUZZ_CHECK(k->delta_sent && strcmp(k->prev, "message_delta") == 0, "message_stop after %s", k->prev);
        FUZZ_CHECK(json_object_object_length(o) == 1, "message_stop with fields: %s", data);
        k->ended = 1;
    } else if (strcmp(event, "error") == 0) {
        on_error(k, o);
    } else {
        FUZZ_CHECK(0, "unknown event %s", event);
    }
    k->prev_index = strcmp(event, "content_block_start") == 0 ? k->open : -1;
    snprintf(k->prev, sizeof k->prev, "%s", event);
    json_object_put(o);
    k->events++;
    return k->stop_after && k->events >= k->stop_after ? -1 : 0;
}

static void check_state(const struct messages_stream *s, const struct sink *k, const struct usage *u)
{
    FUZZ_CHECK(memchr(s->model, '\0', sizeof s->model) && memchr(s->stop_sequence, '\0', sizeof s->stop_sequence),
               "model or stop_sequence overran");
    FUZZ_CHECK(s->prompt >= 0 && s->prompt <= USAGE_COUNT_MAX && s->cached >= 0 && s->cached <= s->prompt &&
                   s->completion >= 0 && s->completion <= USAGE_COUNT_MAX && s->reasoning >= 0,
               "state counts %lld/%lld/%lld/%lld", (long long)s->prompt, (long long)s->completion,
               (long long)s->cached, (long long)s->reasoning);
    FUZZ_CHECK(s->blocks == k->blocks, "state has %d blocks, %d started", s->blocks, k->blocks);
    for (int i = 0; i < MESSAGES_STREAM_TOOLS; i++)
        FUZZ_CHECK(s->tool_block[i] >= 0 && s->tool_block[i] <= s->blocks &&
                       (!s->tool_block[i] || s->tool_block[i] - 1 >= MAX_KINDS || k->kind[s->tool_block[i] - 1] == 'u'),
                   "tool %d -> block %d", i, s->tool_block[i]);
    FUZZ_CHECK(messages_stream_done(s) == s->done && messages_stream_failed(s) == s->failed, "done / failed");
    FUZZ_CHECK(!(s->done && s->failed), "both done and failed");
    if (u && u->found)
        FUZZ_CHECK(u->prompt_tokens >= 0 && u->completion_tokens >= 0 && u->cache_read_tokens >= 0 &&
                       u->cache_read_tokens <= u->prompt_tokens && u->reasoning_tokens >= 0,
                   "usage given back %lld/%lld/%lld", (long long)u->prompt_tokens, (long long)u->completion_tokens,
                   (long long)u->cache_read_tokens);
}

/* One chunk, as len bytes of their own. 0, or -1 when emit stopped it. */
static int chunk(struct messages_stream *s, struct sink *k, const char *data, size_t len, struct usage *u)
{
    char *copy = malloc(len ? len : 1);
    if (!copy)
        abort();
    if (len)
        memcpy(copy, data, len);
    int was_over = s->done || s->failed, before = k->events;
    int r = messages_stream_chunk(s, copy, len, u, emit, k);
    free(copy);
    FUZZ_CHECK(r == 0 || r == -1, "returned %d", r);
    if (r != 0) {
        FUZZ_CHECK(k->stop_after && k->events >= k->stop_after, "stopped though emit never asked to");
        return -1;
    }
    if (was_over)
        FUZZ_CHECK(k->events == before, "%d events after the stream ended", k->events - before);
    check_state(s, k, u);
    FUZZ_CHECK(k->ended == (s->done || s->failed), "ended %d, done %d, failed %d", k->ended, s->done, s->failed);
    FUZZ_CHECK((k->open >= 0) == (s->open != MB_NONE), "open block %d, state %d", k->open, (int)s->open);
    if (!was_over && s->failed)
        FUZZ_CHECK(strcmp(k->prev, "error") == 0, "failed without an error event");
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0 && !was_over)
        FUZZ_CHECK(s->done && strcmp(k->prev, "message_stop") == 0 && k->open < 0, "[DONE] did not end the message");
    return 0;
}

static void translate(const uint8_t *data, size_t size, const char *model, int with_usage, int stop_after)
{
    struct messages_stream s;
    struct sse_parser p;
    struct sse_event ev;
    struct sink *k = calloc(1, sizeof *k);
    if (!k)
        abort();
    k->model = model;
    k->s = &s;
    k->stop_after = stop_after;
    k->open = -1;
    k->prev_index = -1;
    struct usage u, *up = with_usage ? &u : NULL;
    memset(&u, 0, sizeof u);
    messages_stream_init(&s, model);
    sse_init(&p, 0);
    sse_feed(&p, (const char *)data, size);
    int more, stopped = 0;
    while ((more = sse_next(&p, &ev)) == 1 || (more == 0 && sse_finish(&p, &ev))) {
        if (!ev.comment_only && ev.has_data && chunk(&s, k, ev.data, ev.data_len, up) != 0) {
            stopped = 1;
            break;
        }
        if (more == 0)
            break;
    }
    sse_free(&p);
    if (!stopped && !k->ended)
        stopped = chunk(&s, k, "[DONE]", 6, up) != 0;
    if (!stopped) {
        FUZZ_CHECK(k->ended, "not ended after [DONE]");
        static const char after[] = "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"}}]}";
        chunk(&s, k, after, sizeof after - 1, up);
        chunk(&s, k, "[DONE]", 6, up);
    }
    free(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 18)
        return 0;
    translate(data, size, "claude-x", 1, 0);
    translate(data, size, NULL, 0, 0);
    translate(data, size, "claude-x", 1, 1);
    translate(data, size, "claude-x", 1, 4);
    return 0;
}
