/* fuzz_messages_request.c: Anthropic Messages body -> OpenAI chat body (fcgi/messages.c,
 * R-ANT-6) on client JSON.
 *
 * The guard reads a body as UTF-8 and strict JSON; any JSON json-c reads is tried too,
 * and then the output has only to be JSON json-c reads.
 *
 * Invariants: a refusal names one of the codes the header lists, a terminated
 * message and a short param (none for request_too_large), and leaves the output
 * exactly as it was; a body with a top-level field the translation does not know,
 * without a non-empty "messages" array or without a positive integer max_tokens is
 * refused. A translation appends one JSON object (strict JSON and UTF-8 when the
 * body passed the guard's rule) with only chat fields: the model asked for (or the
 * body's, or ""), a non-empty "messages" array of system (first only) / user /
 * assistant / tool messages of the right shapes, as many tool messages, tool calls
 * and image parts as the body had tool_result, tool_use and image blocks, the
 * body's max_tokens, temperature / top_p in 0..1, stream and
 * stream_options.include_usage exactly when asked, tool_choice only with tools and
 * continue_final_message only when the last message is the body's assistant
 * prefill. An output cap the translation fits in changes nothing, and one it does
 * not fit in gives request_too_large with the output untouched. */
#include "fuzz.h"

#include "buf.h"
#include "messages.h"

static const char PREFIX[] = "prefix:";

static const char *const known_fields[] = {"model",       "messages", "max_tokens", "system",       "stop_sequences",
                                           "temperature", "top_p",    "top_k",      "metadata",     "tools",
                                           "tool_choice", "stream",   "thinking",   "service_tier"};
static const char *const chat_fields[] = {"model",       "messages",    "max_tokens",          "stop",
                                          "temperature", "top_p",       "top_k",               "user",
                                          "tools",       "tool_choice", "parallel_tool_calls", "continue_final_message",
                                          "add_generation_prompt",      "stream",              "stream_options"};

static int listed(const char *key, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, names[i]) == 0)
            return 1;
    return 0;
}

static int str_is(struct json_object *v, const char *s)
{
    return v && json_object_is_type(v, json_type_string) && strcmp(json_object_get_string(v), s) == 0;
}

/* What the body asks for, counted the way the translation must carry it over. */
struct shape {
    int unknown_field;          /* a top-level key not in known_fields */
    int64_t max_tokens;         /* 0 when not a positive integer */
    int messages;               /* length of a "messages" array, 0 when none */
    int last_is_assistant;
    int tool_results, tool_uses, images;
    int tools;                  /* length of a "tools" array */
};

static void shape_of(struct json_object *msg, struct shape *sh)
{
    memset(sh, 0, sizeof *sh);
    if (!json_object_is_type(msg, json_type_object))
        return;
    json_object_object_foreach(msg, key, val) {
        (void)val;
        if (!listed(key, known_fields, sizeof known_fields / sizeof known_fields[0]))
            sh->unknown_field = 1;
    }
    struct json_object *mt = fuzz_member(msg, "max_tokens", json_type_int);
    if (mt && json_object_get_int64(mt) >= 1)
        sh->max_tokens = json_object_get_int64(mt);
    struct json_object *tools = fuzz_member(msg, "tools", json_type_array);
    sh->tools = tools ? (int)json_object_array_length(tools) : 0;
    struct json_object *msgs = fuzz_member(msg, "messages", json_type_array);
    if (!msgs)
        return;
    sh->messages = (int)json_object_array_length(msgs);
    for (size_t i = 0; i < json_object_array_length(msgs); i++) {
        struct json_object *m = json_object_array_get_idx(msgs, i);
        struct json_object *role = fuzz_member(m, "role", json_type_string);
        sh->last_is_assistant = str_is(role, "assistant");
        struct json_object *content = fuzz_member(m, "content", json_type_array);
        for (size_t k = 0; content && k < json_object_array_length(content); k++) {
            struct json_object *type = fuzz_member(json_object_array_get_idx(content, k), "type", json_type_string);
            sh->tool_results += str_is(type, "tool_result");
            sh->tool_uses += str_is(type, "tool_use");
            sh->images += str_is(type, "image");
        }
    }
}

