/* router.h: the management API's dispatch table, matched on REQUEST_URI and
 * REQUEST_METHOD only (R-ADM-1, R-SEC-8). */
#ifndef SLUICE_ROUTER_H
#define SLUICE_ROUTER_H

#include "api.h"

#define API_PREFIX "/api/v1/"

enum router_flag {
    ROUTER_PUBLIC = 1,      /* no credential needed (login only) */
};

struct router_route {
    const char *method;     /* GET, POST, PUT, PATCH, DELETE */
    const char *pattern;    /* after /api/v1/: literal segments, {id} (1..2^63-1), {name} */
    api_fn handler;
    int flags;
};

enum router_result { ROUTER_MATCH, ROUTER_NOT_FOUND, ROUTER_BAD_METHOD };

/* Matches c->req's method and path; on ROUTER_MATCH *route is set and the path
 * parameters are in c->ids / c->names. On ROUTER_BAD_METHOD allow holds the methods
 * the path takes ("GET, POST"). */
enum router_result router_match(struct api_ctx *c, const struct router_route **route,
                                char *allow, size_t allow_len);

/* 1 for methods that change something (they need the CSRF token with a cookie). */
int router_is_write(const char *method);

#endif
