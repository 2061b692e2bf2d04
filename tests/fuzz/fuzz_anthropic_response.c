/* fuzz_anthropic_response.c: an Anthropic upstream's answer bodies -> OpenAI shapes
 * (fcgi/anthropic_stream.c: anthropic_response and anthropic_error, R-ANT-1, R-ANT-2)
 * on any bytes an upstream may send.
 *
 * Invariants: a translated Message is one strict JSON chat.completion object (one
 * choice, an assistant message, a finish reason from the table) with non-negative
 * usage that matches the usage returned; a body that is no Message leaves the
 * output as it was; an error answer always becomes a strict JSON {"error":{...}}
 * with string message, type and code, and a status the OpenAI SDKs know
 * (400..599, or 502). */
#include "fuzz.h"

#include "anthropic.h"
#include "buf.h"

static const char PREFIX[] = "[";

static void check_response(const uint8_t *data, size_t size, const char *model)
{
    struct buf out;
    struct usage u;
    char finish[32];
    buf_init(&out, 0);
    buf_puts(&out, PREFIX);
    int rc = anthropic_response((const char *)data, size, model, 1700000000, &out, &u, finish, sizeof finish);
    FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
    if (rc != 0) {
        FUZZ_CHECK(out.len == 1 && out.data[0] == '[' && out.data[1] == '\0', "a refusal left bytes behind");
        buf_free(&out);
        return;
    }
    const char *s = out.data + 1;
    size_t n = out.len - 1;
    struct json_object *o = fuzz_json(s, n, 1);
    FUZZ_CHECK(o && json_object_is_type(o, json_type_object), "not strict JSON: %.*s", (int)n, s);
    struct json_object *obj = fuzz_member(o, "object", json_type_string);
    FUZZ_CHECK(obj && strcmp(json_object_get_string(obj), "chat.completion") == 0, "object");
    FUZZ_CHECK(fuzz_member(o, "id", json_type_string) && fuzz_member(o, "model", json_type_string), "id, model");
    if (model)
        FUZZ_CHECK(strcmp(json_object_get_string(fuzz_member(o, "model", json_type_string)), model) == 0, "model");
    struct json_object *choices = fuzz_member(o, "choices", json_type_array);
    FUZZ_CHECK(choices && json_object_array_length(choices) == 1, "choices");
    struct json_object *c0 = json_object_array_get_idx(choices, 0);
    struct json_object *msg = fuzz_member(c0, "message", json_type_object);
    struct json_object *fr = fuzz_member(c0, "finish_reason", json_type_string);
    FUZZ_CHECK(msg && fr, "message, finish_reason");
    FUZZ_CHECK(strcmp(json_object_get_string(fr), finish) == 0, "finish %s vs %s", json_object_get_string(fr), finish);
    static const char *const finishes[] = {"stop", "length", "tool_calls", "content_filter"};
    int known = 0;
    for (size_t i = 0; i < sizeof finishes / sizeof finishes[0]; i++)
        known |= strcmp(finish, finishes[i]) == 0;
    FUZZ_CHECK(known, "finish reason %s", finish);
    struct json_object *usage = fuzz_member(o, "usage", json_type_object);
    FUZZ_CHECK(!!usage == !!u.found, "usage object %d, found %d", !!usage, u.found);
    if (usage) {
        struct json_object *pt = fuzz_member(usage, "prompt_tokens", json_type_int);
        struct json_object *ct = fuzz_member(usage, "completion_tokens", json_type_int);
        FUZZ_CHECK(pt && ct, "usage counts");
        FUZZ_CHECK(u.prompt_tokens >= 0 && u.completion_tokens >= 0, "negative usage %lld/%lld",
                   (long long)u.prompt_tokens, (long long)u.completion_tokens);
        FUZZ_CHECK(json_object_get_int64(pt) == u.prompt_tokens && json_object_get_int64(ct) == u.completion_tokens,
                   "body usage differs from the usage returned");
    }
    json_object_put(o);
    buf_free(&out);
}

static void check_error(const uint8_t *data, size_t size, long status)
{
    struct buf out;
    int retry = -1;
    buf_init(&out, 0);
    int st = anthropic_error(status, (const char *)data, size, &out, &retry);
    FUZZ_CHECK((st >= 400 && st <= 599) || st == 502, "status %d for %ld", st, status);
    if (status == 529)
        FUZZ_CHECK(st == 503, "529 became %d", st);
    FUZZ_CHECK(retry == (status == 429 || status == 529), "retry_after %d for %ld", retry, status);
    struct json_object *o = fuzz_json(out.data, out.len, 1);
    struct json_object *err = fuzz_member(o, "error", json_type_object);
    FUZZ_CHECK(err, "not strict JSON {\"error\":{...}}: %s", out.data ? out.data : "(empty)");
    FUZZ_CHECK(fuzz_member(err, "message", json_type_string) && fuzz_member(err, "type", json_type_string) &&
                   fuzz_member(err, "code", json_type_string),
               "message, type, code: %s", out.data);
    json_object_put(o);
    buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    check_response(data, size, "gpt-x");
    check_response(data, size, NULL);
    static const long statuses[] = {400, 401, 404, 413, 429, 500, 529, 200, 302, 0, 999};
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        check_error(data, size, statuses[i]);
    return 0;
}
