/* fuzz_anthropic_request.c: OpenAI chat body -> Anthropic Messages body (fcgi/anthropic.c,
 * R-ANT-3) on client JSON, parsed as the guard parses it.
 *
 * Invariants: a refusal names an error code and a terminated message and leaves the
 * output exactly as it was; a translation appends one JSON object (strict JSON when
 * the client's body was strict JSON) with the model asked for, a positive or given
 * max_tokens, and a non-empty "messages" array of user/assistant turns that
 * alternate and each carry a non-empty "content" array; "stream" is there exactly
 * when asked; an output cap that the translation fits in changes nothing, and one
 * it does not fit in gives request_too_large with the output untouched. */
#include "fuzz.h"

#include "anthropic.h"
#include "buf.h"

static const char PREFIX[] = "prefix:";

static void check_fail(const struct xlate_fail *f, const struct buf *out)
{
    FUZZ_CHECK((unsigned)f->code < ERR_COUNT, "refused with code %d", (int)f->code);
    FUZZ_CHECK(memchr(f->message, '\0', sizeof f->message) && f->message[0], "message not set or not terminated");
    if (f->param)
        FUZZ_CHECK(strlen(f->param) < 4096, "param");
    FUZZ_CHECK(out->len == sizeof PREFIX - 1 && memcmp(out->data, PREFIX, out->len) == 0 &&
                   out->data[out->len] == '\0',
               "a refusal left %zu bytes behind", out->len);
}

static void check_body(const char *s, size_t n, const char *model, int strict, int stream)
{
    struct json_object *o = fuzz_json(s, n, strict);
    FUZZ_CHECK(o && json_object_is_type(o, json_type_object), "not a JSON object (strict %d): %.*s", strict, (int)n,
               s);
    struct json_object *m = fuzz_member(o, "model", json_type_string);
    FUZZ_CHECK(m, "no model");
    if (model)
        FUZZ_CHECK(strcmp(json_object_get_string(m), model) == 0, "model %s", json_object_get_string(m));
    FUZZ_CHECK(fuzz_member(o, "max_tokens", json_type_int), "no integer max_tokens");
    struct json_object *msgs = fuzz_member(o, "messages", json_type_array);
    FUZZ_CHECK(msgs && json_object_array_length(msgs) > 0, "no messages");
    const char *prev = NULL;
    for (size_t i = 0; i < json_object_array_length(msgs); i++) {
        struct json_object *t = json_object_array_get_idx(msgs, i);
        struct json_object *role = fuzz_member(t, "role", json_type_string);
        struct json_object *content = fuzz_member(t, "content", json_type_array);
        FUZZ_CHECK(role, "turn %zu without a role", i);
        const char *r = json_object_get_string(role);
        FUZZ_CHECK(strcmp(r, "user") == 0 || strcmp(r, "assistant") == 0, "turn %zu role %s", i, r);
        FUZZ_CHECK(!prev || strcmp(prev, r) != 0, "turns %zu and %zu are both %s", i - 1, i, r);
        FUZZ_CHECK(content && json_object_array_length(content) > 0, "turn %zu without content", i);
        prev = r;
    }
    struct json_object *st = fuzz_member(o, "stream", json_type_boolean);
    FUZZ_CHECK(stream ? st && json_object_get_boolean(st) : !json_object_object_get_ex(o, "stream", NULL),
               "stream %d", stream);
    json_object_put(o);
}

static void translate(struct json_object *chat, int strict, const char *model, int stream)
{
    struct buf out;
    struct xlate_fail f;
    buf_init(&out, 0);
    buf_puts(&out, PREFIX);
    int rc = anthropic_request(chat, model, 1024, stream, &out, &f);
    FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
    if (rc != 0) {
        check_fail(&f, &out);
        buf_free(&out);
        return;
    }
    FUZZ_CHECK(f.code == ERR_NONE, "success with code %d", (int)f.code);
    FUZZ_CHECK(out.len > sizeof PREFIX - 1 && memcmp(out.data, PREFIX, sizeof PREFIX - 1) == 0, "prefix lost");
    const char *body = out.data + sizeof PREFIX - 1;
    size_t n = out.len - (sizeof PREFIX - 1);
    check_body(body, n, model, strict, stream);

    /* The same under caps: exactly enough, and one byte short. */
    struct buf capped;
    struct xlate_fail f2;
    buf_init(&capped, out.len);
    buf_puts(&capped, PREFIX);
    FUZZ_CHECK(anthropic_request(chat, model, 1024, stream, &capped, &f2) == 0 && capped.len == out.len &&
                   memcmp(capped.data, out.data, out.len) == 0,
               "a cap the body fits in changed it");
    buf_free(&capped);
    buf_init(&capped, out.len - 1);
    buf_puts(&capped, PREFIX);
    FUZZ_CHECK(anthropic_request(chat, model, 1024, stream, &capped, &f2) == -1 && f2.code == ERR_REQUEST_TOO_LARGE,
               "a body over the cap was not refused as too large (code %d)", (int)f2.code);
    check_fail(&f2, &capped);
    buf_free(&capped);
    buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    /* The guard parses leniently (json-c's default); remember whether it was strict JSON. */
    struct json_object *chat = fuzz_json((const char *)data, size, 0);
    if (!chat)
        return 0;
    struct json_object *strict = fuzz_json((const char *)data, size, 1);
    int is_strict = strict != NULL;
    json_object_put(strict);
    translate(chat, is_strict, "claude-x", 0);
    translate(chat, is_strict, "claude-x", 1);
    translate(chat, is_strict, NULL, 0);
    json_object_put(chat);
    return 0;
}
