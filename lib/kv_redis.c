/* kv_redis.c: lib/kv_redis.h over hiredis, on lib/redis_eval.c's connection of each thread. */
#include "kv_redis.h"

#include "log.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SLUICE_HIREDIS

#include "redis_eval.h"

#include <hiredis/hiredis.h>

static int kv_started;

int kv_start(const char *url)
{
    if (!url || !*url)
        return 0;
    if (redis_eval_start(url) != 0)
        return -1;
    kv_started = 1;
    return 0;
}

int kv_on(void) { return kv_started; }

/* The connections, their backoff and the outage log are lib/redis_eval.c's. */
static redisContext *kv_conn(int timeout_ms) { return redis_eval_conn(timeout_ms); }

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
    redis_eval_conn_done(ok);
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
    redis_eval_conn_done(ok);
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
    redis_eval_conn_done(rc >= 0);
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
    redis_eval_conn_done(ok);
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
