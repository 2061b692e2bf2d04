/* fake_reply.c: write a response: status line and headers, a Content-Length body shaped by the directives, errors. */
#include "fake.h"

const char *reply_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return status < 400 ? "OK" : "Error";
    }
}

/* Status line and headers into c->out; clen < 0 means a stream. */
void reply_head(struct conn *c, const struct behavior *b, int status, const char *ctype, long long clen)
{
    struct buf *o = &c->out;
    const struct hdr *rid = http_header(&c->req, "x-request-id");
    o->len = 0;
    buf_printf(o, "HTTP/1.1 %d %s\r\n", status, reply_reason(status));
    if (ctype)
        buf_printf(o, "Content-Type: %s\r\n", ctype);
    if (clen >= 0)
        buf_printf(o, "Content-Length: %lld\r\n", clen);
    else
        buf_adds(o, c->req.minor >= 1 ? "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n"
                                      : "Cache-Control: no-cache\r\n");   /* HTTP/1.0: the close ends it */
    buf_printf(o, "x-fake-upstream: %s\r\nx-fake-request-id: ", G.name);
    if (rid && rid->vlen)
        buf_add(o, rid->val, rid->vlen);
    else
        buf_add(o, "-", 1);
    buf_add(o, "\r\n", 2);
    if (b->retry_after >= 0)
        buf_printf(o, "Retry-After: %d\r\n", b->retry_after);
    if (b->cors)
        buf_adds(o, "Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Credentials: true\r\n");
    buf_add(o, c->xhead, c->xhead_len);
    c->xhead_len = 0;
    if (!c->req.keep_alive)
        buf_adds(o, "Connection: close\r\n");
    else if (c->req.minor == 0)
        buf_adds(o, "Connection: keep-alive\r\n");
    buf_add(o, "\r\n", 2);
}

/* Sends c->rbody as a Content-Length response, shaped by the die/hang/bad_json directives. */
enum outcome reply_send(struct conn *c, const struct behavior *b, int status, const char *ctype)
{
    if (status == 200 && b->bad_json) {
        c->rbody.len = 0;
        buf_adds(&c->rbody, "{\"id\": broken");
        ctype = CT_JSON;
    }
    reply_head(c, b, status, ctype, (long long)c->rbody.len);
    bool partial = b->die_after >= 0 || b->hang_after >= 0;
    if (!c->req.is_head)
        buf_add(&c->out, c->rbody.p, partial ? c->rbody.len / 2 : c->rbody.len);
    if (!partial)
        stats_settle(c);
    if (conn_send(c, c->out.p, c->out.len) < 0)
        return OUT_ABORTED;
    if (b->die_after >= 0)
        return OUT_DIED;
    return b->hang_after >= 0 ? conn_hang(c) : OUT_COMPLETE;
}

enum outcome reply_error(struct conn *c, const struct behavior *b, int status, const char *msg)
{
    struct buf *o = &c->rbody;
    o->len = 0;
    buf_adds(o, "{\"error\":{\"message\":");
    if (msg)
        json_put_str(o, msg, strlen(msg));
    else
        buf_printf(o, "\"fake error %d\"", status);
    buf_printf(o, ",\"type\":\"%s\",\"param\":null,\"code\":null}}",
               status >= 400 && status < 500 ? "invalid_request_error" : "server_error");
    return reply_send(c, b, status, CT_JSON);
}

/* Writes p as one HTTP chunk of a stream (raw on HTTP/1.0, where the close ends the body). */
int reply_chunk(struct conn *c, const char *p, size_t n)
{
    struct buf *o = &c->out;
    o->len = 0;
    if (c->req.minor >= 1)
        buf_printf(o, "%zx\r\n", n);
    buf_add(o, p, n);
    if (c->req.minor >= 1)
        buf_add(o, "\r\n", 2);
    return conn_send(c, o->p, o->len);
}

int reply_chunk_end(struct conn *c)
{
    if (c->req.minor >= 1)
        stats_settle(c);
    return c->req.minor >= 1 ? conn_send(c, "0\r\n\r\n", 5) : 0;
}

enum outcome reply_ok(struct conn *c)
{
    c->rbody.len = 0;
    buf_adds(&c->rbody, "{\"ok\":true}");
    return reply_send(c, &BEHAVIOR_DEFAULT, 200, CT_JSON);
}
