/* messages.c: an Anthropic Messages request -> an OpenAI chat.completions request
 * (POST /v1/messages served by an OpenAI-compatible upstream; the reverse of anthropic.c).
 *
 * One pass over the caller's top-level fields through field_table (every field
 * sluice knows is one row; anything else is refused, never dropped), then the
 * chat body is written straight into the output buffer while every message,
 * content block, tool and tool_choice is checked against its allow-list (the
 * same rule one level down). A failure anywhere puts out back as it was, so
 * checking while writing leaves nothing half-written. The answer, error and
 * stream directions are in messages_stream.c. */
#include "messages.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The fields a chat body is built from (slots of struct req). */
enum field {
    F_NONE,                 /* checked only: nothing to send */
    F_MESSAGES,
    F_SYSTEM,
    F_MAX_TOKENS,
    F_STOP,
    F_TEMPERATURE,
    F_TOP_P,
    F_TOP_K,
    F_METADATA,
    F_TOOLS,
    F_TOOL_CHOICE,
    F_COUNT
};

/* One translation: the output, the failure and the fields seen. */
struct req {
    struct xlate x;                     /* the output and the failure */
    struct json_object *v[F_COUNT];     /* by enum field; NULL = absent or null */
    int prefill;                        /* the last message is an assistant text to continue */
};

/* o[key] of type t at path at.key: 1 with *v, or -1 with *f (missing when absent
 * or null and required, else invalid_type); 0 when absent and optional. */
static int need(struct xlate *x, struct json_object *o, const char *key, enum json_type t, int required, const char *at,
                const char *what, struct json_object **v)
{
    int got = xlate_get(o, key, t, v);
    if (got == 1)
        return 1;
    if (got < 0)
        return xlate_fail(x, ERR_INVALID_TYPE, xlate_path(x, "%s.%s", at, key), "%.90s.%.30s must be %s", at, key,
                          what);
    if (required)
        return xlate_fail(x, ERR_MISSING_FIELD, xlate_path(x, "%s.%s", at, key), "%.90s.%.30s is required", at, key);
    return 0;
}

/* ---- nested keys: the allow-lists ----------------------------------------- */

/* Every key of a message, content block, tool, tool_choice and metadata is one
 * row of an allow-list, with field_table's rule: a key not listed is refused
 * with unsupported_parameter even when null, param naming its path
 * ("messages[2].content[0].citations"); a mapped key is type-checked where it
 * is read.
 *
 * cache_control (null or an object) is accepted everywhere and dropped: it is
 * a prompt-cache hint, and OpenAI-compatible upstreams cache prefixes on their
 * own (vLLM's prefix cache, OpenAI's automatic caching), so it changes nothing
 * the caller gets back. citations passes only as null or [] (a text block of an
 * earlier answer may carry an empty list; a real one cannot be sent). */
enum key_rule {
    K_MAPPED,               /* translated; its type is checked where it is read */
    K_CACHE,                /* cache_control: null or an object, dropped */
    K_EMPTY,                /* refused unless null or [] */
};

struct key_row {
    const char *key;
    enum key_rule rule;
};

#define KEYS(a) a, sizeof a / sizeof a[0]

static const struct key_row message_keys[] = {{"role", K_MAPPED}, {"content", K_MAPPED}};
static const struct key_row text_keys[] = {
    {"type", K_MAPPED}, {"text", K_MAPPED}, {"cache_control", K_CACHE}, {"citations", K_EMPTY}};
static const struct key_row image_keys[] = {{"type", K_MAPPED}, {"source", K_MAPPED}, {"cache_control", K_CACHE}};
static const struct key_row source_base64_keys[] = {{"type", K_MAPPED}, {"media_type", K_MAPPED}, {"data", K_MAPPED}};
static const struct key_row source_url_keys[] = {{"type", K_MAPPED}, {"url", K_MAPPED}};
static const struct key_row tool_use_keys[] = {
    {"type", K_MAPPED}, {"id", K_MAPPED}, {"name", K_MAPPED}, {"input", K_MAPPED}, {"cache_control", K_CACHE}};
static const struct key_row tool_result_keys[] = {{"type", K_MAPPED}, {"tool_use_id", K_MAPPED},
                                                  {"content", K_MAPPED}, {"is_error", K_MAPPED},
                                                  {"cache_control", K_CACHE}};
static const struct key_row tool_keys[] = {{"type", K_MAPPED},         {"name", K_MAPPED},
                                           {"description", K_MAPPED},  {"input_schema", K_MAPPED},
                                           {"strict", K_MAPPED},       {"cache_control", K_CACHE}};
