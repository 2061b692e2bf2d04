/* cache_key.c: the exact cache's canonical key material and its SHA-256 (R-CACHE-1, R-CACHE-2). */
#include "cache_key.h"

#include "arena.h"
#include "util.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Canonical text at most this long: a body is capped by server.max_request_size
 * long before, so reaching it means something odd, and odd is not cached. */
#define KEY_TEXT_MAX (64u << 20)
#define KEY_DEPTH_MAX 64

int cache_key_ignored(const char *name)
{
    static const char *const ignored[] = {"user", "metadata", "store", "prompt_cache_key", "safety_identifier",
                                          "stream"};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        if (strcmp(name, ignored[i]) == 0)
            return 1;
    return 0;
}

int cache_key_greedy(struct json_object *body, int default_greedy)
{
    struct json_object *t;
    if (!json_object_object_get_ex(body, "temperature", &t) || json_object_is_type(t, json_type_null))
        return default_greedy ? 1 : 0;
    if (json_object_is_type(t, json_type_int))
        return json_object_get_int64(t) == 0;
    if (json_object_is_type(t, json_type_double))
        return json_object_get_double(t) == 0.0;
    return 0;                       /* not a number: guard refuses it; never greedy */
}

/* One number form: an integral value as an integer (0, 0.0 and -0.0 alike,
 * 1 and 1.0 alike), anything else with 17 significant digits (round-trips). */
