/* messages_stream.c: OpenAI chat answers -> Anthropic Messages answers, errors and
 * stream events (the reverse of anthropic_stream.c; the request direction is
 * messages.c). Everything written is compact JSON. */
#include "messages.h"
#include "util.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* finish_reason -> stop_reason; anything else (null, new values) is end_turn. */
static const struct {
    const char *finish, *stop_reason;
} stop_table[] = {
    {"stop", "end_turn"},
    {"length", "max_tokens"},
    {"tool_calls", "tool_use"},
    {"function_call", "tool_use"},      /* the legacy name of tool_calls */
    {"content_filter", "refusal"},
};

const char *messages_stop_reason(const char *finish_reason)
{
    for (size_t i = 0; finish_reason && i < sizeof stop_table / sizeof stop_table[0]; i++)
        if (strcmp(stop_table[i].finish, finish_reason) == 0)
            return stop_table[i].stop_reason;
    return "end_turn";
}

/* ---- JSON reading -------------------------------------------------------- */

/* An OpenAI usage object -> the counts; cached never exceeds prompt, so
 * input_tokens (prompt - cached) is never negative. 1 when it has a count. */
static int read_usage(struct json_object *usage, int64_t *prompt, int64_t *completion, int64_t *cached,
                      int64_t *reasoning)
{
    int found = xlate_member_count(usage, "prompt_tokens", prompt) |
                xlate_member_count(usage, "completion_tokens", completion);
    xlate_member_count(xlate_member(usage, "prompt_tokens_details", json_type_object), "cached_tokens", cached);
    xlate_member_count(xlate_member(usage, "completion_tokens_details", json_type_object), "reasoning_tokens",
                       reasoning);
    if (*cached > *prompt)
        *cached = *prompt;
    return found;
}

static void fill_usage(struct usage *u, int64_t prompt, int64_t completion, int64_t cached, int64_t reasoning)
{
    if (!u)
        return;
    memset(u, 0, sizeof *u);
    u->prompt_tokens = prompt;
    u->completion_tokens = completion;
    u->cache_read_tokens = cached;
    u->reasoning_tokens = reasoning;
    u->found = 1;
}

/* The Messages usage object: input_tokens excludes the cache reads
 * (Anthropic counts them apart); OpenAI reports no cache writes. */
static int usage_json(struct buf *b, int64_t prompt, int64_t completion, int64_t cached)
{
    return buf_printf(b,
                      "{\"input_tokens\":%" PRId64 ",\"output_tokens\":%" PRId64
                      ",\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":%" PRId64 "}",
                      prompt - cached, completion, cached);
}

/* "msg_" and the chat id without its "chatcmpl-" prefix. */
static int message_id(struct buf *b, const char *id)
{
    char tmp[160];
    if (!id)
        id = "";
    if (strncmp(id, "chatcmpl-", 9) == 0)
        id += 9;
    snprintf(tmp, sizeof tmp, "msg_%s", id);
    return buf_json_str(b, tmp, strlen(tmp));
}

/* The choice with index 0 (or without an index) of choices. */
static struct json_object *first_choice(struct json_object *root)
{
    struct json_object *choices = xlate_member(root, "choices", json_type_array);
    size_t n = choices ? json_object_array_length(choices) : 0;
    for (size_t i = 0; i < n; i++) {
        struct json_object *c = json_object_array_get_idx(choices, i), *index;
        if (!json_object_is_type(c, json_type_object))
            continue;
        index = xlate_member(c, "index", json_type_int);
        if (!index || json_object_get_int64(index) == 0)
            return c;
    }
    return NULL;
}

/* The reasoning text of a message or delta: vLLM's reasoning_content, or
 * reasoning (its newer name, and other servers'). */
static const char *reasoning_of(struct json_object *m, size_t *len)
{
    const char *s = xlate_member_text(m, "reasoning_content", len);
    return s ? s : xlate_member_text(m, "reasoning", len);
}

/* ---- answers ------------------------------------------------------------- */