static const struct key_row tool_choice_keys[] = {
    {"type", K_MAPPED}, {"name", K_MAPPED}, {"disable_parallel_tool_use", K_MAPPED}};
static const struct key_row metadata_keys[] = {{"user_id", K_MAPPED}};

/* Every key of o (found at path at) against rows. */
static int check_keys(struct xlate *x, struct json_object *o, const struct key_row *rows, size_t n_rows, const char *at)
{
    json_object_object_foreach(o, key, v) {
        const struct key_row *row = NULL;
        for (size_t i = 0; i < n_rows && !row; i++)
            if (strcmp(rows[i].key, key) == 0)
                row = &rows[i];
        if (row && row->rule == K_CACHE && v && !json_object_is_type(v, json_type_object))
            return xlate_fail(x, ERR_INVALID_TYPE, xlate_path(x, "%s.%s", at, key), "%.90s.%.30s must be an object", at,
                              key);
        if (row && row->rule == K_EMPTY && v &&
            !(json_object_is_type(v, json_type_array) && json_object_array_length(v) == 0))
            return xlate_fail(x, ERR_UNSUPPORTED_PARAMETER, xlate_path(x, "%s.%s", at, key),
                              "%.90s.%.30s cannot be sent to this endpoint's upstream (OpenAI chat); only null or [] "
                              "passes", at, key);
        if (!row)
            return xlate_fail(x, ERR_UNSUPPORTED_PARAMETER, xlate_path(x, "%s.%s", at, key),
                              "%.90s.%.60s cannot be mapped to this endpoint's upstream protocol (OpenAI chat)", at,
                              key);
    }
    return 0;
}

/* A content block's type at path at: 1 with *type, or -1 with *f. */
static int block_type(struct req *r, struct json_object *block, const char *at, struct json_object **type)
{
    if (!json_object_is_type(block, json_type_object))
        return xlate_fail(&r->x, ERR_INVALID_TYPE, xlate_path(&r->x, "%s", at), "%.100s must be an object", at);
    return need(&r->x, block, "type", json_type_string, 1, at, "a string", type);
}

/* ---- top-level fields ----------------------------------------------------- */

static int check_max_tokens(struct xlate *x, const char *name, struct json_object *v)
{
    if (xlate_check_int(x, name, v) != 0)
        return -1;
    if (json_object_get_int64(v) < 1)
        return xlate_fail(x, ERR_INVALID_VALUE, name, "max_tokens must be at least 1");
    return 0;
}

/* Messages takes 0..1 for both; the same values mean the same on OpenAI, so
 * they pass as they are, and anything outside is the caller's mistake. */
static int check_unit(struct xlate *x, const char *name, struct json_object *v)
{
    if (!xlate_is_number(v))
        return xlate_fail(x, ERR_INVALID_TYPE, name, "%s must be a number", name);
    double d = json_object_get_double(v);
    if (d >= 0.0 && d <= 1.0)
        return 0;
    return xlate_fail(x, ERR_INVALID_VALUE, name, "%s must be between 0 and 1", name);
}

static int check_top_k(struct xlate *x, const char *name, struct json_object *v)
{
    if (xlate_check_int(x, name, v) != 0)
        return -1;
    if (json_object_get_int64(v) < 0)
        return xlate_fail(x, ERR_INVALID_VALUE, name, "top_k must not be negative");
    return 0;
}

static int check_system(struct xlate *x, const char *name, struct json_object *v)
{
    if (json_object_is_type(v, json_type_string) || json_object_is_type(v, json_type_array))
        return 0;
    return xlate_fail(x, ERR_INVALID_TYPE, name, "system must be a string or an array of text blocks");
}

static int check_stop(struct xlate *x, const char *name, struct json_object *v)
{
    if (xlate_check_array(x, name, v) != 0)
        return -1;
    size_t n = json_object_array_length(v);
    for (size_t i = 0; i < n; i++)
        if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_string))
            return xlate_fail(x, ERR_INVALID_TYPE, xlate_path(x, "stop_sequences[%zu]", i),
                              "stop_sequences[%zu] must be a string", i);
    return 0;
}

/* metadata has one field in Messages, user_id (-> user); any other is refused. */
static int check_metadata(struct xlate *x, const char *name, struct json_object *v)
{
    struct json_object *id;
    if (xlate_check_object(x, name, v) != 0 || check_keys(x, v, KEYS(metadata_keys), "metadata") != 0)
        return -1;
    return need(x, v, "user_id", json_type_string, 0, "metadata", "a string", &id) < 0 ? -1 : 0;
}