static void check_fail(const struct xlate_fail *f, const struct buf *out)
{
    static const enum error_code codes[] = {ERR_UNSUPPORTED_PARAMETER, ERR_INVALID_TYPE, ERR_INVALID_VALUE,
                                            ERR_MISSING_FIELD, ERR_REQUEST_TOO_LARGE};
    int known = 0;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        known |= f->code == codes[i];
    FUZZ_CHECK(known, "refused with code %d", (int)f->code);
    FUZZ_CHECK(memchr(f->message, '\0', sizeof f->message) && f->message[0], "message not set or not terminated");
    if (f->param == f->param_buf)
        FUZZ_CHECK(memchr(f->param_buf, '\0', sizeof f->param_buf), "param_buf not terminated");
    if (f->param)
        FUZZ_CHECK(strlen(f->param) < sizeof f->param_buf, "param \"%s\"", f->param);  /* "" names a key "" */
    if (f->code == ERR_REQUEST_TOO_LARGE)
        FUZZ_CHECK(!f->param, "request_too_large with param %s", f->param);
    FUZZ_CHECK(out->len == sizeof PREFIX - 1 && memcmp(out->data, PREFIX, out->len) == 0 &&
                   out->data[out->len] == '\0',
               "a refusal left %zu bytes behind", out->len);
}

/* One chat message of the output; counts its tool calls and image parts. */
static void check_message(struct json_object *m, size_t i, int *tool_msgs, int *calls, int *images)
{
    FUZZ_CHECK(json_object_is_type(m, json_type_object), "message %zu is no object", i);
    struct json_object *role = fuzz_member(m, "role", json_type_string), *v;
    FUZZ_CHECK(role, "message %zu without a role", i);
    const char *r = json_object_get_string(role);
    json_object_object_foreach(m, key, val) {
        (void)val;
        FUZZ_CHECK(strcmp(key, "role") == 0 || strcmp(key, "content") == 0 ||
                       (strcmp(r, "assistant") == 0 && strcmp(key, "tool_calls") == 0) ||
                       (strcmp(r, "tool") == 0 && strcmp(key, "tool_call_id") == 0),
                   "message %zu (%s) has key %s", i, r, key);
    }
    if (strcmp(r, "system") == 0) {
        FUZZ_CHECK(i == 0, "a system message at %zu", i);
        FUZZ_CHECK(fuzz_member(m, "content", json_type_string), "system content");
    } else if (strcmp(r, "tool") == 0) {
        FUZZ_CHECK(fuzz_member(m, "tool_call_id", json_type_string) && fuzz_member(m, "content", json_type_string),
                   "tool message %zu", i);
        (*tool_msgs)++;
    } else if (strcmp(r, "user") == 0) {
        if (!fuzz_member(m, "content", json_type_string)) {
            struct json_object *parts = fuzz_member(m, "content", json_type_array);
            FUZZ_CHECK(parts && json_object_array_length(parts) > 0, "user message %zu content", i);
            for (size_t k = 0; k < json_object_array_length(parts); k++) {
                struct json_object *p = json_object_array_get_idx(parts, k);
                struct json_object *type = fuzz_member(p, "type", json_type_string);
                if (str_is(type, "text")) {
                    FUZZ_CHECK(fuzz_member(p, "text", json_type_string), "text part %zu.%zu", i, k);
                } else {
                    FUZZ_CHECK(str_is(type, "image_url"), "part %zu.%zu of type %s", i, k,
                               type ? json_object_get_string(type) : "(none)");
                    struct json_object *iu = fuzz_member(p, "image_url", json_type_object);
                    FUZZ_CHECK(fuzz_member(iu, "url", json_type_string), "image part %zu.%zu without a url", i, k);
                    (*images)++;
                }
            }
        }
    } else {
        FUZZ_CHECK(strcmp(r, "assistant") == 0, "message %zu has role %s", i, r);
        struct json_object *tc = fuzz_member(m, "tool_calls", json_type_array);
        FUZZ_CHECK(!json_object_object_get_ex(m, "tool_calls", NULL) || (tc && json_object_array_length(tc) > 0),
                   "assistant %zu: tool_calls not a non-empty array", i);
        FUZZ_CHECK(json_object_object_get_ex(m, "content", &v) &&
                       (json_object_is_type(v, json_type_string) || (!v && tc)),
                   "assistant %zu content (null only with tool calls)", i);
        for (size_t k = 0; tc && k < json_object_array_length(tc); k++) {
            struct json_object *c = json_object_array_get_idx(tc, k);
            struct json_object *fn = fuzz_member(c, "function", json_type_object);
            struct json_object *args = fuzz_member(fn, "arguments", json_type_string);
            FUZZ_CHECK(fuzz_member(c, "id", json_type_string) && str_is(fuzz_member(c, "type", json_type_string),
                                                                        "function") &&
                           fuzz_member(fn, "name", json_type_string) && args,
                       "tool call %zu.%zu", i, k);
            struct json_object *a = fuzz_json(json_object_get_string(args), (size_t)json_object_get_string_len(args), 0);
            FUZZ_CHECK(a && json_object_is_type(a, json_type_object), "tool call %zu.%zu arguments %s", i, k,
                       json_object_get_string(args));
            json_object_put(a);
            (*calls)++;
        }
    }
}

