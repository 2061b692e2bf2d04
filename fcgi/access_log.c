/* access_log.c: the access log (access_log.h).
 *
 * The request thread formats its line once, on its stack, and hands it to
 * the file's writer thread (linelog.c): no I/O on the response path. */
#include "access_log.h"

#include "account.h"
#include "errors.h"
#include "linelog.h"
#include "metrics.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AL_LINE_MAX 10240         /* every field's cap below (and its key) sums to less */

/* ---- formatting: a bounded line builder ---- */

struct line {
    char buf[AL_LINE_MAX];
    size_t len;
    int fields;
};

static void put_raw(struct line *l, const char *s, size_t n)
{
    if (n > sizeof l->buf - 2 - l->len)
        n = sizeof l->buf - 2 - l->len;   /* cannot happen with the caps; keeps the line whole */
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void put_key(struct line *l, const char *name)
{
    char k[48];
    size_t n = 0, len = strlen(name);
    if (len > sizeof k - 4)
        len = sizeof k - 4;
    if (l->fields++)
        k[n++] = ',';
    k[n++] = '"';
    memcpy(k + n, name, len);
    n += len;
    k[n++] = '"';
    k[n++] = ':';
    put_raw(l, k, n);
}

/* The length of the valid UTF-8 sequence at s (1..4), or 0 when it is not
 * one (a lone continuation, an overlong form, a surrogate, past U+10FFFF). */
static int utf8_len(const unsigned char *s, size_t left)
{
    unsigned char c = s[0];
    int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (c < 0xC2 || c > 0xF4 || (size_t)n > left)
        return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) || (c == 0xF0 && s[1] < 0x90) ||
        (c == 0xF4 && s[1] > 0x8F))
        return 0;
    return n;
}

/* A JSON string of at most cap output bytes (quotes included): clients send
 * paths, models and user agents, so every byte is escaped or validated;
 * invalid UTF-8 becomes U+FFFD so every line stays valid JSON. */
static void put_escaped(struct line *l, const char *s, size_t cap)
{
    size_t room = sizeof l->buf - 2 - l->len;
    if (cap > room)
        cap = room;               /* cannot happen with the caps; keeps the line whole */
    char *out = l->buf + l->len;
    size_t o = 0;
    out[o++] = '"';
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        /* A run of printable ASCII (nearly every field) is copied whole. */
        size_t run = 0;
        while (i + run < n && (unsigned char)s[i + run] >= 0x20 && (unsigned char)s[i + run] < 0x80 &&
               s[i + run] != '"' && s[i + run] != '\\')
            run++;
        if (run) {
            if (o + run + 1 > cap)
                run = cap > o + 1 ? cap - o - 1 : 0;
            memcpy(out + o, s + i, run);
            o += run;
            i += run;
            if (o + 1 >= cap)
                break;
            continue;
        }
        const unsigned char c = (unsigned char)s[i];
        char unit[8];
        size_t u = 0, used = 1;
        if (c == '"' || c == '\\') {
            unit[u++] = '\\';
            unit[u++] = (char)c;
        } else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            const char *short_form = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            if (short_form) {
                memcpy(unit, short_form, 2);
                u = 2;
            } else {
                memcpy(unit, "\\u00", 4);
                unit[4] = hex[c >> 4];
                unit[5] = hex[c & 15];
                u = 6;
            }
        } else if (c < 0x80) {
            unit[u++] = (char)c;
        } else {
            int k = utf8_len((const unsigned char *)s + i, n - i);
            if (k) {
                memcpy(unit, s + i, (size_t)k);
                u = used = (size_t)k;
            } else {
                memcpy(unit, "\\ufffd", 6);
                u = 6;
            }
        }
        if (o + u + 1 > cap)
            break;                /* cut at a whole character */
        memcpy(out + o, unit, u);
        o += u;
        i += used;
    }
    out[o++] = '"';
    l->len += o;
}

static void put_str(struct line *l, const char *name, const char *value, size_t cap)
{
    put_key(l, name);
    if (value)
        put_escaped(l, value, cap);
    else
        put_raw(l, "null", 4);
}

static void put_int(struct line *l, const char *name, int64_t v)
{
    char num[24];
    size_t n = fmt_i64(num, v);
    put_key(l, name);
    put_raw(l, num, n);
}

/* An id that is 0 when there is none (no key, no user) is null. */
static void put_id(struct line *l, const char *name, int64_t v)
{
    if (v)
        put_int(l, name, v);
    else
        put_str(l, name, NULL, 0);
}

/* Microseconds as milliseconds with three decimals; null when absent. */
static void put_ms(struct line *l, const char *name, int64_t us, int present)
{
    char num[32];
    put_key(l, name);
    if (!present) {
        put_raw(l, "null", 4);
        return;
    }
    if (us < 0)
        us = 0;
    size_t n = fmt_i64(num, us / 1000);
    int frac = (int)(us % 1000);
    num[n++] = '.';
    num[n++] = (char)('0' + frac / 100);
    num[n++] = (char)('0' + frac / 10 % 10);
    num[n++] = (char)('0' + frac % 10);
    put_raw(l, num, n);
}