/* thinking: "disabled" asks for nothing and passes; "enabled" and "adaptive"
 * ask for a reasoning budget and signed thinking blocks, which no OpenAI chat
 * field gives, so they are refused. */
static int check_thinking(struct xlate *x, const char *name, struct json_object *v)
{
    struct json_object *type;
    if (xlate_check_object(x, name, v) != 0 ||
        need(x, v, "type", json_type_string, 1, "thinking", "a string", &type) < 0)
        return -1;
    if (xlate_str_is(type, "disabled"))
        return 0;
    return xlate_fail(x, ERR_UNSUPPORTED_PARAMETER, name,
                      "thinking %.40s cannot be mapped to this endpoint's upstream protocol (OpenAI chat); only "
                      "{\"type\":\"disabled\"} passes", json_object_get_string(type));
}

/* service_tier: "auto" and "standard_only" ask for the ordinary service, which
 * is all this upstream gives; they pass and are not sent. */
static int check_service_tier(struct xlate *x, const char *name, struct json_object *v)
{
    if (xlate_check_string(x, name, v) != 0)
        return -1;
    if (xlate_str_is(v, "auto") || xlate_str_is(v, "standard_only"))
        return 0;
    return xlate_fail(x, ERR_UNSUPPORTED_PARAMETER, name,
                      "service_tier %.40s cannot be mapped to this endpoint's upstream", json_object_get_string(v));
}

/* Every top-level Messages field this translation knows, one row each. A field
 * that is absent or null is skipped; any field not listed is refused with
 * unsupported_parameter (nothing is dropped silently). Accepted and not sent:
 * model (replaced by the endpoint's name), stream (the caller's stream argument
 * decides), thinking {"type":"disabled"}, service_tier "auto" / "standard_only". */
static const struct xlate_field field_table[] = {
    {"model", F_NONE, xlate_check_string},
    {"messages", F_MESSAGES, xlate_check_array},
    {"max_tokens", F_MAX_TOKENS, check_max_tokens},
    {"system", F_SYSTEM, check_system},
    {"stop_sequences", F_STOP, check_stop},             /* -> stop */
    {"temperature", F_TEMPERATURE, check_unit},
    {"top_p", F_TOP_P, check_unit},
    {"top_k", F_TOP_K, check_top_k},                    /* not OpenAI's; vLLM takes it */
    {"metadata", F_METADATA, check_metadata},           /* user_id -> user */
    {"tools", F_TOOLS, xlate_check_array},
    {"tool_choice", F_TOOL_CHOICE, xlate_check_object},
    {"stream", F_NONE, xlate_check_bool},
    {"thinking", F_NONE, check_thinking},
    {"service_tier", F_NONE, check_service_tier},
};

static int read_fields(struct req *r, struct json_object *msg)
{
    const char *key;
    int rc = xlate_read_fields(&r->x, msg, field_table, sizeof field_table / sizeof field_table[0], r->v, &key);
    if (rc > 0)
        return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, xlate_path(&r->x, "%s", key),
                          "%.180s cannot be mapped to this endpoint's upstream protocol (OpenAI chat)", key);
    return rc;
}

/* ---- text ------------------------------------------------------------------ */

/* Appends to a scratch buffer (capped at out's max: it ends up in out). */
static void join(struct req *r, struct buf *b, const char *s, size_t n)
{
    if (buf_append(b, s, n) != 0)
        r->x.overflow = 1;
}

/* A text block at path at: its text, or NULL with *f. */
static struct json_object *text_of(struct req *r, struct json_object *block, const char *at)
{
    struct json_object *text;
    if (check_keys(&r->x, block, KEYS(text_keys), at) != 0 ||
        need(&r->x, block, "text", json_type_string, 1, at, "a string", &text) < 0)
        return NULL;
    return text;
}

/* Text blocks (only) at path at -> their texts joined with sep into b. */
static int join_text_blocks(struct req *r, struct json_object *blocks, const char *at, const char *sep,
                            struct buf *b)
{
    size_t n = json_object_array_length(blocks);
    char here[112];
    for (size_t k = 0; k < n; k++) {
        struct json_object *block = json_object_array_get_idx(blocks, k), *type, *text;
        snprintf(here, sizeof here, "%s[%zu]", at, k);
        if (block_type(r, block, here, &type) < 0)
            return -1;
        if (!xlate_str_is(type, "text"))
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, xlate_path(&r->x, "%s.type", here),
                              "%.100s: only text blocks can be sent here to this endpoint's upstream (OpenAI chat)",
                              here);
        if (!(text = text_of(r, block, here)))
            return -1;
        if (k)
            join(r, b, sep, strlen(sep));
        join(r, b, json_object_get_string(text), (size_t)json_object_get_string_len(text));
    }
    return 0;
}

