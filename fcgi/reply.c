/* reply.c: response head and body to the front server (fcgiconn.c) (R-API-2, R-API-4, R-SSE-1). */
#include "reply.h"

#include "cors.h"
#include "errors.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static int reply_failed(struct request *r)
{
    r->client_gone = 1;
    return -1;
}

static int put_str(struct request *r, const char *s)
{
    return fcgi_write(&r->w->fcgi, s, strlen(s));
}

/* R-OBS-5: "gw" is sluice's own time so far, "upstream" the time spent waiting
 * on upstreams: finished attempts and the one in flight (a stream's head goes
 * out at its first byte, so that is upstream time to the first byte). */
/* Microseconds as milliseconds with three decimals ("12.345"); at most 24 bytes. */
static size_t fmt_ms3(char *out, int64_t us)
{
    if (us < 0)
        us = 0;
    size_t n = fmt_i64(out, us / 1000);
    int frac = (int)(us % 1000);
    out[n++] = '.';
    out[n++] = (char)('0' + frac / 100);
    out[n++] = (char)('0' + frac / 10 % 10);
    out[n++] = (char)('0' + frac % 10);
    return n;
}

static int server_timing(const struct request *r, char *out, size_t cap)
{
    int64_t now = mono_us();
    int64_t up = r->obs.upstream_us + (r->obs.attempt_start_us ? now - r->obs.attempt_start_us : 0);
    int64_t total = now - r->obs.start_us;
    int64_t gw = total > up ? total - up : 0;
    if (cap < 96)
        return -1;
    size_t n = 0;
    memcpy(out, "Server-Timing: gw;dur=", 22), n = 22;
    n += fmt_ms3(out + n, gw);
    memcpy(out + n, ", upstream;dur=", 15), n += 15;
    n += fmt_ms3(out + n, up);
    memcpy(out + n, "\r\n", 2), n += 2;
    return (int)n;
}

int reply_head(struct request *r, int status, const char *content_type, const char *extra)
{
    if (r->headers_sent)
        return 0;
    r->headers_sent = 1;
    r->status = status;
    char head[512];
    size_t rid = strlen(r->request_id);      /* < 80: fits beside the status */
    int n = 8;
    memcpy(head, "Status: ", 8);
    n += (int)fmt_i64(head + n, status);
    memcpy(head + n, "\r\nX-Request-Id: ", 16), n += 16;
    memcpy(head + n, r->request_id, rid), n += (int)rid;
    memcpy(head + n, "\r\n", 2), n += 2;
    if (fcgi_write(&r->w->fcgi, head, (size_t)n) < 0)
        return reply_failed(r);
    n = server_timing(r, head, sizeof head);
    if (n > 0 && (size_t)n < sizeof head && fcgi_write(&r->w->fcgi, head, (size_t)n) < 0)
        return reply_failed(r);
    if (content_type) {
        r->response_content_type = arena_strdup(r->arena, content_type);
        if (fcgi_write(&r->w->fcgi, "Content-Type: ", 14) < 0 ||
            put_str(r, content_type) < 0 || fcgi_write(&r->w->fcgi, "\r\n", 2) < 0)
            return reply_failed(r);
    }
    if (extra && put_str(r, extra) < 0)
        return reply_failed(r);
    if (r->cors_origin && put_str(r, cors_response_headers(r->arena, r->cors_origin)) < 0)
        return reply_failed(r);
    if (fcgi_write(&r->w->fcgi, "\r\n", 2) < 0)
        return reply_failed(r);
    return 0;
}

