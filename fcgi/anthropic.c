/* anthropic.c: an OpenAI chat.completions request -> an Anthropic Messages request (SPEC §18, R-ANT-3).
 *
 * One pass over the caller's top-level fields through field_table (every field
 * sluice knows is one row; anything else is refused, never dropped), one pass
 * over every message, content part and tool call through the nested allow-lists
 * (the same rule one level down), then the Messages body is written straight
 * into the output buffer (tools are checked against theirs as they are
 * written). The response and stream directions are in anthropic_stream.c. */
#include "anthropic.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The fields a Messages body is built from (slots of struct req). */
enum field {
    F_NONE,                 /* consumed or checked only: nothing to send */
    F_MESSAGES,
    F_MAX_TOKENS,
    F_MAX_COMPLETION_TOKENS,
    F_TEMPERATURE,
    F_TOP_P,
    F_TOP_K,
    F_STOP,
    F_USER,
    F_SAFETY_IDENTIFIER,
    F_TOOLS,
    F_TOOL_CHOICE,
    F_PARALLEL_TOOL_CALLS,
    F_COUNT
};

/* One translation: the output, the failure and the fields seen. */
struct req {
    struct xlate x;                     /* the output and the failure */
    struct json_object *v[F_COUNT];     /* by enum field; NULL = absent or null */
    struct json_tokener *tok;           /* for tool-call arguments, made on first use */
    const char *role;                   /* role of the open turn, NULL when none */
    int blocks;                         /* content blocks in the open turn */
};

/* ---- top-level fields ---------------------------------------------------- */

static int check_any(struct xlate *x, const char *name, struct json_object *v) { return 0; }

static int check_number(struct xlate *x, const char *name, struct json_object *v)
{
    if (xlate_is_number(v))
        return 0;
    return xlate_fail(x, ERR_INVALID_TYPE, name, "%s must be a number", name);
}

/* R-ANT-3: Messages takes 0..1; an OpenAI 1.5 is refused, never clamped or scaled. */
static int check_temperature(struct xlate *x, const char *name, struct json_object *v)
{
    if (check_number(x, name, v) != 0)
        return -1;
    double t = json_object_get_double(v);
    if (t >= 0.0 && t <= 1.0)
        return 0;
    return xlate_fail(x, ERR_UNSUPPORTED_PARAMETER, name,
                      "temperature %s is outside 0..1, the range of this endpoint's upstream (Anthropic)",
                      json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
}

static int check_stop(struct xlate *x, const char *name, struct json_object *v)
{
    if (json_object_is_type(v, json_type_string))
        return 0;
    if (json_object_is_type(v, json_type_array)) {
        size_t n = json_object_array_length(v);
        for (size_t i = 0; i < n; i++)
            if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_string))
                return xlate_fail(x, ERR_INVALID_TYPE, name, "stop[%zu] must be a string", i);
        return 0;
    }
    return xlate_fail(x, ERR_INVALID_TYPE, name, "stop must be a string or an array of strings");
}

static int check_tool_choice(struct xlate *x, const char *name, struct json_object *v)
{
    if (json_object_is_type(v, json_type_string) || json_object_is_type(v, json_type_object))
        return 0;
    return xlate_fail(x, ERR_INVALID_TYPE, name, "tool_choice must be a string or an object");
}

static int refuse(struct xlate *x, const char *name)
{
    return xlate_fail(x, ERR_UNSUPPORTED_PARAMETER, name,
                      "%s cannot be mapped to this endpoint's upstream protocol (Anthropic Messages)", name);
}

/* Refused fields pass only with the value that asks for nothing (the OpenAI default). */
static int refuse_always(struct xlate *x, const char *name, struct json_object *v) { return refuse(x, name); }

static int refuse_unless_one(struct xlate *x, const char *name, struct json_object *v)
{
    return json_object_is_type(v, json_type_int) && json_object_get_int64(v) == 1 ? 0 : refuse(x, name);
}

static int refuse_unless_zero(struct xlate *x, const char *name, struct json_object *v)
{
    return xlate_is_number(v) && json_object_get_double(v) == 0.0 ? 0 : refuse(x, name);
}

static int refuse_unless_false(struct xlate *x, const char *name, struct json_object *v)
{
    return json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v) ? 0 : refuse(x, name);
}

static int refuse_unless_empty(struct xlate *x, const char *name, struct json_object *v)
{
    return json_object_is_type(v, json_type_object) && json_object_object_length(v) == 0 ? 0 : refuse(x, name);
}

static int refuse_unless_text(struct xlate *x, const char *name, struct json_object *v)
{
    struct json_object *t;
    return json_object_is_type(v, json_type_object) && json_object_object_length(v) == 1 &&
                   xlate_get(v, "type", json_type_string, &t) == 1 && xlate_str_is(t, "text")
               ? 0
               : refuse(x, name);
}

static int refuse_unless_default_tier(struct xlate *x, const char *name, struct json_object *v)
{
    return xlate_str_is(v, "auto") || xlate_str_is(v, "default") ? 0 : refuse(x, name);
}