/* system (a string, or text blocks joined with "\n") -> the first message, a
 * system message; an empty system asks for nothing and is not sent. */
static int emit_system(struct req *r, struct json_object *system)
{
    struct buf b;
    buf_init(&b, r->x.out->max);
    int rc = 0;
    if (json_object_is_type(system, json_type_string))
        join(r, &b, json_object_get_string(system), (size_t)json_object_get_string_len(system));
    else
        rc = join_text_blocks(r, system, "system", "\n", &b);
    if (rc == 0 && b.len) {
        xlate_put(&r->x, "{\"role\":\"system\",\"content\":");
        xlate_put_json_str(&r->x, b.data, b.len);
        xlate_put(&r->x, "}");
    }
    buf_free(&b);
    return rc;
}

/* ---- messages -------------------------------------------------------------- */

/* One message separator: the first message opens the array without a comma. */
static void message_open(struct req *r, int *n_out)
{
    if ((*n_out)++)
        xlate_put(&r->x, ",");
}

/* An image block -> an image_url part: base64 sources become a data: URL. */
static int image_part(struct req *r, struct json_object *block, const char *at, int emit)
{
    struct json_object *src, *type, *media, *data, *url;
    char here[112];
    if (check_keys(&r->x, block, KEYS(image_keys), at) != 0 ||
        need(&r->x, block, "source", json_type_object, 1, at, "an object", &src) < 0)
        return -1;
    snprintf(here, sizeof here, "%s.source", at);
    if (need(&r->x, src, "type", json_type_string, 1, here, "a string", &type) < 0)
        return -1;
    if (xlate_str_is(type, "base64")) {
        if (check_keys(&r->x, src, KEYS(source_base64_keys), here) != 0 ||
            need(&r->x, src, "media_type", json_type_string, 1, here, "a string", &media) < 0 ||
            need(&r->x, src, "data", json_type_string, 1, here, "a string", &data) < 0)
            return -1;
        if (!emit)
            return 0;
        struct buf u;                       /* data:<media_type>;base64,<data> */
        buf_init(&u, r->x.out->max);
        join(r, &u, "data:", 5);
        join(r, &u, json_object_get_string(media), (size_t)json_object_get_string_len(media));
        join(r, &u, ";base64,", 8);
        join(r, &u, json_object_get_string(data), (size_t)json_object_get_string_len(data));
        xlate_put(&r->x, "{\"type\":\"image_url\",\"image_url\":{\"url\":");
        xlate_put_json_str(&r->x, u.data ? u.data : "", u.len);
        buf_free(&u);
        xlate_put(&r->x, "}}");
        return 0;
    }
    if (xlate_str_is(type, "url")) {
        if (check_keys(&r->x, src, KEYS(source_url_keys), here) != 0 ||
            need(&r->x, src, "url", json_type_string, 1, here, "a string", &url) < 0)
            return -1;
        if (emit) {
            xlate_put(&r->x, "{\"type\":\"image_url\",\"image_url\":{\"url\":");
            xlate_put_str(&r->x, url);
            xlate_put(&r->x, "}}");
        }
        return 0;
    }
    return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, xlate_path(&r->x, "%s.type", here),
                      "%.100s.type %.30s cannot be sent to this endpoint's upstream (OpenAI chat); only base64 and url "
                      "images can", here, json_object_get_string(type));
}

/* A tool_result block -> a tool message. Its content is a string or text
 * blocks (joined with "\n": OpenAI tool messages carry text). is_error is
 * checked and not sent: OpenAI tool messages have no error flag, and the
 * content already says what failed. */
