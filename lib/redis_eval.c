/* redis_eval.c: scripts, connections and leases on the `state` Redis; see redis_eval.h. */
#include "redis_eval.h"

#include "arena.h"
#include "kstate.h"
#include "log.h"
#include "state_url.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static _Atomic int last_lease_ms = 10000, last_timeout_ms = 200;

void redis_eval_tune(int lease_ms, int timeout_ms)
{
    if (lease_ms > 0)
        atomic_store(&last_lease_ms, lease_ms);
    if (timeout_ms > 0)
        atomic_store(&last_timeout_ms, timeout_ms);
}

int redis_eval_lease_ms(void) { return atomic_load(&last_lease_ms); }
int redis_eval_timeout_ms(void) { return atomic_load(&last_timeout_ms); }

#ifndef SLUICE_HIREDIS

int redis_eval_start(const char *url)
{
    fprintf(stderr, "sluice-fcgi: sluice.conf sets state = \"%.*s...\" (Redis), but this sluice-fcgi was built "
                    "without hiredis: install libhiredis-dev, then ./configure && make (or remove `state`)\n",
            8, url ? url : "");
    log_error("state is set (Redis) but this build has no hiredis (libhiredis-dev): refusing to start");
    return -1;
}
int redis_eval_on(void) { return 0; }
int redis_eval_script(const char *lua) { (void)lua; return 0; }
void redis_eval_lease_id(char *out, size_t n) { snprintf(out, n, "-"); }
void redis_lease_keep(const char *key, const char *member) { (void)key, (void)member; }
void redis_lease_forget(const char *key, const char *member) { (void)key, (void)member; }
const char *redis_eval_url_text(void) { return ""; }
int redis_eval_connect_now(void) { return -1; }

#else

#include "redis_conn.h"

/* Removes ARGV[i] from KEYS[i]: leases released while a renewal was on its way. */
static const char DROP_LUA[] =
    "for i, k in ipairs(KEYS) do redis.call('ZREM', k, ARGV[i]) end\n"
    "return #KEYS\n";

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

#define MAX_SCRIPTS 8
static const char *scripts[MAX_SCRIPTS];
static char shas[MAX_SCRIPTS][41];         /* written at each connect (always the same texts) */
static int n_scripts;
static pthread_mutex_t sha_lock = PTHREAD_MUTEX_INITIALIZER;
static int renew_script, drop_script;

static struct state_url url;
static char url_text[300];                 /* without the password, for logs */
static int started, start_rc;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t instance;                  /* random, so lease ids never meet across hosts */
static _Atomic uint64_t lease_seq;

static _Atomic int64_t down_until_ms;      /* no connect attempt before (backoff) */
static _Atomic int connect_failures;
static _Atomic int outage_flag;            /* a cheap read of outage.down */
static struct kstate_outage outage;
static pthread_mutex_t outage_lock = PTHREAD_MUTEX_INITIALIZER;

struct conn {
    redisContext *c;
    int timeout_ms;
};
static pthread_key_t conn_key;

/* The renewal list: the leases this process holds (copies, not the requests' memory). */
struct lease_entry {
    char key[96], member[48];
    struct lease_entry *next;
};
static struct lease_entry *leases;
static pthread_mutex_t leases_lock = PTHREAD_MUTEX_INITIALIZER;

int redis_eval_on(void) { return started && start_rc == 0; }
const char *redis_eval_url_text(void) { return url_text; }

int redis_eval_script(const char *lua)
{
    pthread_mutex_lock(&sha_lock);
    int i = -1;
    for (int k = 0; k < n_scripts && i < 0; k++)
        if (scripts[k] == lua)
            i = k;
    if (i < 0 && n_scripts < MAX_SCRIPTS) {
        i = n_scripts++;
        scripts[i] = lua;
    }
    pthread_mutex_unlock(&sha_lock);
    if (i < 0)
        log_error("state: more than %d scripts registered (MAX_SCRIPTS): one is left out", MAX_SCRIPTS);
    return i;
}

void redis_eval_lease_id(char *out, size_t n)
{
    snprintf(out, n, "%016llx-%d-%llu", (unsigned long long)instance, (int)getpid(),
             (unsigned long long)atomic_fetch_add(&lease_seq, 1));
}

static void conn_free(void *p)
{
    struct conn *k = p;
    if (k && k->c)
        redisFree(k->c);
    free(k);
}

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
        log_warn("state %s does not answer: key limits follow state_fail_policy, replica and endpoint caps "
                 "count on this host alone and affinity is this host's own, until it does (logged once per "
                 "outage)", url_text);
    else if (what == 2)
        log_info("state %s answers again after %lld ms (%lld calls failed)", url_text,
                 (long long)(now_ms() - since), (long long)failures);
}

