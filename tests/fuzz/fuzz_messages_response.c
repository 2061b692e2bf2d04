/* fuzz_messages_response.c: an OpenAI upstream's answer bodies -> Anthropic shapes
 * (fcgi/messages_stream.c: messages_response and messages_error, R-ANT-6) on any
 * bytes an upstream may send.
 *
 * Invariants: a translated answer is one strict JSON, UTF-8 Message object (type
 * "message", role "assistant", an id "msg_...", the model asked for, a content
 * array of at most one thinking block, then at most one text block, then tool_use
 * blocks with an id, a name and an input object; a stop_reason from the table,
 * equal to the one returned, with a stop_sequence string exactly for
 * "stop_sequence") whose usage is non-negative, never reports cache writes and
 * matches the usage returned (input_tokens = prompt - cached); a body whose
 * "object" is another string is no Message; a refusal leaves the output as it was,
 * *u zeroed and stop_reason ""; an output cap the Message fits in changes nothing,
 * one byte less is a refusal. An error answer always becomes a strict JSON, UTF-8
 * {"type":"error","error":{"type":...,"message":...}} with the type for the status
 * returned (the status itself when 400..599, else 502) and the upstream's message
 * when it gave one. */
#include "fuzz.h"

#include "buf.h"
#include "messages.h"

static const char PREFIX[] = "[";

static int str_is(struct json_object *v, const char *s)
{
    return v && json_object_is_type(v, json_type_string) && strcmp(json_object_get_string(v), s) == 0;
}

static int64_t int_member(struct json_object *o, const char *key)
{
    struct json_object *v = fuzz_member(o, key, json_type_int);
    FUZZ_CHECK(v, "no integer %s", key);
    return json_object_get_int64(v);
}

static void check_refused(const struct buf *out, const struct usage *u, const char *stop)
{
    static const struct usage zero;
    FUZZ_CHECK(out->len == 1 && out->data[0] == '[' && out->data[1] == '\0', "a refusal left bytes behind");
    FUZZ_CHECK(memcmp(u, &zero, sizeof zero) == 0, "a refusal left usage");
    FUZZ_CHECK(stop[0] == '\0', "a refusal left stop_reason %s", stop);
}

