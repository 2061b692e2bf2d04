/* access_log.c: the access log writer (access_log.h).
 *
 * The request thread formats its line once, on its stack, copies it into one
 * heap record and links it to a bounded queue (a pointer swap under a mutex
 * nobody holds for long); the writer thread takes the whole queue and appends
 * it with writev. A full queue drops the line and counts it: a slow disk
 * must never slow the answers down. */
#include "access_log.h"

#include "account.h"
#include "errors.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define AL_LINE_MAX 8192          /* every field's cap below sums to less */
#define AL_QUEUE_MAX 16384        /* lines waiting; past this they are dropped */
#define AL_WAKE_AT 1024           /* a burst wakes the writer before its pause ends */
#define AL_PAUSE_MS 100           /* otherwise it writes what came every 100 ms */
#define AL_IOV 256

struct al_line {
    struct al_line *next;
    size_t len;
    char text[];
};

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static struct al_line *q_head, *q_tail;
static int q_len, q_stop;
static atomic_uint_fast64_t q_dropped;   /* since the writer last said so */
static pthread_t al_thread;
static int al_on;                        /* an access_log file is configured and open */
static int al_fd = -1;
static char al_path[512];

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
    char k[40];
    int n = snprintf(k, sizeof k, "%s\"%s\":", l->fields++ ? "," : "", name);
    put_raw(l, k, (size_t)n);
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
    int n = snprintf(num, sizeof num, "%lld", (long long)v);
    put_key(l, name);
    put_raw(l, num, (size_t)n);
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
    int n = snprintf(num, sizeof num, "%lld.%03lld", (long long)(us / 1000), (long long)(us % 1000));
    put_raw(l, num, (size_t)n);
}

static void put_time(struct line *l, int64_t ms)
{
    time_t sec = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    char ts[40];
    int n = snprintf(ts, sizeof ts, "\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\"", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
    put_key(l, "ts");
    put_raw(l, ts, (size_t)n);
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
    put_str(l, "affinity", r->affinity_header[0] ? r->affinity_header : NULL, 128);
    put_str(l, "cache", r->obs.cache, 64);
    put_int(l, "bytes_out", (int64_t)r->obs.bytes_out);
    put_str(l, "client", client_of(r), 256);
    put_str(l, "user_agent", request_header(r, "User-Agent"), 1024);
    if (r->obs.trace_id[0])
        put_str(l, "trace_id", r->obs.trace_id, 80);
    put_raw(l, "}\n", 2);
}

/* ---- the queue ---- */

static void enqueue(struct shm *shm, struct al_line *line)
{
    pthread_mutex_lock(&q_lock);
    if (q_len >= AL_QUEUE_MAX || q_stop) {
        pthread_mutex_unlock(&q_lock);
        free(line);
        atomic_fetch_add(&q_dropped, 1);
        metrics_add(shm, MET_ACCESS_LOG_DROPPED, "", 1);
        return;
    }
    if (q_tail)
        q_tail->next = line;
    else
        q_head = line;
    q_tail = line;
    if (++q_len == AL_WAKE_AT)
        pthread_cond_signal(&q_cond);
    pthread_mutex_unlock(&q_lock);
}

void access_log_write(const struct request *r)
{
    if (!al_on)
        return;
    struct line l;
    format_line(r, &l);
    struct al_line *line = malloc(sizeof *line + l.len);
    if (!line) {
        metrics_add(r->shm, MET_ACCESS_LOG_DROPPED, "", 1);
        return;
    }
    line->next = NULL;
    line->len = l.len;
    memcpy(line->text, l.buf, l.len);
    enqueue(r->shm, line);
}

/* ---- the writer thread ---- */

/* Appends the lines with as few writes as there are AL_IOV-line groups; with
 * O_APPEND each write lands whole, after the other responders' lines. */
static void write_lines(struct al_line *list)
{
    struct iovec iov[AL_IOV];
    while (list) {
        int n = 0;
        for (; list && n < AL_IOV; list = list->next, n++) {
            iov[n].iov_base = list->text;
            iov[n].iov_len = list->len;
        }
        if (writev(al_fd, iov, n) < 0)
            log_warn("access log %s: %s; %d lines lost (is the disk full?)", al_path, strerror(errno), n);
    }
}

static void free_lines(struct al_line *l)
{
    while (l) {
        struct al_line *next = l->next;
        free(l);
        l = next;
    }
}

static void say_dropped(void)
{
    uint64_t n = atomic_exchange(&q_dropped, 0);
    if (n)
        log_warn("access log: %llu lines dropped, the writer's queue (%d lines) was full; %s is on a slow"
                 " disk? (counted in sluice_access_log_dropped_total)", (unsigned long long)n, AL_QUEUE_MAX, al_path);
}

static void *writer_main(void *arg)
{
    (void)arg;
    /* Signals are main's (sigwait): this thread must never take a SIGHUP. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (;;) {
        pthread_mutex_lock(&q_lock);
        if (!q_head && !q_stop) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t ns = ts.tv_nsec + (int64_t)AL_PAUSE_MS * 1000000;
            ts.tv_sec += ns / 1000000000;
            ts.tv_nsec = ns % 1000000000;
            pthread_cond_timedwait(&q_cond, &q_lock, &ts);
        }
        struct al_line *list = q_head;
        q_head = q_tail = NULL;
        q_len = 0;
        int stop = q_stop;
        pthread_mutex_unlock(&q_lock);
        write_lines(list);
        free_lines(list);
        say_dropped();
        if (stop && !list)
            break;
    }
    return NULL;
}

static int open_file(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
}

int access_log_start(const struct conf *c)
{
    if (!c->access_log[0])
        return 0;
    snprintf(al_path, sizeof al_path, "%s", c->access_log);
    al_fd = open_file(al_path);
    if (al_fd < 0) {
        log_error("cannot open the access log %s: %s (set access_log = \"\" in sluice.conf to turn it off)",
                  al_path, strerror(errno));
        return -1;
    }
    if (pthread_create(&al_thread, NULL, writer_main, NULL) != 0) {
        log_error("access log: cannot start its writer thread: %s", strerror(errno));
        return -1;
    }
    al_on = 1;
    return 0;
}

void access_log_reopen(void)
{
    if (!al_on)
        return;
    int fd = open_file(al_path);
    if (fd < 0) {
        log_error("SIGHUP: cannot reopen the access log %s: %s; still writing to the old file", al_path,
                  strerror(errno));
        return;
    }
    /* As log_reopen: the writer's descriptor now names the new file, and a
     * writev in flight finishes in the old one. */
    dup3(fd, al_fd, O_CLOEXEC);
    close(fd);
}

void access_log_stop(void)
{
    if (!al_on)
        return;
    pthread_mutex_lock(&q_lock);
    q_stop = 1;
    pthread_cond_broadcast(&q_cond);
    pthread_mutex_unlock(&q_lock);
    pthread_join(al_thread, NULL);
    al_on = 0;
}