/* Every top-level chat.completions field this translation knows, one row each.
 * A field that is absent or null is skipped; any field not listed here is
 * refused with unsupported_parameter (R-ANT-3: nothing is dropped silently).
 *
 * The allow-list (accepted, nothing sent, because it changes nothing the caller
 * gets back): model (replaced by the endpoint's name), stream (the caller's
 * stream argument decides), stream_options (the relay handles include_usage),
 * metadata (OpenAI stored-completion tags; store:true is refused),
 * prompt_cache_key (a cache-routing hint), and the refused fields below when
 * they carry their do-nothing value: n 1, logprobs false, top_logprobs 0,
 * frequency_penalty / presence_penalty 0, logit_bias {}, response_format
 * {"type":"text"}, store false, service_tier "auto" / "default". */
static const struct xlate_field field_table[] = {
    {"model", F_NONE, check_any},
    {"messages", F_MESSAGES, xlate_check_array},
    {"max_tokens", F_MAX_TOKENS, xlate_check_int},
    {"max_completion_tokens", F_MAX_COMPLETION_TOKENS, xlate_check_int},    /* wins over max_tokens */
    {"temperature", F_TEMPERATURE, check_temperature},
    {"top_p", F_TOP_P, check_number},
    {"top_k", F_TOP_K, xlate_check_int},                /* vLLM-style extension, native in Messages */
    {"stop", F_STOP, check_stop},                       /* -> stop_sequences */
    {"user", F_USER, xlate_check_string},               /* -> metadata.user_id */
    {"safety_identifier", F_SAFETY_IDENTIFIER, xlate_check_string}, /* -> metadata.user_id unless user is set */
    {"tools", F_TOOLS, xlate_check_array},
    {"tool_choice", F_TOOL_CHOICE, check_tool_choice},
    {"parallel_tool_calls", F_PARALLEL_TOOL_CALLS, xlate_check_bool}, /* false -> disable_parallel_tool_use */
    {"stream", F_NONE, xlate_check_bool},
    {"stream_options", F_NONE, check_any},
    {"metadata", F_NONE, check_any},
    {"prompt_cache_key", F_NONE, check_any},
    {"n", F_NONE, refuse_unless_one},
    {"logprobs", F_NONE, refuse_unless_false},
    {"top_logprobs", F_NONE, refuse_unless_zero},
    {"frequency_penalty", F_NONE, refuse_unless_zero},
    {"presence_penalty", F_NONE, refuse_unless_zero},
    {"logit_bias", F_NONE, refuse_unless_empty},
    {"response_format", F_NONE, refuse_unless_text},
    {"store", F_NONE, refuse_unless_false},
    {"service_tier", F_NONE, refuse_unless_default_tier},
    {"seed", F_NONE, refuse_always},
};

static int read_fields(struct req *r, struct json_object *chat)
{
    const char *key;
    int rc = xlate_read_fields(&r->x, chat, field_table, sizeof field_table / sizeof field_table[0], r->v, &key);
    if (rc > 0)     /* param is the key itself: it lives as long as chat */
        return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, key,
                          "%.180s cannot be mapped to this endpoint's upstream protocol (Anthropic Messages)", key);
    return rc;
}

/* ---- messages ------------------------------------------------------------ */

/* Starts a content block in a turn of role, merging into the open turn when it
 * has the same role (Messages wants user and assistant to alternate). */
static void block_open(struct req *r, const char *role)
{
    if (r->role == role) {
        xlate_put(&r->x, ",");
    } else {
        if (r->role)
            xlate_put(&r->x, "]},");
        xlate_put(&r->x, "{\"role\":\"");
        xlate_put(&r->x, role);
        xlate_put(&r->x, "\",\"content\":[");
        r->role = role;
    }
    r->blocks++;
}

/* o's cache_control (an Anthropic extension callers put on OpenAI parts and
 * tools; the allow-lists let only an object through), kept as is. */
static void put_cache_control(struct req *r, struct json_object *o)
{
    struct json_object *cc;
    if (o && xlate_get(o, "cache_control", json_type_object, &cc) == 1) {
        xlate_put(&r->x, ",\"cache_control\":");
        xlate_put_value(&r->x, cc);
    }
}

static void text_block(struct req *r, const char *role, struct json_object *text, struct json_object *part)
{
    block_open(r, role);
    xlate_put(&r->x, "{\"type\":\"text\",\"text\":");
    xlate_put_str(&r->x, text);
    put_cache_control(r, part);
    xlate_put(&r->x, "}");
}

static const char ROLE_USER[] = "user", ROLE_ASSISTANT[] = "assistant";

