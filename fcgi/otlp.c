/* otlp.c: the OTLP/HTTP JSON exporter (otlp.h). */
#include "otlp.h"

#include "arena.h"
#include "buf.h"
#include "log.h"
#include "metrics.h"
#include "upstream.h"
#include "util.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One request's spans, formatted by its thread. */
struct item {
    struct item *next;
    int n;                       /* spans in data */
    size_t len;
    char data[];
};

static struct {
    int on;
    char url[512];
    int flush_ms, batch_max, queue_max, timeout_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;           /* on CLOCK_MONOTONIC */
    struct item *head, *tail;
    int queued;                  /* spans in the list */
    int64_t oldest_ms;           /* mono_ms() when head was queued */
    int stopping;
    int64_t stop_deadline_ms;    /* shutdown: what is still queued must be out by then */
    struct shm *shm;             /* for the drop counter; the process's one mapping */
    CURL *curl;
} X = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char envelope_head[] =
    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":"
    "\"sluice\"}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"sluice\"},\"spans\":[";
static const char envelope_tail[] = "]}]}]}";

int otlp_enabled(void) { return X.on; }

static void count_dropped(struct shm *s, int n)
{
    if (s && n > 0)
        metrics_add(s, MET_SPANS_DROPPED, "", (uint64_t)n);
}

void otlp_enqueue(struct shm *s, const char *spans, size_t len, int n)
{
    if (!X.on || n <= 0)
        return;
    pthread_mutex_lock(&X.mu);
    X.shm = s;
    int full = X.stopping || X.queued + n > X.queue_max;
    pthread_mutex_unlock(&X.mu);
    if (full) {
        count_dropped(s, n);
        return;
    }
    /* Allocated outside the lock: the lock only links it. */
    struct item *it = xmalloc(sizeof *it + len + 1);
    it->next = NULL;
    it->n = n;
    it->len = len;
    memcpy(it->data, spans, len);
    it->data[len] = '\0';
    pthread_mutex_lock(&X.mu);
    if (X.stopping || X.queued + n > X.queue_max) {
        pthread_mutex_unlock(&X.mu);
        free(it);
        count_dropped(s, n);
        return;
    }
    if (X.tail)
        X.tail->next = it;
    else {
        X.head = it;
        X.oldest_ms = mono_ms();
    }
    X.tail = it;
    X.queued += n;
    int wake = X.queued >= X.batch_max || X.head == it;   /* a first span starts its flush_ms wait now */
    pthread_mutex_unlock(&X.mu);
    if (wake)
        pthread_cond_signal(&X.cv);
}

/* Unlinks up to batch_max spans (at least one item); called locked. */
static struct item *take_batch(int *n_out)
{
    struct item *first = X.head, *last = NULL;
    int n = 0;
    for (struct item *it = X.head; it && (n == 0 || n + it->n <= X.batch_max); it = it->next) {
        n += it->n;
        last = it;
    }
    if (!last)
        return NULL;
    X.head = last->next;
    if (!X.head)
        X.tail = NULL;
    last->next = NULL;
    X.queued -= n;
    X.oldest_ms = mono_ms();     /* what is left waits at most flush_ms from now */
    *n_out = n;
    return first;
}

static size_t discard_cb(char *p, size_t size, size_t n, void *u)
{
    (void)p; (void)u;
    return size * n;
}

/* One POST of the batch; 0 when the collector took it (2xx). */
static int post_batch(const struct item *batch, struct buf *body)
{
    buf_reset(body);
    buf_puts(body, envelope_head);
    for (const struct item *it = batch; it; it = it->next) {
        if (it != batch)
            buf_append(body, ",", 1);
        buf_append(body, it->data, it->len);
    }
    buf_puts(body, envelope_tail);
    CURL *c = X.curl;
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return rc == CURLE_OK && status >= 200 && status < 300 ? 0 : -1;
}

static void free_batch(struct item *it)
{
    while (it) {
        struct item *next = it->next;
        free(it);
        it = next;
    }
}

