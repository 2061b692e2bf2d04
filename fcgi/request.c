/* request.c: the read stage: FastCGI params and body into the request (DESIGN.md stage 1). */
#include "request.h"

#include "pathcheck.h"
#include "reply.h"
#include "util.h"

#include <ctype.h>
#include <string.h>

const char *request_param(const struct request *r, const char *name)
{
    return fcgi_param(&r->w->fcgi, name);
}

const char *request_header(const struct request *r, const char *name)
{
    char env[128] = "HTTP_";
    size_t i = 5;
    for (const char *p = name; *p && i < sizeof env - 1; p++)
        env[i++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    env[i] = '\0';
    return fcgi_param(&r->w->fcgi, env);
}

uint64_t request_random(struct request *r)
{
    uint64_t x = r->w->rng;    /* xorshift64*: fast and good enough for traffic splits */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->w->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Reads the body: CONTENT_LENGTH when given, else to EOF (Apache may omit it
 * for chunked bodies). Over the limit -> 413 without reading the rest. */
static int request_read_body(struct request *r)
{
    const char *cl = request_param(r, "CONTENT_LENGTH");
    int64_t want = -1, max = r->conf->max_body_bytes;
    if (cl && *cl && parse_i64(cl, 0, INT64_MAX, &want) != 0) {
        reply_error(r, ERR_INVALID_HEADER, "Content-Length is not a number", NULL);
        return -1;
    }
    if (want > max) {
        reply_error(r, ERR_REQUEST_TOO_LARGE, NULL, NULL);
        return -1;
    }
    /* Without Content-Length the buffer may grow to max + 1: one byte over the
     * limit is how an oversized body is recognised. */
    size_t cap = want >= 0 ? (size_t)want : (65536 < max + 1 ? 65536 : (size_t)max + 1);
    char *body = arena_alloc(r->arena, cap + 1);
    size_t len = 0;
    for (;;) {
        if (want >= 0 && len == (size_t)want)
            break;
        if (len == cap) {
            if ((int64_t)cap > max) {
                reply_error(r, ERR_REQUEST_TOO_LARGE, NULL, NULL);
                return -1;
            }
            size_t ncap = cap * 2 > (size_t)max + 1 ? (size_t)max + 1 : cap * 2;
            char *nb = arena_alloc(r->arena, ncap + 1);
            memcpy(nb, body, len);
            body = nb;
            cap = ncap;
        }
        long n = fcgi_read(&r->w->fcgi, body + len, cap - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    if ((int64_t)len > max) {
        reply_error(r, ERR_REQUEST_TOO_LARGE, NULL, NULL);
        return -1;
    }
    if (want >= 0 && len < (size_t)want) {
        /* The body ended before its Content-Length: never forward half of it. */
        reply_error(r, ERR_INVALID_BODY, "the request body ended before its Content-Length", NULL);
        return -1;
    }
    if (want >= 0) {
        /* Consume the empty stdin record that ends the body, so the FastCGI
         * socket is quiet afterwards and a close can be seen (R-SSE-6). */
        char extra;
        while (fcgi_read(&r->w->fcgi, &extra, 1) > 0)
            ;
    }
    body[len] = '\0';
    r->body_complete = 1;
    r->body = body;
    r->body_len = len;
    return 0;
}

int request_read(struct request *r)
{
    r->method = request_param(r, "REQUEST_METHOD");
    r->uri = request_param(r, "REQUEST_URI");
    if (!r->method)
        r->method = "GET";
    if (!r->uri || r->uri[0] != '/')
        r->uri = "/";
    const char *q = strchr(r->uri, '?');
    r->path = q ? arena_strndup(r->arena, r->uri, (size_t)(q - r->uri)) : r->uri;
    r->query = q ? q + 1 : NULL;

    /* R-API-4: keep the client's X-Request-Id when it is safe to echo, else make one. */
    const char *rid = request_header(r, "X-Request-Id");
    if (rid && pathcheck_id_ok(rid, 64)) {
        str_copy(r->request_id, sizeof r->request_id, rid);
    } else {
        /* Unique, not secret: the worker's generator is enough (no syscall). */
        static const char hex[] = "0123456789abcdef";
        uint64_t a = request_random(r), b = request_random(r);
        memcpy(r->request_id, "req_", 4);
        for (int i = 0; i < 16; i++) {
            r->request_id[4 + i] = hex[(a >> (4 * i)) & 15];
            r->request_id[20 + i] = hex[(b >> (4 * i)) & 15];
        }
        r->request_id[36] = '\0';
    }
    /* R-SEC-4: a header value with CR or LF is refused, never forwarded or echoed. */
    for (char **e = r->w->fcgi.envp; *e; e++)
        if (strncmp(*e, "HTTP_", 5) == 0 && strpbrk(*e, "\r\n")) {
            reply_error(r, ERR_INVALID_HEADER, "a header value contains CR or LF", NULL);
            return -1;
        }
    return request_read_body(r);
}
