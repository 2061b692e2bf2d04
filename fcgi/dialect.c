/* dialect.c: stream events of each caller protocol, one classifier per row. */
#include "dialect.h"

#include "json_parse.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

static struct json_object *parse(const char *data, size_t len)
{
    struct json_object *o = json_parse(data, len, 0, NULL);
    if (o && !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        o = NULL;
    }
    return o;
}

static void copy_str(char *out, size_t n, struct json_object *v)
{
    if (v && json_object_is_type(v, json_type_string) && (size_t)json_object_get_string_len(v) < n)
        snprintf(out, n, "%s", json_object_get_string(v));
}

/* o.a.b as an object member, or NULL. */
static struct json_object *member(struct json_object *o, const char *a, const char *b)
{
    struct json_object *v = NULL;
    if (!o || !json_object_object_get_ex(o, a, &v))
        return NULL;
    if (b && (!json_object_is_type(v, json_type_object) || !json_object_object_get_ex(v, b, &v)))
        return NULL;
    return v;
}

/* The event's type: its event: name, else the data's "type" (a stream relayed
 * without names is still read). */
static void event_type(const char *event, size_t event_len, struct json_object *o, char *out, size_t n)
{
    out[0] = '\0';
    if (event_len && event_len < n) {
        memcpy(out, event, event_len);
        out[event_len] = '\0';
    } else {
        copy_str(out, n, member(o, "type", NULL));
    }
}

/* The usage an event carries (top level, or under message / response). */
static void event_usage(struct json_object *o, const char *data, size_t len, struct event_facts *f)
{
    struct usage u = {0};
    if (o && usage_has_object(data, len) && usage_classify_chunk(data, len, &u) != CHUNK_ERROR && u.found)
        f->usage = u;
}

static void classify_chat(int do_parse, const char *data, size_t len, struct event_facts *f)
{
    if (!do_parse && !usage_has_object(data, len) && !memmem(data, len, "\"error\"", 7)) {
        f->kind = len == 6 && memcmp(data, "[DONE]", 6) == 0 ? CHUNK_DONE : CHUNK_CONTENT;
    } else {
        f->kind = usage_classify_chunk(data, len, &f->usage);
        if (f->kind == CHUNK_ERROR)
            f->server_error = usage_error_is_server_side(data, len);
    }
    /* Usage on every chunk (vLLM's continuous_usage_stats) is a running count;
     * the include_usage chunk ("choices":[]) or the finishing chunk has the last. */
    f->usage_final = f->usage.found && f->kind == CHUNK_USAGE_ONLY;
    if (f->kind != CHUNK_CONTENT)
        return;
    /* A chunk that only closes the choice ("delta":{} with a finish_reason)
     * produced no token (R-SSE-3, R-USE-1). */
    f->counts = !memmem(data, len, "\"delta\":{}", 10);
    const char *p = memmem(data, len, "\"finish_reason\":\"", 17);
    if (p) {
        p += 17;
        const char *e = memchr(p, '"', (size_t)(data + len - p));
        if (e && (size_t)(e - p) < sizeof f->finish)
            snprintf(f->finish, sizeof f->finish, "%.*s", (int)(e - p), p);
    }
    f->usage_final = f->usage.found && f->finish[0];
}

/* Anthropic Messages (REFERENCE §4): message_start, content_block_start and
 * ping come before anything is generated. */
static void classify_messages(const char *event, size_t event_len, const char *data, size_t len,
                              struct event_facts *f)
{
    char type[48];
    struct json_object *o = NULL;
    /* Deltas are the bulk of a stream: named ones need no parse. */
    if (event_len == 19 && memcmp(event, "content_block_delta", 19) == 0) {
        f->kind = CHUNK_CONTENT;
        f->counts = 1;
        return;
    }
    o = parse(data, len);
    event_type(event, event_len, o, type, sizeof type);
    if (strcmp(type, "message_start") == 0 || strcmp(type, "content_block_start") == 0 ||
        strcmp(type, "ping") == 0) {
        f->kind = CHUNK_ROLE_ONLY;
    } else if (strcmp(type, "error") == 0) {
        f->kind = CHUNK_ERROR;
        f->server_error = usage_error_is_server_side(data, len);
    } else if (strcmp(type, "content_block_delta") == 0) {
        f->kind = CHUNK_CONTENT;
        f->counts = 1;
    } else {
        f->kind = o ? CHUNK_CONTENT : CHUNK_OTHER;
        copy_str(f->finish, sizeof f->finish, member(o, "delta", "stop_reason"));
    }
    event_usage(o, data, len, f);
    f->usage_final = f->usage.found && strcmp(type, "message_delta") == 0;
    json_object_put(o);
}

/* OpenAI Responses (REFERENCE §11): created / in_progress / queued and the
 * empty item and part openings come before anything is generated. */
static void classify_responses(const char *event, size_t event_len, const char *data, size_t len,
                               struct event_facts *f)
{
    char type[64];
    if (event_len > 6 && memcmp(event + event_len - 6, ".delta", 6) == 0) {
        f->kind = CHUNK_CONTENT;
        f->counts = 1;
        return;
    }
    struct json_object *o = parse(data, len);
    event_type(event, event_len, o, type, sizeof type);
    size_t tn = strlen(type);
    if (strcmp(type, "response.created") == 0 || strcmp(type, "response.in_progress") == 0 ||
        strcmp(type, "response.queued") == 0 || strcmp(type, "response.output_item.added") == 0 ||
        strcmp(type, "response.content_part.added") == 0) {
        f->kind = CHUNK_ROLE_ONLY;
        copy_str(f->response_id, sizeof f->response_id, member(member(o, "response", NULL), "id", NULL));
    } else if (strcmp(type, "error") == 0 || strcmp(type, "response.failed") == 0) {
        f->kind = CHUNK_ERROR;
        /* The caller's own mistakes (invalid_prompt, bad parameters) reach it. */
        struct json_object *code = strcmp(type, "error") == 0 ? member(o, "code", NULL)
                                                               : member(member(o, "response", "error"), "code", NULL);
        const char *c = code && json_object_is_type(code, json_type_string) ? json_object_get_string(code) : "";
        f->server_error = !*c || strcmp(c, "server_error") == 0 || strcmp(c, "rate_limit_exceeded") == 0;
    } else {
        f->kind = o ? CHUNK_CONTENT : CHUNK_OTHER;
        f->counts = tn > 6 && strcmp(type + tn - 6, ".delta") == 0;
        if (strncmp(type, "response.", 9) == 0 && strchr(type + 9, '.') == NULL)   /* completed, incomplete */
            copy_str(f->finish, sizeof f->finish, member(member(o, "response", NULL), "status", NULL));
    }
    event_usage(o, data, len, f);
    f->usage_final = f->usage.found;      /* only the closing events carry usage */
    json_object_put(o);
}

void dialect_classify(enum dialect d, int do_parse, const char *event, size_t event_len, const char *data,
                      size_t len, struct event_facts *f)
{
    memset(f, 0, sizeof *f);
    switch (d) {
    case DIALECT_MESSAGES:
        classify_messages(event ? event : "", event ? event_len : 0, data, len, f);
        return;
    case DIALECT_RESPONSES:
        classify_responses(event ? event : "", event ? event_len : 0, data, len, f);
        return;
    case DIALECT_CHAT:
        classify_chat(do_parse, data, len, f);
        return;
    }
}
