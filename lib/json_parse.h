/* json_parse.h: json-c parsing with one tokener per thread. json_tokener_new
 * allocates the tokener, its stack and a print buffer: for the small bodies
 * and events of the hot path that cost as much as the parse itself. */
#ifndef SLUICE_JSON_PARSE_H
#define SLUICE_JSON_PARSE_H

#include <json-c/json.h>
#include <stddef.h>

/* The JSON value in s[0..n) (json-c flags, e.g. JSON_TOKENER_STRICT), or NULL
 * when it is not well-formed. *end (if given) gets where the value ended, so
 * a caller can refuse trailing bytes. The caller owns the result. */
struct json_object *json_parse(const char *s, size_t n, int flags, size_t *end);

/* A thread that ends frees its tokener (the pool's threads that shrink away). */
void json_parse_thread_end(void);

#endif
