/* shadow_cmp.h: the pure parts of shadow traffic (R-SHD-1): whether a request
 * is mirrored, what a mirror's answer says (status, tokens, end, text), and
 * how it compares with the client's answer. No sockets, no shared state:
 * shadow.c runs the transfers and feeds these. */
#ifndef SLUICE_SHADOW_CMP_H
#define SLUICE_SHADOW_CMP_H

#include "buf.h"
#include "sse.h"
#include "usage.h"

#include <stddef.h>
#include <stdint.h>

/* Is the request with this id mirrored at percent (0..100)? A hash of the id,
 * not a random draw: the same request id is always decided the same way, and
 * the share over many ids is percent in a hundred. */
int shadow_wanted(int percent, const char *request_id);

/* The shape an answer's JSON has: OpenAI (chat, completions) or Anthropic Messages. */
enum shadow_shape { SHADOW_OPENAI, SHADOW_ANTHROPIC };

/* Reads one mirror answer as it arrives, in the protocol its endpoint speaks. */
struct shadow_reader {
    enum shadow_shape shape;
    int stream;                   /* the answer is an event stream */
    struct sse_parser sse;
    struct buf body;              /* a buffered answer, capped (past it: overflow) */
    int overflow;
    struct usage u;
    int content_events;           /* stream: events with content (the first one is the mirror's TTFT) */
    int done;                     /* stream: its end ([DONE], message_stop) was seen */
    int failed;                   /* an error event, or an event too large */
    int has_text;                 /* a buffered 2xx answer's text was hashed */
    uint64_t text_hash;
    size_t text_len;
};

void shadow_reader_init(struct shadow_reader *rd, enum shadow_shape shape, int stream, size_t max_event,
                        size_t max_body);
/* Bytes of the answer body; returns how many content events they completed. */
int shadow_reader_feed(struct shadow_reader *rd, const char *p, size_t n);
/* The body ended (status is the answer's): a buffered body's usage and text. */
void shadow_reader_end(struct shadow_reader *rd, long status);
void shadow_reader_free(struct shadow_reader *rd);

/* The answer text of a buffered JSON answer of that shape (OpenAI: every
 * choice's message.content or text; Anthropic: every text block), as an
 * FNV-1a 64 hash and length. 1 if the body had such text, else 0. */
int shadow_text_hash(enum shadow_shape shape, const char *json, size_t len, uint64_t *hash, size_t *n);

/* One side of a mirrored request: the client's answer or the mirror's. */
struct shadow_side {
    int status;                   /* HTTP status, 0 = no answer */
    int64_t latency_us;           /* from the start of its attempt to its last byte */
    int64_t ttft_us;              /* to its first content, 0 = none */
    int64_t prompt_tokens, completion_tokens;
    int has_text;                 /* a buffered answer's text: */
    uint64_t text_hash;
    size_t text_len;
};

struct shadow_cmp {
    int status_match;             /* both 2xx, or the same status */
    double token_ratio;           /* mirror's completion tokens / the client's; -1 = the client's were 0 */
    int ttft_known;               /* both had a first token: */
    int64_t ttft_delta_us;        /* mirror - client */
    int64_t latency_delta_us;     /* mirror - client */
    int exact;                    /* the same answer text: 1, 0; -1 = not comparable (a stream, no text) */
};

void shadow_compare(const struct shadow_side *client, const struct shadow_side *mirror, struct shadow_cmp *out);

/* The comparison's log fields ("status_match=1 ... exact_match=na") into out. */
void shadow_cmp_format(const struct shadow_cmp *c, const struct shadow_side *client, const struct shadow_side *mirror,
                       char *out, size_t cap);

/* The outcome word of a finished mirror: "ok", "error" or "timeout". */
const char *shadow_outcome(int timed_out, long status, int transport_ok, const struct shadow_reader *rd);

#endif
