/* usage_scan.h: the counters a usage object holds, read from its text without json-c
 * when the text is plain JSON (issue 17), or from json-c's object; usage.c decides
 * from them what the usage is, the same way for both. */
#ifndef SLUICE_USAGE_SCAN_H
#define SLUICE_USAGE_SCAN_H

#include <stddef.h>
#include <stdint.h>

enum usage_field {
    UF_PROMPT, UF_COMPLETION, UF_INPUT, UF_OUTPUT,              /* "prompt_tokens" ... "output_tokens" */
    UF_CACHE_CREATION, UF_CACHE_READ,                           /* "cache_creation_input_tokens", "cache_read_input_tokens" */
    UF_PROMPT_CACHED, UF_COMPLETION_REASONING,                  /* prompt_tokens_details.cached_tokens, completion_tokens_details.reasoning_tokens */
    UF_INPUT_CACHED, UF_OUTPUT_REASONING,                       /* input_tokens_details.cached_tokens, output_tokens_details.reasoning_tokens */
    UF_N
};

/* What json-c's object would say: a counter is there (bit 1 << field) when its key's
 * value (the last, for a key given twice) is an integer, v[] its value clamped to
 * 0..USAGE_COUNT_MAX; a detail counter only inside a details key whose value is an
 * object. input_details / output_details: those keys are there, with any value. */
struct usage_seen {
    unsigned has;
    int64_t v[UF_N];
    int input_details, output_details;
};

/* Reads the object at s[0..n) (s[0] == '{'; what follows its end is not read). 1: seen
 * is what json-c would give; 0: the text is not plain (comments, escapes, fractions,
 * literals json-c takes but JSON does not, an object nested deeper than a details
 * object, truncated, ...): ask json-c. Pure: no allocation, no state. */
int usage_scan(const char *s, size_t n, struct usage_seen *seen);

#endif
