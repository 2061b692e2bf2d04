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

/* n commands in one round trip on this thread's connection (lib/redis_eval.c's: its
 * backoff, its outage log), tried once more on a new connection when the server had
 * closed the old one (a Redis restart: nothing ran). replies[i] are the caller's to
 * free. 0, or -1 (nothing answered; the connection dropped and the outage noted). */
#define KV_MAX 8                    /* keys of one call at most (a cascade has 5 levels) */

struct kv_cmd {
    int argc;
    const char *argv[KV_MAX + 1];
    size_t lens[KV_MAX + 1];
};

static int kv_run(const struct kv_cmd *cmds, int n, redisReply **replies, int timeout_ms)
{
    for (int i = 0; i < n; i++)
        replies[i] = NULL;
    for (int attempt = 0; kv_started && attempt < 2; attempt++) {
        redisContext *c = redis_eval_conn(timeout_ms);
        if (!c)
            return -1;
        int ok = 1;
        for (int i = 0; ok && i < n; i++)
            ok = redisAppendCommandArgv(c, cmds[i].argc, (const char **)cmds[i].argv, cmds[i].lens) == REDIS_OK;
        int got = 0;
        while (ok && got < n) {
            void *reply = NULL;
            if (redisGetReply(c, &reply) != REDIS_OK)
                ok = 0;
            else
                replies[got++] = reply;
        }
        if (ok) {
            redis_eval_conn_done(1);
            return 0;
        }
        for (int i = 0; i < got; i++) {
            freeReplyObject(replies[i]);
            replies[i] = NULL;
        }
        if (got || !redis_eval_conn_closed(c))
            break;                  /* slow, or closed halfway: not sent again */
    }
    redis_eval_conn_done(0);
    return -1;
}

static void kv_arg(struct kv_cmd *k, const char *s)
{
    k->argv[k->argc] = s;
    k->lens[k->argc++] = strlen(s);
}

int kv_get(const char *const *keys, int n, int64_t *vals, int timeout_ms)
{
    for (int i = 0; i < n; i++)
        vals[i] = 0;
    if (n <= 0 || n > KV_MAX)
        return -1;
    struct kv_cmd k = {0};
    kv_arg(&k, "MGET");
    for (int i = 0; i < n; i++)
        kv_arg(&k, keys[i]);
    redisReply *r;
    if (kv_run(&k, 1, &r, timeout_ms) != 0)
        return -1;
    int ok = r->type == REDIS_REPLY_ARRAY && (int)r->elements == n;
    for (int i = 0; ok && i < n; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING)
            vals[i] = strtoll(r->element[i]->str, NULL, 10);
    freeReplyObject(r);
    return ok ? 0 : -1;
}

int kv_put(const char *const *keys, const int64_t *vals, int n, int64_t ttl_ms, int timeout_ms)
{
    if (n <= 0 || n > KV_MAX)
        return -1;
    struct kv_cmd k[KV_MAX] = {{0}};
    char v[KV_MAX][24], ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)ttl_ms);
    for (int i = 0; i < n; i++) {
        snprintf(v[i], sizeof v[i], "%lld", (long long)vals[i]);
        kv_arg(&k[i], "SET");
        kv_arg(&k[i], keys[i]);
        kv_arg(&k[i], v[i]);
        kv_arg(&k[i], "PX");
        kv_arg(&k[i], ttl);
    }
    redisReply *r[KV_MAX];
    if (kv_run(k, n, r, timeout_ms) != 0)
        return -1;
    int ok = 1;
    for (int i = 0; i < n; i++) {
        ok &= r[i]->type == REDIS_REPLY_STATUS;
        freeReplyObject(r[i]);
    }
    return ok ? 0 : -1;
}

int kv_claim(const char *key, int64_t val, int64_t ttl_ms, int64_t *held, int timeout_ms)
{
    *held = 0;
    struct kv_cmd k = {0};
    char v[24], ttl[24];
    snprintf(v, sizeof v, "%lld", (long long)val);
    snprintf(ttl, sizeof ttl, "%lld", (long long)ttl_ms);
    kv_arg(&k, "SET");
    kv_arg(&k, key);
    kv_arg(&k, v);
    kv_arg(&k, "NX");
    kv_arg(&k, "PX");
    kv_arg(&k, ttl);
    /* SET ... NX GET would say whose it is in one call, but only from Redis 7: the
     * holder's number is read by a GET in the same round trip instead. */
    struct kv_cmd g = {0};
    kv_arg(&g, "GET");
    kv_arg(&g, key);
    struct kv_cmd both[2] = {k, g};
    redisReply *r[2];
    if (kv_run(both, 2, r, timeout_ms) != 0)
        return -1;
    int rc = -1;
    if (r[0]->type == REDIS_REPLY_STATUS)
        rc = 1;
    else if (r[0]->type == REDIS_REPLY_NIL) {
        rc = 0;
        if (r[1]->type == REDIS_REPLY_STRING)
            *held = strtoll(r[1]->str, NULL, 10);
    }
    freeReplyObject(r[0]);
    freeReplyObject(r[1]);
    return rc;
}

int kv_del(const char *key, int timeout_ms)
{
    struct kv_cmd k = {0};
    kv_arg(&k, "DEL");
    kv_arg(&k, key);
    redisReply *r;
    if (kv_run(&k, 1, &r, timeout_ms) != 0)
        return -1;
    int ok = r->type == REDIS_REPLY_INTEGER;
    freeReplyObject(r);
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
