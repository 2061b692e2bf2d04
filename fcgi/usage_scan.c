/* usage_scan.c: a usage object's counters straight from its text (usage_scan.h).
 *
 * Every answer's usage object was parsed by json-c, which cost ~5 % of a request
 * (a tokener run, a locale switch, an object per key, all freed again; issue 17) for a
 * handful of integers. Upstreams write it as plain JSON: keys without escapes, integer
 * counters, a details object or two. That subset is read here; anything outside it is
 * refused (0) and json-c reads it as before, so what json-c would accept differently
 * (its non-strict extras, escapes, fractions) is never decided here. */
#include "usage_scan.h"

#include "usage.h"

#include <string.h>

struct cur {
    const char *p, *end;
};

static void ws(struct cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* A string without escapes or control bytes: its bytes in *s, *len. */
static int string(struct cur *c, const char **s, size_t *len)
{
    if (c->p >= c->end || *c->p != '"')
        return 0;
    const char *b = ++c->p;
    while (c->p < c->end && *c->p != '"') {
        if (*c->p == '\\' || (unsigned char)*c->p < 0x20)
            return 0;
        c->p++;
    }
    if (c->p >= c->end)
        return 0;
    *s = b;
    *len = (size_t)(c->p++ - b);
    return 1;
}

static int is(const char *s, size_t len, const char *name)
{
    return strlen(name) == len && memcmp(s, name, len) == 0;
}

/* The byte after a value must end it (json-c reads "1x" or "nullx" its own way). */
static int value_ends(const struct cur *c)
{
    return c->p < c->end && (*c->p == ',' || *c->p == '}' || *c->p == ' ' || *c->p == '\t' || *c->p == '\n' ||
                             *c->p == '\r');
}

enum vkind { V_BAD, V_INT, V_OTHER, V_OBJECT };

/* A number that json-c reads as the same int64: -?digits, no leading zero, at most 18
 * digits, no fraction or exponent (those are doubles, or its own reading). */
static enum vkind number(struct cur *c, int64_t *out)
{
    int neg = c->p < c->end && *c->p == '-';
    if (neg)
        c->p++;
    const char *b = c->p;
    int64_t n = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (c->p - b == 18)
            return V_BAD;
        n = n * 10 + (*c->p++ - '0');
    }
    size_t digits = (size_t)(c->p - b);
    if (!digits || (digits > 1 && *b == '0') || !value_ends(c))
        return V_BAD;
    *out = neg ? -n : n;
    return V_INT;
}

static int64_t clamp(int64_t n)
{
    return n <= 0 ? 0 : n > USAGE_COUNT_MAX ? USAGE_COUNT_MAX : n;
}

static int object(struct cur *c, int depth, int detail_of, struct usage_seen *seen);

/* One value; an object is read by object() (its details counters into seen when
 * detail_of >= 0 names which details object it is). */
static enum vkind value(struct cur *c, int depth, int detail_of, struct usage_seen *seen, int64_t *n)
{
    if (c->p >= c->end)
        return V_BAD;
    char ch = *c->p;
    if (ch == '-' || (ch >= '0' && ch <= '9'))
        return number(c, n);
    if (ch == '"') {
        const char *s;
        size_t len;
        return string(c, &s, &len) && value_ends(c) ? V_OTHER : V_BAD;
    }
    if (ch == '{')
        return depth < 2 && object(c, depth + 1, detail_of, seen) && value_ends(c) ? V_OBJECT : V_BAD;
    static const char *const lit[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(lit[i]);
        if ((size_t)(c->end - c->p) >= len && memcmp(c->p, lit[i], len) == 0) {
            c->p += len;
            return value_ends(c) ? V_OTHER : V_BAD;
        }
    }
    return V_BAD;                  /* arrays and whatever json-c alone takes */
}

/* The counter a key names in the object it is in (depth 1: usage; 2: a details object). */
static int field_of(const char *k, size_t len, int depth, int detail_of)
{
    static const char *const top[] = {
        [UF_PROMPT] = "prompt_tokens", [UF_COMPLETION] = "completion_tokens", [UF_INPUT] = "input_tokens",
        [UF_OUTPUT] = "output_tokens", [UF_CACHE_CREATION] = "cache_creation_input_tokens",
        [UF_CACHE_READ] = "cache_read_input_tokens",
    };
    if (depth == 1) {
        for (int f = UF_PROMPT; f <= UF_CACHE_READ; f++)
            if (is(k, len, top[f]))
                return f;
        return -1;
    }
    if (detail_of == UF_PROMPT_CACHED || detail_of == UF_INPUT_CACHED)
        return is(k, len, "cached_tokens") ? detail_of : -1;
    if (detail_of == UF_COMPLETION_REASONING || detail_of == UF_OUTPUT_REASONING)
        return is(k, len, "reasoning_tokens") ? detail_of : -1;
    return -1;
}

/* At depth 1, the details object a key names (its counter), or -1. */
static int details_of(const char *k, size_t len)
{
    return is(k, len, "prompt_tokens_details") ? UF_PROMPT_CACHED
           : is(k, len, "completion_tokens_details") ? UF_COMPLETION_REASONING
           : is(k, len, "input_tokens_details") ? UF_INPUT_CACHED
           : is(k, len, "output_tokens_details") ? UF_OUTPUT_REASONING : -1;
}

/* json-c keeps the last value of a key given twice: each key sets or clears its
 * counter (and a details key its detail counter) as its value says. */
static int object(struct cur *c, int depth, int detail_of, struct usage_seen *seen)
{
    c->p++;                        /* '{' */
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 1;
    }
    for (;;) {
        const char *k;
        size_t klen;
        if (!string(c, &k, &klen))
            return 0;
        ws(c);
        if (c->p >= c->end || *c->p != ':')
            return 0;
        c->p++;
        ws(c);
        int f = field_of(k, klen, depth, detail_of), d = depth == 1 ? details_of(k, klen) : -1;
        if (d >= 0) {
            seen->has &= ~(1u << d);
            if (d == UF_INPUT_CACHED)
                seen->input_details = 1;
            else if (d == UF_OUTPUT_REASONING)
                seen->output_details = 1;
        }
        int64_t n = 0;
        enum vkind v = value(c, depth, d, seen, &n);
        if (v == V_BAD)
            return 0;
        if (f >= 0) {
            if (v == V_INT) {
                seen->has |= 1u << f;
                seen->v[f] = clamp(n);
            } else
                seen->has &= ~(1u << f);
        }
        ws(c);
        if (c->p >= c->end)
            return 0;
        if (*c->p == '}') {
            c->p++;
            return 1;
        }
        if (*c->p != ',')
            return 0;
        c->p++;
        ws(c);
    }
}

int usage_scan(const char *s, size_t n, struct usage_seen *seen)
{
    memset(seen, 0, sizeof *seen);
    struct cur c = {s, s + n};
    if (!n || *s != '{')
        return 0;
    /* The object's end needs no byte after it (value_ends is for values inside). */
    return object(&c, 1, -1, seen);
}