/* Exports one batch and says what became of it in the log, at most once a
 * minute, so a dead collector does not flood the diagnostics. */
static void export_one(struct item *batch, int n, struct buf *body)
{
    static int64_t last_warn_ms;
    if (post_batch(batch, body) != 0) {
        pthread_mutex_lock(&X.mu);
        struct shm *s = X.shm;
        pthread_mutex_unlock(&X.mu);
        count_dropped(s, n);
        if (mono_ms() - last_warn_ms >= 60000) {
            log_warn("OTLP export to %s failed: %d spans dropped (further failures counted only)", X.url, n);
            last_warn_ms = mono_ms();
        }
    }
    free_batch(batch);
}

static void *otlp_main(void *arg)
{
    (void)arg;
    thread_background();
    struct buf body;
    buf_init(&body, 0);
    pthread_mutex_lock(&X.mu);
    while (!X.stopping) {
        int64_t now = mono_ms();
        if (X.queued >= X.batch_max || (X.head && now - X.oldest_ms >= X.flush_ms)) {
            int n = 0;
            struct item *batch = take_batch(&n);
            pthread_mutex_unlock(&X.mu);
            export_one(batch, n, &body);
            pthread_mutex_lock(&X.mu);
            continue;
        }
        /* Asleep until the head's flush time, or a second when empty (the
         * first span to come starts its own wait). */
        int64_t until = X.head ? X.oldest_ms + X.flush_ms : now + 1000;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = (int64_t)ts.tv_nsec + (until - now) * 1000000;
        ts.tv_sec += ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&X.cv, &X.mu, &ts);
    }
    /* Shutdown: what is queued goes out within otlp.timeout_ms of otlp_stop
     * (each POST gets what is left of it); the rest is counted. */
    while (X.head) {
        int n = 0;
        struct item *batch = take_batch(&n);
        int64_t left = X.stop_deadline_ms - mono_ms();
        pthread_mutex_unlock(&X.mu);
        if (left > 0) {
            curl_easy_setopt(X.curl, CURLOPT_TIMEOUT_MS, (long)left);
            export_one(batch, n, &body);
        } else {
            count_dropped(X.shm, n);
            free_batch(batch);
        }
        pthread_mutex_lock(&X.mu);
    }
    pthread_mutex_unlock(&X.mu);
    buf_free(&body);
    return NULL;
}

int otlp_start(const struct conf *c)
{
    if (!c->otlp_endpoint[0])
        return 0;
    str_copy(X.url, sizeof X.url, c->otlp_endpoint);
    X.flush_ms = c->otlp_flush_ms;
    X.batch_max = c->otlp_batch_max;
    X.queue_max = c->otlp_queue_max;
    X.timeout_ms = c->otlp_timeout_ms;
    X.curl = curl_easy_init();
    if (!X.curl) {
        log_error("otlp: curl_easy_init failed");
        return -1;
    }
    upstream_safe_defaults(X.curl);
    static struct curl_slist *headers;
    headers = curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(X.curl, CURLOPT_URL, X.url);
    curl_easy_setopt(X.curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(X.curl, CURLOPT_TIMEOUT_MS, (long)X.timeout_ms);
    curl_easy_setopt(X.curl, CURLOPT_CONNECTTIMEOUT_MS, (long)X.timeout_ms);
    curl_easy_setopt(X.curl, CURLOPT_WRITEFUNCTION, discard_cb);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&X.cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&X.thread, NULL, otlp_main, NULL) != 0) {
        log_error("otlp: cannot start the exporter thread");
        return -1;
    }
    X.on = 1;
    log_info("OTLP export of spans to %s (batches of %d, every %d ms)", X.url, X.batch_max, X.flush_ms);
    return 0;
}

void otlp_stop(void)
{
    if (!X.on)
        return;
    pthread_mutex_lock(&X.mu);
    X.stopping = 1;
    X.stop_deadline_ms = mono_ms() + X.timeout_ms;
    pthread_mutex_unlock(&X.mu);
    pthread_cond_signal(&X.cv);
    pthread_join(X.thread, NULL);
    X.on = 0;
}
