/* fake_json.c: JSON string output and a minimal scanner that reads just what the routes need from a body. */
#include "fake.h"

/* ---- output ---- */

/* Length of the valid UTF-8 sequence at u, 0 if it is not one (overlongs and surrogates rejected). */
static size_t json_utf8_len(const unsigned char *u, size_t n)
{
    unsigned char c = u[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        lo = c == 0xE0 ? 0xA0 : lo;
        hi = c == 0xED ? 0x9F : hi;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        lo = c == 0xF0 ? 0x90 : lo;
        hi = c == 0xF4 ? 0x8F : hi;
    } else {
        return 0;
    }
    if (n < len || u[1] < lo || u[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((u[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* Bytes at u that can be copied into a JSON string as they are. */
static size_t json_plain_len(const unsigned char *u, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = u[i];
        if (c < 0x80) {
            if (c < 0x20 || c == '"' || c == '\\')
                break;
            i++;
            continue;
        }
        size_t k = json_utf8_len(u + i, n - i);
        if (k == 0)
            break;
        i += k;
    }
    return i;
}

/* Escapes one byte; a byte that is not UTF-8 becomes \u00XX so the output always parses. */
static void json_escape_byte(struct buf *b, unsigned char c)
{
    switch (c) {
    case '"': buf_add(b, "\\\"", 2); break;
    case '\\': buf_add(b, "\\\\", 2); break;
    case '\n': buf_add(b, "\\n", 2); break;
    case '\r': buf_add(b, "\\r", 2); break;
    case '\t': buf_add(b, "\\t", 2); break;
    default: buf_printf(b, "\\u%04x", c); break;
    }
}

/* Appends s escaped for the inside of a JSON string (no quotes). */
void json_put_chars(struct buf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t k = json_plain_len(u + i, n - i);
        buf_add(b, s + i, k);
        i += k;
        if (i < n)
            json_escape_byte(b, u[i++]);
    }
}

void json_put_str(struct buf *b, const char *s, size_t n)
{
    buf_add(b, "\"", 1);
    json_put_chars(b, s, n);
    buf_add(b, "\"", 1);
}

/* ---- the scanner ---- */

void js_ws(struct jscan *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

/* Whitespace-separated words of a raw JSON string; \n \t \r escapes separate too. */
long js_words(const char *s, size_t n)
{
    long w = 0;
    bool in = false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool sp = ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
        if (ch == '\\' && i + 1 < n) {
            ch = s[++i];
            sp = ch == 'n' || ch == 't' || ch == 'r';
        }
        if (!sp && !in)
            w++;
        in = !sp;
    }
    return w;
}

bool js_string(struct jscan *j, struct jval *v)
{
    const char *q = ++j->p;
    while (q < j->end && *q != '"')
        q += (*q == '\\' && q + 1 < j->end) ? 2 : 1;
    if (q >= j->end)
        return false;
    v->s = j->p;
    v->n = (size_t)(q - j->p);
    j->p = q + 1;
    return true;
}

static enum jtype js_scalar(struct jscan *j)
{
    static const struct { const char *lit; enum jtype t; } LITS[] = {
        { "true", JT_TRUE }, { "false", JT_FALSE }, { "null", JT_NULL },
    };
    for (size_t i = 0; i < ARRAY_LEN(LITS); i++) {
        size_t l = strlen(LITS[i].lit);
        if ((size_t)(j->end - j->p) >= l && memcmp(j->p, LITS[i].lit, l) == 0) {
            j->p += l;
            return LITS[i].t;
        }
    }
    const char *s = j->p;
    while (j->p < j->end && *j->p && strchr("+-.eE0123456789", *j->p))
        j->p++;
    return j->p > s ? JT_NUM : JT_ERR;
}

static long js_inputs(const struct jval *v)
{
    if (v->t == JT_STR)
        return 1;
    if (v->t == JT_ARR)
        return v->num_elems ? 1 : v->elems;
    return 0;
}

/* One object member: picks the context its value is read in and records what the routes need. */
static enum jtype js_member(struct jscan *j, int depth, enum jctx ctx, const char *k, size_t kn)
{
    bool top = depth == 1;
    enum jctx child = ctx == JC_TEXT ? JC_TEXT : JC_NONE;
    if (mem_is(k, kn, "content") || (top && (mem_is(k, kn, "prompt") || mem_is(k, kn, "input"))))
        child = JC_TEXT;
    if (top && mem_is(k, kn, "stream_options"))
        child = JC_STREAM_OPTS;
    struct jval v = { .t = JT_ERR };
    if (js_value(j, depth, child, k, kn, &v) == JT_ERR)
        return JT_ERR;
    if (top && mem_is(k, kn, "model") && v.t == JT_STR) {
        j->model = v.s;
        j->model_len = v.n;
    }
    if (top && mem_is(k, kn, "stream"))
        j->stream = v.t == JT_TRUE;
    if (top && mem_is(k, kn, "input"))
        j->inputs = js_inputs(&v);
    if (ctx == JC_STREAM_OPTS && mem_is(k, kn, "include_usage"))
        j->include_usage = v.t == JT_TRUE;
    return v.t;
}

/* Reads the separator after a member or element: 1 at the closing bracket, 0 after ',', -1 bad. */
int js_next(struct jscan *j, char close)
{
    js_ws(j);
    if (j->p >= j->end)
        return -1;
    char ch = *j->p++;
    return ch == close ? 1 : ch == ',' ? 0 : -1;
}

static enum jtype js_object(struct jscan *j, int depth, enum jctx ctx)
{
    if (depth > JSON_DEPTH_MAX)
        return JT_ERR;
    j->p++;
    js_ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        return JT_OBJ;
    }
    for (;;) {
        struct jval key;
        js_ws(j);
        if (j->p >= j->end || *j->p != '"' || !js_string(j, &key))
            return JT_ERR;
        js_ws(j);
        if (j->p >= j->end || *j->p++ != ':')
            return JT_ERR;
        if (js_member(j, depth, ctx, key.s, key.n) == JT_ERR)
            return JT_ERR;
        int r = js_next(j, '}');
        if (r != 0)
            return r > 0 ? JT_OBJ : JT_ERR;
    }
}

static enum jtype js_array(struct jscan *j, int depth, enum jctx ctx, struct jval *v)
{
    if (depth > JSON_DEPTH_MAX)
        return JT_ERR;
    j->p++;
    js_ws(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        return JT_ARR;
    }
    for (;;) {
        struct jval e = { .t = JT_ERR };
        enum jtype t = js_value(j, depth, ctx, NULL, 0, &e);
        if (t == JT_ERR)
            return JT_ERR;
        if (v->elems++ == 0)
            v->num_elems = t == JT_NUM;
        int r = js_next(j, ']');
        if (r != 0)
            return r > 0 ? JT_ARR : JT_ERR;
    }
}

/* Prompt text is a "content"/"text"/"prompt"/"input" string or an array element; "type" etc. are not. */
static bool js_counts(enum jctx ctx, const char *key, size_t kn)
{
    return ctx == JC_TEXT && (!key || mem_is(key, kn, "content") || mem_is(key, kn, "text")
                              || mem_is(key, kn, "prompt") || mem_is(key, kn, "input"));
}

enum jtype js_value(struct jscan *j, int depth, enum jctx ctx, const char *key, size_t kn, struct jval *v)
{
    js_ws(j);
    if (j->p >= j->end)
        return v->t = JT_ERR;
    if (*j->p == '{')
        return v->t = js_object(j, depth + 1, ctx);
    if (*j->p == '[')
        return v->t = js_array(j, depth + 1, ctx, v);
    if (*j->p == '"') {
        if (!js_string(j, v))
            return v->t = JT_ERR;
        if (js_counts(ctx, key, kn))
            j->words += js_words(v->s, v->n);
        return v->t = JT_STR;
    }
    v->t = js_scalar(j);
    if (v->t == JT_NUM && ctx == JC_TEXT && !key)
        j->words++;   /* a token id */
    return v->t;
}

/* Best effort: a malformed body keeps whatever was read before the error. */
void json_scan(struct jscan *j, const char *body, size_t n)
{
    *j = (struct jscan){ .p = body, .end = body + n };
    js_ws(j);
    if (j->p < j->end && *j->p == '{')
        js_object(j, 1, JC_NONE);
}

/* ---- walking a body member by member (the strict request readers) ---- */

char js_peek(struct jscan *j)
{
    js_ws(j);
    return j->p < j->end ? *j->p : 0;
}

/* Enters the object or array at j->p: 1 if members follow, 0 if empty, -1 if it is not one. */
int js_open(struct jscan *j, char open)
{
    if (js_peek(j) != open)
        return -1;
    j->p++;
    if (js_peek(j) != (open == '{' ? '}' : ']'))
        return 1;
    j->p++;
    return 0;
}

/* After a member: 1 if another follows, 0 at the end, -1 on bad JSON. */
int js_more(struct jscan *j, char close)
{
    int r = js_next(j, close);
    return r < 0 ? -1 : !r;
}

bool js_key(struct jscan *j, struct jval *k)
{
    if (js_peek(j) != '"' || !js_string(j, k) || js_peek(j) != ':')
        return false;
    j->p++;
    return true;
}

/* The scanner takes any escape; strings an answer repeats must be valid JSON ones. */
static bool str_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] < 0x20)
            return false;
        if (s[i] != '\\')
            continue;
        if (++i < n && s[i] == 'u') {
            for (int h = 0; h < 4; h++)
                if (++i >= n || !s[i] || !strchr("0123456789abcdefABCDEF", s[i]))
                    return false;
        } else if (i >= n || !s[i] || !strchr("\"\\/bfnrt", s[i])) {
            return false;
        }
    }
    return true;
}

/* Reads any value; strings give their inside (valid, still escaped), other values their raw text. */
enum jtype js_read(struct jscan *j, struct jval *v)
{
    *v = (struct jval){ .t = JT_ERR };
    js_peek(j);
    const char *s = j->p;
    if (js_value(j, 2, JC_NONE, NULL, 0, v) == JT_STR && !str_valid(v->s, v->n))
        v->t = JT_ERR;
    if (v->t != JT_STR && v->t != JT_ERR) {
        v->s = s;
        v->n = (size_t)(j->p - s);
    }
    return v->t;
}

bool js_is(const struct jval *v, const char *lit)
{
    return v->t == JT_STR && mem_is(v->s, v->n, lit);
}
