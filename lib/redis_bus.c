/* redis_bus.c: the shared channel of lib/redis_bus.h over hiredis. */
#include "redis_bus.h"

#include "log.h"
#include "state_url.h"
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define bus_channel REDIS_BUS_CHANNEL

#ifdef SLUICE_HIREDIS

#include "redis_conn.h"

#include <hiredis/hiredis.h>
#include <time.h>
#include <pthread.h>

static struct state_url bus_url;
static char bus_text[300];
#define BUS_LISTENERS 4
static struct {
    redis_bus_fn *fn;
    void *arg;
} listeners[BUS_LISTENERS];
static _Atomic int n_listeners;
static int bus_started, bus_rc;
static pthread_mutex_t pub_lock = PTHREAD_MUTEX_INITIALIZER;   /* the ring below */
static redisContext *pub;          /* the publisher thread's connection */
static int64_t pub_down_until_ms;  /* no new connection before this (mono); the publisher's */

/* pub/sub channels are not per database: no SELECT */
static redisContext *bus_connect(int timeout_ms) { return redis_connect(&bus_url, timeout_ms, 0); }

static void *bus_main(void *arg)
{
    (void)arg;
    int failures = 0;
    for (;;) {
        redisContext *c = bus_connect(2000);
        redisReply *r = c ? redisCommand(c, "SUBSCRIBE %s", bus_channel) : NULL;
        if (r) {
            freeReplyObject(r);
            if (failures)
                log_info("state %s: subscribed to %s again", bus_text, bus_channel);
            failures = 0;
            struct timeval forever = {0, 0};
            redisSetTimeout(c, forever);
            void *reply;
            while (redisGetReply(c, &reply) == REDIS_OK) {
                redisReply *m = reply;
                /* ["message", channel, payload] */
                if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 && m->element[2]->type == REDIS_REPLY_STRING &&
                    strcmp(m->element[0]->str, "message") == 0) {
                    int n = atomic_load(&n_listeners);
                    for (int i = 0; i < n; i++)
                        listeners[i].fn(m->element[2]->str, m->element[2]->len, listeners[i].arg);
                }
                freeReplyObject(m);
            }
        }
        if (c)
            redisFree(c);
        if (!failures++)
            log_warn("state %s: the news channel %s is down; other hosts' bans and freed places reach this one "
                     "again when it is back", bus_text, bus_channel);
        struct timespec pause = {failures < 5 ? 0 : 2, failures < 5 ? 200000000L * failures : 0};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static void *publish_main(void *arg);

int redis_bus_listen(redis_bus_fn *fn, void *arg)
{
    int i = atomic_load(&n_listeners);
    if (i >= BUS_LISTENERS)
        return -1;
    listeners[i].fn = fn;
    listeners[i].arg = arg;
    atomic_store(&n_listeners, i + 1);
    return 0;
}

static int bus_start_once(const char *url)
{
    char why[160];
    if (state_url_parse(url, &bus_url, why, sizeof why) != 0) {
        log_error("%s", why);
        return -1;
    }
    state_url_describe(&bus_url, bus_text, sizeof bus_text);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, bus_main, NULL);
    if (rc == 0)
        rc = pthread_create(&t, &at, publish_main, NULL);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        log_error("state %s: cannot start the news channel's thread", bus_text);
        return -1;
    }
    return 0;
}

int redis_bus_start(const char *url)
{
    if (!bus_started) {             /* at start, on one thread */
        bus_rc = bus_start_once(url);
        bus_started = 1;
    }
    return bus_rc;
}

/* The messages waiting for the publisher thread: a request never waits on Redis
 * for news; when the ring is full (Redis slow or down) the newest is dropped. */
#define BUS_RING 64
#define BUS_MSG 256
static struct {
    char text[BUS_MSG];
    size_t n;
    int timeout_ms;
} ring[BUS_RING];
static int ring_head, ring_len;
static pthread_cond_t ring_cond = PTHREAD_COND_INITIALIZER;

static void *publish_main(void *arg)
{
    (void)arg;
    char text[BUS_MSG];
    for (;;) {
        pthread_mutex_lock(&pub_lock);
        while (!ring_len)
            pthread_cond_wait(&ring_cond, &pub_lock);
        size_t n = ring[ring_head].n;
        int timeout_ms = ring[ring_head].timeout_ms;
        memcpy(text, ring[ring_head].text, n);
        ring_head = (ring_head + 1) % BUS_RING;
        ring_len--;
        pthread_mutex_unlock(&pub_lock);
        if (!pub && mono_ms() >= pub_down_until_ms && !(pub = bus_connect(timeout_ms)))
            pub_down_until_ms = mono_ms() + 1000;
        if (!pub)
            continue;                   /* down: this news is lost (it expires by itself) */
        redisReply *r = redisCommand(pub, "PUBLISH %s %b", bus_channel, text, n);
        int ok = r && r->type == REDIS_REPLY_INTEGER;
        if (r)
            freeReplyObject(r);
        if (!ok) {                      /* timed out or closed: a new connection, after a pause */
            redisFree(pub);
            pub = NULL;
            pub_down_until_ms = mono_ms() + 1000;
        }
    }
    return NULL;
}

int redis_bus_publish(const char *msg, size_t n, int timeout_ms)
{
    if (n > BUS_MSG)
        return -1;
    int rc = -1;
    pthread_mutex_lock(&pub_lock);
    if (ring_len < BUS_RING) {
        int at = (ring_head + ring_len) % BUS_RING;
        memcpy(ring[at].text, msg, n);
        ring[at].n = n;
        ring[at].timeout_ms = timeout_ms;
        ring_len++;
        pthread_cond_signal(&ring_cond);
        rc = 0;
    }
    pthread_mutex_unlock(&pub_lock);
    return rc;
}

#else

int redis_bus_listen(redis_bus_fn *fn, void *arg)
{
    (void)fn, (void)arg;
    return 0;
}

int redis_bus_start(const char *url)
{
    log_error("state = \"%s\" needs a sluice built with hiredis (apt-get install libhiredis-dev, then"
              " ./configure && make)", url);
    return -1;
}

int redis_bus_publish(const char *msg, size_t n, int timeout_ms)
{
    (void)msg, (void)n, (void)timeout_ms;
    return -1;
}

#endif
