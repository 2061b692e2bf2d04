/* kstate_redis.c: the key-limit hot state in Redis (kstate.h, issue 19).
 *
 * Every admission is one EVALSHA of ADMIT_LUA: all checks first, in R-KEY-2
 * order, on the server's clock (redis.call('TIME'), so hosts' clocks do not
 * matter), then every take; nothing to give back when a check refuses. Keys
 * of one API key share the hash tag {ID}:
 *   sluice:k:{ID}:qps           ZSET admission id -> admission ms (the sliding second)
 *   sluice:k:{ID}:conc          ZSET lease id -> expiry ms (renewed while the request lives)
 *   sluice:k:{ID}:d:YYYY-MM-DD  HASH calls                     (seeded from SQLite)
 *   sluice:k:{ID}:m:YYYY-MM     HASH calls, tokens             (seeded from SQLite)
 *   sluice:k:{ID}:tpm           HASH level (milli-tokens), refill ms, limit
 * One connection per thread (pthread key, freed with the thread), a short
 * timeout, reconnects with a process-wide backoff; one renewal thread per
 * responder re-adds the leases it holds every third of the lease time, so a
 * host that dies stops renewing and its slots free within the lease. */
#include "kstate.h"

#include "arena.h"
#include "log.h"
#include "state_url.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#ifndef SLUICE_HIREDIS

int kstate_remote(void) { return 0; }

int kstate_start(const char *url)
{
    if (!url || !*url)
        return 0;
    fprintf(stderr, "sluice-fcgi: sluice.conf sets state = \"%.*s...\" (Redis), but this sluice-fcgi was built "
                    "without hiredis: install libhiredis-dev, then ./configure && make (or remove `state`)\n",
            8, url);
    log_error("state is set (Redis) but this build has no hiredis (libhiredis-dev): refusing to start");
    return -1;
}

enum kstate_result kstate_admit(const struct kstate_ask *a, struct kstate_hold *h, struct kstate_refusal *why)
{
    return KSTATE_UNAVAILABLE;
}

int kstate_release(struct kstate_hold *h, int give_back, int64_t tpm_actual, int64_t month_actual, int timeout_ms)
{
    return -1;
}

#else

#include "redis_conn.h"

#include <hiredis/hiredis.h>

