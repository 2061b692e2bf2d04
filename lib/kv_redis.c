/* kv_redis.c: lib/kv_redis.h over hiredis, one connection per thread. */
#include "kv_redis.h"

#include "log.h"
#include "state_url.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SLUICE_HIREDIS

#include "arena.h"
#include "redis_conn.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>

static struct state_url kv_url;
static char kv_text[300];
static int kv_started;
static pthread_key_t kv_key;
static _Atomic int64_t kv_down_until_ms;   /* no connect before (mono): a down store costs nothing */
static _Atomic int kv_failures;

struct kv_conn {
    redisContext *c;
};

static void kv_conn_free(void *p)
{
    struct kv_conn *k = p;
    if (k && k->c)
        redisFree(k->c);
    free(k);
}

int kv_start(const char *url)
{
    if (!url || !*url)
        return 0;
    char why[160];
    if (state_url_parse(url, &kv_url, why, sizeof why) != 0) {
        log_error("%s", why);
        return -1;
    }
    state_url_describe(&kv_url, kv_text, sizeof kv_text);
    if (pthread_key_create(&kv_key, kv_conn_free) != 0)
        return -1;
    kv_started = 1;
    return 0;
}

int kv_on(void) { return kv_started; }

static redisContext *kv_conn(int timeout_ms)
{
    struct kv_conn *k = pthread_getspecific(kv_key);
    if (!k) {
        k = xcalloc(1, sizeof *k);
        pthread_setspecific(kv_key, k);
    }
    if (!k->c && mono_ms() >= atomic_load(&kv_down_until_ms)) {
        k->c = redis_connect(&kv_url, timeout_ms, 1);
        if (!k->c) {
            int n = atomic_fetch_add(&kv_failures, 1) + 1;
            atomic_store(&kv_down_until_ms, mono_ms() + (n < 5 ? 100 * n : 2000));
            if (n == 1)
                log_warn("state %s does not answer: affinity is per host until it does", kv_text);
        } else if (atomic_exchange(&kv_failures, 0) > 0) {
            log_info("state %s answers again: affinity is shared across hosts again", kv_text);
        }
    }
    return k->c;
}

static void kv_drop(void)
{
    struct kv_conn *k = pthread_getspecific(kv_key);
    if (k && k->c) {
        redisFree(k->c);
        k->c = NULL;
    }
}

int kv_get(const char *const *keys, int n, int64_t *vals, int timeout_ms)
{
    for (int i = 0; i < n; i++)
        vals[i] = 0;
    redisContext *c = kv_started && n > 0 ? kv_conn(timeout_ms) : NULL;
    if (!c)
        return -1;
    const char *argv[1 + n];
    size_t lens[1 + n];
    argv[0] = "MGET";
    lens[0] = 4;
    for (int i = 0; i < n; i++) {
        argv[1 + i] = keys[i];
        lens[1 + i] = strlen(keys[i]);
    }
    redisReply *r = redisCommandArgv(c, 1 + n, argv, lens);
    int ok = r && r->type == REDIS_REPLY_ARRAY && (int)r->elements == n;
    for (int i = 0; ok && i < n; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING)
            vals[i] = strtoll(r->element[i]->str, NULL, 10);
    if (r)
        freeReplyObject(r);
    if (!ok)
        kv_drop();
    return ok ? 0 : -1;
}

int kv_put(const char *const *keys, const int64_t *vals, int n, int64_t ttl_ms, int timeout_ms)
{
    redisContext *c = kv_started && n > 0 ? kv_conn(timeout_ms) : NULL;
    if (!c)
        return -1;
    for (int i = 0; i < n; i++)
        redisAppendCommand(c, "SET %s %lld PX %lld", keys[i], (long long)vals[i], (long long)ttl_ms);
    int ok = 1;
    for (int i = 0; i < n; i++) {
        void *reply = NULL;
        if (redisGetReply(c, &reply) != REDIS_OK) {
            ok = 0;
            break;
        }
        freeReplyObject(reply);
    }
    if (!ok)
        kv_drop();
    return ok ? 0 : -1;
}

int kv_claim(const char *key, int64_t val, int64_t ttl_ms, int64_t *held, int timeout_ms)
{
    *held = 0;
    redisContext *c = kv_started ? kv_conn(timeout_ms) : NULL;
    if (!c)
        return -1;
    redisReply *r = redisCommand(c, "SET %s %lld NX PX %lld GET", key, (long long)val, (long long)ttl_ms);
    int rc = -1;
    if (r && r->type == REDIS_REPLY_NIL)
        rc = 1;
    else if (r && r->type == REDIS_REPLY_STRING) {
        *held = strtoll(r->str, NULL, 10);
        rc = 0;
    }
    if (r)
        freeReplyObject(r);
    if (rc < 0)
        kv_drop();
    return rc;
}

int kv_del(const char *key, int timeout_ms)
{
    redisContext *c = kv_started ? kv_conn(timeout_ms) : NULL;
    if (!c)
        return -1;
    redisReply *r = redisCommand(c, "DEL %s", key);
    int ok = r && r->type == REDIS_REPLY_INTEGER;
    if (r)
        freeReplyObject(r);
    if (!ok)
        kv_drop();
    return ok ? 0 : -1;
}

#else

int kv_claim(const char *key, int64_t val, int64_t ttl_ms, int64_t *held, int timeout_ms)
{
    (void)key, (void)val, (void)ttl_ms, (void)timeout_ms;
    *held = 0;
    return -1;
}

int kv_del(const char *key, int timeout_ms)
{
    (void)key, (void)timeout_ms;
    return -1;
}

int kv_start(const char *url)
{
    (void)url;
    return 0;           /* kstate_start has said what a `state` needs */
}

int kv_on(void) { return 0; }

int kv_get(const char *const *keys, int n, int64_t *vals, int timeout_ms)
{
    (void)keys, (void)timeout_ms;
    for (int i = 0; i < n; i++)
        vals[i] = 0;
    return -1;
}

int kv_put(const char *const *keys, const int64_t *vals, int n, int64_t ttl_ms, int timeout_ms)
{
    (void)keys, (void)vals, (void)n, (void)ttl_ms, (void)timeout_ms;
    return -1;
}

#endif