/* image_url -> an image block: data:<type>;base64,<data> or an https URL. */
static int image_block(struct req *r, size_t i, struct json_object *part)
{
    struct json_object *iu, *url;
    if (xlate_get(part, "image_url", json_type_object, &iu) != 1 || xlate_get(iu, "url", json_type_string, &url) != 1)
        return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages", "messages[%zu]: image_url must be an object with a url",
                          i);
    const char *u = json_object_get_string(url);
    size_t n = (size_t)json_object_get_string_len(url);
    if (n > 5 && strncasecmp(u, "data:", 5) == 0) {
        const char *comma = memchr(u, ',', n);
        const char *semi = comma ? memchr(u + 5, ';', (size_t)(comma - (u + 5))) : NULL;
        if (!semi || semi == u + 5 || (size_t)(comma - semi) != 7 || strncasecmp(semi, ";base64", 7) != 0 ||
            strncasecmp(u + 5, "image/", 6) != 0)
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, "messages",
                              "messages[%zu]: only base64 image data URLs (data:image/...;base64,...) can be sent", i);
        block_open(r, ROLE_USER);
        xlate_put(&r->x, "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":");
        xlate_put_json_str(&r->x, u + 5, (size_t)(semi - (u + 5)));
        xlate_put(&r->x, ",\"data\":");
        xlate_put_json_str(&r->x, comma + 1, n - (size_t)(comma + 1 - u));
        xlate_put(&r->x, "}");
        put_cache_control(r, part);
        xlate_put(&r->x, "}");
        return 0;
    }
    if (n > 8 && strncasecmp(u, "https://", 8) == 0) {
        block_open(r, ROLE_USER);
        xlate_put(&r->x, "{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":");
        xlate_put_str(&r->x, url);
        xlate_put(&r->x, "}");
        put_cache_control(r, part);
        xlate_put(&r->x, "}");
        return 0;
    }
    return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, "messages",
                      "messages[%zu]: image URLs must be https:// or base64 data URLs", i);
}

/* String content or an array of parts (text; image_url for users) -> blocks.
 * skip_empty: an assistant's "" next to its tool calls is no block. */
static int content_blocks(struct req *r, size_t i, const char *role, struct json_object *content, int skip_empty)
{
    if (json_object_is_type(content, json_type_string)) {
        if (!(skip_empty && json_object_get_string_len(content) == 0))
            text_block(r, role, content, NULL);
        return 0;
    }
    if (!json_object_is_type(content, json_type_array))
        return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages", "messages[%zu].content must be a string or an array", i);
    size_t n = json_object_array_length(content);
    for (size_t k = 0; k < n; k++) {
        struct json_object *part = json_object_array_get_idx(content, k), *type, *text;
        if (!json_object_is_type(part, json_type_object) || xlate_get(part, "type", json_type_string, &type) != 1)
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages",
                              "messages[%zu].content[%zu] must be an object with a type", i, k);
        if (xlate_str_is(type, "text")) {
            if (xlate_get(part, "text", json_type_string, &text) != 1)
                return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages",
                                  "messages[%zu].content[%zu].text must be a string", i, k);
            if (!(skip_empty && json_object_get_string_len(text) == 0))
                text_block(r, role, text, part);
        } else if (xlate_str_is(type, "image_url") && role == ROLE_USER) {
            if (image_block(r, i, part) != 0)
                return -1;
        } else {
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, "messages",
                              "messages[%zu].content[%zu]: %.40s parts cannot be sent to this endpoint's upstream", i,
                              k, json_object_get_string(type));
        }
    }
    return 0;
}

/* Tool-call arguments (a JSON string) -> the parsed object, or NULL. "" is {}. */
static struct json_object *parse_arguments(struct req *r, struct json_object *args)
{
    const char *s = json_object_get_string(args);
    int n = json_object_get_string_len(args), i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    if (i == n)
        return json_object_new_object();
    if (!r->tok)
        r->tok = json_tokener_new();
    else
        json_tokener_reset(r->tok);
    struct json_object *o = json_tokener_parse_ex(r->tok, s + i, n - i);
    if (json_tokener_get_error(r->tok) != json_tokener_success || !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return NULL;
    }
    for (i += (int)json_tokener_get_parse_end(r->tok); i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') {
            json_object_put(o);
            return NULL;
        }
    return o;
}