static const char ADMIT_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local lease = ARGV[1]\n"
    "local qps, conc, lease_ms = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    "local daily, monthly, mtok, mwant = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]\n"
    "local tpm, twant = tonumber(ARGV[9]), tonumber(ARGV[10])\n"
    "local quotas = daily > 0 or monthly > 0 or mtok > 0\n"
    "if qps > 0 then\n"
    "  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 1000)\n"
    "  local n = redis.call('ZCARD', KEYS[1])\n"
    "  if n >= qps then\n"
    "    local o = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')\n"
    "    return {1, 1, n, tonumber(o[2]) + 1000 - now}\n"
    "  end\n"
    "end\n"
    "if conc > 0 then\n"
    "  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)\n"
    "  local n = redis.call('ZCARD', KEYS[2])\n"
    "  if n >= conc then return {1, 2, n, 1000} end\n"
    "end\n"
    "if quotas then\n"
    "  local d = redis.call('HGET', KEYS[3], 'calls')\n"
    "  local m = redis.call('HMGET', KEYS[4], 'calls', 'tokens')\n"
    "  if (not d) or (not m[1]) then\n"
    "    if ARGV[11] ~= '1' then return {2} end\n"
    "    if not d then redis.call('HSET', KEYS[3], 'calls', ARGV[12]); d = ARGV[12] end\n"
    "    if not m[1] then redis.call('HSET', KEYS[4], 'calls', ARGV[13], 'tokens', ARGV[14]); m = {ARGV[13], ARGV[14]} end\n"
    "  end\n"
    "  local dc, mc, mt = tonumber(d), tonumber(m[1]), tonumber(m[2] or '0')\n"
    "  if daily > 0 and dc >= daily then return {1, 3, dc, 0} end\n"
    "  if monthly > 0 and mc >= monthly then return {1, 4, mc, 0} end\n"
    "  if mtok > 0 and mt >= mtok then return {1, 5, mt, 0} end\n"
    "end\n"
    "if tpm > 0 then\n"
    "  local b = redis.call('HMGET', KEYS[5], 'level', 'refill', 'limit')\n"
    "  local level, refill, lim = tonumber(b[1]), tonumber(b[2]), tonumber(b[3])\n"
    "  if (not level) or (not refill) or lim ~= tpm then\n"
    "    level, refill = tpm * 1000, now\n"
    "  else\n"
    "    local el = now - refill\n"
    "    if el > 0 then\n"
    "      if el > 60000 then el = 60000 end\n"
    "      level = math.min(level + math.floor(el * tpm / 60), tpm * 1000)\n"
    "      refill = now\n"
    "    end\n"
    "  end\n"
    "  local want = twant\n"
    "  if want > tpm then want = tpm end\n"
    "  if want < 1 then want = 1 end\n"
    "  if level < want * 1000 then\n"
    "    local missing = want * 1000 - level\n"
    "    local used = tpm\n"
    "    if level > 0 then used = tpm - math.floor(level / 1000) end\n"
    "    return {1, 6, used, math.floor((missing * 60 + tpm - 1) / tpm)}\n"
    "  end\n"
    "  redis.call('HSET', KEYS[5], 'level', string.format('%.0f', level - want * 1000),\n"
    "             'refill', string.format('%.0f', refill), 'limit', string.format('%.0f', tpm))\n"
    "  redis.call('PEXPIRE', KEYS[5], 120000)\n"
    "end\n"
    "if qps > 0 then\n"
    "  redis.call('ZADD', KEYS[1], now, lease)\n"
    "  redis.call('PEXPIRE', KEYS[1], 2000)\n"
    "end\n"
    "if conc > 0 then\n"
    "  redis.call('ZADD', KEYS[2], now + lease_ms, lease)\n"
    "  redis.call('PEXPIRE', KEYS[2], lease_ms * 2 + 1000)\n"
    "end\n"
    "if quotas then\n"
    "  redis.call('HINCRBY', KEYS[3], 'calls', 1)\n"
    "  redis.call('EXPIRE', KEYS[3], 259200)\n"
    "  redis.call('HINCRBY', KEYS[4], 'calls', 1)\n"
    "  if mtok > 0 then redis.call('HINCRBY', KEYS[4], 'tokens', mwant) end\n"
    "  redis.call('EXPIRE', KEYS[4], 3456000)\n"
    "end\n"
    "return {0, now}\n";

/* A count is only adjusted where the period is held: a hash created here by a
 * refund would look seeded and hide SQLite's count. */
static const char RELEASE_LUA[] =
    "if ARGV[3] == '1' then redis.call('ZREM', KEYS[2], ARGV[1]) end\n"
    "if ARGV[2] == '1' then redis.call('ZREM', KEYS[1], ARGV[1]) end\n"
    "local calls = tonumber(ARGV[4])\n"
    "if calls ~= 0 then\n"
    "  for i = 3, 4 do\n"
    "    if redis.call('HEXISTS', KEYS[i], 'calls') == 1 and\n"
    "       redis.call('HINCRBY', KEYS[i], 'calls', calls) < 0 then redis.call('HSET', KEYS[i], 'calls', 0) end\n"
    "  end\n"
    "end\n"
    "if ARGV[5] ~= '0' and redis.call('HEXISTS', KEYS[4], 'calls') == 1 then\n"
    "  if redis.call('HINCRBY', KEYS[4], 'tokens', ARGV[5]) < 0 then redis.call('HSET', KEYS[4], 'tokens', 0) end\n"
    "end\n"
    "local td, lim = tonumber(ARGV[6]), tonumber(ARGV[7])\n"
    "if td ~= 0 and lim > 0 then\n"
    "  local b = redis.call('HMGET', KEYS[5], 'level', 'limit')\n"
    "  if b[1] and tonumber(b[2]) == lim then\n"
    "    local level = tonumber(b[1]) + td * 1000\n"
    "    if level > lim * 1000 then level = lim * 1000 end\n"
    "    if level < -lim * 1000 then level = -lim * 1000 end\n"
    "    redis.call('HSET', KEYS[5], 'level', string.format('%.0f', level))\n"
    "  end\n"
    "end\n"
    "return 0\n";

