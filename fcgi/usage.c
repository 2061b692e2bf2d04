/* usage.c: token usage from upstream JSON (OpenAI chat, Responses, Anthropic) and OpenAI chunk kinds. */
#include "usage.h"

#include "json_parse.h"
#include "usage_scan.h"

#include <json-c/json.h>
#include <string.h>

/* One counter of a usage object: 1 and *out when present. */
static int usage_counter(struct json_object *usage, const char *name, int64_t *out)
{
    struct json_object *v;
    if (!json_object_object_get_ex(usage, name, &v) || !json_object_is_type(v, json_type_int))
        return 0;
    int64_t n = json_object_get_int64(v);
    *out = n <= 0 ? 0 : n > USAGE_COUNT_MAX ? USAGE_COUNT_MAX : n;
    return 1;
}

/* a + b for counts >= 0, saturating: an upstream's huge counts never overflow. */
static int64_t usage_add(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* A counter inside a details object of usage (prompt_tokens_details.cached_tokens, ...). */
static void usage_detail(struct json_object *usage, const char *obj, const char *name, struct usage_seen *s, int f)
{
    struct json_object *d;
    if (json_object_object_get_ex(usage, obj, &d) && json_object_is_type(d, json_type_object) &&
        usage_counter(d, name, &s->v[f]))
        s->has |= 1u << f;
}

/* The counters of json-c's usage object (what usage_scan reads from plain text). */
static void usage_seen_of(struct json_object *usage, struct usage_seen *s)
{
    static const char *const top[] = {
        [UF_PROMPT] = "prompt_tokens", [UF_COMPLETION] = "completion_tokens", [UF_INPUT] = "input_tokens",
        [UF_OUTPUT] = "output_tokens", [UF_CACHE_CREATION] = "cache_creation_input_tokens",
        [UF_CACHE_READ] = "cache_read_input_tokens",
    };
    memset(s, 0, sizeof *s);
    for (int f = UF_PROMPT; f <= UF_CACHE_READ; f++)
        if (usage_counter(usage, top[f], &s->v[f]))
            s->has |= 1u << f;
    usage_detail(usage, "prompt_tokens_details", "cached_tokens", s, UF_PROMPT_CACHED);
    usage_detail(usage, "completion_tokens_details", "reasoning_tokens", s, UF_COMPLETION_REASONING);
    usage_detail(usage, "input_tokens_details", "cached_tokens", s, UF_INPUT_CACHED);
    usage_detail(usage, "output_tokens_details", "reasoning_tokens", s, UF_OUTPUT_REASONING);
    s->input_details = json_object_object_get_ex(usage, "input_tokens_details", NULL);
    s->output_details = json_object_object_get_ex(usage, "output_tokens_details", NULL);
}

static int64_t seen_v(const struct usage_seen *s, enum usage_field f)
{
    return s->has & (1u << f) ? s->v[f] : 0;
}

/* OpenAI chat's usage (prompt_tokens, completion_tokens, their details), the
 * Responses API's (input_tokens including cached ones, input_tokens_details,
 * output_tokens_details), or Anthropic's (input_tokens without the cache
 * counts, which are added). Found only when a known counter is there:
 * an empty or foreign usage object is no usage. */
static int usage_decide(const struct usage_seen *s, struct usage *u)
{
    int openai = (s->has & (1u << UF_PROMPT | 1u << UF_COMPLETION)) != 0;
    int other = (s->has & (1u << UF_INPUT | 1u << UF_OUTPUT)) != 0;
    int anthropic = (s->has & (1u << UF_CACHE_CREATION | 1u << UF_CACHE_READ)) != 0;
    if (!openai && !other && !anthropic)
        return 0;
    memset(u, 0, sizeof *u);
    if (openai) {
        u->prompt_tokens = seen_v(s, UF_PROMPT);
        u->completion_tokens = seen_v(s, UF_COMPLETION);
        u->cache_read_tokens = seen_v(s, UF_PROMPT_CACHED);
        u->reasoning_tokens = seen_v(s, UF_COMPLETION_REASONING);
    } else if (s->input_details || s->output_details) {
        u->prompt_tokens = seen_v(s, UF_INPUT);            /* Responses: input_tokens counts the cached ones */
        u->completion_tokens = seen_v(s, UF_OUTPUT);
        u->cache_read_tokens = seen_v(s, UF_INPUT_CACHED);
        u->reasoning_tokens = seen_v(s, UF_OUTPUT_REASONING);
    } else {
        int64_t cw = seen_v(s, UF_CACHE_CREATION), cr = seen_v(s, UF_CACHE_READ);
        u->prompt_tokens = usage_add(usage_add(seen_v(s, UF_INPUT), cw), cr);
        u->completion_tokens = seen_v(s, UF_OUTPUT);
        u->cache_read_tokens = cr;
        u->cache_creation_tokens = cw;
    }
    u->found = 1;
    return 1;
}

/* Top level, or under "message" (message_start) or "response" (response.completed). */
static int usage_read_object(struct json_object *usage, struct usage *u)
{
    if (!json_object_is_type(usage, json_type_object))
        return 0;
    struct usage_seen s;
    usage_seen_of(usage, &s);
    return usage_decide(&s, u);
}

static int usage_read(struct json_object *obj, struct usage *u)
{
    struct json_object *usage, *msg;
    if (!json_object_object_get_ex(obj, "usage", &usage) &&
        !(json_object_object_get_ex(obj, "message", &msg) && json_object_is_type(msg, json_type_object) &&
          json_object_object_get_ex(msg, "usage", &usage)) &&
        !(json_object_object_get_ex(obj, "response", &msg) && json_object_is_type(msg, json_type_object) &&
          json_object_object_get_ex(msg, "usage", &usage)))
        return 0;
    return usage_read_object(usage, u);
}

static struct json_object *parse(const char *json, size_t len)
{
    return json_parse(json, len, 0, NULL);
}

/* The last `"usage":{` of a body: a key, since quotes inside JSON strings are
 * escaped, and the top-level one, since OpenAI-shaped bodies put it last. */
static const char *usage_last_object(const char *json, size_t len)
{
    const char *found = NULL, *p = json, *end = json + len;
    while (p < end && (p = memmem(p, (size_t)(end - p), "\"usage\":", 8))) {
        const char *v = p + 8;
        while (v < end && (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r'))
            v++;
        if (v < end && *v == '{')
            found = v;
        p += 8;
    }
    return found;
}

int usage_from_body(const char *json, size_t len, struct usage *u)
{
    memset(u, 0, sizeof *u);
    size_t i = 0;
    while (i < len && (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' || json[i] == '\r'))
        i++;
    if (i == len || json[i] != '{')
        return 0;               /* a response body is an object; nothing else has usage */
    const char *obj_start = usage_last_object(json, len);
    if (!obj_start)
        return 0;
    /* Read only the usage object: a long body (embeddings) costs nothing more. Plain
     * JSON (every upstream's) without json-c; anything else through it. */
    struct usage_seen seen;
    if (usage_scan(obj_start, (size_t)(json + len - obj_start), &seen))
        return usage_decide(&seen, u);
    struct json_object *usage = json_parse(obj_start, (size_t)(json + len - obj_start), 0, NULL);
    int ok = usage && usage_read_object(usage, u);
    json_object_put(usage);
    return ok;
}

/* A delta counts as content when it has anything beyond role and empty content. */
static int delta_has_content(struct json_object *choice)
{
    struct json_object *delta, *v;
    if (json_object_object_get_ex(choice, "finish_reason", &v) && json_object_get_type(v) == json_type_string)
        return 1;
    if (json_object_object_get_ex(choice, "text", &v))          /* completions chunks */
        return 1;
    if (!json_object_object_get_ex(choice, "delta", &delta) ||
        json_object_get_type(delta) != json_type_object)
        return 1;
    json_object_object_foreach(delta, key, val) {
        if (strcmp(key, "role") == 0)
            continue;
        if (json_object_get_type(val) == json_type_null)
            continue;
        if (strcmp(key, "content") == 0 && json_object_get_type(val) == json_type_string &&
            json_object_get_string_len(val) == 0)
            continue;
        return 1;
    }
    return 0;
}

enum chunk_kind usage_classify_chunk(const char *data, size_t len, struct usage *u)
{
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0)
        return CHUNK_DONE;
    struct json_object *obj = parse(data, len), *choices, *err;
    if (!obj || json_object_get_type(obj) != json_type_object) {
        json_object_put(obj);
        return CHUNK_OTHER;
    }
    enum chunk_kind kind = CHUNK_OTHER;
    if (json_object_object_get_ex(obj, "error", &err)) {
        kind = CHUNK_ERROR;
        goto out;
    }
    int has_usage = u ? usage_read(obj, u) : 0;
    if (json_object_object_get_ex(obj, "choices", &choices) &&
        json_object_get_type(choices) == json_type_array) {
        size_t n = json_object_array_length(choices);
        if (n == 0) {
            kind = has_usage ? CHUNK_USAGE_ONLY : CHUNK_OTHER;
            goto out;
        }
        kind = CHUNK_ROLE_ONLY;
        for (size_t i = 0; i < n; i++)
            if (delta_has_content(json_object_array_get_idx(choices, i))) {
                kind = CHUNK_CONTENT;
                break;
            }
    }
out:
    json_object_put(obj);
    return kind;
}

static size_t skip_ws(const char *d, size_t i, size_t len)
{
    while (i < len && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r'))
        i++;
    return i;
}

/* If a `"usage"` key starts at i, the index just after its colon (and spaces). */
static size_t usage_key_end(const char *d, size_t i, size_t len)
{
    if (len - i < 7 || memcmp(d + i, "\"usage\"", 7) != 0)
        return 0;
    size_t j = skip_ws(d, i + 7, len);
    if (j >= len || d[j] != ':')
        return 0;
    return skip_ws(d, j + 1, len);
}

int usage_has_object(const char *data, size_t len)
{
    const char *p = data, *end = data + len;
    while (p < end && (p = memmem(p, (size_t)(end - p), "\"usage\"", 7))) {
        size_t v = usage_key_end(data, (size_t)(p - data), len);
        if (v && v < len && data[v] == '{')
            return 1;
        p += 7;
    }
    return 0;
}

size_t usage_strip_null(char *data, size_t len)
{
    size_t w = 0, r = 0;
    while (r < len) {
        if (data[r] == ',') {
            size_t k = skip_ws(data, r + 1, len);
            size_t v = usage_key_end(data, k, len);
            if (v && len - v >= 4 && memcmp(data + v, "null", 4) == 0) {
                r = v + 4;          /* drop `, "usage" : null` */
                continue;
            }
        }
        data[w++] = data[r++];
    }
    return w;
}

int usage_error_is_server_side(const char *data, size_t len)
{
    struct json_tokener *tok = json_tokener_new();
    struct json_object *o = tok ? json_tokener_parse_ex(tok, data, (int)len) : NULL, *e, *v;
    int server = 0;
    if (o && json_object_object_get_ex(o, "error", &e) && json_object_is_type(e, json_type_object)) {
        static const char *const types[] = {"server_error", "api_error", "overloaded_error", "internal_error",
                                            "timeout_error", NULL};
        for (int k = 0; k < 2 && !server; k++) {
            if (!json_object_object_get_ex(e, k ? "code" : "type", &v))
                continue;
            if (json_object_is_type(v, json_type_int))
                server = json_object_get_int64(v) >= 500;
            else if (json_object_is_type(v, json_type_string))
                for (int i = 0; types[i] && !server; i++)
                    server = strcmp(json_object_get_string(v), types[i]) == 0;
        }
    }
    json_object_put(o);
    json_tokener_free(tok);
    return server;
}
