/* anthropic_stream.c: Anthropic Messages answers -> OpenAI chat.completion bodies, stream chunks and
 * errors (SPEC §18, R-ANT-1; REFERENCE §4 "Mapping Anthropic -> OpenAI"). The request direction is
 * anthropic.c. Everything written here is compact JSON, so fcgi/usage.c classifies the chunks. */
#include "anthropic.h"
#include "util.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* stop_reason -> finish_reason; anything else (null, new values) is "stop". */
static const struct {
    const char *stop_reason, *finish;
} finish_table[] = {
    {"end_turn", "stop"},
    {"stop_sequence", "stop"},
    {"max_tokens", "length"},
    {"tool_use", "tool_calls"},
    {"refusal", "content_filter"},                  /* gateway choice */
    {"model_context_window_exceeded", "length"},    /* gateway choice */
    {"pause_turn", "stop"},                         /* no OpenAI equivalent */
};

const char *anthropic_finish_reason(const char *stop_reason)
{
    for (size_t i = 0; stop_reason && i < sizeof finish_table / sizeof finish_table[0]; i++)
        if (strcmp(finish_table[i].stop_reason, stop_reason) == 0)
            return finish_table[i].finish;
    return "stop";
}

/* Anthropic error types, the status Anthropic sends each with, and the OpenAI
 * type reported for it (the OpenAI "code" is the Anthropic type itself). */
static const struct {
    const char *type;
    long status;
    const char *openai;
} error_types[] = {
    {"invalid_request_error", 400, "invalid_request_error"},
    {"authentication_error", 401, "authentication_error"},
    {"billing_error", 402, "invalid_request_error"},
    {"permission_error", 403, "permission_error"},
    {"not_found_error", 404, "not_found_error"},
    {"request_too_large", 413, "invalid_request_error"},
    {"rate_limit_error", 429, "rate_limit_error"},
    {"api_error", 500, "server_error"},
    {"timeout_error", 504, "server_error"},
    {"overloaded_error", 529, "server_error"},
};

/* The OpenAI type for an Anthropic type; an unknown one is judged by status. */
static const char *error_openai_type(const char *type, long status)
{
    for (size_t i = 0; i < sizeof error_types / sizeof error_types[0]; i++)
        if (strcmp(error_types[i].type, type) == 0)
            return error_types[i].openai;
    return status >= 500 ? "server_error" : "invalid_request_error";
}

/* The Anthropic type a status stands for, when the body does not say. */
static const char *error_type_for_status(long status)
{
    for (size_t i = 0; i < sizeof error_types / sizeof error_types[0]; i++)
        if (error_types[i].status == status)
            return error_types[i].type;
    return status >= 500 ? "api_error" : "invalid_request_error";
}

/* {"error":{"message":M,"type":T',"param":null,"code":T}} */
static int error_json(struct buf *out, const char *type, const char *msg, size_t msg_len, long status)
{
    int rc = buf_puts(out, "{\"error\":{\"message\":");
    rc |= buf_json_str(out, msg, msg_len);
    rc |= buf_puts(out, ",\"type\":\"");
    rc |= buf_puts(out, error_openai_type(type, status));
    rc |= buf_puts(out, "\",\"param\":null,\"code\":");
    rc |= buf_json_str(out, type, strlen(type));
    rc |= buf_puts(out, "}}");
    return rc ? -1 : 0;
}

int anthropic_error(long status, const char *body, size_t len, struct buf *out, int *retry_after)
{
    struct json_object *root = xlate_parse_head(body, len), *err = xlate_member(root, "error", json_type_object);
    const char *type = xlate_member_str(err, "type", NULL);
    size_t msg_len;
    const char *msg = xlate_member_str(err, "message", &msg_len);
    char generic[64];
    if (!type)
        type = error_type_for_status(status);
    if (!msg) {
        msg_len = (size_t)snprintf(generic, sizeof generic, "upstream answered %ld", status);
        msg = generic;
    }
    error_json(out, type, msg, msg_len, status);
    json_object_put(root);
    if (retry_after)
        *retry_after = status == 429 || status == 529;
    if (status == 529)
        return 503;             /* overloaded: what the OpenAI SDKs retry as a server error */
    return status >= 400 && status <= 599 ? (int)status : 502;
}

/* The OpenAI usage object; prompt tokens include cache reads and writes. */
static int usage_json(struct buf *b, int64_t input, int64_t output, int64_t cache_read, int64_t cache_creation)
{
    int64_t prompt = input + cache_read + cache_creation;
    return buf_printf(b,
                      "{\"prompt_tokens\":%" PRId64 ",\"completion_tokens\":%" PRId64 ",\"total_tokens\":%" PRId64
                      ",\"prompt_tokens_details\":{\"cached_tokens\":%" PRId64 "}}",
                      prompt, output, prompt + output, cache_read);
}