/* Re-adds (not only extends: after a Redis restart the leases come back) every
 * lease of this process; KEYS[i] holds ARGV[i + 1]. */
static const char RENEW_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local ms = tonumber(ARGV[1])\n"
    "for i, k in ipairs(KEYS) do\n"
    "  redis.call('ZADD', k, now + ms, ARGV[i + 1])\n"
    "  redis.call('PEXPIRE', k, ms * 2 + 1000)\n"
    "end\n"
    "return #KEYS\n";

enum { SCRIPT_ADMIT, SCRIPT_RELEASE, SCRIPT_RENEW, N_SCRIPTS };
static const char *const scripts[N_SCRIPTS] = {ADMIT_LUA, RELEASE_LUA, RENEW_LUA};
static char shas[N_SCRIPTS][41];           /* written at each connect (always the same text) */
static pthread_mutex_t sha_lock = PTHREAD_MUTEX_INITIALIZER;

static struct state_url url;
static char url_text[300];                 /* without the password, for logs */
static int configured;
static uint64_t instance;                  /* random, so lease ids never meet across hosts */
static _Atomic uint64_t lease_seq;

static _Atomic int64_t down_until_ms;      /* no connect attempt before (backoff) */
static _Atomic int connect_failures;
static _Atomic int outage_flag;            /* a cheap read of outage.down */
static struct kstate_outage outage;
static pthread_mutex_t outage_lock = PTHREAD_MUTEX_INITIALIZER;

static _Atomic int last_lease_ms = 10000, last_timeout_ms = 200;

struct conn {
    redisContext *c;
    int timeout_ms;
};
static pthread_key_t conn_key;

/* The renewal list: the leases this process holds (copies, not the requests' memory). */
struct lease_entry {
    int64_t key_id;
    char lease[48];
    struct lease_entry *next;
};
static struct lease_entry *leases;
static pthread_mutex_t leases_lock = PTHREAD_MUTEX_INITIALIZER;

static void conn_free(void *p)
{
    struct conn *k = p;
    if (k && k->c)
        redisFree(k->c);
    free(k);
}

int kstate_remote(void) { return configured; }

