/* fake_prefix.c: the prefix (KV) cache simulation behind prefix_cache=1 (described at the top of fake_upstream.c). */
#include "fake.h"

#include <stdlib.h>

enum { PREFIX_SET_MAX = 4096 };
static const uint64_t FNV_OFFSET = 14695981039346656037ULL;

/* The hashes of prefixes served here, least recently used replaced first. */
static struct {
    pthread_mutex_t mu;
    uint64_t hash[PREFIX_SET_MAX];
    unsigned long long used[PREFIX_SET_MAX];   /* tick of the last use; 0 = empty slot */
    unsigned long long tick;
} P = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* FNV-1a: a stand-in needs no cryptographic hash, and 64 bits make collisions moot here. */
static uint64_t prefix_mix(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* One message into the running hash; NUL closes each part because raw JSON text never holds one. */
static uint64_t prefix_message(uint64_t h, const char *role, size_t rn, const char *content, size_t cn)
{
    h = prefix_mix(h, role, rn);
    h = prefix_mix(h, "", 1);
    h = prefix_mix(h, content, cn);
    return prefix_mix(h, "", 1);
}

/* One element of "messages": role (unescaped bytes) and content (raw JSON value, quotes included). */
static int prefix_element(struct jscan *j, uint64_t *h)
{
    const char *role = "", *content = "null";
    size_t rn = 0, cn = 4;
    js_ws(j);
    if (j->p >= j->end || *j->p != '{')
        return -1;
    j->p++;
    js_ws(j);
    if (j->p < j->end && *j->p == '}')
        j->p++;
    else
        for (;;) {
            struct jval key, v = { .t = JT_ERR };
            js_ws(j);
            if (j->p >= j->end || *j->p != '"' || !js_string(j, &key))
                return -1;
            js_ws(j);
            if (j->p >= j->end || *j->p++ != ':')
                return -1;
            js_ws(j);
            const char *start = j->p;
            if (js_value(j, 3, JC_NONE, NULL, 0, &v) == JT_ERR)
                return -1;
            if (mem_is(key.s, key.n, "role") && v.t == JT_STR) {
                role = v.s;
                rn = v.n;
            }
            if (mem_is(key.s, key.n, "content")) {
                content = start;
                cn = (size_t)(j->p - start);
            }
            int r = js_next(j, '}');
            if (r < 0)
                return -1;
            if (r > 0)
                break;
        }
    *h = prefix_message(*h, role, rn, content, cn);
    return 0;
}

/* Hashes of a chat body's messages without the last one and with all; -1 if there are none. */
static int prefix_scan(const char *body, size_t n, uint64_t *before_last, uint64_t *all)
{
    struct jscan j = { .p = body, .end = body + n };
    js_ws(&j);
    if (j.p >= j.end || *j.p++ != '{')
        return -1;
    for (;;) {
        struct jval key, v = { .t = JT_ERR };
        js_ws(&j);
        if (j.p >= j.end || *j.p != '"' || !js_string(&j, &key))
            return -1;
        js_ws(&j);
        if (j.p >= j.end || *j.p++ != ':')
            return -1;
        js_ws(&j);
        if (mem_is(key.s, key.n, "messages") && j.p < j.end && *j.p == '[')
            break;
        if (js_value(&j, 1, JC_NONE, NULL, 0, &v) == JT_ERR || js_next(&j, '}') != 0)
            return -1;
    }
    uint64_t h = FNV_OFFSET, prev = h;
    j.p++;
    js_ws(&j);
    if (j.p < j.end && *j.p == ']')
        return -1;
    for (;;) {
        prev = h;
        if (prefix_element(&j, &h) < 0)
            return -1;
        int r = js_next(&j, ']');
        if (r < 0)
            return -1;
        if (r > 0)
            break;
    }
    *before_last = prev;
    *all = h;
    return 0;
}

/* The conversation after the answer this request gets (the content the stream or reply carries). */
static uint64_t prefix_answered(uint64_t all, int chunks)
{
    struct buf a = { 0 };
    buf_add(&a, "\"", 1);
    openai_words(&a, 1, chunks);
    buf_add(&a, "\"", 1);
    uint64_t h = prefix_message(all, "assistant", 9, a.p, a.len);
    free(a.p);
    return h;
}

/* Is h in the set? A hit counts as a use. */
static bool prefix_seen(uint64_t h)
{
    bool hit = false;
    pthread_mutex_lock(&P.mu);
    for (int i = 0; i < PREFIX_SET_MAX && !hit; i++)
        if (P.used[i] && P.hash[i] == h) {
            P.used[i] = ++P.tick;
            hit = true;
        }
    pthread_mutex_unlock(&P.mu);
    return hit;
}

static void prefix_store(uint64_t h)
{
    pthread_mutex_lock(&P.mu);
    int slot = 0;
    for (int i = 0; i < PREFIX_SET_MAX; i++) {
        if (P.used[i] && P.hash[i] == h) {
            slot = i;
            break;
        }
        if (P.used[i] < P.used[slot])
            slot = i;   /* an empty slot (0) or the least recently used */
    }
    P.hash[slot] = h;
    P.used[slot] = ++P.tick;
    pthread_mutex_unlock(&P.mu);
}

/* A chat request's "prefill": counts a hit or miss and waits accordingly; -1 if the client hung up meanwhile. */
int prefix_prefill(struct conn *c, const struct behavior *b)
{
    uint64_t before_last, all;
    if (prefix_scan(c->req.body, c->req.blen, &before_last, &all) < 0)
        return 0;
    bool hit = prefix_seen(before_last);
    atomic_fetch_add(hit ? &S.prefix_hits : &S.prefix_misses, 1);
    /* Stored at "prefill", before any byte goes out, so a client's next turn can never outrun it. */
    prefix_store(all);
    prefix_store(prefix_answered(all, b->chunks));
    int ms = hit ? b->prefix_hit_ms : b->prefix_miss_ms;
    if (ms > 0 && conn_wait(c, ms) < 0)
        return -1;
    return 0;
}

void prefix_clear(void)
{
    pthread_mutex_lock(&P.mu);
    memset(P.used, 0, sizeof P.used);
    P.tick = 0;
    pthread_mutex_unlock(&P.mu);
    atomic_store(&S.prefix_hits, 0);
    atomic_store(&S.prefix_misses, 0);
}
