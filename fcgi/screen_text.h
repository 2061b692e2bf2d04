/* screen_text.h: the texts content rules read (R-GUARD-3), for fcgi/screen.c;
 * pure functions (tests/unit/test_screen.c). */
#ifndef SLUICE_SCREEN_TEXT_H
#define SLUICE_SCREEN_TEXT_H

#include "buf.h"

#include <json-c/json.h>
#include <stddef.h>

/* A stream's window: the text before an event's that is matched with it. */
#define SCREEN_WINDOW 4096

/* Every string under v the model reads (not roles, ids, URLs, ...), appended one a
 * line (the body limit bounds it). */
void screen_text_request(struct json_object *v, struct buf *text);

/* The text the model wrote in an answer or event (JSON of any protocol), appended to
 * out, each string followed by sep: strings under content/text/arguments/refusal/
 * partial_json/delta/thinking, and every string of a tool call's input. whole: v is
 * such a value itself. */
void screen_text_answer(struct json_object *v, int whole, const char *sep, struct buf *out);
/* Where the last keep bytes (at most) of p begin, moved on to the next word (a cut
 * word would match a whole-word rule it does not hold), or at least to a character
 * boundary of UTF-8. 0 when len <= keep. */
size_t screen_text_tail(const char *p, size_t len, size_t keep);

#endif