static void check_body(const char *s, size_t n, struct json_object *msg, const struct shape *sh, const char *model,
                       int strict, int stream)
{
    struct json_object *o = fuzz_json(s, n, strict);
    FUZZ_CHECK(o && json_object_is_type(o, json_type_object), "not a JSON object (strict %d): %.*s", strict, (int)n,
               s);
    if (strict)
        FUZZ_CHECK(fuzz_utf8(s, n), "not UTF-8: %.*s", (int)n, s);
    json_object_object_foreach(o, key, val) {
        (void)val;
        FUZZ_CHECK(listed(key, chat_fields, sizeof chat_fields / sizeof chat_fields[0]), "chat field %s", key);
    }
    struct json_object *m = fuzz_member(o, "model", json_type_string);
    FUZZ_CHECK(m, "no model");
    struct json_object *own = fuzz_member(msg, "model", json_type_string);
    const char *want = model ? model : own ? json_object_get_string(own) : "";
    /* a model with a NUL or stray bytes is written escaped: compare only plain ones */
    if (fuzz_utf8(want, strlen(want)) && (model || !own || (size_t)json_object_get_string_len(own) == strlen(want)))
        FUZZ_CHECK(strcmp(json_object_get_string(m), want) == 0, "model %s, want %s", json_object_get_string(m), want);

    struct json_object *mt = fuzz_member(o, "max_tokens", json_type_int);
    FUZZ_CHECK(mt && json_object_get_int64(mt) == sh->max_tokens, "max_tokens %s, body's %lld",
               mt ? json_object_get_string(mt) : "(none)", (long long)sh->max_tokens);

    struct json_object *msgs = fuzz_member(o, "messages", json_type_array);
    FUZZ_CHECK(msgs && json_object_array_length(msgs) > 0, "no messages: %.*s", (int)n, s);
    int tool_msgs = 0, calls = 0, images = 0;
    size_t nm = json_object_array_length(msgs);
    for (size_t i = 0; i < nm; i++)
        check_message(json_object_array_get_idx(msgs, i), i, &tool_msgs, &calls, &images);
    FUZZ_CHECK(tool_msgs == sh->tool_results && calls == sh->tool_uses && images == sh->images,
               "tool messages %d / tool_result %d, calls %d / tool_use %d, images %d / %d", tool_msgs,
               sh->tool_results, calls, sh->tool_uses, images, sh->images);

    static const char *const units[] = {"temperature", "top_p"};
    for (size_t i = 0; i < 2; i++) {
        struct json_object *v;
        if (json_object_object_get_ex(o, units[i], &v)) {
            FUZZ_CHECK(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double), "%s",
                       units[i]);
            double d = json_object_get_double(v);
            FUZZ_CHECK(d >= 0 && d <= 1, "%s %g", units[i], d);
        }
    }
    struct json_object *top_k;
    if (json_object_object_get_ex(o, "top_k", &top_k))
        FUZZ_CHECK(json_object_is_type(top_k, json_type_int) && json_object_get_int64(top_k) >= 0, "top_k");

    struct json_object *tools = fuzz_member(o, "tools", json_type_array);
    FUZZ_CHECK(!json_object_object_get_ex(o, "tools", NULL) || (tools && (int)json_object_array_length(tools) ==
                                                                              sh->tools && sh->tools > 0),
               "tools: %d in the body", sh->tools);
    for (size_t k = 0; tools && k < json_object_array_length(tools); k++) {
        struct json_object *t = json_object_array_get_idx(tools, k);
        struct json_object *fn = fuzz_member(t, "function", json_type_object);
        FUZZ_CHECK(str_is(fuzz_member(t, "type", json_type_string), "function") &&
                       fuzz_member(fn, "name", json_type_string) && fuzz_member(fn, "parameters", json_type_object),
                   "tool %zu", k);
    }
    FUZZ_CHECK(!json_object_object_get_ex(o, "tool_choice", NULL) || tools, "tool_choice without tools");
    struct json_object *ptc = fuzz_member(o, "parallel_tool_calls", json_type_boolean);
    FUZZ_CHECK(!json_object_object_get_ex(o, "parallel_tool_calls", NULL) ||
                   (ptc && !json_object_get_boolean(ptc) && json_object_object_get_ex(o, "tool_choice", NULL)),
               "parallel_tool_calls");

    struct json_object *cfm = fuzz_member(o, "continue_final_message", json_type_boolean);
    struct json_object *agp = fuzz_member(o, "add_generation_prompt", json_type_boolean);
    FUZZ_CHECK(!!json_object_object_get_ex(o, "continue_final_message", NULL) ==
                   !!json_object_object_get_ex(o, "add_generation_prompt", NULL),
               "continue_final_message without add_generation_prompt or the reverse");
    if (cfm) {
        struct json_object *last = json_object_array_get_idx(msgs, nm - 1);
        FUZZ_CHECK(json_object_get_boolean(cfm) && agp && !json_object_get_boolean(agp), "prefill flags");
        FUZZ_CHECK(sh->last_is_assistant && str_is(fuzz_member(last, "role", json_type_string), "assistant") &&
                       !fuzz_member(last, "tool_calls", json_type_array),
                   "continue_final_message without an assistant prefill last");
    } else {
        FUZZ_CHECK(!json_object_object_get_ex(o, "continue_final_message", NULL), "continue_final_message not bool");
    }

    struct json_object *st = fuzz_member(o, "stream", json_type_boolean);
    struct json_object *inc = fuzz_member(fuzz_member(o, "stream_options", json_type_object), "include_usage",
                                          json_type_boolean);
    if (stream)
        FUZZ_CHECK(st && json_object_get_boolean(st) && inc && json_object_get_boolean(inc), "stream, include_usage");
    else
        FUZZ_CHECK(!json_object_object_get_ex(o, "stream", NULL) && !json_object_object_get_ex(o, "stream_options", NULL),
                   "stream fields in a non-stream request");
    json_object_put(o);
}