/* The second's text is made once per second per thread; the milliseconds each time. */
static void put_time(struct line *l, int64_t ms)
{
    static __thread int64_t cached_sec = -1;
    static __thread char ts[40];       /* "YYYY-MM-DDTHH:MM:SS." then the milliseconds */
    static __thread int ts_len;
    if (ms / 1000 != cached_sec) {
        time_t sec = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&sec, &tm);
        ts_len = snprintf(ts, sizeof ts, "\"%04d-%02d-%02dT%02d:%02d:%02d.", tm.tm_year + 1900, tm.tm_mon + 1,
                          tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        cached_sec = ms / 1000;
    }
    char t[48];
    int frac = (int)(ms % 1000);
    memcpy(t, ts, (size_t)ts_len);
    size_t n = (size_t)ts_len;
    t[n++] = (char)('0' + frac / 100);
    t[n++] = (char)('0' + frac / 10 % 10);
    t[n++] = (char)('0' + frac % 10);
    t[n++] = 'Z';
    t[n++] = '"';
    put_key(l, "ts");
    put_raw(l, t, n);
}

/* ---- what a request's line says ---- */

static const char *tenant_name(const struct request *r)
{
    const struct snap_tenant *t = r->caller.tenant_id && r->snap ? snapshot_tenant(r->snap, r->caller.tenant_id) : NULL;
    return t ? t->name : NULL;
}

static const char *client_of(const struct request *r)
{
    return r->obs.client_addr ? r->obs.client_addr : request_param(r, "REMOTE_ADDR");
}

static void format_line(const struct request *r, struct line *l)
{
    int status = account_status(r);
    int64_t prompt, completion;
    account_charged_tokens(r, status, &prompt, &completion);
    int64_t ttft_us = r->obs.ttft_us > 0 ? r->obs.ttft_us : r->ttft_ms * 1000;
    l->len = 0;
    l->fields = 0;
    put_raw(l, "{", 1);
    put_time(l, r->start_ms);
    put_str(l, "request_id", r->request_id, 200);
    put_str(l, "tenant", tenant_name(r), 512);
    put_id(l, "user_id", r->caller.user_id);
    put_id(l, "key_id", r->caller.key_id);
    put_str(l, "method", r->method, 40);
    put_str(l, "path", r->path, 1536);
    put_str(l, "model", r->model, 512);
    put_str(l, "routed_model", r->routed_model, 512);
    put_str(l, "endpoint", r->ep ? r->ep->name : NULL, 512);
    put_str(l, "replica", r->replica ? r->replica->url : NULL, 1024);
    put_int(l, "status", status);
    put_str(l, "code", r->error_code, 128);
    put_int(l, "prompt_tokens", prompt);
    put_int(l, "completion_tokens", completion);
    put_ms(l, "ttft_ms", ttft_us, ttft_us > 0);
    put_ms(l, "latency_ms", mono_us() - r->obs.start_us, 1);
    put_int(l, "retries", r->retries);
    if (r->queue_outcome) {
        put_int(l, "queue_ms", r->queue_ms);
        put_str(l, "queue", r->queue_outcome, 16);
    }
    if (r->degrade_level > 0) {
        put_int(l, "degradation_level", r->degrade_level);
        put_str(l, "degraded_from", r->degraded_from, 512);
    }
    put_str(l, "affinity", r->affinity_header[0] ? r->affinity_header : NULL, 128);
    put_str(l, "routing_reason", r->routing_reason, 128);     /* R-SEM: X-Routing-Reason */
    put_str(l, "cache", r->obs.cache, 64);
    if (r->obs.cache)
        put_int(l, "cache_lookup_us", r->obs.cache_lookup_us);
    if (r->obs.guard_us >= 0)
        put_int(l, "guard_us", r->obs.guard_us);
    if (r->obs.content_flag)                                  /* R-GUARD-3: flag rules that matched */
        put_str(l, "content_flag", r->obs.content_flag, 600);
    if (r->obs.content_block)                                 /* the block rule that refused it */
        put_str(l, "content_block", r->obs.content_block, 200);
    put_int(l, "bytes_out", (int64_t)r->obs.bytes_out);
    put_str(l, "client", client_of(r), 256);
    put_str(l, "user_agent", request_header(r, "User-Agent"), 1024);
    if (r->obs.trace_id[0])
        put_str(l, "trace_id", r->obs.trace_id, 80);
    if (r->shrunk_max_tokens) {       /* R-KEY-6: a quota layer shrank the answer */
        put_str(l, "degraded", "max_tokens", 16);
        put_int(l, "max_tokens", r->shrunk_max_tokens);
    }
    put_raw(l, "}\n", 2);
}

/* ---- the file ---- */

static struct linelog al;

void access_log_write(const struct request *r)
{
    if (!linelog_on(&al))
        return;
    struct line l;
    format_line(r, &l);
    linelog_put(&al, r->shm, l.buf, l.len);
}

int access_log_start(const struct conf *c)
{
    return linelog_open(&al, "access log", c->access_log, MET_ACCESS_LOG_DROPPED);
}

int access_log_move(const char *path) { return linelog_move(&al, path); }

void access_log_reopen(void) { linelog_reopen(&al); }

void access_log_stop(void) { linelog_close(&al); }