/* An assistant's tool_calls -> tool_use blocks, after its text. */
static int tool_use_blocks(struct req *r, size_t i, struct json_object *calls)
{
    size_t n = json_object_array_length(calls);
    for (size_t k = 0; k < n; k++) {
        struct json_object *call = json_object_array_get_idx(calls, k), *id, *type, *fn, *name, *args;
        if (!json_object_is_type(call, json_type_object) || xlate_get(call, "id", json_type_string, &id) != 1 ||
            xlate_get(call, "function", json_type_object, &fn) != 1 ||
            xlate_get(fn, "name", json_type_string, &name) != 1)
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages",
                              "messages[%zu].tool_calls[%zu] must have a string id and a function with a name", i, k);
        if (xlate_get(call, "type", json_type_string, &type) == 1 && !xlate_str_is(type, "function"))
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, "messages",
                              "messages[%zu].tool_calls[%zu]: only function tool calls can be sent", i, k);
        int has_args = xlate_get(fn, "arguments", json_type_string, &args);
        if (has_args < 0)
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages",
                              "messages[%zu].tool_calls[%zu].function.arguments must be a string", i, k);
        struct json_object *input = has_args ? parse_arguments(r, args) : json_object_new_object();
        if (!input)
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages",
                              "messages[%zu].tool_calls[%zu].function.arguments is not a JSON object", i, k);
        block_open(r, ROLE_ASSISTANT);
        xlate_put(&r->x, "{\"type\":\"tool_use\",\"id\":");
        xlate_put_str(&r->x, id);
        xlate_put(&r->x, ",\"name\":");
        xlate_put_str(&r->x, name);
        xlate_put(&r->x, ",\"input\":");
        xlate_put_value(&r->x, input);
        xlate_put(&r->x, "}");
        json_object_put(input);
    }
    return 0;
}

/* A tool message -> a tool_result block in a user turn. */
static int tool_result_block(struct req *r, size_t i, struct json_object *m)
{
    struct json_object *id, *content;
    if (xlate_get(m, "tool_call_id", json_type_string, &id) != 1)
        return xlate_fail(&r->x, ERR_MISSING_FIELD, "messages",
                          "messages[%zu]: a tool message needs a string tool_call_id", i);
    if (!json_object_object_get_ex(m, "content", &content) ||
        !(json_object_is_type(content, json_type_string) || json_object_is_type(content, json_type_array)))
        return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages", "messages[%zu].content must be a string or an array", i);
    /* Text parts are checked before the block opens, so the output stays whole on failure. */
    size_t n = json_object_is_type(content, json_type_array) ? json_object_array_length(content) : 0;
    for (size_t k = 0; k < n; k++) {
        struct json_object *part = json_object_array_get_idx(content, k), *type, *text;
        if (!json_object_is_type(part, json_type_object) || xlate_get(part, "type", json_type_string, &type) != 1 ||
            !xlate_str_is(type, "text") || xlate_get(part, "text", json_type_string, &text) != 1)
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, "messages",
                              "messages[%zu].content[%zu]: tool results carry text parts only", i, k);
    }
    block_open(r, ROLE_USER);
    xlate_put(&r->x, "{\"type\":\"tool_result\",\"tool_use_id\":");
    xlate_put_str(&r->x, id);
    xlate_put(&r->x, ",\"content\":");
    if (json_object_is_type(content, json_type_string)) {
        xlate_put_str(&r->x, content);
    } else {
        xlate_put(&r->x, "[");
        for (size_t k = 0; k < n; k++) {
            struct json_object *part = json_object_array_get_idx(content, k), *text;
            json_object_object_get_ex(part, "text", &text);
            xlate_put(&r->x, k ? ",{\"type\":\"text\",\"text\":" : "{\"type\":\"text\",\"text\":");
            xlate_put_str(&r->x, text);
            put_cache_control(r, part);
            xlate_put(&r->x, "}");
        }
        xlate_put(&r->x, "]");
    }
    xlate_put(&r->x, "}");
    return 0;
}

static int is_system(struct json_object *role)
{
    return xlate_str_is(role, "system") || xlate_str_is(role, "developer");
}

/* System and developer messages -> the top-level "system" array of text blocks,
 * one per non-empty text, in order. */
static int emit_system(struct req *r, struct json_object *msgs)
{
    size_t n = json_object_array_length(msgs), blocks = 0;
    for (size_t i = 0; i < n; i++) {
        struct json_object *m = json_object_array_get_idx(msgs, i), *role, *content;
        if (!json_object_is_type(m, json_type_object) || xlate_get(m, "role", json_type_string, &role) != 1 ||
            !is_system(role))
            continue;
        if (!json_object_object_get_ex(m, "content", &content) ||
            !(json_object_is_type(content, json_type_string) || json_object_is_type(content, json_type_array)))
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages", "messages[%zu].content must be a string or an array",
                              i);
        int one = json_object_is_type(content, json_type_string);
        size_t parts = one ? 1 : json_object_array_length(content);
        for (size_t k = 0; k < parts; k++) {
            struct json_object *part = one ? NULL : json_object_array_get_idx(content, k), *text = content, *type;
            if (!one && (!json_object_is_type(part, json_type_object) ||
                         xlate_get(part, "type", json_type_string, &type) != 1 || !xlate_str_is(type, "text") ||
                         xlate_get(part, "text", json_type_string, &text) != 1))
                return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, "messages",
                                  "messages[%zu].content[%zu]: system messages carry text parts only", i, k);
            if (json_object_get_string_len(text) == 0)
                continue;
            xlate_put(&r->x, blocks++ ? "," : ",\"system\":[");
            xlate_put(&r->x, "{\"type\":\"text\",\"text\":");
            xlate_put_str(&r->x, text);
            put_cache_control(r, part);
            xlate_put(&r->x, "}");
        }
    }
    if (blocks)
        xlate_put(&r->x, "]");
    return 0;
}

