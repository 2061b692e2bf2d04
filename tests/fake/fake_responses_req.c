/* fake_responses_req.c: read a Responses request (POST /v1/responses) as the real API does. */
#include "fake.h"

#include <stdarg.h>
#include <stdio.h>

static const char BAD_JSON[] = "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
                               "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
                               "sent was not valid JSON.)";

/* Sets the error the route answers with (400 unless q->status is set); param and code NULL are JSON null. */
int responses_req_fail(struct responses_req *q, const char *param, const char *code, const char *fmt, ...)
{
    if (q->err[0])
        return -1;   /* the first error found is the one reported */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->err, sizeof q->err, fmt, ap);
    va_end(ap);
    snprintf(q->param, sizeof q->param, "%s", param ? param : "");
    q->code = code;
    return -1;
}

static int bad_json(struct responses_req *q)
{
    return responses_req_fail(q, NULL, NULL, "%s", BAD_JSON);
}

/* The real API names the JSON type it got in its "Invalid type" errors. */
static const char *got(enum jtype t)
{
    switch (t) {
    case JT_OBJ: return "an object";
    case JT_ARR: return "an array";
    case JT_STR: return "a string";
    case JT_NUM: return "a number";
    case JT_TRUE: case JT_FALSE: return "a boolean";
    default: return "null";
    }
}

static int bad_type(struct responses_req *q, const char *param, const char *want, enum jtype t)
{
    return responses_req_fail(q, param, "invalid_type", "Invalid type for '%s': expected %s, but got %s instead.",
                              param, want, got(t));
}

/* "input[0].content[1]" and "text" give "input[0].content[1].text" in dst (64 bytes). */
static const char *field(char *dst, const char *where, const char *name)
{
    snprintf(dst, 64, "%s.%s", where, name);
    return dst;
}

static int missing(struct responses_req *q, const char *where, const char *name)
{
    char f[64];
    field(f, where, name);
    return responses_req_fail(q, f, "missing_required_parameter", "Missing required parameter: '%s'.", f);
}

/* A piece of input text: it counts as prompt words and is what GET .../input_items gives back. */
static void text_add(struct responses_req *q, const struct jval *v)
{
    q->words += js_words(v->s, v->n);
    if (q->text.len)
        buf_add(&q->text, " ", 1);
    buf_add(&q->text, v->s, v->n);
}

/* The text-bearing part types, then the others a message may hold. */
static const char *const PART_TYPES[] = { "input_text", "output_text", "refusal", "input_image", "input_file",
                                          "input_audio" };
enum { PART_TEXT_TYPES = 3 };

/* input[i].content as a list of parts. */
static int parts_parse(struct jscan *j, struct responses_req *q, int i)
{
    char where[48], name[64];
    int k = 0;
    for (int r = js_open(j, '['); r != 0; r = js_more(j, ']'), k++) {
        struct jval type = { 0 }, text = { 0 }, key, v;
        snprintf(where, sizeof where, "input[%d].content[%d]", i, k);
        if (r < 0)
            return bad_json(q);
        if (js_peek(j) != '{') {
            enum jtype t = js_read(j, &v);
            return t == JT_ERR ? bad_json(q) : bad_type(q, where, "an object", t);
        }
        for (int m = js_open(j, '{'); m != 0; m = js_more(j, '}')) {
            if (m < 0 || !js_key(j, &key) || js_read(j, &v) == JT_ERR)
                return bad_json(q);
            if (mem_is(key.s, key.n, "type"))
                type = v;
            else if (mem_is(key.s, key.n, "text") || mem_is(key.s, key.n, "refusal"))
                text = v;
        }
        size_t p = 0;
        while (p < ARRAY_LEN(PART_TYPES) && !js_is(&type, PART_TYPES[p]))
            p++;
        if (type.t != JT_STR)
            return missing(q, where, "type");
        if (p == ARRAY_LEN(PART_TYPES))
            return responses_req_fail(q, field(name, where, "type"), "invalid_value", "Invalid value: '%.*s'. "
                                      "Supported values are: 'input_text', 'input_image', 'output_text', 'refusal', "
                                      "'input_file', and 'input_audio'.", (int)(type.n > 64 ? 64 : type.n), type.s);
        if (p < PART_TEXT_TYPES && text.t != JT_STR)
            return missing(q, where, "text");
        if (p < PART_TEXT_TYPES)
            text_add(q, &text);
    }
    return 0;
}

/* Item types other than a message that an input list may carry back (tool results and earlier output). */
static const char *const ITEM_TYPES[] = { "function_call_output", "function_call", "reasoning", "item_reference",
                                          "custom_tool_call_output", "custom_tool_call" };

