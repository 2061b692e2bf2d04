/* screen_text.c: the texts content rules read (R-GUARD-3): what the model reads in
 * a request, what it wrote in an answer or a stream event of any protocol, which of a
 * stream's channels an event's text continues, and where a stream's window of recent
 * text starts and its settled part ends. Pure: no request, no rule. */
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

/* A tool's name is part of what the model reads of it; only the schema's types are not. */
static int screen_skip_tool_key(const char *k)
{
    return strcmp(k, "type") == 0 || strcmp(k, "cache_control") == 0;
}

/* Every string under v, one a line, except under the keys skip says. */
static void screen_text_strings(struct json_object *v, int (*skip)(const char *), struct buf *text)
{
    switch (json_object_get_type(v)) {
    case json_type_string:
        buf_append(text, json_object_get_string(v), (size_t)json_object_get_string_len(v));
        buf_append(text, "\n", 1);
        break;
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(v); i++)
            screen_text_strings(json_object_array_get_idx(v, i), skip, text);
        break;
    case json_type_object: {
        json_object_object_foreach(v, k, sub) {
            if (!skip(k))
                screen_text_strings(sub, skip, text);
        }
        break;
    }
    default:
        break;
    }
}

void screen_text_request(struct json_object *v, struct buf *text)
{
    screen_text_strings(v, screen_skip_key, text);
}

void screen_text_tools(struct json_object *v, struct buf *text)
{
    screen_text_strings(v, screen_skip_tool_key, text);
}

/* Keys whose string values are text the model wrote, in every protocol's answers and
 * events: chat content and refusals, completions' text, tool call arguments, Anthropic
 * text and partial_json, Responses' text and delta, and reasoning (vLLM's
 * reasoning_content, OpenRouter's reasoning, Anthropic's thinking). */
static int screen_text_key(const char *k)
{
    static const char *keys[] = {"content",  "text",     "arguments",         "refusal",   "partial_json",
                                 "delta",    "thinking", "reasoning_content", "reasoning", NULL};
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

/* The integer member k of o, or -1 when there is none. */
static int64_t screen_index(struct json_object *o, const char *k)
{
    struct json_object *v;
    if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int))
        return -1;
    return json_object_get_int64(v);
}

struct screen_channel screen_text_choice_channel(struct json_object *choice, size_t pos)
{
    struct screen_channel ch = {screen_index(choice, "index"), -1};
    if (ch.major < 0)
        ch.major = (int64_t)pos;
    /* parallel tool calls of one choice interleave their arguments by index */
    struct json_object *delta, *calls;
    if (json_object_object_get_ex(choice, "delta", &delta) && json_object_object_get_ex(delta, "tool_calls", &calls) &&
        json_object_is_type(calls, json_type_array) && json_object_array_length(calls) > 0) {
        ch.minor = screen_index(json_object_array_get_idx(calls, 0), "index");
        if (ch.minor < 0)
            ch.minor = 0;
    }
    return ch;
}

struct screen_channel screen_text_event_channel(struct json_object *event)
{
    struct screen_channel ch = {screen_index(event, "index"), -1};
    if (ch.major < 0) {
        ch.major = screen_index(event, "output_index");
        ch.minor = screen_index(event, "content_index");
    }
    return ch;
}

static int screen_ascii_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

size_t screen_text_settled(const char *p, size_t len)
{
    size_t at = len;
    while (at > 0 && len - at <= SCREEN_HELD_MAX && screen_ascii_word((unsigned char)p[at - 1]))
        at--;
    return len - at > SCREEN_HELD_MAX ? len : at;
}
