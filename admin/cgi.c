/* cgi.c: read a CGI request from the environment, write one JSON response (R-SEC-8). */
#include "cgi.h"

#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A header or variable value we are willing to look at; NULL when absent or
 * absurdly long (treated as absent: the request then fails authentication). */
static const char *cgi_env(const char *name)
{
    const char *v = getenv(name);
    if (!v || strlen(v) > CGI_HEADER_MAX)
        return NULL;
    return v;
}

/* Reads and drops a body we refuse, so the server is not cut off mid-write (it
 * would log a broken pipe and might not pass our 413 on). The front server's own
 * request size limit bounds this. */
static void cgi_drain(uint64_t n)
{
    char buf[65536];
    while (n > 0) {
        ssize_t got = read(STDIN_FILENO, buf, n < sizeof buf ? (size_t)n : sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n -= (uint64_t)got;
    }
}

static int cgi_read_body(struct cgi_req *r, size_t max_body)
{
    const char *cl = getenv("CONTENT_LENGTH");
    int64_t want = -1;
    if (cl && *cl) {
        if (parse_i64(cl, 0, INT64_MAX, &want) != 0)
            return 400;
        if ((uint64_t)want > max_body) {
            cgi_drain((uint64_t)want);
            return 413;
        }
    } else if (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0 ||
               strcmp(r->method, "DELETE") == 0) {
        return 0;
    }
    /* Without CONTENT_LENGTH (some servers with chunked bodies) read to EOF, capped. */
    size_t cap = want >= 0 ? (size_t)want : max_body + 1;
    r->body = malloc(cap + 1);
    if (!r->body)
        abort();
    size_t got = 0;
    while (got < cap) {
        ssize_t n = read(STDIN_FILENO, r->body + got, cap - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (want >= 0 && got != (size_t)want)
        return 400;
    if (got > max_body) {
        cgi_drain(UINT64_MAX);
        return 413;
    }
    r->body[got] = '\0';
    r->body_len = got;
    return 0;
}

int cgi_read(struct cgi_req *r, size_t max_body)
{
    memset(r, 0, sizeof *r);
    const char *m = getenv("REQUEST_METHOD"), *uri = getenv("REQUEST_URI");
    if (!m || !uri || strlen(m) >= sizeof r->method)
        return 400;
    snprintf(r->method, sizeof r->method, "%s", m);
    /* R-SEC-8: the path comes from REQUEST_URI as the client sent it; SCRIPT_NAME and
     * PATH_INFO depend on how the server mounted us and are ignored. */
    const char *q = strchr(uri, '?');
    size_t plen = q ? (size_t)(q - uri) : strlen(uri);
    if (plen >= sizeof r->path || (q && strlen(q + 1) >= sizeof r->query))
        return 414;
    memcpy(r->path, uri, plen);
    r->path[plen] = '\0';
    snprintf(r->query, sizeof r->query, "%s", q ? q + 1 : "");
    r->remote_addr = cgi_env("REMOTE_ADDR");
    if (!r->remote_addr)
        r->remote_addr = "";
    r->cookie = cgi_env("HTTP_COOKIE");
    r->authorization = cgi_env("HTTP_AUTHORIZATION");
    r->csrf = cgi_env("HTTP_X_CSRF_TOKEN");
    const char *https = getenv("HTTPS");
    r->https = https && strcmp(https, "on") == 0;
    return cgi_read_body(r, max_body);
}

void cgi_free(struct cgi_req *r)
{
    free(r->body);
    r->body = NULL;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int cgi_query(const struct cgi_req *r, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    for (const char *p = r->query; *p;) {
        size_t plen = strcspn(p, "&");
        if (plen > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
            size_t o = 0;
            for (size_t i = nlen + 1; i < plen; i++) {
                int c = (unsigned char)p[i];
                if (c == '+') {
                    c = ' ';
                } else if (c == '%') {
                    int hi = i + 2 < plen ? hexval(p[i + 1]) : -1;
                    int lo = hi >= 0 ? hexval(p[i + 2]) : -1;
                    if (lo < 0)
                        return -1;
                    c = hi * 16 + lo;
                    i += 2;
                }
                if (c < 0x20 || c == 0x7f || o + 1 >= cap)
                    return -1;
                out[o++] = (char)c;
            }
            out[o] = '\0';
            return 1;
        }
        if (plen == nlen && strncmp(p, name, nlen) == 0) {   /* "?name" alone */
            if (cap < 1)
                return -1;
            out[0] = '\0';
            return 1;
        }
        p += plen;
        if (*p == '&')
            p++;
    }
    return 0;
}

int cgi_cookie(const struct cgi_req *r, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    for (const char *p = r->cookie; p && *p;) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, ";");
        if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
            size_t vlen = len - nlen - 1;
            if (vlen >= cap)
                return 0;
            memcpy(out, p + nlen + 1, vlen);
            out[vlen] = '\0';
            return 1;
        }
        p += len;
        if (*p == ';')
            p++;
    }
    return 0;
}

const char *cgi_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 503: return "Service Unavailable";
    default: return status >= 500 ? "Internal Server Error" : "Error";
    }
}

void cgi_send_text(int status, const char *const *extra_headers, const char *content_type, const char *text,
                   size_t len)
{
    /* Every API answer: never cached, never sniffed, never framed (R-SEC-7). */
    printf("Status: %d %s\r\n"
           "Content-Type: %s\r\n"
           "Cache-Control: no-store\r\n"
           "X-Content-Type-Options: nosniff\r\n"
           "X-Frame-Options: DENY\r\n"
           "Referrer-Policy: no-referrer\r\n"
           "Content-Security-Policy: default-src 'none'; frame-ancestors 'none'\r\n",
           status, cgi_reason(status), content_type);
    for (const char *const *h = extra_headers; h && *h; h++)
        printf("%s\r\n", *h);
    printf("Content-Length: %zu\r\n\r\n", len);
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

void cgi_send(int status, const char *const *extra_headers, struct json_object *body)
{
    const char *text = body ? json_object_to_json_string_ext(
        body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : "{}";
    cgi_send_text(status, extra_headers, "application/json", text, strlen(text));
}
