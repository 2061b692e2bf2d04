/* guard.c: request validation and rewriting before routing (DESIGN.md stage 4). */
#include "guard.h"

#include "json_parse.h"
#include "pathcheck.h"
#include "reply.h"

#include <errno.h>
#include <string.h>

/* The field the endpoint needs besides "model". */
static const char *guard_required_field(enum req_kind k)
{
    switch (k) {
    case REQ_CHAT: return "messages";
    case REQ_COMPLETIONS: return "prompt";
    case REQ_EMBEDDINGS: return "input";
    default: return NULL;
    }
}

static int guard_fail(struct request *r, enum error_code code, const char *msg, const char *param)
{
    reply_error(r, code, msg, param);
    return -1;
}

/* R-SEC-4: a string sluice interprets (routes by, records, echoes) holds no NUL
 * or other control character; its UTF-8 was checked by the parser. */
static int guard_plain_string(struct json_object *v)
{
    const char *s = json_object_get_string(v);
    size_t n = (size_t)json_object_get_string_len(v);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

/* A number field within [lo, hi], or absent/null. 0, or -1 after replying. */
static int guard_number(struct request *r, struct json_object *body, const char *name, double lo, double hi,
                        int integer)
{
    struct json_object *v;
    if (!json_object_object_get_ex(body, name, &v) || json_object_get_type(v) == json_type_null)
        return 0;
    enum json_type t = json_object_get_type(v);
    if (t != json_type_int && (integer || t != json_type_double))
        return guard_fail(r, ERR_INVALID_TYPE, arena_printf(r->arena, "%s must be %s", name,
                                                            integer ? "an integer" : "a number"), name);
    double d = json_object_get_double(v);
    if (!(d >= lo && d <= hi))
        return guard_fail(r, ERR_INVALID_VALUE, arena_printf(r->arena, "%s must be between %g and %g", name, lo, hi),
                          name);
    return 0;
}

/* R-KEY-5: max_tokens is range-checked before any arithmetic: at most the
 * model's max_output (its policy) or limits.max_tokens_cap. names: the
 * protocol's fields for it; required: absent is an error (Messages). */
static int guard_max_tokens(struct request *r, struct json_object *body, const char *const *names, int n_names,
                            int required)
{
    const struct snap_policy *p = snapshot_policy(r->snap, r->model);
    int64_t cap = p && p->max_output > 0 ? p->max_output : r->conf->max_tokens_cap;
    struct json_object *v;
    for (int i = 0; i < n_names; i++) {
        if (!json_object_object_get_ex(body, names[i], &v) || json_object_get_type(v) == json_type_null)
            continue;
        errno = 0;
        int64_t n = json_object_get_int64(v);
        if (json_object_get_type(v) != json_type_int || n < required)
            return guard_fail(r, ERR_INVALID_TYPE, arena_printf(r->arena, "%s: must be %s integer", names[i],
                                                                required ? "a positive" : "a non-negative"),
                              names[i]);
        /* R-GUARD-1: a policy with clamp_max_tokens lowers it to max_output
         * instead (guard_rewrite writes the clamped value into the body). */
        if (n > cap && errno != ERANGE && p && p->max_output > 0 && p->clamp_max_tokens) {
            r->clamped_max_tokens = 1;
            n = cap;
        } else if (n > cap || errno == ERANGE)
            return guard_fail(r, ERR_INVALID_VALUE,
                              arena_printf(r->arena, "%s is %s; the most model %s allows is %lld", names[i],
                                           json_object_get_string(v), r->model, (long long)cap), names[i]);
        if (!r->max_tokens)
            r->max_tokens = n;
    }
    if (required && !r->max_tokens)
        return guard_fail(r, ERR_MISSING_FIELD, arena_printf(r->arena, "%s: Field required", names[0]), names[0]);
    return 0;
}

/* R-GUARD-1: each message an object with a role the API knows and content of
 * a type it accepts (string, array of parts, or null where a tool call stands
 * in for it); a tool message names its tool_call_id. roles: NULL-terminated. */
/* "messages[i].field": made only for an error (this runs for every message). */
static const char *msg_field(struct request *r, size_t i, const char *field)
{
    return arena_printf(r->arena, "messages[%zu].%s", i, field);
}

static int guard_roles(struct request *r, struct json_object *msgs, const char *const *roles, int anthropic)
{
    size_t n = json_object_array_length(msgs);
    for (size_t i = 0; i < n; i++) {
        struct json_object *m = json_object_array_get_idx(msgs, i), *v;
        if (!json_object_is_type(m, json_type_object))
            return guard_fail(r, ERR_INVALID_TYPE, arena_printf(r->arena, "messages[%zu] must be an object", i),
                              arena_printf(r->arena, "messages[%zu]", i));
        if (!json_object_object_get_ex(m, "role", &v) || json_object_is_type(v, json_type_null)) {
            const char *param = msg_field(r, i, "role");
            return guard_fail(r, ERR_MISSING_FIELD, arena_printf(r->arena, "%s: Field required", param), param);
        }
        int ok = 0;
        if (json_object_is_type(v, json_type_string))
            for (int k = 0; roles[k] && !ok; k++)
                ok = strcmp(json_object_get_string(v), roles[k]) == 0;
        if (!ok) {
            const char *param = msg_field(r, i, "role");
            return guard_fail(r, ERR_INVALID_VALUE,
                              arena_printf(r->arena, "%s must be one of %s", param,
                                           anthropic ? "user, assistant" :
                                           "system, developer, user, assistant, tool, function"), param);
        }
        const char *role = json_object_get_string(v);
        int has = json_object_object_get_ex(m, "content", &v) && !json_object_is_type(v, json_type_null);
        if (has && !json_object_is_type(v, json_type_string) && !json_object_is_type(v, json_type_array)) {
            const char *cparam = msg_field(r, i, "content");
            return guard_fail(r, ERR_INVALID_TYPE, arena_printf(r->arena, "%s must be a string or an array", cparam),
                              cparam);
        }
        /* Only an assistant message (with tool_calls) may leave content out. */
        if (!has && (anthropic || strcmp(role, "assistant") != 0)) {
            const char *cparam = msg_field(r, i, "content");
            return guard_fail(r, ERR_MISSING_FIELD, arena_printf(r->arena, "%s: Field required", cparam), cparam);
        }
        if (!anthropic && strcmp(role, "tool") == 0 &&
            (!json_object_object_get_ex(m, "tool_call_id", &v) || !json_object_is_type(v, json_type_string)))
            return guard_fail(r, ERR_MISSING_FIELD,
                              arena_printf(r->arena, "messages[%zu].tool_call_id: Field required", i),
                              msg_field(r, i, "tool_call_id"));
    }
    return 0;
}

static const char *const guard_chat_roles[] = {"system", "developer", "user", "assistant", "tool", "function", NULL};
static const char *const guard_anthropic_roles[] = {"user", "assistant", NULL};

/* "model": a plain non-empty string of at most 256 bytes. */
static int guard_model(struct request *r, struct json_object *body)
{
    struct json_object *v;
    if (!json_object_object_get_ex(body, "model", &v) || json_object_get_type(v) == json_type_null)
        return guard_fail(r, ERR_MISSING_FIELD, "you must provide a model parameter", "model");
    if (json_object_get_type(v) != json_type_string || json_object_get_string_len(v) == 0 ||
        json_object_get_string_len(v) > 256)
        return guard_fail(r, ERR_INVALID_TYPE, "model must be a non-empty string", "model");
    if (!guard_plain_string(v))
        return guard_fail(r, ERR_INVALID_VALUE, "model must not contain control characters", "model");
    r->model = json_object_get_string(v);
    return 0;
}

/* "stream": a boolean or absent. */
static int guard_stream(struct request *r, struct json_object *body)
{
    struct json_object *v;
    if (json_object_object_get_ex(body, "stream", &v) && json_object_get_type(v) != json_type_null) {
        if (json_object_get_type(v) != json_type_boolean)
            return guard_fail(r, ERR_INVALID_TYPE, "stream must be a boolean", "stream");
        r->stream = json_object_get_boolean(v);
    }
    return 0;
}

/* R-ANT-6/7: a Messages (or count_tokens) body: what sluice routes, counts and
 * reserves by; the rest is the upstream's (or the translation's) to judge. */
static int guard_messages(struct request *r, struct json_object *body)
{
    struct json_object *v;
    if (guard_model(r, body) != 0)
        return -1;
    if (!json_object_object_get_ex(body, "messages", &v) || json_object_get_type(v) == json_type_null)
        return guard_fail(r, ERR_MISSING_FIELD, "messages: Field required", "messages");
    if (json_object_get_type(v) != json_type_array || json_object_array_length(v) == 0)
        return guard_fail(r, ERR_INVALID_TYPE, "messages: must be a non-empty array", "messages");
    if (guard_roles(r, v, guard_anthropic_roles, 1) != 0)
        return -1;
    if (r->kind == REQ_COUNT_TOKENS)
        return 0;
    static const char *const names[] = {"max_tokens"};
    if (guard_stream(r, body) != 0 || guard_max_tokens(r, body, names, 1, 1) != 0 ||
        guard_number(r, body, "temperature", 0, 1, 0) != 0 || guard_number(r, body, "top_p", 0, 1, 0) != 0 ||
        guard_number(r, body, "top_k", 0, 1e9, 1) != 0)
        return -1;
    return 0;
}

/* A response id as the Responses API spells them: letters, digits, '_' and '-'. */
static int response_id_ok(const char *s, size_t n)
{
    if (n == 0 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

/* R-API-8: a Responses body; previous_response_id pins it to its replica. */
static int guard_responses(struct request *r, struct json_object *body)
{
    struct json_object *v;
    static const char *const names[] = {"max_output_tokens"};
    if (guard_model(r, body) != 0 || guard_stream(r, body) != 0 || guard_max_tokens(r, body, names, 1, 0) != 0 ||
        guard_number(r, body, "temperature", 0, 2, 0) != 0 || guard_number(r, body, "top_p", 0, 1, 0) != 0)
        return -1;
    if (json_object_object_get_ex(body, "input", &v) && json_object_get_type(v) != json_type_null &&
        json_object_get_type(v) != json_type_string && json_object_get_type(v) != json_type_array)
        return guard_fail(r, ERR_INVALID_TYPE, "input must be a string or an array", "input");
    if (json_object_object_get_ex(body, "previous_response_id", &v) && json_object_get_type(v) != json_type_null) {
        if (json_object_get_type(v) != json_type_string ||
            !response_id_ok(json_object_get_string(v), (size_t)json_object_get_string_len(v)))
            return guard_fail(r, ERR_INVALID_VALUE, "previous_response_id must be a response id",
                              "previous_response_id");
        r->response_ref = arena_strdup(r->arena, json_object_get_string(v));
    }
    return 0;
}

/* GET/DELETE /v1/responses/{id}, POST .../cancel, GET .../input_items (R-API-8):
 * no body to judge, only the path and its method. */
static int guard_response_op(struct request *r)
{
    static const struct { const char *tail; const char *m1, *m2; } ops[] = {
        {"", "GET", "DELETE"}, {"/cancel", "POST", NULL}, {"/input_items", "GET", NULL},
    };
    const char *id = r->path + strlen("/v1/responses/");
    size_t n = strcspn(id, "/");
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (strcmp(id + n, ops[i].tail) != 0)
            continue;
        if (!response_id_ok(id, n))
            return guard_fail(r, ERR_RESPONSE_NOT_FOUND, "No response with this id.", NULL);
        if (strcmp(r->method, ops[i].m1) != 0 && (!ops[i].m2 || strcmp(r->method, ops[i].m2) != 0))
            return guard_fail(r, ERR_METHOD_NOT_ALLOWED, NULL, NULL);
        r->response_ref = arena_strndup(r->arena, id, n);
        r->fwd_body = r->body;
        r->fwd_len = r->body_len;
        return 0;
    }
    return guard_fail(r, ERR_NOT_FOUND, arena_printf(r->arena, "Unknown path %s", r->path), NULL);
}

static int guard_types(struct request *r, struct json_object *body)
{
    struct json_object *v;
    if (guard_model(r, body) != 0)
        return -1;
    if (json_object_object_get_ex(body, "user", &v) && json_object_get_type(v) == json_type_string &&
        !guard_plain_string(v))
        return guard_fail(r, ERR_INVALID_VALUE, "user must not contain control characters", "user");

    const char *field = guard_required_field(r->kind);
    if (!json_object_object_get_ex(body, field, &v) || json_object_get_type(v) == json_type_null)
        return guard_fail(r, ERR_MISSING_FIELD, arena_printf(r->arena, "'%s' is a required property", field), field);
    enum json_type t = json_object_get_type(v);
    if (r->kind == REQ_CHAT && (t != json_type_array || json_object_array_length(v) == 0))
        return guard_fail(r, ERR_INVALID_TYPE, "messages must be a non-empty array", "messages");
    if (r->kind == REQ_CHAT && guard_roles(r, v, guard_chat_roles, 0) != 0)
        return -1;
    if (r->kind != REQ_CHAT && t != json_type_string && t != json_type_array)
        return guard_fail(r, ERR_INVALID_TYPE, arena_printf(r->arena, "%s must be a string or an array", field), field);

    /* R-KEY-5: what the request may produce, for the token pre-deduction. */
    static const char *const max_names[] = {"max_completion_tokens", "max_tokens"};
    if (guard_stream(r, body) != 0 || guard_max_tokens(r, body, max_names, 2, 0) != 0 || guard_number(r, body, "temperature", 0, 2, 0) != 0 ||
        guard_number(r, body, "top_p", 0, 1, 0) != 0 || guard_number(r, body, "n", 1, (double)r->conf->max_n, 1) != 0)
        return -1;
    /* n answers may each be max_tokens long: the reservation counts them all. */
    if (json_object_object_get_ex(body, "n", &v) && json_object_get_type(v) == json_type_int)
        r->choices = (int)json_object_get_int64(v);
    if (r->kind == REQ_EMBEDDINGS && r->stream)
        return guard_fail(r, ERR_INVALID_TYPE, "embeddings cannot be streamed", "stream");
    if (json_object_object_get_ex(body, "stream_options", &v) && json_object_get_type(v) != json_type_null) {
        if (json_object_get_type(v) != json_type_object)
            return guard_fail(r, ERR_INVALID_TYPE, "stream_options must be an object", "stream_options");
        struct json_object *inc = NULL;
        if (json_object_object_get_ex(v, "include_usage", &inc) &&
            json_object_get_type(inc) != json_type_boolean)
            return guard_fail(r, ERR_INVALID_TYPE, "include_usage must be a boolean",
                              "stream_options.include_usage");
        r->want_usage_chunk = inc && json_object_get_type(inc) == json_type_boolean && json_object_get_boolean(inc);
    }
    return 0;
}

/* Parses the body as one JSON object (trailing whitespace allowed); NULL if not. */
static struct json_object *guard_parse(const struct request *r)
{
    /* R-API-3: the body is UTF-8 (RFC 8259 §8.1); json-c's own check lets
     * encoded surrogates and overlong forms through, this one does not. */
    const unsigned char *p = (const unsigned char *)r->body;
    for (size_t i = 0, k; i < r->body_len; i += k)
        if (p[i] < 0x80)
            k = 1;
        else if (!(k = utf8_sequence(p + i, r->body_len - i)))
            return NULL;
    size_t used = 0;     /* STRICT: UTF-8 was checked above, more strictly */
    struct json_object *body = json_parse(r->body, r->body_len, JSON_TOKENER_STRICT, &used);
    while (used < r->body_len && r->body[used] && strchr(" \t\r\n", r->body[used]))
        used++;
    if (!body || used != r->body_len) {
        json_object_put(body);
        return NULL;
    }
    return body;
}

/* Internal fields out (R-API-5), include_usage in (R-USE-1); sets the body to send. */
static void guard_rewrite(struct request *r, struct json_object *body, enum req_kind kind)
{
    int changed = 0;
    r->prompt_estimate = (int64_t)(r->body_len / 4) + 1;
    for (int i = 0; i < r->snap->n_internal_fields; i++)
        if (json_object_object_get_ex(body, r->snap->internal_fields[i], NULL)) {
            json_object_object_del(body, r->snap->internal_fields[i]);
            changed = 1;
        }
    /* R-GUARD-1: the clamped max_tokens is what the upstream is asked for. */
    if (r->clamped_max_tokens) {
        static const char *const names[] = {"max_tokens", "max_completion_tokens", "max_output_tokens"};
        struct json_object *v;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (json_object_object_get_ex(body, names[i], &v) && !json_object_is_type(v, json_type_null))
                json_object_object_add(body, names[i], json_object_new_int64(r->max_tokens));
        changed = 1;
    }
    /* R-USE-1: always ask the upstream for usage (billing does not depend on
     * the client's choice); the relay removes the chunk unless the client asked
     * for it (R-USE-2), and the stream_options it sent are kept otherwise. */
    if (r->stream && !r->want_usage_chunk && (kind == REQ_CHAT || kind == REQ_COMPLETIONS)) {
        struct json_object *so = NULL;
        if (!json_object_object_get_ex(body, "stream_options", &so) || !json_object_is_type(so, json_type_object)) {
            so = json_object_new_object();
            json_object_object_add(body, "stream_options", so);
        }
        json_object_object_add(so, "include_usage", json_object_new_boolean(1));
        r->injected_usage = 1;
        changed = 1;
    }
    /* model points into the parsed object; keep a copy that outlives edits. */
    if (r->model)
        r->model = arena_strdup(r->arena, r->model);
    if (changed) {
        const char *s = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        r->fwd_body = arena_strdup(r->arena, s);
        r->fwd_len = strlen(r->fwd_body);
    } else {
        r->fwd_body = r->body;
        r->fwd_len = r->body_len;
    }
}

/* Is the pass-through path an inference operation (counted like /v1, R-KEY-0)?
 * *kind: the OpenAI operation, or REQ_UNKNOWN for Anthropic Messages (parsed for
 * its max_tokens and stream, never rewritten). */
static int guard_proxy_inference(const struct request *r, enum req_kind *kind)
{
    char name[129];
    const char *rest;
    if (strcmp(r->method, "POST") != 0 || pathcheck_proxy(r->uri, name, sizeof name, &rest) != PATH_OK)
        return 0;
    size_t n = strcspn(rest, "?");
    static const struct { const char *path; enum req_kind kind; } ops[] = {
        {"/v1/chat/completions", REQ_CHAT}, {"/v1/completions", REQ_COMPLETIONS}, {"/v1/embeddings", REQ_EMBEDDINGS},
        {"/v1/messages", REQ_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strlen(ops[i].path) == n && strncmp(rest, ops[i].path, n) == 0) {
            *kind = ops[i].kind;
            return 1;
        }
    return 0;
}

/* R-KEY-0, R-USE-1: the pass-through to an inference path is counted like the
 * /v1 routes (stream, max_tokens, usage); its fields are the upstream's to
 * judge, but a body sluice cannot read as one JSON object would escape the
 * count, so it is refused. Anything else passes byte for byte. 0 or -1. */
static int guard_proxy(struct request *r)
{
    r->fwd_body = r->body;
    r->fwd_len = r->body_len;
    enum req_kind kind = REQ_UNKNOWN;
    if (!guard_proxy_inference(r, &kind))
        return 0;
    struct json_object *body = guard_parse(r), *v;
    if (!body || !json_object_is_type(body, json_type_object)) {
        json_object_put(body);
        return guard_fail(r, ERR_INVALID_JSON, "The body of an inference path must be one JSON object in UTF-8.",
                          NULL);
    }
    r->json = body;
    if (json_object_object_get_ex(body, "model", &v) && json_object_is_type(v, json_type_string))
        r->model = json_object_get_string(v);
    if (json_object_object_get_ex(body, "stream", &v) && json_object_is_type(v, json_type_boolean))
        r->stream = json_object_get_boolean(v);
    if (json_object_object_get_ex(body, "stream_options", &v) && !json_object_is_type(v, json_type_null)) {
        struct json_object *inc = NULL;
        r->want_usage_chunk = json_object_object_get_ex(v, "include_usage", &inc) &&
                              json_object_is_type(inc, json_type_boolean) && json_object_get_boolean(inc);
    }
    const char *max_names[] = {"max_completion_tokens", "max_tokens"};
    for (int i = 0; i < 2 && !r->max_tokens; i++)
        if (json_object_object_get_ex(body, max_names[i], &v) && json_object_is_type(v, json_type_int) &&
            json_object_get_int64(v) > 0)
            r->max_tokens = json_object_get_int64(v);
    /* The upstream judges the pass-through; the reservation never exceeds the cap. */
    if (r->max_tokens > r->conf->max_tokens_cap)
        r->max_tokens = r->conf->max_tokens_cap;
    if (kind != REQ_UNKNOWN)
        guard_rewrite(r, body, kind);
    else
        r->prompt_estimate = (int64_t)(r->body_len / 4) + 1;    /* Messages: counted, never rewritten */
    return 0;
}

int guard_check(struct request *r)
{
    if (r->kind == REQ_PROXY)
        return guard_proxy(r);
    if (r->kind == REQ_RESPONSE_OP)
        return guard_response_op(r);
    struct json_object *body = guard_parse(r);
    if (!body)
        return guard_fail(r, ERR_INVALID_JSON, "We could not parse the JSON body of your request.", NULL);
    r->json = body;
    if (json_object_get_type(body) != json_type_object)
        return guard_fail(r, ERR_INVALID_TYPE, "the request body must be a JSON object", NULL);
    int rc = r->kind == REQ_MESSAGES || r->kind == REQ_COUNT_TOKENS ? guard_messages(r, body)
             : r->kind == REQ_RESPONSES                             ? guard_responses(r, body)
                                                                    : guard_types(r, body);
    if (rc != 0)
        return -1;
    guard_rewrite(r, body, r->kind);
    return 0;
}