/* ---- nested fields: the allow-lists -------------------------------------- */

/* R-ANT-3 below the top level: every key of a message, a content part, a tool
 * call and a tool is one row of an allow-list, with field_table's rule: a key
 * not listed is refused with unsupported_parameter even when null, param naming
 * its path ("messages[2].name", "tools[0].function.strict"); a mapped key is
 * type-checked where it is written; a refused key passes only with the value
 * that asks for nothing (null, or the one named).
 *
 *   message, role system / developer  role, content; name only null. Only before
 *                                     the first user / assistant / tool message:
 *                                     Messages has one system prompt ahead of all
 *                                     turns, so a later one is refused (param
 *                                     messages[i].role), never moved to the top
 *   message, role user                role, content; name only null
 *   message, role assistant           role, content, tool_calls; name, refusal,
 *                                     audio, function_call only null; annotations
 *                                     only null or []
 *   message, role tool                role, content, tool_call_id; name only null
 *   content part, type text           type, text, cache_control (an object, kept)
 *   content part, type image_url      type, image_url, cache_control (an object,
 *                                     kept); image_url: url, detail only "auto"
 *                                     (Messages has no detail levels)
 *   assistant tool_calls[k]           id, type, function; function: name, arguments
 *   tools[k]                          type, function, cache_control (an object,
 *                                     kept); function: name, description,
 *                                     parameters, strict only false (strict:true
 *                                     asks for a schema guarantee Messages does
 *                                     not give here)
 * Other roles and part types are refused where they are translated. */
enum key_rule {
    K_MAPPED,               /* translated; its type is checked where it is written */
    K_CACHE,                /* cache_control: null or an object, kept as is */
    K_NULL,                 /* refused unless null */
    K_FALSE,                /* refused unless null or false */
    K_AUTO,                 /* refused unless null or "auto" */
    K_EMPTY,                /* refused unless null or [] */
};

struct key_row {
    const char *key;
    enum key_rule rule;
};

#define KEYS(a) a, sizeof a / sizeof a[0]

static const struct key_row msg_plain_keys[] = {        /* system, developer, user */
    {"role", K_MAPPED}, {"content", K_MAPPED}, {"name", K_NULL}};
static const struct key_row msg_assistant_keys[] = {
    {"role", K_MAPPED},     {"content", K_MAPPED}, {"tool_calls", K_MAPPED},    {"name", K_NULL},
    {"refusal", K_NULL},    {"audio", K_NULL},     {"function_call", K_NULL},   {"annotations", K_EMPTY}};
static const struct key_row msg_tool_keys[] = {
    {"role", K_MAPPED}, {"content", K_MAPPED}, {"tool_call_id", K_MAPPED}, {"name", K_NULL}};
static const struct key_row part_text_keys[] = {{"type", K_MAPPED}, {"text", K_MAPPED}, {"cache_control", K_CACHE}};
static const struct key_row part_image_keys[] = {
    {"type", K_MAPPED}, {"image_url", K_MAPPED}, {"cache_control", K_CACHE}};
static const struct key_row image_url_keys[] = {{"url", K_MAPPED}, {"detail", K_AUTO}};
static const struct key_row tool_call_keys[] = {{"id", K_MAPPED}, {"type", K_MAPPED}, {"function", K_MAPPED}};
static const struct key_row tool_call_fn_keys[] = {{"name", K_MAPPED}, {"arguments", K_MAPPED}};
static const struct key_row tool_keys[] = {{"type", K_MAPPED}, {"function", K_MAPPED}, {"cache_control", K_CACHE}};
static const struct key_row tool_fn_keys[] = {
    {"name", K_MAPPED}, {"description", K_MAPPED}, {"parameters", K_MAPPED}, {"strict", K_FALSE}};

/* Every key of o (found at path at) against rows. */
static int check_keys(struct req *r, struct json_object *o, const struct key_row *rows, size_t n_rows,
                      const char *at)
{
    json_object_object_foreach(o, key, v) {
        const struct key_row *row = NULL;
        for (size_t i = 0; i < n_rows && !row; i++)
            if (strcmp(rows[i].key, key) == 0)
                row = &rows[i];
        int ok = 0;
        const char *why = "cannot be mapped to this endpoint's upstream protocol (Anthropic Messages)";
        if (row) {
            switch (row->rule) {
            case K_MAPPED:
                ok = 1;
                break;
            case K_CACHE:
                if (v && !json_object_is_type(v, json_type_object))
                    return xlate_fail(&r->x, ERR_INVALID_TYPE, xlate_path(&r->x, "%s.%s", at, key),
                                      "%s.%s must be an object", at, key);
                ok = 1;
                break;
            case K_NULL:
                ok = !v;
                why = "cannot be mapped to this endpoint's upstream protocol (Anthropic Messages); only null passes";
                break;
            case K_FALSE:
                ok = !v || (json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v));
                why = "asks for a guarantee this endpoint's upstream (Anthropic Messages) does not give; "
                      "only false passes";
                break;
            case K_AUTO:
                ok = !v || xlate_str_is(v, "auto");
                why = "cannot be mapped to this endpoint's upstream protocol (Anthropic Messages); only \"auto\" "
                      "passes";
                break;
            case K_EMPTY:
                ok = !v || (json_object_is_type(v, json_type_array) && json_object_array_length(v) == 0);
                why = "cannot be mapped to this endpoint's upstream protocol (Anthropic Messages); only null or "
                      "[] passes";
                break;
            }
        }
        if (!ok)
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, xlate_path(&r->x, "%s.%s", at, key), "%.90s.%.60s %s",
                              at, key, why);
    }
    return 0;
}