static int is_block(struct json_object *block, const char *type)
{
    const char *t = xlate_member_str(block, "type", NULL);
    return t && strcmp(t, type) == 0;
}

int anthropic_response(const char *body, size_t len, const char *model, int64_t created, struct buf *out,
                       struct usage *u, char *finish, size_t finish_size)
{
    if (u)
        memset(u, 0, sizeof *u);
    if (finish && finish_size)
        finish[0] = '\0';
    struct json_object *root = xlate_parse_head(body, len), *content = xlate_member(root, "content", json_type_array);
    const char *type = xlate_member_str(root, "type", NULL);
    if (!content || (type && strcmp(type, "message") != 0)) {
        json_object_put(root);
        return -1;
    }
    size_t start = out->len, n = json_object_array_length(content), n_text = 0, n_tools = 0, id_len, model_len;
    struct buf text;
    buf_init(&text, 0);
    for (size_t i = 0; i < n; i++) {
        struct json_object *block = json_object_array_get_idx(content, i);
        size_t tl;
        const char *t = xlate_member_str(block, "text", &tl);
        if (is_block(block, "text") && t) {
            buf_append(&text, t, tl);
            n_text++;
        } else if (is_block(block, "tool_use")) {
            n_tools++;
        }
    }
    const char *id = xlate_member_str(root, "id", &id_len);
    if (!model)
        model = xlate_member_str(root, "model", NULL);
    model_len = model ? strlen(model) : 0;
    const char *reason = anthropic_finish_reason(xlate_member_str(root, "stop_reason", NULL));

