/* screen_text.c: the texts content rules read (R-GUARD-3): what the model reads in
 * a request, what it wrote in an answer or a stream event of any protocol, and where a
 * stream's window of recent text starts. Pure: no request, no rule. */
#include "screen_text.h"

#include <string.h>

/* The keys whose strings are not text the model reads. */
static int screen_skip_key(const char *k)
{
    static const char *skip[] = {"role", "type",      "name",          "id",    "tool_call_id",
                                 "url",  "image_url", "cache_control", "model", NULL};
    for (int i = 0; skip[i]; i++)
        if (strcmp(k, skip[i]) == 0)
            return 1;
    return 0;
}

void screen_text_request(struct json_object *v, struct buf *text)
{
    switch (json_object_get_type(v)) {
    case json_type_string:
        buf_append(text, json_object_get_string(v), (size_t)json_object_get_string_len(v));
        buf_append(text, "\n", 1);
        break;
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(v); i++)
            screen_text_request(json_object_array_get_idx(v, i), text);
        break;
    case json_type_object: {
        json_object_object_foreach(v, k, sub) {
            if (!screen_skip_key(k))
                screen_text_request(sub, text);
        }
        break;
    }
    default:
        break;
    }
}

/* Keys whose string values are text the model wrote, in every protocol's answers and
 * events: chat content and refusals, completions' text, tool call arguments, Anthropic
 * text and partial_json, Responses' text and delta. */
static int screen_text_key(const char *k)
{
    static const char *keys[] = {"content", "text", "arguments", "refusal", "partial_json", "delta", "thinking",
                                 NULL};
    for (int i = 0; keys[i]; i++)
        if (strcmp(k, keys[i]) == 0)
            return 1;
    return 0;
}

/* Objects the model filled in whole (a tool call's input): every string counts. */
static int screen_whole_key(const char *k)
{
    return strcmp(k, "input") == 0 || strcmp(k, "arguments") == 0;
}

void screen_text_answer(struct json_object *v, int whole, const char *sep, struct buf *out)
{
    switch (json_object_get_type(v)) {
    case json_type_string:
        if (whole) {
            buf_append(out, json_object_get_string(v), (size_t)json_object_get_string_len(v));
            buf_puts(out, sep);
        }
        break;
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(v); i++)
            screen_text_answer(json_object_array_get_idx(v, i), whole, sep, out);
        break;
    case json_type_object: {
        json_object_object_foreach(v, k, sub) {
            if (whole || (json_object_is_type(sub, json_type_string) && screen_text_key(k)))
                screen_text_answer(sub, 1, sep, out);
            else
                screen_text_answer(sub, screen_whole_key(k), sep, out);
        }
        break;
    }
    default:
        break;
    }
}

size_t screen_text_tail(const char *p, size_t len, size_t keep)
{
    if (len <= keep)
        return 0;
    size_t at = len - keep;
    /* from the next word: a cut word would match a whole-word rule it does not hold */
    size_t ws = at;
    while (ws < len && p[ws] != ' ' && p[ws] != '\n' && p[ws] != '\t')
        ws++;
    if (ws < len)
        return ws + 1;
    while (at < len && ((unsigned char)p[at] & 0xC0) == 0x80)
        at++;           /* no word break at all: at least a whole character */
    return at;
}