/* A message's content parts: text and image_url parts against their lists. */
static int check_parts(struct req *r, size_t i, struct json_object *content)
{
    char at[96];
    size_t n = json_object_array_length(content);
    for (size_t k = 0; k < n; k++) {
        struct json_object *part = json_object_array_get_idx(content, k), *type, *iu;
        if (!json_object_is_type(part, json_type_object) || xlate_get(part, "type", json_type_string, &type) != 1)
            continue;                   /* refused where it is translated */
        snprintf(at, sizeof at, "messages[%zu].content[%zu]", i, k);
        if (xlate_str_is(type, "text")) {
            if (check_keys(r, part, KEYS(part_text_keys), at) != 0)
                return -1;
        } else if (xlate_str_is(type, "image_url")) {
            if (check_keys(r, part, KEYS(part_image_keys), at) != 0)
                return -1;
            snprintf(at, sizeof at, "messages[%zu].content[%zu].image_url", i, k);
            if (xlate_get(part, "image_url", json_type_object, &iu) == 1 &&
                check_keys(r, iu, KEYS(image_url_keys), at) != 0)
                return -1;
        }
    }
    return 0;
}

/* An assistant's tool calls against theirs. */
static int check_calls(struct req *r, size_t i, struct json_object *calls)
{
    char at[96];
    size_t n = json_object_array_length(calls);
    for (size_t k = 0; k < n; k++) {
        struct json_object *call = json_object_array_get_idx(calls, k), *fn;
        if (!json_object_is_type(call, json_type_object))
            continue;                   /* refused where it is translated */
        snprintf(at, sizeof at, "messages[%zu].tool_calls[%zu]", i, k);
        if (check_keys(r, call, KEYS(tool_call_keys), at) != 0)
            return -1;
        snprintf(at, sizeof at, "messages[%zu].tool_calls[%zu].function", i, k);
        if (xlate_get(call, "function", json_type_object, &fn) == 1 &&
            check_keys(r, fn, KEYS(tool_call_fn_keys), at) != 0)
            return -1;
    }
    return 0;
}

/* Every message, in order, against the allow-lists above; the shapes of the
 * values are checked where they are translated. */
static int check_messages(struct req *r, struct json_object *msgs)
{
    size_t n = json_object_array_length(msgs);
    int turns = 0;                      /* a user, assistant or tool message was seen */
    char at[32];
    for (size_t i = 0; i < n; i++) {
        struct json_object *m = json_object_array_get_idx(msgs, i), *role, *content, *calls;
        if (!json_object_is_type(m, json_type_object))
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages", "messages[%zu] must be an object", i);
        if (xlate_get(m, "role", json_type_string, &role) != 1)
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages", "messages[%zu].role must be a string", i);
        const struct key_row *rows;
        size_t n_rows;
        int assistant = 0;
        if (is_system(role)) {
            if (turns)
                return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, xlate_path(&r->x, "messages[%zu].role", i),
                                  "messages[%zu]: a %s message after the conversation started cannot be sent to this "
                                  "endpoint's upstream (Anthropic Messages has one system prompt, ahead of all turns)",
                                  i, json_object_get_string(role));
            rows = msg_plain_keys;
            n_rows = sizeof msg_plain_keys / sizeof msg_plain_keys[0];
        } else if (xlate_str_is(role, "user")) {
            rows = msg_plain_keys;
            n_rows = sizeof msg_plain_keys / sizeof msg_plain_keys[0];
        } else if (xlate_str_is(role, "assistant")) {
            rows = msg_assistant_keys;
            n_rows = sizeof msg_assistant_keys / sizeof msg_assistant_keys[0];
            assistant = 1;
        } else if (xlate_str_is(role, "tool")) {
            rows = msg_tool_keys;
            n_rows = sizeof msg_tool_keys / sizeof msg_tool_keys[0];
        } else {
            continue;                   /* refused where it is translated */
        }
        if (!is_system(role))
            turns = 1;
        snprintf(at, sizeof at, "messages[%zu]", i);
        if (check_keys(r, m, rows, n_rows, at) != 0)
            return -1;
        if (xlate_get(m, "content", json_type_array, &content) == 1 && check_parts(r, i, content) != 0)
            return -1;
        if (assistant && xlate_get(m, "tool_calls", json_type_array, &calls) == 1 && check_calls(r, i, calls) != 0)
            return -1;
    }
    return 0;
}

