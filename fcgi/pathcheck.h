/* pathcheck.h: validate pass-through paths and header values (R-SEC-3, R-SEC-4). */
#ifndef SLUICE_PATHCHECK_H
#define SLUICE_PATHCHECK_H

#include <stddef.h>

enum pathcheck_result { PATH_OK = 0, PATH_INVALID = -1, PATH_NO_ENDPOINT = -2 };

/* uri is the raw REQUEST_URI beginning "/api/v1/proxy/". Copies the endpoint
 * name (percent-decoding not allowed in it) and points *rest at the remaining
 * path+query, which always begins with '/'. Rejects dot segments (also
 * percent-encoded), encoded or raw CR/LF/NUL and other control bytes,
 * backslashes and fragments, so the path can never leave the replica's base URL. */
enum pathcheck_result pathcheck_proxy(const char *uri, char *endpoint, size_t cap, const char **rest);

/* 1 when a client header value may be used: no CR, LF or NUL, at most max bytes. */
int pathcheck_header_ok(const char *v, size_t max);

/* 1 when an identifier (request id) is printable ASCII without quotes or
 * backslashes, 1..max bytes: safe to log and echo. */
int pathcheck_id_ok(const char *v, size_t max);

#endif