static struct timeval tv_of(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

static void note(int ok)
{
    if (ok && !atomic_load_explicit(&outage_flag, memory_order_relaxed))
        return;                             /* the common case: no lock */
    pthread_mutex_lock(&outage_lock);
    int64_t failures = outage.failures, since = outage.since_ms;
    int what = kstate_outage_note(&outage, ok, now_ms());
    atomic_store(&outage_flag, outage.down);
    pthread_mutex_unlock(&outage_lock);
    if (what == 1)
        log_warn("state %s does not answer: key limits follow state_fail_policy until it does (logged once per "
                 "outage)", url_text);
    else if (what == 2)
        log_info("state %s answers again after %lld ms (%lld calls failed)", url_text,
                 (long long)(now_ms() - since), (long long)failures);
}

static int load_scripts(redisContext *c)
{
    for (int i = 0; i < N_SCRIPTS; i++) {
        redisReply *r = redisCommand(c, "SCRIPT LOAD %s", scripts[i]);
        if (!r || r->type != REDIS_REPLY_STRING || r->len != 40) {
            if (r && r->type == REDIS_REPLY_ERROR)
                log_warn("state %s: SCRIPT LOAD: %s", url_text, r->str);
            if (r)
                freeReplyObject(r);
            return -1;
        }
        pthread_mutex_lock(&sha_lock);
        memcpy(shas[i], r->str, 40);
        shas[i][40] = '\0';
        pthread_mutex_unlock(&sha_lock);
        freeReplyObject(r);
    }
    return 0;
}

static redisContext *conn_open(int timeout_ms)
{
    redisContext *c = redis_connect(&url, timeout_ms, 1);
    if (!c)
        goto failed;
    if (load_scripts(c) != 0)
        goto failed;
    atomic_store(&connect_failures, 0);
    return c;
failed:
    if (c)
        redisFree(c);
    int n = atomic_fetch_add(&connect_failures, 1) + 1;
    atomic_store(&down_until_ms, mono_ms() + kstate_backoff_ms(n));
    return NULL;
}

/* This thread's connection, opened (again) unless the backoff says wait. */
static struct conn *conn_get(int timeout_ms)
{
    struct conn *k = pthread_getspecific(conn_key);
    if (!k) {
        k = xcalloc(1, sizeof *k);
        pthread_setspecific(conn_key, k);
    }
    if (!k->c) {
        if (mono_ms() < atomic_load(&down_until_ms))
            return NULL;
        if (!(k->c = conn_open(timeout_ms)))
            return NULL;
        k->timeout_ms = timeout_ms;
    } else if (k->timeout_ms != timeout_ms) {
        redisSetTimeout(k->c, tv_of(timeout_ms));    /* state_timeout_ms changed */
        k->timeout_ms = timeout_ms;
    }
    return k;
}

/* EVALSHA of script s: the reply, or NULL (the store did not answer; the
 * connection is dropped and the outage noted). A flushed script cache
 * (NOSCRIPT) loads the scripts again and retries once. */
/* The server closed this connection (a restart, a client timeout) rather than
 * being slow: the command never ran, and a new connection may well work. */
static int conn_was_closed(const redisContext *c)
{
    return c->err == REDIS_ERR_EOF ||
           (c->err == REDIS_ERR_IO && errno != EAGAIN && errno != EWOULDBLOCK && errno != ETIMEDOUT &&
            errno != EINPROGRESS);
}

static redisReply *eval(int s, int nkeys, const char **keys, int nargs, const char **args, int timeout_ms)
{
    struct conn *k = conn_get(timeout_ms);
    if (!k) {
        note(0);
        return NULL;
    }
    int fresh = 0;                  /* a stale connection gets one more try on a new one */
    int argc = 3 + nkeys + nargs;
    const char **argv = xcalloc((size_t)argc, sizeof *argv);
    size_t *lens = xcalloc((size_t)argc, sizeof *lens);
    char sha[41], n[16];
    snprintf(n, sizeof n, "%d", nkeys);
    redisReply *r = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        pthread_mutex_lock(&sha_lock);
        memcpy(sha, shas[s], sizeof sha);
        pthread_mutex_unlock(&sha_lock);
        argv[0] = "EVALSHA", argv[1] = sha, argv[2] = n;
        for (int i = 0; i < nkeys; i++)
            argv[3 + i] = keys[i];
        for (int i = 0; i < nargs; i++)
            argv[3 + nkeys + i] = args[i];
        for (int i = 0; i < argc; i++)
            lens[i] = strlen(argv[i]);
        r = redisCommandArgv(k->c, argc, argv, lens);
        if (!r && !fresh && conn_was_closed(k->c)) {
            redisFree(k->c);
            k->c = NULL;
            fresh = 1;
            if (!(k = conn_get(timeout_ms)))
                break;
            attempt--;
            continue;
        }
        if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0 && attempt == 0) {
            freeReplyObject(r);
            r = NULL;
            if (load_scripts(k->c) == 0)
                continue;
        }
        break;
    }
    free(argv);
    free(lens);
    if (!k) {                       /* the new connection failed too */
        note(0);
        return NULL;
    }
    if (!r || r->type == REDIS_REPLY_ERROR) {
        if (r) {
            /* A script error (a bug, a full or loading server): once per outage. */
            if (!atomic_load(&outage_flag))
                log_warn("state %s: %s", url_text, r->str);
            freeReplyObject(r);
        }
        redisFree(k->c);
        k->c = NULL;
        note(0);
        return NULL;
    }
    note(1);
    return r;
}