static void check_message(const char *s, size_t n, struct json_object *body, const char *model,
                          const struct usage *u, const char *stop)
{
    FUZZ_CHECK(fuzz_utf8(s, n), "not UTF-8: %.*s", (int)n, s);
    struct json_object *o = fuzz_json(s, n, 1);
    FUZZ_CHECK(o && json_object_is_type(o, json_type_object), "not strict JSON: %.*s", (int)n, s);
    struct json_object *id = fuzz_member(o, "id", json_type_string);
    FUZZ_CHECK(id && strncmp(json_object_get_string(id), "msg_", 4) == 0, "id");
    FUZZ_CHECK(str_is(fuzz_member(o, "type", json_type_string), "message"), "type");
    FUZZ_CHECK(str_is(fuzz_member(o, "role", json_type_string), "assistant"), "role");
    struct json_object *m = fuzz_member(o, "model", json_type_string);
    FUZZ_CHECK(m, "model");
    if (model)
        FUZZ_CHECK(strcmp(json_object_get_string(m), model) == 0, "model %s", json_object_get_string(m));

    struct json_object *content = fuzz_member(o, "content", json_type_array);
    FUZZ_CHECK(content, "no content array");
    int stage = 0;      /* 1 thinking seen, 2 text seen, 3 tool_use seen */
    for (size_t i = 0; i < json_object_array_length(content); i++) {
        struct json_object *b = json_object_array_get_idx(content, i);
        struct json_object *type = fuzz_member(b, "type", json_type_string), *t;
        if (str_is(type, "thinking")) {
            FUZZ_CHECK(stage < 1, "thinking block %zu after another block", i);
            t = fuzz_member(b, "thinking", json_type_string);
            FUZZ_CHECK(t && json_object_get_string_len(t) > 0 &&
                           str_is(fuzz_member(b, "signature", json_type_string), ""),
                       "thinking block %zu", i);
            stage = 1;
        } else if (str_is(type, "text")) {
            FUZZ_CHECK(stage < 2, "text block %zu after text or tool_use", i);
            t = fuzz_member(b, "text", json_type_string);
            FUZZ_CHECK(t && json_object_get_string_len(t) > 0, "text block %zu empty", i);
            stage = 2;
        } else {
            FUZZ_CHECK(str_is(type, "tool_use"), "block %zu of type %s", i, type ? json_object_get_string(type) : "?");
            struct json_object *tid = fuzz_member(b, "id", json_type_string);
            FUZZ_CHECK(tid && json_object_get_string_len(tid) > 0 && fuzz_member(b, "name", json_type_string) &&
                           fuzz_member(b, "input", json_type_object),
                       "tool_use block %zu", i);
            stage = 3;
        }
    }

    struct json_object *sr = fuzz_member(o, "stop_reason", json_type_string), *seq;
    FUZZ_CHECK(sr && strcmp(json_object_get_string(sr), stop) == 0, "stop_reason %s, returned %s",
               sr ? json_object_get_string(sr) : "(none)", stop);
    static const char *const reasons[] = {"end_turn", "max_tokens", "tool_use", "refusal", "stop_sequence"};
    int known = 0;
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        known |= strcmp(stop, reasons[i]) == 0;
    FUZZ_CHECK(known, "stop_reason %s", stop);
    FUZZ_CHECK(json_object_object_get_ex(o, "stop_sequence", &seq), "no stop_sequence");
    FUZZ_CHECK(strcmp(stop, "stop_sequence") == 0 ? json_object_is_type(seq, json_type_string) : !seq,
               "stop_sequence for %s", stop);

    struct json_object *usage = fuzz_member(o, "usage", json_type_object);
    FUZZ_CHECK(usage, "no usage");
    int64_t in = int_member(usage, "input_tokens"), outt = int_member(usage, "output_tokens");
    int64_t cw = int_member(usage, "cache_creation_input_tokens"), cr = int_member(usage, "cache_read_input_tokens");
    FUZZ_CHECK(in >= 0 && outt >= 0 && cr >= 0 && cw == 0, "usage %lld/%lld/%lld/%lld", (long long)in,
               (long long)outt, (long long)cw, (long long)cr);
    if (u->found) {
        FUZZ_CHECK(u->prompt_tokens >= 0 && u->prompt_tokens <= USAGE_COUNT_MAX && u->completion_tokens >= 0 &&
                       u->completion_tokens <= USAGE_COUNT_MAX && u->cache_read_tokens >= 0 &&
                       u->cache_read_tokens <= u->prompt_tokens && u->reasoning_tokens >= 0 &&
                       u->cache_creation_tokens == 0,
                   "usage returned %lld/%lld/%lld/%lld", (long long)u->prompt_tokens, (long long)u->completion_tokens,
                   (long long)u->cache_read_tokens, (long long)u->reasoning_tokens);
        FUZZ_CHECK(in == u->prompt_tokens - u->cache_read_tokens && outt == u->completion_tokens &&
                       cr == u->cache_read_tokens,
                   "body usage differs from the usage returned");
    } else {
        static const struct usage zero;
        FUZZ_CHECK(memcmp(u, &zero, sizeof zero) == 0, "usage filled though not found");
        FUZZ_CHECK(in == 0 && outt == 0 && cr == 0, "counts without usage");
    }
    /* Only a chat.completion (or an answer that does not say) is a Message. */
    struct json_object *object;
    if (body && json_object_object_get_ex(body, "object", &object) && json_object_is_type(object, json_type_string))
        FUZZ_CHECK(str_is(object, "chat.completion"), "a %s became a Message", json_object_get_string(object));
    json_object_put(o);
}

static void check_response(const uint8_t *data, size_t size, struct json_object *body, const char *model)
{
    struct buf out;
    struct usage u;
    char stop[32];
    memset(&u, 0x5a, sizeof u);
    memset(stop, 'x', sizeof stop);
    buf_init(&out, 0);
    buf_puts(&out, PREFIX);
    int rc = messages_response((const char *)data, size, model, &out, &u, stop, sizeof stop);
    FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
    FUZZ_CHECK(memchr(stop, '\0', sizeof stop), "stop_reason not terminated");
    if (rc != 0) {
        check_refused(&out, &u, stop);
        buf_free(&out);
        return;
    }
    FUZZ_CHECK(out.data[out.len] == '\0', "not terminated");
    check_message(out.data + 1, out.len - 1, body, model, &u, stop);

    /* The same under caps: exactly enough, and one byte short. */
    struct buf capped;
    struct usage u2;
    char stop2[32];
    buf_init(&capped, out.len);
    buf_puts(&capped, PREFIX);
    FUZZ_CHECK(messages_response((const char *)data, size, model, &capped, &u2, stop2, sizeof stop2) == 0 &&
                   capped.len == out.len && memcmp(capped.data, out.data, out.len) == 0 &&
                   memcmp(&u, &u2, sizeof u) == 0 && strcmp(stop, stop2) == 0,
               "a cap the Message fits in changed it");
    buf_free(&capped);
    buf_init(&capped, out.len - 1);
    buf_puts(&capped, PREFIX);
    memset(&u2, 0x5a, sizeof u2);
    FUZZ_CHECK(messages_response((const char *)data, size, model, &capped, &u2, stop2, sizeof stop2) == -1,
               "a Message over the cap was written");
    check_refused(&capped, &u2, stop2);
    buf_free(&capped);
    buf_free(&out);
}

