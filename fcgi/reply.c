/* reply.c: response head and body through libfcgi (R-API-2, R-API-4, R-SSE-1). */
#include "reply.h"

#include "errors.h"

#include <stdio.h>
#include <string.h>

static int reply_failed(struct request *r)
{
    r->client_gone = 1;
    return -1;
}

int reply_head(struct request *r, int status, const char *content_type, const char *extra)
{
    if (r->headers_sent)
        return 0;
    r->headers_sent = 1;
    r->status = status;
    char head[512];
    int n = snprintf(head, sizeof head, "Status: %d\r\nX-Request-Id: %s\r\n", status, r->request_id);
    if (n < 0 || (size_t)n >= sizeof head)
        return reply_failed(r);
    if (FCGX_PutStr(head, n, r->w->fcgi.out) < 0)
        return reply_failed(r);
    if (content_type) {
        n = snprintf(head, sizeof head, "Content-Type: %s\r\n", content_type);
        if (FCGX_PutStr(head, n, r->w->fcgi.out) < 0)
            return reply_failed(r);
    }
    if (extra && FCGX_PutS(extra, r->w->fcgi.out) < 0)
        return reply_failed(r);
    if (FCGX_PutStr("\r\n", 2, r->w->fcgi.out) < 0)
        return reply_failed(r);
    return 0;
}

int reply_body(struct request *r, const char *data, size_t len, int flush)
{
    if (r->client_gone)
        return -1;
    while (len > 0) {
        int chunk = len > (1 << 30) ? (1 << 30) : (int)len;
        if (FCGX_PutStr(data, chunk, r->w->fcgi.out) < 0)
            return reply_failed(r);
        data += chunk;
        len -= (size_t)chunk;
    }
    if (flush && FCGX_FFlush(r->w->fcgi.out) < 0)
        return reply_failed(r);
    return 0;
}

void reply_error(struct request *r, const char *code, const char *message, const char *param)
{
    const struct error_def *e = errors_find(code);
    r->error_code = e->code;
    struct buf *b = &r->w->out;
    buf_reset(b);
    if (r->headers_sent) {
        /* R-SSE-4: the client already has a 200 stream; end it with an error event. */
        if (r->client_gone)
            return;
        buf_puts(b, "data: ");
        errors_body(b, e, message, param);
        buf_puts(b, "\n\n");
        reply_body(r, b->data, b->len, 1);
        return;
    }
    char extra[256];
    int n = snprintf(extra, sizeof extra, "%s", e->no_retry ? "x-should-retry: false\r\n" : "");
    if (e->retry_after && n >= 0 && (size_t)n < sizeof extra)
        snprintf(extra + n, sizeof extra - (size_t)n, "Retry-After: %d\r\n", r->conf->retry_after_s);
    errors_body(b, e, message, param);
    n = (int)strlen(extra);
    snprintf(extra + n, sizeof extra - (size_t)n, "Content-Length: %zu\r\n", b->len);
    if (reply_head(r, e->status, "application/json", extra) == 0)
        reply_body(r, b->data, b->len, 0);
}