static void key_names(int64_t key_id, const char *day, const char *month, char names[5][64])
{
    snprintf(names[0], 64, "sluice:k:{%lld}:qps", (long long)key_id);
    snprintf(names[1], 64, "sluice:k:{%lld}:conc", (long long)key_id);
    snprintf(names[2], 64, "sluice:k:{%lld}:%s", (long long)key_id, day);
    snprintf(names[3], 64, "sluice:k:{%lld}:%s", (long long)key_id, month);
    snprintf(names[4], 64, "sluice:k:{%lld}:tpm", (long long)key_id);
}

static void *renew_main(void *arg)
{
    for (;;) {
        int lease_ms = atomic_load(&last_lease_ms);
        int wait = lease_ms / 3 < 100 ? 100 : lease_ms / 3;
        struct timespec ts = {wait / 1000, (long)(wait % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        /* Under the list's lock for the whole call: a lease released meanwhile
         * (removed from the list, then ZREM) can never be re-added after its ZREM. */
        pthread_mutex_lock(&leases_lock);
        int n = 0;
        for (struct lease_entry *e = leases; e; e = e->next)
            n++;
        if (n) {
            char (*names)[64] = xcalloc((size_t)n, 64);
            const char **keys = xcalloc((size_t)n, sizeof *keys);
            const char **args = xcalloc((size_t)n + 1, sizeof *args);
            char ms[16];
            snprintf(ms, sizeof ms, "%d", lease_ms);
            args[0] = ms;
            int i = 0;
            for (struct lease_entry *e = leases; e; e = e->next, i++) {
                snprintf(names[i], 64, "sluice:k:{%lld}:conc", (long long)e->key_id);
                keys[i] = names[i];
                args[i + 1] = e->lease;
            }
            redisReply *r = eval(SCRIPT_RENEW, n, keys, n + 1, args, atomic_load(&last_timeout_ms));
            if (r)
                freeReplyObject(r);
            free(names);
            free(keys);
            free(args);
        }
        pthread_mutex_unlock(&leases_lock);
    }
    return NULL;
}

int kstate_start(const char *text)
{
    if (!text || !*text)
        return 0;
    char why[160];
    if (state_url_parse(text, &url, why, sizeof why) != 0) {
        log_error("%s", why);
        return -1;
    }
    state_url_describe(&url, url_text, sizeof url_text);
    if (getrandom(&instance, sizeof instance, 0) != (ssize_t)sizeof instance)
        instance = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 32);
    if (pthread_key_create(&conn_key, conn_free) != 0)
        return -1;
    configured = 1;
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, renew_main, NULL);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        log_error("state %s: cannot start the lease renewal thread", url_text);
        return -1;
    }
    /* A first connection now, so a wrong address is in the log at start. */
    struct conn *k = conn_get(atomic_load(&last_timeout_ms));
    if (k)
        log_info("state %s: key limits are kept in Redis (pool-wide across hosts)", url_text);
    else
        note(0);
    return 0;
}

static void num(char *out, int64_t v) { snprintf(out, 24, "%lld", (long long)v); }

