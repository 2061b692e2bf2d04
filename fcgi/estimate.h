/* estimate.h: the calibrated prompt-token estimate of the context pre-check
 * (R-GUARD-2). Pure: no I/O, no allocation. */
#ifndef SLUICE_ESTIMATE_H
#define SLUICE_ESTIMATE_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

/* Tokens of one UTF-8 text, by character classes (README "Guards"). */
int64_t estimate_text(const char *s, size_t n);

/* Tokens of what the model reads of a request body: every message's text and
 * name with a per-message overhead, system, prompt / input, tools; JSON
 * structure itself is not read by the model and is not counted. */
int64_t estimate_request(struct json_object *body);

#endif