/* User, assistant and tool messages -> alternating turns. */
static int emit_turns(struct req *r, struct json_object *msgs)
{
    size_t n = json_object_array_length(msgs);
    xlate_put(&r->x, ",\"messages\":[");
    for (size_t i = 0; i < n; i++) {
        struct json_object *m = json_object_array_get_idx(msgs, i), *role, *content, *calls;
        if (!json_object_is_type(m, json_type_object))
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages", "messages[%zu] must be an object", i);
        if (xlate_get(m, "role", json_type_string, &role) != 1)
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages", "messages[%zu].role must be a string", i);
        if (is_system(role))
            continue;
        int has_content = json_object_object_get_ex(m, "content", &content) && content;
        if (xlate_str_is(role, "user")) {
            if (!has_content)
                return xlate_fail(&r->x, ERR_MISSING_FIELD, "messages", "messages[%zu]: a user message needs content",
                                  i);
            if (content_blocks(r, i, ROLE_USER, content, 0) != 0)
                return -1;
        } else if (xlate_str_is(role, "assistant")) {
            int has_calls = xlate_get(m, "tool_calls", json_type_array, &calls);
            if (has_calls < 0)
                return xlate_fail(&r->x, ERR_INVALID_TYPE, "messages", "messages[%zu].tool_calls must be an array", i);
            if (has_calls && json_object_array_length(calls) == 0)
                has_calls = 0;
            if (!has_content && !has_calls)
                return xlate_fail(&r->x, ERR_MISSING_FIELD, "messages",
                                  "messages[%zu]: an assistant message needs content or tool_calls", i);
            if (has_content && content_blocks(r, i, ROLE_ASSISTANT, content, has_calls) != 0)
                return -1;
            if (has_calls && tool_use_blocks(r, i, calls) != 0)
                return -1;
        } else if (xlate_str_is(role, "tool")) {
            if (tool_result_block(r, i, m) != 0)
                return -1;
        } else {
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, "messages",
                              "messages[%zu]: role %.40s cannot be sent to this endpoint's upstream", i,
                              json_object_get_string(role));
        }
    }
    if (!r->role)
        return xlate_fail(&r->x, ERR_MISSING_FIELD, "messages",
                          "messages needs at least one user or assistant message");
    xlate_put(&r->x, "]}]");
    return 0;
}

/* ---- tools --------------------------------------------------------------- */

static int emit_tools(struct req *r, struct json_object *tools)
{
    size_t n = json_object_array_length(tools);
    xlate_put(&r->x, ",\"tools\":[");
    for (size_t k = 0; k < n; k++) {
        struct json_object *t = json_object_array_get_idx(tools, k), *type, *fn, *name, *desc, *params;
        char at[48];
        if (!json_object_is_type(t, json_type_object))
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "tools", "tools[%zu] must be an object", k);
        snprintf(at, sizeof at, "tools[%zu]", k);
        if (check_keys(r, t, KEYS(tool_keys), at) != 0)
            return -1;
        if (xlate_get(t, "type", json_type_string, &type) == 1 && !xlate_str_is(type, "function"))
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, "tools", "tools[%zu]: only function tools can be sent",
                              k);
        if (xlate_get(t, "function", json_type_object, &fn) != 1 || xlate_get(fn, "name", json_type_string, &name) != 1)
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "tools", "tools[%zu] needs a function with a string name", k);
        snprintf(at, sizeof at, "tools[%zu].function", k);
        if (check_keys(r, fn, KEYS(tool_fn_keys), at) != 0)
            return -1;
        int has_desc = xlate_get(fn, "description", json_type_string, &desc);
        int has_params = xlate_get(fn, "parameters", json_type_object, &params);
        if (has_desc < 0 || has_params < 0)
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "tools",
                              "tools[%zu]: description must be a string and parameters an object", k);
        xlate_put(&r->x, k ? ",{\"name\":" : "{\"name\":");
        xlate_put_str(&r->x, name);
        if (has_desc) {
            xlate_put(&r->x, ",\"description\":");
            xlate_put_str(&r->x, desc);
        }
        xlate_put(&r->x, ",\"input_schema\":");
        if (has_params)
            xlate_put_value(&r->x, params);
        else
            xlate_put(&r->x, "{\"type\":\"object\",\"properties\":{}}");
        put_cache_control(r, t);
        xlate_put(&r->x, "}");
    }
    xlate_put(&r->x, "]");
    return 0;
}

/* tool_choice and parallel_tool_calls:false -> one tool_choice object. Without
 * tools, "auto" and "none" mean nothing and are not sent. */