enum kstate_result kstate_admit(const struct kstate_ask *a, struct kstate_hold *h, struct kstate_refusal *why)
{
    if (a->lease_ms > 0)
        atomic_store(&last_lease_ms, a->lease_ms);
    if (a->timeout_ms > 0)
        atomic_store(&last_timeout_ms, a->timeout_ms);
    memset(h, 0, sizeof *h);
    snprintf(h->lease, sizeof h->lease, "%016llx-%d-%llu", (unsigned long long)instance, (int)getpid(),
             (unsigned long long)atomic_fetch_add(&lease_seq, 1));
    char names[5][64], v[13][24];
    key_names(a->key_id, a->day, a->month, names);
    const char *keys[5] = {names[0], names[1], names[2], names[3], names[4]};
    num(v[0], a->qps_limit);
    num(v[1], a->concurrency_limit);
    num(v[2], a->lease_ms);
    num(v[3], a->daily_limit);
    num(v[4], a->monthly_quota);
    num(v[5], a->monthly_token_quota);
    num(v[6], a->month_want);
    num(v[7], a->tpm_limit);
    num(v[8], a->tpm_want);
    num(v[9], a->seeded);
    num(v[10], a->seed_day_calls);
    num(v[11], a->seed_month_calls);
    num(v[12], a->seed_month_tokens);
    const char *args[14] = {h->lease, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]};
    redisReply *r = eval(SCRIPT_ADMIT, 5, keys, 14, args, a->timeout_ms > 0 ? a->timeout_ms : 200);
    if (!r)
        return KSTATE_UNAVAILABLE;
    enum kstate_result res = KSTATE_UNAVAILABLE;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->type == REDIS_REPLY_INTEGER) {
        long long code = r->element[0]->integer;
        if (code == 0) {
            res = KSTATE_OK;
            h->key_id = a->key_id;
            if (r->elements >= 2 && r->element[1]->type == REDIS_REPLY_INTEGER)
                h->admitted_ms = r->element[1]->integer;
            h->qps = a->qps_limit > 0;
            h->slot = a->concurrency_limit > 0;
            h->calls = a->daily_limit > 0 || a->monthly_quota > 0 || a->monthly_token_quota > 0;
            h->month_tokens = a->monthly_token_quota > 0 ? a->month_want : 0;
            if (a->tpm_limit > 0) {
                h->tpm_limit = a->tpm_limit;
                h->tpm_reserved = a->tpm_want > a->tpm_limit ? a->tpm_limit : (a->tpm_want < 1 ? 1 : a->tpm_want);
            }
            str_copy(h->day, sizeof h->day, a->day);
            str_copy(h->month, sizeof h->month, a->month);
        } else if (code == 1 && r->elements >= 4) {
            res = KSTATE_REFUSED;
            why->which = (enum kstate_limit)r->element[1]->integer;
            why->current = r->element[2]->integer;
            why->retry_ms = r->element[3]->integer;
        } else if (code == 2) {
            res = KSTATE_NEED_SEED;
        }
    }
    freeReplyObject(r);
    if (res == KSTATE_OK && h->slot) {
        struct lease_entry *e = xcalloc(1, sizeof *e);
        e->key_id = h->key_id;
        str_copy(e->lease, sizeof e->lease, h->lease);
        pthread_mutex_lock(&leases_lock);
        e->next = leases;
        leases = e;
        pthread_mutex_unlock(&leases_lock);
    }
    return res;
}

int kstate_release(struct kstate_hold *h, int give_back, int64_t tpm_actual, int64_t month_actual, int timeout_ms)
{
    if (h->slot) {
        pthread_mutex_lock(&leases_lock);
        for (struct lease_entry **p = &leases; *p; p = &(*p)->next)
            if (strcmp((*p)->lease, h->lease) == 0) {
                struct lease_entry *e = *p;
                *p = e->next;
                free(e);
                break;
            }
        pthread_mutex_unlock(&leases_lock);
    }
    int64_t month_delta = 0, tpm_back = 0;
    if (give_back) {
        month_delta = -h->month_tokens;
        tpm_back = h->tpm_reserved;
    } else {
        if (h->month_tokens && month_actual >= 0)
            month_delta = month_actual - h->month_tokens;
        if (h->tpm_reserved && tpm_actual >= 0)
            tpm_back = h->tpm_reserved - tpm_actual;
    }
    int calls = give_back && h->calls ? -1 : 0;
    if (!h->slot && !(give_back && h->qps) && !calls && !month_delta && !tpm_back)
        return 0;                           /* nothing held: no round trip */
    char names[5][64], v[5][24];
    key_names(h->key_id, h->day, h->month, names);
    const char *keys[5] = {names[0], names[1], names[2], names[3], names[4]};
    num(v[0], calls);
    num(v[1], month_delta);
    num(v[2], tpm_back);
    num(v[3], h->tpm_limit);
    const char *args[7] = {h->lease, give_back && h->qps ? "1" : "0", h->slot ? "1" : "0", v[0], v[1], v[2], v[3]};
    redisReply *r = eval(SCRIPT_RELEASE, 5, keys, 7, args, timeout_ms > 0 ? timeout_ms : 200);
    h->slot = h->qps = h->calls = 0;
    h->month_tokens = h->tpm_reserved = 0;
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

#endif
