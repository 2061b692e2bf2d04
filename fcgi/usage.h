/* usage.h: read token usage from upstream bodies and stream chunks (R-USE-1, R-USE-2). */
#ifndef SLUICE_USAGE_H
#define SLUICE_USAGE_H

#include <stddef.h>
#include <stdint.h>

/* No answer has more tokens than this: an upstream's larger count is clamped,
 * so no limit arithmetic on counts can overflow (R-KEY-5). */
#define USAGE_COUNT_MAX 1000000000000LL

struct usage {
    int64_t prompt_tokens, completion_tokens;   /* all input (cache reads and writes included), all output */
    int64_t cache_read_tokens;                  /* of prompt_tokens: read from a prompt cache */
    int64_t cache_creation_tokens;              /* of prompt_tokens: written to a prompt cache (Anthropic) */
    int64_t reasoning_tokens;                   /* of completion_tokens: reasoning */
    int found;
};

/* Non-streaming body: usage.prompt_tokens / completion_tokens. 1 if found. */
int usage_from_body(const char *json, size_t len, struct usage *u);

enum chunk_kind {
    CHUNK_OTHER,            /* not JSON, or JSON without anything below */
    CHUNK_ROLE_ONLY,        /* choices whose deltas carry only role / empty content */
    CHUNK_CONTENT,          /* a delta with content, tool calls, text, or a finish_reason */
    CHUNK_USAGE_ONLY,       /* "choices":[] with a usage object: the include_usage chunk */
    CHUNK_DONE,             /* the literal [DONE] */
    CHUNK_ERROR             /* an {"error":...} object */
};

/* Classifies one event's data and, when it carries a usage object, fills u. */
enum chunk_kind usage_classify_chunk(const char *data, size_t len, struct usage *u);

/* Removes every `,"usage":null` (whitespace allowed around the colon and comma)
 * from data in place (chunks gain it only because sluice asked for
 * include_usage); returns the new length. */
size_t usage_strip_null(char *data, size_t len);

/* An {"error":...} event the upstream's side caused (type server_error, api_error,
 * overloaded_error, internal_error, timeout_error, or a code >= 500)? Only
 * those may be failed over; a caller's own mistake reaches the caller (R-SSE-5). */
int usage_error_is_server_side(const char *data, size_t len);

/* Does data hold a `"usage"` key whose value is an object (any spacing)? */
int usage_has_object(const char *data, size_t len);

#endif