static int emit_tool_choice(struct req *r, int have_tools)
{
    struct json_object *tc = r->v[F_TOOL_CHOICE], *p = r->v[F_PARALLEL_TOOL_CALLS], *fn, *name;
    int no_parallel = p && !json_object_get_boolean(p);
    const char *type = "auto";
    name = NULL;
    if (tc && json_object_is_type(tc, json_type_string)) {
        if (xlate_str_is(tc, "auto"))
            type = "auto";
        else if (xlate_str_is(tc, "none"))
            type = "none";
        else if (xlate_str_is(tc, "required"))
            type = "any";
        else
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, "tool_choice", "tool_choice %.40s cannot be mapped",
                              json_object_get_string(tc));
    } else if (tc) {
        struct json_object *t;
        if (xlate_get(tc, "type", json_type_string, &t) != 1 || !xlate_str_is(t, "function"))
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, "tool_choice",
                              "only function tool_choice objects can be mapped");
        if (xlate_get(tc, "function", json_type_object, &fn) != 1 ||
            xlate_get(fn, "name", json_type_string, &name) != 1)
            return xlate_fail(&r->x, ERR_INVALID_TYPE, "tool_choice", "tool_choice.function.name must be a string");
        type = "tool";
    }
    if (!have_tools) {
        if (tc && (strcmp(type, "any") == 0 || name))
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, "tool_choice", "tool_choice requires tools");
        return 0;
    }
    if (!tc && !no_parallel)
        return 0;
    xlate_put(&r->x, ",\"tool_choice\":{\"type\":\"");
    xlate_put(&r->x, type);
    xlate_put(&r->x, "\"");
    if (name) {
        xlate_put(&r->x, ",\"name\":");
        xlate_put_str(&r->x, name);
    }
    if (no_parallel && strcmp(type, "none") != 0)   /* ToolChoiceNone has no such field */
        xlate_put(&r->x, ",\"disable_parallel_tool_use\":true");
    xlate_put(&r->x, "}");
    return 0;
}

/* ---- the body ------------------------------------------------------------ */

int anthropic_request(struct json_object *chat, const char *model, int64_t default_max_tokens, int stream,
                      struct buf *out, struct xlate_fail *f)
{
    struct req r;
    memset(&r, 0, sizeof r);
    xlate_begin(&r.x, out, f);
    int rc = -1;

    if (!json_object_is_type(chat, json_type_object)) {
        xlate_fail(&r.x, ERR_INVALID_TYPE, NULL, "the request body must be a JSON object");
        goto out;
    }
    if (read_fields(&r, chat) != 0)
        goto out;
    struct json_object *msgs = r.v[F_MESSAGES];
    if (!msgs) {
        xlate_fail(&r.x, ERR_MISSING_FIELD, "messages", "messages is required");
        goto out;
    }
    if (json_object_array_length(msgs) == 0) {
        xlate_fail(&r.x, ERR_MISSING_FIELD, "messages", "messages must not be empty");
        goto out;
    }

    xlate_put(&r.x, "{\"model\":");
    xlate_put_model(&r.x, chat, model);
    struct json_object *mt = r.v[F_MAX_COMPLETION_TOKENS] ? r.v[F_MAX_COMPLETION_TOKENS] : r.v[F_MAX_TOKENS];
    if (buf_printf(out, ",\"max_tokens\":%" PRId64, mt ? json_object_get_int64(mt) : default_max_tokens) != 0)
        r.x.overflow = 1;
    if (check_messages(&r, msgs) != 0 || emit_system(&r, msgs) != 0 || emit_turns(&r, msgs) != 0)
        goto out;
    xlate_put_sampling(&r.x, r.v[F_TEMPERATURE], r.v[F_TOP_P], r.v[F_TOP_K]);
    struct json_object *stop = r.v[F_STOP];
    if (stop && json_object_is_type(stop, json_type_string)) {
        xlate_put(&r.x, ",\"stop_sequences\":[");
        xlate_put_str(&r.x, stop);
        xlate_put(&r.x, "]");
    } else if (stop && json_object_array_length(stop) > 0) {
        xlate_put(&r.x, ",\"stop_sequences\":");
        xlate_put_value(&r.x, stop);
    }
    struct json_object *user = r.v[F_USER] ? r.v[F_USER] : r.v[F_SAFETY_IDENTIFIER];
    if (user) {
        xlate_put(&r.x, ",\"metadata\":{\"user_id\":");
        xlate_put_str(&r.x, user);
        xlate_put(&r.x, "}");
    }
    int have_tools = r.v[F_TOOLS] && json_object_array_length(r.v[F_TOOLS]) > 0;
    if (have_tools && emit_tools(&r, r.v[F_TOOLS]) != 0)
        goto out;
    if (emit_tool_choice(&r, have_tools) != 0)
        goto out;
    if (stream)
        xlate_put(&r.x, ",\"stream\":true");
    xlate_put(&r.x, "}");
    rc = 0;
out:
    if (r.tok)
        json_tokener_free(r.tok);
    return xlate_end(&r.x, rc);     /* nothing half-written is left behind */
}