/* Tool-call arguments (a JSON text, or already an object) -> the input object;
 * anything that is not a JSON object is {} (the caller gets a tool_use it can
 * answer, not an error for the model's malformed call). */
static const char *tool_input(struct json_object *fn, struct json_object **owned)
{
    size_t len;
    const char *args = xlate_member_str(fn, "arguments", &len);
    struct json_object *obj = xlate_member(fn, "arguments", json_type_object);
    *owned = NULL;
    /* json-c writes a string's bytes as they are: arguments that are not UTF-8
     * would make the Message invalid, so they count as no input. */
    for (size_t i = 0, k; args && i < len; i += k)
        if (!(k = (unsigned char)args[i] < 0x80 ? 1 : utf8_sequence((const unsigned char *)args + i, len - i)))
            return "{}";
    if (args) {
        *owned = xlate_parse(args, len);
        obj = *owned;
    }
    return obj ? json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : "{}";
}

static int tool_use_block(struct buf *out, struct json_object *call, struct json_object *fn, size_t k)
{
    size_t l;
    char fallback[32];
    const char *id = xlate_member_str(call, "id", &l), *name;
    if (!id) {              /* the caller needs an id to answer with a tool_result */
        l = (size_t)snprintf(fallback, sizeof fallback, "call_%zu", k);
        id = fallback;
    }
    struct json_object *owned;
    int rc = buf_puts(out, ",{\"type\":\"tool_use\",\"id\":");
    rc |= buf_json_str(out, id, l);
    rc |= buf_puts(out, ",\"name\":");
    name = xlate_member_str(fn, "name", &l);
    rc |= buf_json_str(out, name ? name : "", l);
    rc |= buf_puts(out, ",\"input\":");
    rc |= buf_puts(out, tool_input(fn, &owned));
    rc |= buf_puts(out, "}");
    json_object_put(owned);
    return rc;
}

/* The stop_reason and stop_sequence: vLLM's choice stop_reason names the stop
 * string that ended a "stop" finish (an integer is a stop token: end_turn). */
static const char *stop_of(struct json_object *choice, const char **sequence, size_t *seq_len)
{
    const char *finish = xlate_member_str(choice, "finish_reason", NULL);
    const char *reason = messages_stop_reason(finish);
    *sequence = NULL;
    if (finish && strcmp(finish, "stop") == 0 && (*sequence = xlate_member_str(choice, "stop_reason", seq_len)))
        reason = "stop_sequence";
    return reason;
}