int reply_body(struct request *r, const char *data, size_t len, int flush)
{
    if (r->client_gone)
        return -1;
    r->obs.bytes_out += len;
    if (r->capture && !r->capture_overflow && buf_append(r->capture, data, len) != 0)
        r->capture_overflow = 1;     /* too large to keep for an idempotent replay */
    if (r->cache_body && !r->cache_overflow && len > 0) {
        /* R-CACHE-2: a stream is replayed write by write, so each length is kept. */
        unsigned char le[4] = {(unsigned char)len, (unsigned char)(len >> 8), (unsigned char)(len >> 16),
                               (unsigned char)(len >> 24)};
        if (len > 0xffffffffu || buf_append(r->cache_body, data, len) != 0 || buf_append(r->cache_chunks, le, 4) != 0)
            r->cache_overflow = 1;   /* too large to cache */
    }
    if (fcgi_write(&r->w->fcgi, data, len) < 0)
        return reply_failed(r);
    if (flush && fcgi_flush(&r->w->fcgi) < 0)
        return reply_failed(r);
    return 0;
}

/* The error body in the caller's protocol (R-API-2, R-ANT-6). */
static void error_body(const struct request *r, struct buf *b, const struct error_def *e, const char *message,
                       const char *param)
{
    if (r->ingress == INGRESS_ANTHROPIC)
        errors_body_anthropic(b, errors_anthropic_type(e->status), message ? message : e->meaning);
    else
        errors_body(b, e, message, param);
}

/* Does the stream speak the Responses API's events (named, with a type)? */
static int responses_stream(const struct request *r)
{
    return r->kind == REQ_RESPONSES || r->kind == REQ_RESPONSE_OP;
}

void reply_error_event(struct request *r, const char *body, size_t len)
{
    struct buf ev;
    buf_init(&ev, 0);
    /* The Anthropic SDKs raise on a named error event; OpenAI's chat streams carry a
     * data error object; a Responses stream an `error` event of its own shape. */
    buf_puts(&ev, r->ingress == INGRESS_ANTHROPIC || responses_stream(r) ? "event: error\ndata: " : "data: ");
    buf_append(&ev, body, len);
    buf_puts(&ev, "\n\n");
    reply_body(r, ev.data, ev.len, 1);
    buf_free(&ev);
}

static void reply_error_full(struct request *r, enum error_code code, const char *message, const char *param,
                             const char *more_headers)
{
    const struct error_def *e = errors_get(code);
    r->error_code = e->code;
    struct buf *b = &r->w->out;
    buf_reset(b);
    error_body(r, b, e, message, param);
    if (r->headers_sent) {
        /* R-SSE-4: the client already has a 200 stream; end it with an error event. */
        if (!r->client_gone && responses_stream(r) && r->ingress != INGRESS_ANTHROPIC) {
            buf_reset(b);
            errors_body_responses(b, e->code, message ? message : e->meaning, param);
        }
        if (!r->client_gone)
            reply_error_event(r, b->data, b->len);
        return;
    }
    /* The Anthropic SDKs read the request id of an error from request-id. */
    const char *rid = r->ingress == INGRESS_ANTHROPIC ? arena_printf(r->arena, "request-id: %s\r\n", r->request_id) : "";
    const char *extra = arena_printf(r->arena, "%s%s%s%sContent-Length: %zu\r\n", rid,
                                     e->no_retry ? "x-should-retry: false\r\n" : "",
                                     e->retry_after ? arena_printf(r->arena, "Retry-After: %d\r\n",
                                                                   r->conf->retry_after_s) : "",
                                     more_headers ? more_headers : "", b->len);
    if (reply_head(r, e->status, "application/json", extra) == 0)
        reply_body(r, b->data, b->len, 0);
}

void reply_error(struct request *r, enum error_code code, const char *message, const char *param)
{
    reply_error_full(r, code, message, param, NULL);
}

void reply_error_extra(struct request *r, enum error_code code, const char *message, const char *extra_headers)
{
    reply_error_full(r, code, message, NULL, extra_headers);
}