/* The message messages_error must carry: the header's order of places, or NULL. */
static struct json_object *expected_message(struct json_object *body)
{
    struct json_object *err = fuzz_member(body, "error", json_type_object), *v;
    if ((v = fuzz_member(err, "message", json_type_string)) && json_object_get_string_len(v) > 0)
        return v;
    static const char *const tops[] = {"error", "message", "detail"};
    for (size_t i = 0; i < 3; i++)
        if ((v = fuzz_member(body, tops[i], json_type_string)) && json_object_get_string_len(v) > 0)
            return v;
    return NULL;
}

static void check_error(const uint8_t *data, size_t size, struct json_object *body, long status, int capped)
{
    struct buf out;
    buf_init(&out, 0);
    buf_puts(&out, PREFIX);
    int st = messages_error(status, (const char *)data, size, &out);
    FUZZ_CHECK(st == (status >= 400 && status <= 599 ? status : 502), "status %d for %ld", st, status);
    FUZZ_CHECK(out.len > 1 && out.data[0] == '[' && out.data[out.len] == '\0', "prefix lost");
    const char *s = out.data + 1;
    size_t n = out.len - 1;
    FUZZ_CHECK(fuzz_utf8(s, n), "not UTF-8: %.*s", (int)n, s);
    struct json_object *o = fuzz_json(s, n, 1);
    FUZZ_CHECK(o && str_is(fuzz_member(o, "type", json_type_string), "error"), "not strict JSON {\"type\":\"error\"}: %s",
               s);
    struct json_object *err = fuzz_member(o, "error", json_type_object);
    struct json_object *type = fuzz_member(err, "type", json_type_string);
    struct json_object *msg = fuzz_member(err, "message", json_type_string);
    FUZZ_CHECK(type && msg, "error.type, error.message: %s", s);
    FUZZ_CHECK(strcmp(json_object_get_string(type), errors_anthropic_type(st)) == 0, "type %s for %d",
               json_object_get_string(type), st);
    struct json_object *wv = expected_message(body);
    char generic[64];
    snprintf(generic, sizeof generic, "upstream answered %d", st);
    const char *want = wv ? json_object_get_string(wv) : generic;
    /* empty only when the upstream's own message starts with a NUL (written up to it) */
    FUZZ_CHECK(json_object_get_string_len(msg) > 0 || !*want, "an empty message: %s", s);
    /* A message with a NUL or stray bytes is written cut or mended: compare plain ones. */
    if (!wv || ((size_t)json_object_get_string_len(wv) == strlen(want) && fuzz_utf8(want, strlen(want))))
        FUZZ_CHECK(strcmp(json_object_get_string(msg), want) == 0, "message \"%s\", want \"%s\"",
                   json_object_get_string(msg), want);
    json_object_put(o);

    buf_free(&out);
    if (!capped)
        return;
    /* Over a cap: the output is left as it was. */
    buf_init(&out, 8);
    buf_puts(&out, PREFIX);
    messages_error(status, (const char *)data, size, &out);
    FUZZ_CHECK(out.len == 1 && out.data[0] == '[' && out.data[1] == '\0', "a capped error left bytes behind");
    buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    /* As messages_stream.c reads it: json-c's default, whitespace after. */
    struct json_object *body = fuzz_json((const char *)data, size, 0);
    if (body && !json_object_is_type(body, json_type_object)) {
        json_object_put(body);
        body = NULL;
    }
    check_response(data, size, body, "claude-x");
    check_response(data, size, body, NULL);
    static const long statuses[] = {400, 401, 403, 404, 413, 429, 500, 503, 529, 200, 0, -1};
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        check_error(data, size, body, statuses[i], statuses[i] == 500);
    json_object_put(body);
    return 0;
}