static int put_number(struct buf *b, struct json_object *v)
{
    if (json_object_is_type(v, json_type_int))
        return buf_printf(b, "%" PRId64, json_object_get_int64(v));
    double d = json_object_get_double(v);
    if (isfinite(d) && d == floor(d) && fabs(d) < 9007199254740992.0)
        return buf_printf(b, "%" PRId64, (int64_t)d);
    return buf_printf(b, "%.17g", d);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* What the canonical text leaves as a hole: the semantic scope's last user
 * turn (R-CACHE-4); NULL for the exact key. */
struct key_walk {
    struct buf *b;
    const struct json_object *hole;
};

static int put_value(struct key_walk *k, struct json_object *v, int depth, int top, int in_stream_options);

/* {"a":..,"b":..}: members sorted by name; at the top level without the
 * ignored ones, inside stream_options without include_usage. */
static int put_object(struct key_walk *kw, struct json_object *o, int depth, int top, int stream_options)
{
    struct buf *b = kw->b;
    size_t n = (size_t)json_object_object_length(o), k = 0;
    const char **names = xcalloc(n ? n : 1, sizeof *names);
    json_object_object_foreach(o, name, val) {
        (void)val;
        if ((top && cache_key_ignored(name)) || (stream_options && strcmp(name, "include_usage") == 0))
            continue;
        names[k++] = name;
    }
    qsort(names, k, sizeof *names, by_name);
    int rc = buf_puts(b, "{");
    for (size_t i = 0; i < k && rc == 0; i++) {
        struct json_object *member = NULL;
        json_object_object_get_ex(o, names[i], &member);
        if ((i && buf_puts(b, ",") != 0) || buf_json_str(b, names[i], strlen(names[i])) != 0 || buf_puts(b, ":") != 0)
            rc = -1;
        else
            rc = put_value(kw, member, depth + 1, 0, top && strcmp(names[i], "stream_options") == 0);
    }
    free(names);
    return rc == 0 ? buf_puts(b, "}") : -1;
}

static int put_value(struct key_walk *k, struct json_object *v, int depth, int top, int in_stream_options)
{
    struct buf *b = k->b;
    if (depth > KEY_DEPTH_MAX)
        return -1;
    if (v && v == k->hole)
        return buf_puts(b, "<last user turn>");     /* no JSON value looks like it */
    switch (json_object_get_type(v)) {
    case json_type_null:
        return buf_puts(b, "null");
    case json_type_boolean:
        return buf_puts(b, json_object_get_boolean(v) ? "true" : "false");
    case json_type_int:
    case json_type_double:
        return put_number(b, v);
    case json_type_string:
        return buf_json_str(b, json_object_get_string(v), (size_t)json_object_get_string_len(v));
    case json_type_array: {
        size_t n = json_object_array_length(v);
        if (buf_puts(b, "[") != 0)
            return -1;
        for (size_t i = 0; i < n; i++)
            if ((i && buf_puts(b, ",") != 0) || put_value(k, json_object_array_get_idx(v, i), depth + 1, 0, 0) != 0)
                return -1;
        return buf_puts(b, "]");
    }
    case json_type_object:
        return put_object(k, v, depth, top, in_stream_options);
    }
    return -1;
}

/* name=value, the value as a JSON string (no separator can be forged). */
static int put_part(struct buf *b, const char *name, const char *value)
{
    value = value ? value : "";
    if (buf_puts(b, name) != 0 || buf_puts(b, "=") != 0 || buf_json_str(b, value, strlen(value)) != 0)
        return -1;
    return buf_puts(b, "\n");
}

/* The canonical text, the version line naming which text it is: a change of
 * this text's form must never meet old keys, nor a scope an exact key. */
static int key_text(const struct cache_key_in *in, struct buf *b, const char *version,
                    const struct json_object *hole)
{
    if (buf_printf(b, "%s\ntenant=%" PRId64 "\nendpoint=%" PRId64 "\n", version, in->tenant_id,
                   in->endpoint_id) < 0 ||
        put_part(b, "routed_model", in->routed_model) != 0 || put_part(b, "path", in->path) != 0 ||
        buf_printf(b, "stream=%d\nusage_chunk=%d\n", in->stream ? 1 : 0, in->stream && in->want_usage ? 1 : 0) < 0 ||
        put_part(b, "headers", in->extra) != 0 || buf_puts(b, "body=") != 0)
        return -1;
    if (!in->body || !json_object_is_type(in->body, json_type_object))
        return -1;
    struct key_walk k = {.b = b, .hole = hole};
    return put_value(&k, in->body, 0, 1, 0);
}

int cache_key_text(const struct cache_key_in *in, struct buf *b)
{
    return key_text(in, b, "sluice-exact-cache-v1", NULL);
}

static int hash_of(const struct cache_key_in *in, const char *version, const struct json_object *hole, char hex[65])
{
    struct buf b;
    buf_init(&b, KEY_TEXT_MAX);
    int rc = key_text(in, &b, version, hole);
    if (rc == 0)
        sha256_hex(b.data, b.len, hex);
    buf_free(&b);
    return rc;
}

int cache_key_hash(const struct cache_key_in *in, char hex[65])
{
    return hash_of(in, "sluice-exact-cache-v1", NULL, hex);
}

/* A content's text: a string, or an array of text parts (OpenAI's
 * {"type":"text","text":..}, Anthropic's text blocks) joined by a newline.
 * Anything else (an image, audio, a tool result) is not text alone. */
static int content_text(struct json_object *c, struct buf *out)
{
    if (json_object_is_type(c, json_type_string))
        return buf_append(out, json_object_get_string(c), (size_t)json_object_get_string_len(c));
    if (!json_object_is_type(c, json_type_array) || json_object_array_length(c) == 0)
        return -1;
    for (size_t i = 0; i < json_object_array_length(c); i++) {
        struct json_object *part = json_object_array_get_idx(c, i), *type, *text;
        if (!json_object_is_type(part, json_type_object) || !json_object_object_get_ex(part, "type", &type) ||
            !json_object_is_type(type, json_type_string) || strcmp(json_object_get_string(type), "text") != 0 ||
            !json_object_object_get_ex(part, "text", &text) || !json_object_is_type(text, json_type_string))
            return -1;
        if ((i && buf_puts(out, "\n") != 0) ||
            buf_append(out, json_object_get_string(text), (size_t)json_object_get_string_len(text)) != 0)
            return -1;
    }
    return 0;
}

int cache_key_last_user(struct json_object *body, struct buf *text, struct json_object **where)
{
    struct json_object *msgs, *prompt, *found = NULL;
    *where = NULL;
    if (!body || !json_object_is_type(body, json_type_object))
        return -1;
    if (json_object_object_get_ex(body, "messages", &msgs)) {
        if (!json_object_is_type(msgs, json_type_array))
            return -1;
        for (size_t i = json_object_array_length(msgs); i-- > 0 && !found;) {
            struct json_object *m = json_object_array_get_idx(msgs, i), *role, *content;
            if (json_object_is_type(m, json_type_object) && json_object_object_get_ex(m, "role", &role) &&
                json_object_is_type(role, json_type_string) && strcmp(json_object_get_string(role), "user") == 0) {
                if (!json_object_object_get_ex(m, "content", &content))
                    return -1;
                found = content;
            }
        }
    } else if (json_object_object_get_ex(body, "prompt", &prompt) && json_object_is_type(prompt, json_type_string)) {
        found = prompt;
    }
    if (!found)
        return -1;
    size_t len0 = text->len;
    if (content_text(found, text) != 0 || text->len == len0)
        return -1;                  /* an empty turn says nothing to compare */
    *where = found;
    return 0;
}

int cache_key_scope_hash(const struct cache_key_in *in, const struct json_object *turn, char hex[65])
{
    if (!turn)
        return -1;
    return hash_of(in, "sluice-semantic-scope-v1", turn, hex);
}
