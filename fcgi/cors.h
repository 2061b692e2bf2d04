/* cors.h: CORS for browser callers (R-API-7): which origins may call, and the
 * header lines of a preflight answer and of a real response. Pure: strings in,
 * strings out, tested in tests/unit/test_cors.c. */
#ifndef SLUICE_CORS_H
#define SLUICE_CORS_H

#include "arena.h"

/* Is origin in list (the cors_allowed_origins setting: comma- or space-separated
 * origins, "*" for any; empty: CORS off)? Origins compare exactly, ASCII case
 * aside; an origin with characters no origin has ("null" included) never matches. */
int cors_origin_allowed(const char *list, const char *origin);

/* The preflight's lines after Access-Control-Allow-Origin: methods, headers
 * (the ones the SDKs send, plus each requested header that is a plain token),
 * Max-Age. requested: Access-Control-Request-Headers, or NULL. */
const char *cors_preflight_headers(struct arena *a, const char *requested);

/* Lines every answer to an allowed origin carries (preflight included). */
const char *cors_response_headers(struct arena *a, const char *origin);

#endif