static int tool_message(struct req *r, struct json_object *block, const char *at, int *n_out)
{
    struct json_object *id, *content, *is_error;
    char here[112];
    if (check_keys(&r->x, block, KEYS(tool_result_keys), at) != 0 ||
        need(&r->x, block, "tool_use_id", json_type_string, 1, at, "a string", &id) < 0 ||
        need(&r->x, block, "is_error", json_type_boolean, 0, at, "a boolean", &is_error) < 0)
        return -1;
    struct buf b;
    buf_init(&b, r->x.out->max);
    int rc = 0;
    if (xlate_get(block, "content", json_type_string, &content) == 1) {
        join(r, &b, json_object_get_string(content), (size_t)json_object_get_string_len(content));
    } else if (content && json_object_is_type(content, json_type_array)) {
        snprintf(here, sizeof here, "%s.content", at);
        rc = join_text_blocks(r, content, here, "\n", &b);
    } else if (content) {
        rc = xlate_fail(&r->x, ERR_INVALID_TYPE, xlate_path(&r->x, "%s.content", at),
                        "%.90s.content must be a string or an array", at);
    }
    if (rc == 0) {
        message_open(r, n_out);
        xlate_put(&r->x, "{\"role\":\"tool\",\"tool_call_id\":");
        xlate_put_str(&r->x, id);
        xlate_put(&r->x, ",\"content\":");
        xlate_put_json_str(&r->x, b.data ? b.data : "", b.len);
        xlate_put(&r->x, "}");
    }
    buf_free(&b);
    return rc;
}

/* A user message. Its tool_result blocks become tool messages placed first
 * (OpenAI wants them right after the assistant's tool_calls), then the rest of
 * its blocks one user message, none when nothing is left. The first pass
 * writes the tool messages and checks every other block in order; the second
 * writes those. */
static int user_message(struct req *r, size_t i, struct json_object *content, int *n_out)
{
    if (json_object_is_type(content, json_type_string)) {
        message_open(r, n_out);
        xlate_put(&r->x, "{\"role\":\"user\",\"content\":");
        xlate_put_str(&r->x, content);
        xlate_put(&r->x, "}");
        return 0;
    }
    size_t n = json_object_array_length(content), rest = 0;
    if (n == 0)
        return xlate_fail(&r->x, ERR_INVALID_VALUE, xlate_path(&r->x, "messages[%zu].content", i),
                          "messages[%zu].content is empty", i);
    char at[64];
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            if (!rest)
                return 0;
            message_open(r, n_out);
            xlate_put(&r->x, "{\"role\":\"user\",\"content\":[");
        }
        for (size_t k = 0, parts = 0; k < n; k++) {
            struct json_object *block = json_object_array_get_idx(content, k), *type, *text;
            snprintf(at, sizeof at, "messages[%zu].content[%zu]", i, k);
            if (block_type(r, block, at, &type) < 0)
                return -1;
            if (xlate_str_is(type, "tool_result")) {
                if (pass == 0 && tool_message(r, block, at, n_out) != 0)
                    return -1;
                continue;
            }
            if (pass == 1 && parts++)
                xlate_put(&r->x, ",");
            if (xlate_str_is(type, "text")) {
                if (!(text = text_of(r, block, at)))
                    return -1;
                if (pass == 1) {
                    xlate_put(&r->x, "{\"type\":\"text\",\"text\":");
                    xlate_put_str(&r->x, text);
                    xlate_put(&r->x, "}");
                }
            } else if (xlate_str_is(type, "image")) {
                if (image_part(r, block, at, pass) != 0)
                    return -1;
            } else if (xlate_str_is(type, "tool_use") || xlate_str_is(type, "thinking") ||
                       xlate_str_is(type, "redacted_thinking")) {
                return xlate_fail(&r->x, ERR_INVALID_VALUE, xlate_path(&r->x, "%s.type", at),
                                  "%s: %.30s blocks belong in assistant messages", at, json_object_get_string(type));
            } else {
                return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, xlate_path(&r->x, "%s.type", at),
                                  "%s: %.40s blocks cannot be sent to this endpoint's upstream (OpenAI chat)", at,
                                  json_object_get_string(type));
            }
            if (pass == 0)
                rest++;
        }
    }
    xlate_put(&r->x, "]}");
    return 0;
}

/* A tool_use block -> one tool call; input is sent as its compact JSON text. */
static int tool_call(struct req *r, struct json_object *block, const char *at, size_t calls)
{
    struct json_object *id, *name, *input;
    if (check_keys(&r->x, block, KEYS(tool_use_keys), at) != 0 ||
        need(&r->x, block, "id", json_type_string, 1, at, "a string", &id) < 0 ||
        need(&r->x, block, "name", json_type_string, 1, at, "a string", &name) < 0 ||
        need(&r->x, block, "input", json_type_object, 1, at, "an object", &input) < 0)
        return -1;
    xlate_put(&r->x, calls ? ",{\"id\":" : "{\"id\":");
    xlate_put_str(&r->x, id);
    xlate_put(&r->x, ",\"type\":\"function\",\"function\":{\"name\":");
    xlate_put_str(&r->x, name);
    xlate_put(&r->x, ",\"arguments\":");
    const char *args = xlate_compact(input);
    xlate_put_json_str(&r->x, args, strlen(args));
    xlate_put(&r->x, "}}");
    return 0;
}