int messages_response(const char *body, size_t len, const char *model, struct buf *out, struct usage *u,
                      char *stop_reason, size_t stop_size)
{
    if (u)
        memset(u, 0, sizeof *u);
    if (stop_reason && stop_size)
        stop_reason[0] = '\0';
    struct json_object *root = xlate_parse(body, len), *choice = first_choice(root);
    struct json_object *msg = xlate_member(choice, "message", json_type_object);
    const char *object = xlate_member_str(root, "object", NULL);
    if (!msg || (object && strcmp(object, "chat.completion") != 0)) {
        json_object_put(root);
        return -1;
    }
    size_t start = out->len, l, seq_len = 0;
    const char *s, *seq;
    const char *reason = stop_of(choice, &seq, &seq_len);
    if (!model)
        model = xlate_member_str(root, "model", NULL);

    int rc = buf_puts(out, "{\"id\":");
    rc |= message_id(out, xlate_member_str(root, "id", NULL));
    rc |= buf_puts(out, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    rc |= buf_json_str(out, model ? model : "", model ? strlen(model) : 0);
    /* every block is written with a leading comma; the first one's is dropped */
    rc |= buf_puts(out, ",\"content\":[");
    size_t blocks = out->len;
    if ((s = reasoning_of(msg, &l))) {
        rc |= buf_puts(out, ",{\"type\":\"thinking\",\"thinking\":");
        rc |= buf_json_str(out, s, l);
        rc |= buf_puts(out, ",\"signature\":\"\"}");
    }
    if ((s = xlate_member_text(msg, "content", &l))) {
        rc |= buf_puts(out, ",{\"type\":\"text\",\"text\":");
        rc |= buf_json_str(out, s, l);
        rc |= buf_puts(out, "}");
    } else if ((s = xlate_member_text(msg, "refusal", &l))) {
        /* OpenAI's refusal text is what the caller reads: a text block, stop_reason refusal */
        rc |= buf_puts(out, ",{\"type\":\"text\",\"text\":");
        rc |= buf_json_str(out, s, l);
        rc |= buf_puts(out, "}");
        if (strcmp(reason, "end_turn") == 0 || seq) {
            reason = "refusal";
            seq = NULL;
        }
    }
    struct json_object *calls = xlate_member(msg, "tool_calls", json_type_array), *fn;
    size_t n = calls ? json_object_array_length(calls) : 0;
    for (size_t k = 0; k < n; k++) {
        struct json_object *call = json_object_array_get_idx(calls, k);
        if ((fn = xlate_member(call, "function", json_type_object)))
            rc |= tool_use_block(out, call, fn, k);
    }
    if (!n && (fn = xlate_member(msg, "function_call", json_type_object)))    /* the legacy single call */
        rc |= tool_use_block(out, NULL, fn, 0);
    if (!rc && out->len > blocks) {
        memmove(out->data + blocks, out->data + blocks + 1, out->len - blocks);
        out->len--;
    }
    rc |= buf_puts(out, "],\"stop_reason\":");
    rc |= buf_printf(out, "\"%s\",\"stop_sequence\":", reason);
    rc |= seq ? buf_json_str(out, seq, seq_len) : buf_puts(out, "null");
    int64_t prompt = 0, completion = 0, cached = 0, reasoning = 0;
    int found = read_usage(xlate_member(root, "usage", json_type_object), &prompt, &completion, &cached, &reasoning);
    rc |= buf_puts(out, ",\"usage\":");
    rc |= usage_json(out, prompt, completion, cached);
    rc |= buf_puts(out, "}");
    json_object_put(root);
    if (rc) {                   /* over out's max: nothing half-written, nothing counted */
        xlate_rewind(out, start);
        return -1;
    }
    if (found)
        fill_usage(u, prompt, completion, cached, reasoning);
    if (stop_reason && stop_size)
        snprintf(stop_reason, stop_size, "%s", reason);
    return 0;
}

/* ---- errors -------------------------------------------------------------- */

/* The message of an OpenAI-shaped error body: error.message ({"error":{...}}),
 * error itself when a string, or a top-level message (vLLM's older
 * {"object":"error","message":...}) or detail (FastAPI). NULL when none. */
static const char *error_message(struct json_object *root)
{
    struct json_object *err = xlate_member(root, "error", json_type_object);
    size_t l;
    const char *s = xlate_member_text(err, "message", &l);
    if (!s)
        s = xlate_member_text(root, "error", &l);
    if (!s)
        s = xlate_member_text(root, "message", &l);
    if (!s)
        s = xlate_member_text(root, "detail", &l);
    return s;
}

int messages_error(long status, const char *body, size_t len, struct buf *out)
{
    if (status < 400 || status > 599)
        status = 502;           /* not an error status: the upstream's answer was bad */
    struct json_object *root = xlate_parse(body, len);
    const char *msg = error_message(root);
    char generic[64];
    if (!msg) {
        snprintf(generic, sizeof generic, "upstream answered %ld", status);
        msg = generic;
    }
    size_t start = out->len;
    if (errors_body_anthropic(out, errors_anthropic_type((int)status), msg) != 0) {
        xlate_rewind(out, start);
    }
    json_object_put(root);
    return (int)status;
}

/* ---- stream -------------------------------------------------------------- */

void messages_stream_init(struct messages_stream *s, const char *model)
{
    memset(s, 0, sizeof *s);
    if (model)
        str_copy(s->model, sizeof s->model, model);
}

int messages_stream_failed(const struct messages_stream *s) { return s->failed; }

int messages_stream_done(const struct messages_stream *s) { return s->done; }

/* What one chunk's handlers need. b is scratch memory for the event's data. */
struct stream_call {
    struct messages_stream *s;
    struct usage *u;
    messages_emit_fn emit;
    void *ctx;
    struct buf b;
};

static int send(struct stream_call *c, const char *event)
{
    int rc = c->emit(c->ctx, event, c->b.data ? c->b.data : "", c->b.len) != 0 ? -1 : 0;
    buf_reset(&c->b);
    return rc;
}

static int message_start(struct stream_call *c, struct json_object *chunk)
{
    const char *model = xlate_member_str(chunk, "model", NULL);
    c->s->started = 1;
    if (!c->s->model[0] && model)
        str_copy(c->s->model, sizeof c->s->model, model);
    buf_puts(&c->b, "{\"type\":\"message_start\",\"message\":{\"id\":");
    message_id(&c->b, xlate_member_str(chunk, "id", NULL));
    buf_puts(&c->b, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    buf_json_str(&c->b, c->s->model, strlen(c->s->model));
    /* the counts are known only at the end: message_delta carries them */
    buf_puts(&c->b, ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"
                    "\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}}");
    return send(c, "message_start");
}

static int block_close(struct stream_call *c)
{
    if (c->s->open == MB_NONE)
        return 0;
    c->s->open = MB_NONE;
    buf_printf(&c->b, "{\"type\":\"content_block_stop\",\"index\":%d}", c->s->blocks - 1);
    return send(c, "content_block_stop");
}

/* Closes the open block and starts one of kind (block: its content_block
 * JSON); ping follows the message's first content_block_start only, as
 * Anthropic sends it. */
static int block_start(struct stream_call *c, enum messages_block kind, struct buf *block)
{
    if (block_close(c) != 0)
        return -1;
    int index = c->s->blocks++;
    c->s->open = kind;
    buf_printf(&c->b, "{\"type\":\"content_block_start\",\"index\":%d,\"content_block\":", index);
    buf_append(&c->b, block->data, block->len);
    buf_puts(&c->b, "}");
    if (send(c, "content_block_start") != 0)
        return -1;
    if (index > 0)
        return 0;
    buf_puts(&c->b, "{\"type\":\"ping\"}");
    return send(c, "ping");
}

/* A text or thinking delta: its block is started (or kept) and s added to it. */
static int text_delta(struct stream_call *c, enum messages_block kind, const char *s, size_t len)
{
    const char *field = kind == MB_TEXT ? "text" : "thinking";
    if (c->s->open != kind) {
        struct buf block;
        buf_init(&block, 0);
        buf_puts(&block, kind == MB_TEXT ? "{\"type\":\"text\",\"text\":\"\"}"
                                         : "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}");
        int rc = block_start(c, kind, &block);
        buf_free(&block);
        if (rc != 0)
            return -1;
    }
    buf_printf(&c->b, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"%s_delta\",\"%s\":",
               c->s->blocks - 1, field, field);
    buf_json_str(&c->b, s, len);
    buf_puts(&c->b, "}}");
    return send(c, "content_block_delta");
}

/* One tool_calls element. A tool index not seen before starts a tool_use block
 * (the open block closes); its argument pieces are input_json_delta events on
 * that block. OpenAI and vLLM send each call whole before the next, so pieces
 * go to the open block; should an upstream interleave, a piece for an earlier
 * call goes to that call's (closed) block index, which the Anthropic SDKs
 * accumulate by. Indexes past tool_block's end are known only while open. */
static int tool_delta(struct stream_call *c, struct json_object *tc, size_t pos)
{
    struct messages_stream *s = c->s;
    struct json_object *ix = xlate_member(tc, "index", json_type_int),
                       *fn = xlate_member(tc, "function", json_type_object);
    int64_t index = ix ? json_object_get_int64(ix) : (int64_t)pos;
    if (index < 0 || index > 1000000)
        index = (int64_t)pos;
    int in_table = index < MESSAGES_STREAM_TOOLS;
    int open = s->open == MB_TOOL && s->open_tool == (int)index;
    int block = open ? s->blocks - 1 : in_table && s->tool_block[index] ? s->tool_block[index] - 1 : -1;
    if (block < 0) {
        size_t l;
        char fallback[32];
        const char *id = xlate_member_str(tc, "id", &l), *name;
        if (!id) {          /* the caller needs an id to answer with a tool_result */
            l = (size_t)snprintf(fallback, sizeof fallback, "call_%" PRId64, index);
            id = fallback;
        }
        struct buf start;
        buf_init(&start, 0);
        buf_puts(&start, "{\"type\":\"tool_use\",\"id\":");
        buf_json_str(&start, id, l);
        buf_puts(&start, ",\"name\":");
        name = xlate_member_str(fn, "name", &l);
        buf_json_str(&start, name ? name : "", l);
        buf_puts(&start, ",\"input\":{}}");
        int rc = block_start(c, MB_TOOL, &start);
        buf_free(&start);
        if (rc != 0)
            return -1;
        s->open_tool = (int)index;
        block = s->blocks - 1;
        if (in_table)
            s->tool_block[index] = block + 1;
    }
    size_t l;
    const char *args = xlate_member_text(fn, "arguments", &l);
    if (!args)
        return 0;
    buf_printf(&c->b, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"input_json_delta\","
                      "\"partial_json\":", block);
    buf_json_str(&c->b, args, l);
    buf_puts(&c->b, "}}");
    return send(c, "content_block_delta");
}

/* A choice's delta, in the order a model produces them: reasoning, text, tool calls. */
static int on_choice(struct stream_call *c, struct json_object *choice)
{
    struct json_object *delta = xlate_member(choice, "delta", json_type_object), *calls;
    size_t l;
    const char *s;
    if ((s = reasoning_of(delta, &l)) && text_delta(c, MB_THINKING, s, l) != 0)
        return -1;
    if ((s = xlate_member_text(delta, "content", &l)) && text_delta(c, MB_TEXT, s, l) != 0)
        return -1;
    if ((s = xlate_member_text(delta, "refusal", &l))) {      /* OpenAI's refusal: text the caller reads */
        c->s->refusal = 1;
        if (text_delta(c, MB_TEXT, s, l) != 0)
            return -1;
    }
    if ((calls = xlate_member(delta, "tool_calls", json_type_array)))
        for (size_t k = 0; k < json_object_array_length(calls); k++) {
            struct json_object *tc = json_object_array_get_idx(calls, k);
            if (json_object_is_type(tc, json_type_object) && tool_delta(c, tc, k) != 0)
                return -1;
        }
    const char *finish = xlate_member_str(choice, "finish_reason", NULL), *seq;
    if (finish) {
        c->s->stop_reason = messages_stop_reason(finish);
        c->s->stop_sequence[0] = '\0';
        if (strcmp(finish, "stop") == 0 && (seq = xlate_member_str(choice, "stop_reason", &l)) &&
            l < sizeof c->s->stop_sequence)
            memcpy(c->s->stop_sequence, seq, l + 1);
    }
    return 0;
}

/* [DONE]: the open block's stop, message_delta with the stop reason and the
 * counts, message_stop. Once, whatever emit answers. */
static int on_done(struct stream_call *c)
{
    struct messages_stream *s = c->s;
    s->done = 1;
    if (!s->started && message_start(c, NULL) != 0)
        return -1;
    if (block_close(c) != 0)
        return -1;
    const char *reason = s->stop_reason ? s->stop_reason : "end_turn";
    int end_turn = strcmp(reason, "end_turn") == 0;
    if (end_turn && s->refusal)
        reason = "refusal";
    else if (end_turn && s->stop_sequence[0])
        reason = "stop_sequence";
    buf_printf(&c->b, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"%s\",\"stop_sequence\":", reason);
    if (strcmp(reason, "stop_sequence") == 0)
        buf_json_str(&c->b, s->stop_sequence, strlen(s->stop_sequence));
    else
        buf_puts(&c->b, "null");
    buf_puts(&c->b, "},\"usage\":");
    usage_json(&c->b, s->prompt, s->completion, s->cached);
    buf_puts(&c->b, "}");
    if (send(c, "message_delta") != 0)
        return -1;
    buf_puts(&c->b, "{\"type\":\"message_stop\"}");
    return send(c, "message_stop");
}

/* The Anthropic error type for an OpenAI-shaped stream error's type or code
 * string: Anthropic's own names stay, the OpenAI ones map, the rest is api_error
 * (an error mid-stream is the upstream's failure unless it says otherwise). */
static const char *stream_error_type(const char *t)
{
    static const char *const anthropic[] = {"invalid_request_error", "authentication_error", "billing_error",
                                            "permission_error",      "not_found_error",      "request_too_large",
                                            "rate_limit_error",      "api_error",            "timeout_error",
                                            "overloaded_error"};
    if (!t)
        return NULL;
    for (size_t i = 0; i < sizeof anthropic / sizeof anthropic[0]; i++)
        if (strcmp(anthropic[i], t) == 0)
            return anthropic[i];
    if (strcmp(t, "server_error") == 0)
        return "api_error";
    if (strstr(t, "overload"))
        return "overloaded_error";
    if (strstr(t, "rate_limit"))
        return "rate_limit_error";
    return NULL;
}

/* R-SSE-4: an {"error":...} chunk -> an error event; nothing follows it. */
static int on_error(struct stream_call *c, struct json_object *err)
{
    struct json_object *code = xlate_member(err, "code", json_type_int);
    const char *type = NULL;
    if (code && json_object_get_int64(code) >= 400 && json_object_get_int64(code) <= 599)
        type = errors_anthropic_type((int)json_object_get_int64(code));
    if (!type)
        type = stream_error_type(xlate_member_str(err, "type", NULL));
    if (!type)
        type = stream_error_type(xlate_member_str(err, "code", NULL));
    if (!type)
        type = "api_error";
    size_t l;
    const char *msg = json_object_is_type(err, json_type_string) ? json_object_get_string(err)
                                                                 : xlate_member_text(err, "message", &l);
    if (!msg || !*msg)
        msg = "the upstream stream failed";
    c->s->failed = 1;
    errors_body_anthropic(&c->b, type, msg);
    return send(c, "error");
}

int messages_stream_chunk(struct messages_stream *s, const char *data, size_t len, struct usage *u,
                          messages_emit_fn emit, void *ctx)
{
    if (s->done || s->failed)
        return 0;               /* nothing follows [DONE] or an error */
    struct stream_call c = {.s = s, .u = u, .emit = emit, .ctx = ctx};
    buf_init(&c.b, 0);
    int rc = 0;
    struct json_object *chunk = NULL, *err, *choice, *usage;
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        rc = on_done(&c);
        goto out;
    }
    if (!(chunk = xlate_parse(data, len)))
        goto out;               /* not JSON: nothing */
    if (json_object_object_get_ex(chunk, "error", &err) && err) {
        rc = on_error(&c, err);
        goto out;
    }
    if (!s->started && (rc = message_start(&c, chunk)) != 0)
        goto out;
    if ((choice = first_choice(chunk)) && (rc = on_choice(&c, choice)) != 0)
        goto out;
    /* the include_usage chunk ("choices":[]), or any chunk with counts (vLLM's continuous usage) */
    if ((usage = xlate_member(chunk, "usage", json_type_object)) &&
        read_usage(usage, &s->prompt, &s->completion, &s->cached, &s->reasoning))
        fill_usage(u, s->prompt, s->completion, s->cached, s->reasoning);
out:
    json_object_put(chunk);
    buf_free(&c.b);
    return rc;
}
