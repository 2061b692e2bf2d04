/* cgi.h: the CGI request as sluice-admin.cgi sees it, and the JSON response it writes
 * (R-ADM-1, R-SEC-8). One process serves one request, so the request lives in main. */
#ifndef SLUICE_CGI_H
#define SLUICE_CGI_H

#include <json-c/json.h>
#include <stddef.h>

#define CGI_PATH_MAX 2048
#define CGI_HEADER_MAX 8192     /* longest header value we look at */

struct cgi_req {
    char method[16];            /* REQUEST_METHOD, checked against the route table */
    char path[CGI_PATH_MAX];    /* REQUEST_URI up to '?', as sent (never SCRIPT_NAME/PATH_INFO) */
    char query[CGI_PATH_MAX];   /* after '?', or "" */
    const char *remote_addr;    /* REMOTE_ADDR or "" */
    const char *cookie;         /* HTTP_COOKIE or NULL */
    const char *authorization;  /* HTTP_AUTHORIZATION or NULL */
    const char *csrf;           /* HTTP_X_CSRF_TOKEN or NULL */
    int https;                  /* HTTPS=on: the cookie gets Secure */
    char *body;                 /* NUL-terminated, heap; NULL without a body */
    size_t body_len;
};

/* Fills r from the environment and stdin. 0; or the HTTP status to refuse with
 * (400 bad request line or length, 413 body over max_body, 414 URI too long). */
int cgi_read(struct cgi_req *r, size_t max_body);
void cgi_free(struct cgi_req *r);

/* The decoded value of query parameter name into out (cap bytes): 1 found, 0 absent,
 * -1 malformed (bad %-escape, control character, NUL, too long). */
int cgi_query(const struct cgi_req *r, const char *name, char *out, size_t cap);
/* The value of cookie name (not decoded) into out: 1 found, 0 absent or too long. */
int cgi_cookie(const struct cgi_req *r, const char *name, char *out, size_t cap);

/* Writes the whole response to stdout: Status, the security headers every API answer
 * carries (JSON, no-store, nosniff, ...), extra header lines (each "Name: value",
 * may be NULL), and body serialised. */
void cgi_send(int status, const char *const *extra_headers, struct json_object *body);
/* The same headers around another body (a CSV download). */
void cgi_send_text(int status, const char *const *extra_headers, const char *content_type, const char *text,
                   size_t len);

const char *cgi_reason(int status);

#endif