/* An assistant message: text blocks joined into content (null when there are
 * tool calls and no text), tool_use blocks into tool_calls. thinking and
 * redacted_thinking blocks are dropped: they are the model's own earlier
 * reasoning, and no OpenAI chat field takes it back. last: this is the final
 * message, a prefill to continue (then it carries no tool calls; an empty one
 * asks for nothing and is not sent). */
static int assistant_message(struct req *r, size_t i, struct json_object *content, int last, int *n_out)
{
    struct buf text, calls;
    buf_init(&text, r->x.out->max);
    buf_init(&calls, r->x.out->max);
    size_t n_calls = 0;
    int rc = 0;
    char at[64];
    if (json_object_is_type(content, json_type_string)) {
        join(r, &text, json_object_get_string(content), (size_t)json_object_get_string_len(content));
    } else {
        /* tool calls are written to a scratch buffer: content comes first */
        struct buf *out = r->x.out;
        r->x.out = &calls;
        size_t n = json_object_array_length(content);
        for (size_t k = 0; k < n && rc == 0; k++) {
            struct json_object *block = json_object_array_get_idx(content, k), *type, *t;
            snprintf(at, sizeof at, "messages[%zu].content[%zu]", i, k);
            if (block_type(r, block, at, &type) < 0) {
                rc = -1;
            } else if (xlate_str_is(type, "text")) {
                if ((t = text_of(r, block, at)))
                    join(r, &text, json_object_get_string(t), (size_t)json_object_get_string_len(t));
                else
                    rc = -1;
            } else if (xlate_str_is(type, "tool_use")) {
                rc = tool_call(r, block, at, n_calls++);
            } else if (xlate_str_is(type, "thinking") || xlate_str_is(type, "redacted_thinking")) {
                continue;
            } else if (xlate_str_is(type, "tool_result") || xlate_str_is(type, "image")) {
                rc = xlate_fail(&r->x, ERR_INVALID_VALUE, xlate_path(&r->x, "%s.type", at),
                                "%s: %.30s blocks belong in user messages", at, json_object_get_string(type));
            } else {
                rc = xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, xlate_path(&r->x, "%s.type", at),
                                "%s: %.40s blocks cannot be sent to this endpoint's upstream (OpenAI chat)", at,
                                json_object_get_string(type));
            }
        }
        r->x.out = out;
    }
    if (rc == 0 && last && n_calls)
        rc = xlate_fail(&r->x, ERR_INVALID_VALUE, xlate_path(&r->x, "messages[%zu]", i),
                        "messages[%zu]: the last message has tool_use blocks and no tool_result follows", i);
    if (rc == 0 && !(last && text.len == 0)) {
        message_open(r, n_out);
        xlate_put(&r->x, "{\"role\":\"assistant\",\"content\":");
        if (n_calls && text.len == 0)
            xlate_put(&r->x, "null");
        else
            xlate_put_json_str(&r->x, text.data ? text.data : "", text.len);
        if (n_calls) {
            xlate_put(&r->x, ",\"tool_calls\":[");
            if (buf_append(r->x.out, calls.data, calls.len) != 0)
                r->x.overflow = 1;
            xlate_put(&r->x, "]");
        }
        xlate_put(&r->x, "}");
        r->prefill = last;
    }
    buf_free(&text);
    buf_free(&calls);
    return rc;
}