/* input[i]: a message {role, content} (type "message" or none), or another item; its text counts. */
static int item_parse(struct jscan *j, struct responses_req *q, int i)
{
    char where[48], name[64];
    struct jval role = { 0 }, type = { 0 }, key, v;
    bool content = false;
    snprintf(where, sizeof where, "input[%d]", i);
    if (js_peek(j) != '{') {
        enum jtype t = js_read(j, &v);
        return t == JT_ERR ? bad_json(q) : bad_type(q, where, "an input item", t);
    }
    for (int r = js_open(j, '{'); r != 0; r = js_more(j, '}')) {
        if (r < 0 || !js_key(j, &key))
            return bad_json(q);
        if (mem_is(key.s, key.n, "content") && js_peek(j) == '[') {
            if (parts_parse(j, q, i) < 0)
                return -1;
            content = true;
            continue;
        }
        if (js_read(j, &v) == JT_ERR)
            return bad_json(q);
        if (mem_is(key.s, key.n, "role"))
            role = v;
        else if (mem_is(key.s, key.n, "type"))
            type = v;
        else if ((mem_is(key.s, key.n, "content") || mem_is(key.s, key.n, "output")) && v.t == JT_STR) {
            text_add(q, &v);
            content = true;
        }
    }
    if (type.t == JT_ERR || js_is(&type, "message")) {
        if (role.t == JT_ERR)
            return missing(q, where, "role");
        if (!js_is(&role, "user") && !js_is(&role, "assistant") && !js_is(&role, "system")
            && !js_is(&role, "developer"))
            return responses_req_fail(q, field(name, where, "role"), "invalid_value", "Invalid value: '%.*s'. "
                                      "Supported values are: 'assistant', 'system', 'developer', and 'user'.",
                                      (int)(role.n > 64 ? 64 : role.n), role.s);
        return content ? 0 : missing(q, where, "content");
    }
    for (size_t t = 0; t < ARRAY_LEN(ITEM_TYPES); t++)
        if (js_is(&type, ITEM_TYPES[t]))
            return 0;
    return responses_req_fail(q, field(name, where, "type"), "invalid_value", "Invalid value: '%.*s'. Supported "
                              "values are: 'message', 'function_call', 'function_call_output', 'reasoning' and "
                              "'item_reference'.", (int)(type.n > 64 ? 64 : type.n), type.s);
}

static int input_list(struct jscan *j, struct responses_req *q)
{
    int i = 0;
    q->has_input = true;
    for (int r = js_open(j, '['); r != 0; r = js_more(j, ']'), i++)
        if (r < 0 || item_parse(j, q, i) < 0)
            return r < 0 ? bad_json(q) : -1;
    return 0;
}

/* Members accepted without a look at their value: the gateway may pass any of them through. */
static const char *const OTHER_MEMBERS[] = {
    "temperature", "top_p", "tools", "tool_choice", "parallel_tool_calls", "text", "reasoning", "metadata",
    "truncation", "user", "include", "background", "service_tier", "prompt_cache_key", "prompt_cache_retention",
    "safety_identifier", "top_logprobs", "max_tool_calls", "prompt", "conversation", "stream_options",
};

/* A top-level member other than an input list; unknown members are refused as the real API does. */
static int member_check(struct responses_req *q, const struct jval *k, const struct jval *v)
{
    long l;
    bool null = v->t == JT_NULL;
    if (mem_is(k->s, k->n, "model")) {
        if (v->t != JT_STR)
            return bad_type(q, "model", "a string", v->t);
        q->model = *v;
    } else if (mem_is(k->s, k->n, "input")) {
        if (v->t != JT_STR)
            return bad_type(q, "input", "one of a string or array of input items", v->t);
        q->has_input = true;
        text_add(q, v);
    } else if (mem_is(k->s, k->n, "instructions")) {
        if (v->t != JT_STR && !null)
            return bad_type(q, "instructions", "a string", v->t);
        q->instructions = *v;
        q->words += null ? 0 : js_words(v->s, v->n);
    } else if (mem_is(k->s, k->n, "previous_response_id")) {
        if (v->t != JT_STR && !null)
            return bad_type(q, "previous_response_id", "a string", v->t);
        q->prev = *v;
    } else if (mem_is(k->s, k->n, "stream")) {
        if (v->t != JT_TRUE && v->t != JT_FALSE && !null)
            return bad_type(q, "stream", "a boolean", v->t);
        q->stream = v->t == JT_TRUE;
    } else if (mem_is(k->s, k->n, "store")) {
        if (v->t != JT_TRUE && v->t != JT_FALSE && !null)
            return bad_type(q, "store", "a boolean", v->t);
        q->store = v->t != JT_FALSE;   /* null: the default, stored */
    } else if (mem_is(k->s, k->n, "max_output_tokens")) {
        if (null)
            return 0;
        if (v->t != JT_NUM || parse_long(v->s, v->n, &l) < 0)
            return bad_type(q, "max_output_tokens", "an integer", v->t);
        if (l < 16)
            return responses_req_fail(q, "max_output_tokens", "integer_below_min_value", "Invalid "
                                      "'max_output_tokens': integer below minimum value. Expected a value >= 16, "
                                      "but got %ld instead.", l);
        q->max_out = l;
    } else {
        for (size_t i = 0; i < ARRAY_LEN(OTHER_MEMBERS); i++)
            if (mem_is(k->s, k->n, OTHER_MEMBERS[i]))
                return 0;
        char name[65];
        snprintf(name, sizeof name, "%.*s", (int)(k->n > 64 ? 64 : k->n), k->s);
        return responses_req_fail(q, name, "unknown_parameter", "Unknown parameter: '%s'.", name);
    }
    return 0;
}

/* 0 if the body is a valid Responses request, else -1 and q->err; the caller frees q->text. */
int responses_req_parse(struct responses_req *q, const char *body, size_t n)
{
    struct jscan j = { .p = body, .end = body + n };
    struct jval k, v;
    q->max_out = -1;
    q->store = true;
    if (js_peek(&j) != '{')
        return bad_json(q);
    for (int r = js_open(&j, '{'); r != 0; r = js_more(&j, '}')) {
        if (r < 0 || !js_key(&j, &k))
            return bad_json(q);
        int rc = mem_is(k.s, k.n, "input") && js_peek(&j) == '[' ? input_list(&j, q)
               : js_read(&j, &v) == JT_ERR ? bad_json(q) : member_check(q, &k, &v);
        if (rc < 0)
            return -1;
    }
    if (js_peek(&j) != 0)
        return bad_json(q);
    if (q->model.t != JT_STR)
        return responses_req_fail(q, "model", "missing_required_parameter", "Missing required parameter: 'model'.");
    return 0;
}