static void translate(struct json_object *msg, int strict, const char *model, int stream)
{
    struct shape sh;
    shape_of(msg, &sh);
    struct buf out;
    struct xlate_fail f;
    memset(&f, 0x5a, sizeof f);
    buf_init(&out, 0);
    buf_puts(&out, PREFIX);
    int rc = messages_request(msg, model, stream, &out, &f);
    FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
    if (rc != 0) {
        check_fail(&f, &out);
        buf_free(&out);
        return;
    }
    FUZZ_CHECK(f.code == ERR_NONE, "success with code %d", (int)f.code);
    FUZZ_CHECK(!sh.unknown_field, "a body with an unknown top-level field was translated");
    FUZZ_CHECK(sh.messages > 0 && sh.max_tokens >= 1, "translated without messages (%d) or max_tokens (%lld)",
               sh.messages, (long long)sh.max_tokens);
    FUZZ_CHECK(out.len > sizeof PREFIX - 1 && memcmp(out.data, PREFIX, sizeof PREFIX - 1) == 0 &&
                   out.data[out.len] == '\0',
               "prefix lost or not terminated");
    check_body(out.data + sizeof PREFIX - 1, out.len - (sizeof PREFIX - 1), msg, &sh, model, strict, stream);

    /* The same under caps: exactly enough, and one byte short. */
    struct buf capped;
    struct xlate_fail f2;
    buf_init(&capped, out.len);
    buf_puts(&capped, PREFIX);
    FUZZ_CHECK(messages_request(msg, model, stream, &capped, &f2) == 0 && capped.len == out.len &&
                   memcmp(capped.data, out.data, out.len) == 0,
               "a cap the body fits in changed it");
    buf_free(&capped);
    buf_init(&capped, out.len - 1);
    buf_puts(&capped, PREFIX);
    FUZZ_CHECK(messages_request(msg, model, stream, &capped, &f2) == -1 && f2.code == ERR_REQUEST_TOO_LARGE,
               "a body over the cap was not refused as too large (code %d)", (int)f2.code);
    check_fail(&f2, &capped);
    buf_free(&capped);
    buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    struct json_object *msg = fuzz_json((const char *)data, size, 0);
    if (!msg)
        return 0;
    /* What the guard lets through (fcgi/guard.c guard_parse): UTF-8, strict JSON. */
    struct json_object *strict = fuzz_utf8((const char *)data, size) ? fuzz_json((const char *)data, size, 1) : NULL;
    int is_strict = strict != NULL;
    json_object_put(strict);
    translate(msg, is_strict, "gpt-x", 0);
    translate(msg, is_strict, "gpt-x", 1);
    translate(msg, is_strict, NULL, 0);
    json_object_put(msg);
    return 0;
}