static int emit_messages(struct req *r, struct json_object *msgs)
{
    size_t n = json_object_array_length(msgs);
    int n_out = 0;
    char at[32];
    xlate_put(&r->x, ",\"messages\":[");
    if (r->v[F_SYSTEM]) {
        size_t before = r->x.out->len;
        if (emit_system(r, r->v[F_SYSTEM]) != 0)
            return -1;
        n_out = r->x.out->len != before;
    }
    for (size_t i = 0; i < n; i++) {
        struct json_object *m = json_object_array_get_idx(msgs, i), *role, *content;
        snprintf(at, sizeof at, "messages[%zu]", i);
        if (!json_object_is_type(m, json_type_object))
            return xlate_fail(&r->x, ERR_INVALID_TYPE, xlate_path(&r->x, "%s", at), "%s must be an object", at);
        if (check_keys(&r->x, m, KEYS(message_keys), at) != 0 ||
            need(&r->x, m, "role", json_type_string, 1, at, "a string", &role) < 0)
            return -1;
        if (!json_object_object_get_ex(m, "content", &content) || !content)
            return xlate_fail(&r->x, ERR_MISSING_FIELD, xlate_path(&r->x, "%s.content", at), "%s.content is required",
                              at);
        if (!json_object_is_type(content, json_type_string) && !json_object_is_type(content, json_type_array))
            return xlate_fail(&r->x, ERR_INVALID_TYPE, xlate_path(&r->x, "%s.content", at),
                              "%s.content must be a string or an array", at);
        int rc;
        if (xlate_str_is(role, "user"))
            rc = user_message(r, i, content, &n_out);
        else if (xlate_str_is(role, "assistant"))
            rc = assistant_message(r, i, content, i + 1 == n, &n_out);
        else
            rc = xlate_fail(&r->x, ERR_INVALID_VALUE, xlate_path(&r->x, "%s.role", at),
                            "%s.role must be \"user\" or \"assistant\"", at);
        if (rc != 0)
            return -1;
    }
    /* An empty prefill (or one of thinking only) is not sent; with nothing
     * else there is nothing to ask the upstream. */
    if (n_out == 0)
        return xlate_fail(&r->x, ERR_INVALID_VALUE, "messages",
                          "messages: nothing to send (only an empty assistant prefill)");
    xlate_put(&r->x, "]");
    return 0;
}

/* ---- tools ----------------------------------------------------------------- */

/* Custom tools (type absent or "custom") -> function tools, in order. Server
 * tools (web_search_*, bash_*, text_editor_*, ...) run at Anthropic and have no
 * OpenAI counterpart: refused. */
static int emit_tools(struct req *r, struct json_object *tools)
{
    size_t n = json_object_array_length(tools);
    char at[32];
    xlate_put(&r->x, ",\"tools\":[");
    for (size_t k = 0; k < n; k++) {
        struct json_object *t = json_object_array_get_idx(tools, k), *type, *name, *desc, *schema, *strict;
        snprintf(at, sizeof at, "tools[%zu]", k);
        if (!json_object_is_type(t, json_type_object))
            return xlate_fail(&r->x, ERR_INVALID_TYPE, xlate_path(&r->x, "%s", at), "%s must be an object", at);
        if (need(&r->x, t, "type", json_type_string, 0, at, "a string", &type) < 0)
            return -1;
        if (type && json_object_is_type(type, json_type_string) && !xlate_str_is(type, "custom"))
            return xlate_fail(&r->x, ERR_UNSUPPORTED_PARAMETER, xlate_path(&r->x, "%s.type", at),
                              "%s: the server tool %.60s cannot be used with this endpoint's upstream (OpenAI chat); "
                              "only custom tools can", at, json_object_get_string(type));
        if (check_keys(&r->x, t, KEYS(tool_keys), at) != 0 ||
            need(&r->x, t, "name", json_type_string, 1, at, "a string", &name) < 0 ||
            need(&r->x, t, "description", json_type_string, 0, at, "a string", &desc) < 0 ||
            need(&r->x, t, "input_schema", json_type_object, 1, at, "an object", &schema) < 0 ||
            need(&r->x, t, "strict", json_type_boolean, 0, at, "a boolean", &strict) < 0)
            return -1;
        xlate_put(&r->x, k ? ",{\"type\":\"function\",\"function\":{\"name\":"
                           : "{\"type\":\"function\",\"function\":{\"name\":");
        xlate_put_str(&r->x, name);
        if (desc && json_object_is_type(desc, json_type_string)) {
            xlate_put(&r->x, ",\"description\":");
            xlate_put_str(&r->x, desc);
        }
        xlate_put(&r->x, ",\"parameters\":");
        xlate_put_value(&r->x, schema);
        if (strict && json_object_is_type(strict, json_type_boolean))
            xlate_put(&r->x, json_object_get_boolean(strict) ? ",\"strict\":true" : ",\"strict\":false");
        xlate_put(&r->x, "}}");
    }
    xlate_put(&r->x, "]");
    return 0;
}

/* tool_choice -> tool_choice and parallel_tool_calls. OpenAI refuses both
 * without tools, so then "auto" and "none" (which ask for nothing) are not
 * sent and "any" / "tool" are the caller's mistake. */