    int rc = buf_puts(out, "{\"id\":");
    rc |= buf_json_str(out, id ? id : "", id ? id_len : 0);
    rc |= buf_printf(out, ",\"object\":\"chat.completion\",\"created\":%" PRId64 ",\"model\":", created);
    rc |= buf_json_str(out, model ? model : "", model_len);
    rc |= buf_puts(out, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
    if (n_text || !n_tools)
        rc |= buf_json_str(out, text.data ? text.data : "", text.len);
    else
        rc |= buf_puts(out, "null");
    if (n_tools) {
        rc |= buf_puts(out, ",\"tool_calls\":[");
        for (size_t i = 0, k = 0; i < n; i++) {
            struct json_object *block = json_object_array_get_idx(content, i), *input;
            if (!is_block(block, "tool_use"))
                continue;
            size_t l;
            const char *s = xlate_member_str(block, "id", &l);
            rc |= buf_puts(out, k++ ? ",{\"id\":" : "{\"id\":");
            rc |= buf_json_str(out, s ? s : "", l);
            rc |= buf_puts(out, ",\"type\":\"function\",\"function\":{\"name\":");
            s = xlate_member_str(block, "name", &l);
            rc |= buf_json_str(out, s ? s : "", l);
            rc |= buf_puts(out, ",\"arguments\":");
            s = json_object_object_get_ex(block, "input", &input) && input
                    ? json_object_to_json_string_ext(input, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
                    : "{}";
            rc |= buf_json_str(out, s, strlen(s));
            rc |= buf_puts(out, "}}");
        }
        rc |= buf_puts(out, "]");
    }
    rc |= buf_printf(out, "},\"finish_reason\":\"%s\",\"logprobs\":null}]", reason);
    struct json_object *usage = xlate_member(root, "usage", json_type_object);
    if (usage) {
        int64_t in = 0, o = 0, cr = 0, cc = 0;
        xlate_member_count(usage, "input_tokens", &in);
        xlate_member_count(usage, "output_tokens", &o);
        xlate_member_count(usage, "cache_read_input_tokens", &cr);
        xlate_member_count(usage, "cache_creation_input_tokens", &cc);
        rc |= buf_puts(out, ",\"usage\":");
        rc |= usage_json(out, in, o, cr, cc);
        if (u) {
            u->prompt_tokens = in + cr + cc;
            u->completion_tokens = o;
            u->cache_read_tokens = cr;
            u->cache_creation_tokens = cc;
            u->found = 1;
        }
    }
    rc |= buf_puts(out, "}");
    if (finish && finish_size)
        snprintf(finish, finish_size, "%s", reason);
    buf_free(&text);
    json_object_put(root);
    if (rc) {                   /* over out's max: nothing half-written, nothing counted */
        xlate_rewind(out, start);
        if (u)
            memset(u, 0, sizeof *u);
        if (finish && finish_size)
            finish[0] = '\0';
        return -1;
    }
    return 0;
}

/* ---- stream -------------------------------------------------------------- */

void anthropic_stream_init(struct anthropic_stream *s, const char *model, int64_t created)
{
    memset(s, 0, sizeof *s);
    if (model)
        str_copy(s->model, sizeof s->model, model);
    s->created = created;
    s->last_tool_block = -1;
}

/* What one event handler needs. b is scratch memory for the payload. */
struct stream_call {
    struct anthropic_stream *s;
    struct json_object *data;       /* the event's parsed data, NULL when it is not a JSON object */
    struct usage *u;
    anthropic_emit_fn emit;
    void *ctx;
    struct buf b;
};

static int send(struct stream_call *c)
{
    int rc = c->emit(c->ctx, c->b.data, c->b.len) != 0 ? -1 : 0;
    buf_reset(&c->b);
    return rc;
}

static void chunk_head(struct stream_call *c)
{
    buf_puts(&c->b, "{\"id\":");
    buf_json_str(&c->b, c->s->id, strlen(c->s->id));
    buf_printf(&c->b, ",\"object\":\"chat.completion.chunk\",\"created\":%" PRId64 ",\"model\":", c->s->created);
    buf_json_str(&c->b, c->s->model, strlen(c->s->model));
}

/* A chunk is delta_open(), the delta object, delta_close(). */
static void delta_open(struct stream_call *c)
{
    chunk_head(c);
    buf_puts(&c->b, ",\"choices\":[{\"index\":0,\"delta\":");
}

static int delta_close(struct stream_call *c, const char *finish)
{
    if (finish)
        buf_printf(&c->b, ",\"finish_reason\":\"%s\"}]}", finish);
    else
        buf_puts(&c->b, ",\"finish_reason\":null}]}");
    return send(c);
}

static void stream_usage(struct stream_call *c)
{
    if (!c->u)
        return;
    c->u->prompt_tokens = c->s->input_tokens + c->s->cache_read + c->s->cache_creation;
    c->u->completion_tokens = c->s->output_tokens;
    c->u->cache_read_tokens = c->s->cache_read;
    c->u->cache_creation_tokens = c->s->cache_creation;
    c->u->found = 1;
}

/* Input and cache counts wherever they appear; output counts are cumulative. */
static void read_counts(struct anthropic_stream *s, struct json_object *usage)
{
    xlate_member_count(usage, "input_tokens", &s->input_tokens);
    xlate_member_count(usage, "output_tokens", &s->output_tokens);
    xlate_member_count(usage, "cache_read_input_tokens", &s->cache_read);
    xlate_member_count(usage, "cache_creation_input_tokens", &s->cache_creation);
}

static int on_message_start(struct stream_call *c)
{
    struct json_object *msg = xlate_member(c->data, "message", json_type_object);
    const char *id = xlate_member_str(msg, "id", NULL), *model = xlate_member_str(msg, "model", NULL);
    if (id)
        str_copy(c->s->id, sizeof c->s->id, id);
    if (!c->s->model[0] && model)
        str_copy(c->s->model, sizeof c->s->model, model);
    read_counts(c->s, xlate_member(msg, "usage", json_type_object));
    stream_usage(c);
    delta_open(c);
    buf_puts(&c->b, "{\"role\":\"assistant\",\"content\":\"\"}");
    return delta_close(c, NULL);
}

static long block_index(struct json_object *data)
{
    struct json_object *v = xlate_member(data, "index", json_type_int);
    return v ? (long)json_object_get_int64(v) : -1;
}

/* The OpenAI tool call index of a content block, -1 when it is not a tool. */
static int block_tool(const struct anthropic_stream *s, long index)
{
    long n = (long)(sizeof s->block_tool / sizeof s->block_tool[0]);
    if (index >= 0 && index < n)
        return s->block_tool[index] - 1;
    return index >= 0 && index == s->last_tool_block ? s->last_tool : -1;
}

static int on_block_start(struct stream_call *c)
{
    struct json_object *block = xlate_member(c->data, "content_block", json_type_object);
    if (!is_block(block, "tool_use"))
        return 0;               /* text starts with its first delta; thinking is never asked for */
    long index = block_index(c->data);
    int tool = c->s->n_tools++;
    if (index >= 0 && index < (long)(sizeof c->s->block_tool / sizeof c->s->block_tool[0]))
        c->s->block_tool[index] = tool + 1;
    c->s->last_tool_block = index;
    c->s->last_tool = tool;
    size_t l;
    const char *s;
    delta_open(c);
    buf_printf(&c->b, "{\"tool_calls\":[{\"index\":%d,\"id\":", tool);
    s = xlate_member_str(block, "id", &l);
    buf_json_str(&c->b, s ? s : "", l);
    buf_puts(&c->b, ",\"type\":\"function\",\"function\":{\"name\":");
    s = xlate_member_str(block, "name", &l);
    buf_json_str(&c->b, s ? s : "", l);
    buf_puts(&c->b, ",\"arguments\":\"\"}}]}");
    return delta_close(c, NULL);
}

static int on_block_delta(struct stream_call *c)
{
    struct json_object *delta = xlate_member(c->data, "delta", json_type_object);
    size_t l;
    const char *s;
    if (is_block(delta, "text_delta") && (s = xlate_member_str(delta, "text", &l)) && l) {
        delta_open(c);
        buf_puts(&c->b, "{\"content\":");
        buf_json_str(&c->b, s, l);
        buf_puts(&c->b, "}");
        return delta_close(c, NULL);
    }
    int tool = block_tool(c->s, block_index(c->data));
    if (is_block(delta, "input_json_delta") && tool >= 0 && (s = xlate_member_str(delta, "partial_json", &l)) && l) {
        delta_open(c);
        buf_printf(&c->b, "{\"tool_calls\":[{\"index\":%d,\"function\":{\"arguments\":", tool);
        buf_json_str(&c->b, s, l);
        buf_puts(&c->b, "}}]}");
        return delta_close(c, NULL);
    }
    return 0;                   /* empty pieces, thinking, signatures, citations */
}

/* Anthropic may send more than one message_delta: each is only recorded (the
 * latest non-null stop_reason wins; usage counts are cumulative, so the latest
 * win), and message_stop sends the one finish chunk and the one usage chunk. */
static int on_message_delta(struct stream_call *c)
{
    const char *reason = xlate_member_str(xlate_member(c->data, "delta", json_type_object), "stop_reason", NULL);
    if (reason)
        c->s->finish = anthropic_finish_reason(reason);
    read_counts(c->s, xlate_member(c->data, "usage", json_type_object));
    stream_usage(c);
    return 0;
}

/* The finish chunk, the usage chunk, [DONE]: once, whatever emit answers. */
static int on_message_stop(struct stream_call *c)
{
    c->s->done = 1;
    delta_open(c);
    buf_puts(&c->b, "{}");
    if (delta_close(c, c->s->finish ? c->s->finish : anthropic_finish_reason(NULL)) != 0)
        return -1;
    /* Always sent: the relay drops it when the client did not ask for include_usage. */
    chunk_head(c);
    buf_puts(&c->b, ",\"choices\":[],\"usage\":");
    usage_json(&c->b, c->s->input_tokens, c->s->output_tokens, c->s->cache_read, c->s->cache_creation);
    buf_puts(&c->b, "}");
    if (send(c) != 0)
        return -1;
    buf_puts(&c->b, "[DONE]");
    return send(c);
}

/* R-SSE-4: a mid-stream error is a data: {"error":...} payload. */
static int on_error(struct stream_call *c)
{
    struct json_object *err = xlate_member(c->data, "error", json_type_object);
    size_t l;
    const char *type = xlate_member_str(err, "type", NULL), *msg = xlate_member_str(err, "message", &l);
    if (!type)
        type = "api_error";
    if (!msg) {
        msg = "the upstream stream failed";
        l = strlen(msg);
    }
    c->s->failed = 1;
    error_json(&c->b, type, msg, l, 500);
    return send(c);
}

/* Upstream events, one row each; any other event (ping, content_block_stop,
 * unknown types) emits nothing. needs_data: parse the data first. */
static const struct {
    const char *name;
    int (*fn)(struct stream_call *c);
    int needs_data;
} stream_events[] = {
    {"message_start", on_message_start, 1},
    {"content_block_start", on_block_start, 1},
    {"content_block_delta", on_block_delta, 1},
    {"message_delta", on_message_delta, 1},
    {"message_stop", on_message_stop, 0},
    {"error", on_error, 1},
};

int anthropic_stream_event(struct anthropic_stream *s, const char *event, size_t event_len, const char *data,
                           size_t data_len, struct usage *u, anthropic_emit_fn emit, void *ctx)
{
    if (s->done)
        return 0;               /* nothing follows [DONE] */
    struct stream_call c = {.s = s, .u = u, .emit = emit, .ctx = ctx};
    buf_init(&c.b, 0);
    size_t name_len = event_len;
    const char *name = event;
    if (!event_len) {           /* no event: line; the data's "type" names it */
        c.data = xlate_parse_head(data, data_len);
        name = xlate_member_str(c.data, "type", &name_len);
    }
    int rc = 0;
    for (size_t i = 0; name && i < sizeof stream_events / sizeof stream_events[0]; i++) {
        if (strlen(stream_events[i].name) != name_len || memcmp(stream_events[i].name, name, name_len) != 0)
            continue;
        if (stream_events[i].needs_data && !c.data)
            c.data = xlate_parse_head(data, data_len);
        rc = stream_events[i].fn(&c);
        break;
    }
    json_object_put(c.data);
    buf_free(&c.b);
    return rc;
}