static int load_scripts(redisContext *c)
{
    pthread_mutex_lock(&sha_lock);
    int n = n_scripts;
    pthread_mutex_unlock(&sha_lock);
    for (int i = 0; i < n; i++) {
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

/* The server closed this connection (a restart, a client timeout) rather than
 * being slow: the command never ran, and a new connection may well work. */
static int conn_was_closed(const redisContext *c)
{
    return c->err == REDIS_ERR_EOF ||
           (c->err == REDIS_ERR_IO && errno != EAGAIN && errno != EWOULDBLOCK && errno != ETIMEDOUT &&
            errno != EINPROGRESS);
}

redisReply *redis_eval_call(int s, int nkeys, const char **keys, int nargs, const char **args, int timeout_ms)
{
    if (timeout_ms <= 0)
        timeout_ms = redis_eval_timeout_ms();
    if (s < 0 || s >= n_scripts)
        return NULL;
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
        /* NOSCRIPT: a flushed cache, or a script registered after this connection was made. */
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

redisContext *redis_eval_conn(int timeout_ms)
{
    struct conn *k = started && start_rc == 0 ? conn_get(timeout_ms > 0 ? timeout_ms : redis_eval_timeout_ms())
                                              : NULL;
    if (!k)
        note(0);
    return k ? k->c : NULL;
}

void redis_eval_conn_done(int ok)
{
    if (!ok) {
        struct conn *k = pthread_getspecific(conn_key);
        if (k && k->c) {
            redisFree(k->c);
            k->c = NULL;
        }
    }
    note(ok);
}

int redis_eval_conn_closed(redisContext *c)
{
    if (!conn_was_closed(c))
        return 0;
    struct conn *k = pthread_getspecific(conn_key);
    if (k && k->c == c) {
        redisFree(k->c);
        k->c = NULL;
    }
    return 1;
}

int redis_eval_connect_now(void)
{
    if (conn_get(redis_eval_timeout_ms()))
        return 0;
    note(0);
    return -1;
}

void redis_lease_keep(const char *key, const char *member)
{
    struct lease_entry *e = xcalloc(1, sizeof *e);
    str_copy(e->key, sizeof e->key, key);
    str_copy(e->member, sizeof e->member, member);
    pthread_mutex_lock(&leases_lock);
    e->next = leases;
    leases = e;
    pthread_mutex_unlock(&leases_lock);
}

void redis_lease_forget(const char *key, const char *member)
{
    pthread_mutex_lock(&leases_lock);
    for (struct lease_entry **p = &leases; *p; p = &(*p)->next)
        if (strcmp((*p)->member, member) == 0 && strcmp((*p)->key, key) == 0) {
            struct lease_entry *e = *p;
            *p = e->next;
            free(e);
            break;
        }
    pthread_mutex_unlock(&leases_lock);
}

/* The leases as the renewal found them, copied out of the list: the call to
 * Redis is made without its lock, so a take or release never waits on it. */
struct renewal {
    int n;
    struct lease_entry *e;          /* n copies */
};

static void renewal_copy(struct renewal *rn)
{
    pthread_mutex_lock(&leases_lock);
    rn->n = 0;
    for (struct lease_entry *e = leases; e; e = e->next)
        rn->n++;
    rn->e = rn->n ? xcalloc((size_t)rn->n, sizeof *rn->e) : NULL;
    int i = 0;
    for (struct lease_entry *e = leases; e; e = e->next, i++)
        rn->e[i] = *e;
    pthread_mutex_unlock(&leases_lock);
}

static int still_held(const struct lease_entry *c)
{
    for (struct lease_entry *e = leases; e; e = e->next)
        if (strcmp(e->member, c->member) == 0 && strcmp(e->key, c->key) == 0)
            return 1;
    return 0;
}

static void renew_once(int lease_ms)
{
    struct renewal rn;
    renewal_copy(&rn);
    if (!rn.n)
        return;
    const char **keys = xcalloc((size_t)rn.n, sizeof *keys);
    const char **args = xcalloc((size_t)rn.n + 1, sizeof *args);
    char ms[16];
    snprintf(ms, sizeof ms, "%d", lease_ms);
    args[0] = ms;
    for (int i = 0; i < rn.n; i++) {
        keys[i] = rn.e[i].key;
        args[i + 1] = rn.e[i].member;
    }
    redisReply *r = redis_eval_call(renew_script, rn.n, keys, rn.n + 1, args, redis_eval_timeout_ms());
    if (r) {
        freeReplyObject(r);
        /* A lease released while the renewal was under way may have been
         * re-added after its release's ZREM: it goes again. */
        int k = 0;
        pthread_mutex_lock(&leases_lock);
        for (int i = 0; i < rn.n; i++)
            if (!still_held(&rn.e[i])) {
                keys[k] = rn.e[i].key;
                args[k] = rn.e[i].member;
                k++;
            }
        pthread_mutex_unlock(&leases_lock);
        if (k && (r = redis_eval_call(drop_script, k, keys, k, args, redis_eval_timeout_ms())))
            freeReplyObject(r);
    }
    free(keys);
    free(args);
    free(rn.e);
}

static void *renew_main(void *arg)
{
    (void)arg;
    int64_t last = mono_ms();
    for (;;) {
        /* Short naps: a lease time lowered in the settings is followed at once. */
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
        int lease_ms = redis_eval_lease_ms();
        int every = lease_ms / 3 < 100 ? 100 : lease_ms / 3;
        if (mono_ms() - last < every)
            continue;
        last = mono_ms();
        renew_once(lease_ms);
    }
    return NULL;
}

static int start_once(const char *text)
{
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
    renew_script = redis_eval_script(RENEW_LUA);
    drop_script = redis_eval_script(DROP_LUA);
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
    return 0;
}

int redis_eval_start(const char *text)
{
    if (!text || !*text)
        return -1;
    pthread_mutex_lock(&start_lock);
    if (!started) {
        start_rc = start_once(text);
        started = 1;
    }
    int rc = start_rc;
    pthread_mutex_unlock(&start_lock);
    return rc;
}

#endif