static int emit_tool_choice(struct req *r, struct json_object *tc, int have_tools)
{
    struct json_object *type, *name = NULL, *no_parallel;
    if (check_keys(&r->x, tc, KEYS(tool_choice_keys), "tool_choice") != 0 ||
        need(&r->x, tc, "type", json_type_string, 1, "tool_choice", "a string", &type) < 0 ||
        need(&r->x, tc, "disable_parallel_tool_use", json_type_boolean, 0, "tool_choice", "a boolean", &no_parallel) <
            0)
        return -1;
    const char *choice;
    if (xlate_str_is(type, "auto"))
        choice = "\"auto\"";
    else if (xlate_str_is(type, "any"))
        choice = "\"required\"";
    else if (xlate_str_is(type, "none"))
        choice = "\"none\"";
    else if (xlate_str_is(type, "tool")) {
        if (need(&r->x, tc, "name", json_type_string, 1, "tool_choice", "a string", &name) < 0)
            return -1;
        choice = NULL;
    } else
        return xlate_fail(&r->x, ERR_INVALID_VALUE, "tool_choice.type",
                          "tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\"");
    if (!have_tools) {
        if (xlate_str_is(type, "any") || name)
            return xlate_fail(&r->x, ERR_INVALID_VALUE, "tool_choice", "tool_choice %s needs tools",
                              json_object_get_string(type));
        return 0;
    }
    xlate_put(&r->x, ",\"tool_choice\":");
    if (choice) {
        xlate_put(&r->x, choice);
    } else {
        xlate_put(&r->x, "{\"type\":\"function\",\"function\":{\"name\":");
        xlate_put_str(&r->x, name);
        xlate_put(&r->x, "}}");
    }
    if (no_parallel && json_object_is_type(no_parallel, json_type_boolean) && json_object_get_boolean(no_parallel))
        xlate_put(&r->x, ",\"parallel_tool_calls\":false");
    return 0;
}

/* ---- the body -------------------------------------------------------------- */

int messages_request(struct json_object *msg, const char *model, int stream, struct buf *out, struct xlate_fail *f)
{
    struct req r;
    memset(&r, 0, sizeof r);
    xlate_begin(&r.x, out, f);
    int rc = -1;

    if (!json_object_is_type(msg, json_type_object)) {
        xlate_fail(&r.x, ERR_INVALID_TYPE, NULL, "the request body must be a JSON object");
        goto out;
    }
    if (read_fields(&r, msg) != 0)
        goto out;
    struct json_object *msgs = r.v[F_MESSAGES], *mt = r.v[F_MAX_TOKENS];
    if (!msgs) {
        xlate_fail(&r.x, ERR_MISSING_FIELD, "messages", "messages is required");
        goto out;
    }
    if (json_object_array_length(msgs) == 0) {
        xlate_fail(&r.x, ERR_INVALID_VALUE, "messages", "messages must not be empty");
        goto out;
    }
    if (!mt) {
        xlate_fail(&r.x, ERR_MISSING_FIELD, "max_tokens", "max_tokens is required");
        goto out;
    }

    xlate_put(&r.x, "{\"model\":");
    xlate_put_model(&r.x, msg, model);
    if (emit_messages(&r, msgs) != 0)
        goto out;
    if (buf_printf(out, ",\"max_tokens\":%" PRId64, json_object_get_int64(mt)) != 0)
        r.x.overflow = 1;
    struct json_object *stop = r.v[F_STOP];
    if (stop && json_object_array_length(stop) > 0) {
        xlate_put(&r.x, ",\"stop\":");
        xlate_put_value(&r.x, stop);
    }
    xlate_put_sampling(&r.x, r.v[F_TEMPERATURE], r.v[F_TOP_P], r.v[F_TOP_K]);
    struct json_object *user;
    if (r.v[F_METADATA] && xlate_get(r.v[F_METADATA], "user_id", json_type_string, &user) == 1) {
        xlate_put(&r.x, ",\"user\":");
        xlate_put_str(&r.x, user);
    }
    /* OpenAI refuses "tools":[]: an empty list asks for nothing and is not sent. */
    int have_tools = r.v[F_TOOLS] && json_object_array_length(r.v[F_TOOLS]) > 0;
    if (have_tools && emit_tools(&r, r.v[F_TOOLS]) != 0)
        goto out;
    if (r.v[F_TOOL_CHOICE] && emit_tool_choice(&r, r.v[F_TOOL_CHOICE], have_tools) != 0)
        goto out;
    /* A final assistant message is a prefill: vLLM continues it only when told. */
    if (r.prefill)
        xlate_put(&r.x, ",\"continue_final_message\":true,\"add_generation_prompt\":false");
    if (stream)
        xlate_put(&r.x, ",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    xlate_put(&r.x, "}");
    rc = 0;
out:
    return xlate_end(&r.x, rc);     /* nothing half-written is left behind */
}
