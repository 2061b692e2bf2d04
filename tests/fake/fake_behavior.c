/* fake_behavior.c: the behaviour directives a request picks (k=v from the default, a header, the body). */
#include "fake.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

/* ---- k=v parsing, shared with the control routes ---- */

/* Parses all of s[0..n) as a base-10 long. */
int parse_long(const char *s, size_t n, long *out)
{
    char tmp[32];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    long v = strtol(tmp, &end, 10);
    if (errno || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

int parse_double(const char *s, size_t n, double *out)
{
    char tmp[64];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    if (errno || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static bool is_sep(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == ',';
}

/* Calls fn for each "k=v" token of a directive string (separated by spaces, ';' or ','). */
void kv_each(const char *s, size_t n, void (*fn)(void *, const char *, size_t, const char *, size_t), void *arg)
{
    const char *end = s + n;
    while (s < end) {
        while (s < end && is_sep(*s))
            s++;
        const char *tok = s;
        while (s < end && !is_sep(*s))
            s++;
        const char *eq = memchr(tok, '=', (size_t)(s - tok));
        if (eq)
            fn(arg, tok, (size_t)(eq - tok), eq + 1, (size_t)(s - eq - 1));
    }
}

/* ---- directives ---- */

const struct behavior BEHAVIOR_DEFAULT = {
    .chunks = 3, .die_after = -1, .hang_after = -1, .role_chunks = 1,
    .prompt_tokens = -1, .completion_tokens = -1, .retry_after = -1,
    .prefix_miss_ms = 150, .prefix_hit_ms = 10, .error_after = -1, .tokenize_count = -1,
};

/* Directive name, field, accepted range; a value out of range is ignored. */
#define BKEY(k, lo, hi) { #k, offsetof(struct behavior, k), lo, hi }
static const struct behavior_key {
    const char *name;
    size_t off;
    long min, max;
} BEHAVIOR_KEYS[] = {
    BKEY(status, 200, 599),       BKEY(ttfb_ms, 0, 3600000),
    BKEY(chunks, 0, 1000000),     BKEY(gap_ms, 0, 3600000),
    BKEY(die_after, 0, INT_MAX),  BKEY(die_before, 0, 1),
    BKEY(hang, 0, 1),             BKEY(hang_after, 0, INT_MAX),
    BKEY(bad_json, 0, 1),         BKEY(role_chunks, 0, 1000),
    BKEY(prompt_tokens, 0, INT_MAX / 2), BKEY(completion_tokens, 0, INT_MAX / 2),
    BKEY(retry_after, 0, INT_MAX), BKEY(cors, 0, 1),
    BKEY(info100, 0, 1),          BKEY(prefix_cache, 0, 1),
    BKEY(prefix_miss_ms, 0, 3600000), BKEY(prefix_hit_ms, 0, 3600000),
    BKEY(error_after, 0, INT_MAX),  BKEY(cache_read_tokens, 0, INT_MAX / 2),
    BKEY(cache_write_tokens, 0, INT_MAX / 2), BKEY(no_usage, 0, 1), BKEY(client_error, 0, 1),
    BKEY(reasoning_tokens, 0, INT_MAX / 2), BKEY(tokenize_count, 0, INT_MAX / 2),
    BKEY(tokenize_ms, 0, 3600000), BKEY(tokenize_status, 200, 599),
};

static void behavior_set(void *arg, const char *k, size_t kn, const char *v, size_t vn)
{
    struct behavior *b = arg;
    long val;
    if (parse_long(v, vn, &val) < 0)
        return;
    for (size_t i = 0; i < ARRAY_LEN(BEHAVIOR_KEYS); i++) {
        const struct behavior_key *bk = &BEHAVIOR_KEYS[i];
        if (!mem_is(k, kn, bk->name))
            continue;
        if (val >= bk->min && val <= bk->max)
            *(int *)((char *)b + bk->off) = (int)val;
        return;
    }
}

void behavior_parse(struct behavior *b, const char *s, size_t n)
{
    kv_each(s, n, behavior_set, b);
}

/* Finds "[[fake k=v ...]]" in a body; returns the inside or NULL. */
static const char *behavior_in_body(const char *body, size_t n, size_t *len)
{
    const char *p = memmem(body, n, "[[fake", 6);
    if (!p)
        return NULL;
    p += 6;
    const char *end = body + n;
    if (p < end && *p != ' ' && *p != ']')
        return NULL;
    const char *close = memmem(p, (size_t)(end - p), "]]", 2);
    if (!close)
        return NULL;
    *len = (size_t)(close - p);
    return p;
}

void behavior_for(const struct request *r, struct behavior *b)
{
    *b = BEHAVIOR_DEFAULT;
    if (atomic_load(&G.has_dflt)) {
        pthread_mutex_lock(&G.mu);
        *b = G.dflt;
        pthread_mutex_unlock(&G.mu);
    }
    const struct hdr *h = http_header(r, "x-fake-behavior");
    if (h)
        behavior_parse(b, h->val, h->vlen);
    size_t n;
    const char *s = behavior_in_body(r->body, r->blen, &n);
    if (s)
        behavior_parse(b, s, n);
}