/* RFC 3339 UTC time of epoch seconds. */
static const char *rfc3339(struct arena *a, int64_t s)
{
    time_t t = (time_t)s;
    struct tm tm;
    gmtime_r(&t, &tm);
    return arena_printf(a, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                        tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void reply_limit(struct request *r, const struct limit_info *li)
{
    const struct error_def *e = errors_get(li->code);
    r->error_code = e->code;
    struct buf *b = &r->w->out;
    buf_reset(b);
    const char *reset_at = rfc3339(r->arena, li->reset_s);
    const char *scope = li->scope ? li->scope : "per_api_key";
    static const struct { const char *scope, *whose; } whose[] = {
        {"per_api_key", "this API key"}, {"per_tenant", "this tenant"}, {"per_user", "this user"},
        {"per_endpoint", "this endpoint"}, {"per_model", "this model"},
    };
    const char *who = "this API key";
    for (size_t i = 0; i < sizeof whose / sizeof whose[0]; i++)
        if (strcmp(whose[i].scope, scope) == 0)
            who = whose[i].whose;
    const char *msg = li->message ? li->message
                      : arena_printf(r->arena, "Rate limit reached for %s: %s (limit %lld, current %lld).", who,
                                     e->code, (long long)li->limit, (long long)li->current);
    if (r->ingress == INGRESS_ANTHROPIC) {
        errors_body_anthropic(b, "rate_limit_error", msg);      /* the numbers are in the headers */
    } else {
        buf_puts(b, "{\"error\":{\"message\":");
        buf_json_str(b, msg, strlen(msg));
        buf_printf(b, ",\"type\":\"rate_limit_error\",\"param\":null,\"code\":\"%s\",\"limit\":%lld,"
                   "\"current\":%lld,\"remaining\":%lld,\"scope\":\"%s\",\"reset_at\":\"%s\"}}",
                   e->code, (long long)li->limit, (long long)li->current, (long long)li->remaining, scope, reset_at);
    }
    struct buf h;
    buf_init(&h, 1024);
    buf_printf(&h, "Retry-After: %lld\r\nX-RateLimit-Limit: %lld\r\nX-RateLimit-Remaining: %lld\r\n"
               "X-RateLimit-Reset: %lld\r\n", (long long)li->retry_after_s, (long long)li->limit,
               (long long)li->remaining, (long long)li->reset_s);
    if (li->quota_reset_s) {
        /* X-Quota-Reset: the boundary in the billing time zone, with its offset. */
        time_t t = (time_t)li->quota_reset_s;
        struct tm tm;
        char when[40];
        localtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S%z", &tm);
        size_t n = strlen(when);
        if (n == 24) {      /* +hhmm -> +hh:mm (RFC 3339) */
            memmove(when + 23, when + 22, 3);
            when[22] = ':';
        }
        buf_printf(&h, "X-Quota-Reset: %s\r\n", when);
    }
    if (li->no_retry)
        buf_puts(&h, "x-should-retry: false\r\n");
    if (r->ingress == INGRESS_ANTHROPIC)
        buf_printf(&h, "request-id: %s\r\n", r->request_id);
    buf_printf(&h, "Content-Length: %zu\r\n", b->len);
    const char *extra = arena_strdup(r->arena, h.data);
    buf_free(&h);
    if (reply_head(r, 429, "application/json", extra) == 0)
        reply_body(r, b->data, b->len, 0);
}

void reply_limit_refusal(struct request *r, enum error_code code, const char *scope, int64_t limit, int64_t current,
                         int64_t retry_ms, int64_t quota_reset_s, const char *message)
{
    struct limit_info li = {0};
    int64_t now = now_ms();
    li.code = code;
    li.scope = scope;
    li.limit = limit;
    li.current = current;
    li.remaining = limit - current > 0 ? limit - current : 0;
    li.retry_after_s = quota_reset_s ? quota_reset_s - now / 1000 : (retry_ms + 999) / 1000;
    if (li.retry_after_s < 1)
        li.retry_after_s = 1;
    li.reset_s = quota_reset_s ? quota_reset_s : (now + retry_ms + 999) / 1000;
    li.quota_reset_s = quota_reset_s;
    li.no_retry = quota_reset_s != 0;   /* a quota resets at a day or month boundary */
    li.message = message;
    reply_limit(r, &li);
}

int reply_client_closed(struct request *r)
{
    return fcgi_gone(&r->w->fcgi);
}
