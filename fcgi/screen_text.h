/* screen_text.h: the texts content rules read (R-GUARD-3), for fcgi/screen.c;
 * pure functions (tests/unit/test_screen.c). */
#ifndef SLUICE_SCREEN_TEXT_H
#define SLUICE_SCREEN_TEXT_H

#include "buf.h"

#include <json-c/json.h>
#include <stddef.h>

#include <stdint.h>

/* A stream's window: the text before an event's that is matched with it. */
#define SCREEN_WINDOW 4096
/* The longest trailing word held back from matching until more text comes. */
#define SCREEN_HELD_MAX 64

/* One stream of text inside a stream of events: a chat choice's content (minor -1) or one
 * of its tool calls (minor: the call's index); an Anthropic content block (major: index);
 * a Responses output item (major: output_index, minor: content_index). -1: not given. */
struct screen_channel {
    int64_t major, minor;
};

/* Every string under v the model reads (not roles, ids, URLs, ...), appended one a
 * line (the body limit bounds it). */
void screen_text_request(struct json_object *v, struct buf *text);
/* The same for tool definitions and tool_choice: their names are read too. */
void screen_text_tools(struct json_object *v, struct buf *text);

/* The text the model wrote in an answer or event (JSON of any protocol), appended to
 * out, each string followed by sep: strings under content/text/arguments/refusal/
 * partial_json/delta/thinking, and every string of a tool call's input. whole: v is
 * such a value itself. */
void screen_text_answer(struct json_object *v, int whole, const char *sep, struct buf *out);
/* Where the last keep bytes (at most) of p begin, moved on to the next word (a cut
 * word would match a whole-word rule it does not hold), or at least to a character
 * boundary of UTF-8. 0 when len <= keep. */
size_t screen_text_tail(const char *p, size_t len, size_t keep);

/* The channel of choices[pos] of a chat or completions chunk (its "index", else pos). */
struct screen_channel screen_text_choice_channel(struct json_object *choice, size_t pos);
/* The channel of an event without choices (Anthropic, Responses). */
struct screen_channel screen_text_event_channel(struct json_object *event);
/* How much of a stream's text so far can be matched now: all but a trailing run of ASCII
 * word characters of at most SCREEN_HELD_MAX bytes, which the next piece may continue
 * (\b and keywords would match "kill" in "kill" + "er"). Longer runs, and text ending in
 * anything else (spaces, punctuation, UTF-8 such as CJK, which has no spaces), are
 * matched whole. */
size_t screen_text_settled(const char *p, size_t len);

#endif
