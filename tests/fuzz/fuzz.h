/* fuzz.h: what every harness in tests/fuzz/ shares: the libFuzzer entry point, an
 * invariant check that stops the run with a message, and small input helpers.
 *
 * A harness is one file fuzz_<target>.c defining LLVMFuzzerTestOneInput. It is linked
 * either with libFuzzer (clang -fsanitize=fuzzer: `make fuzz`, `make fuzz-replay`) or
 * with tests/fuzz/standalone.c, a plain main() that feeds it files (`make fuzz-replay
 * FUZZ_ENGINE=standalone`, any C compiler). Harnesses free everything they allocate:
 * LeakSanitizer runs after every input. */
#ifndef SLUICE_FUZZ_H
#define SLUICE_FUZZ_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of the code under test: on failure, say which and abort (libFuzzer
 * then saves the input as a crash artifact). */
#define FUZZ_CHECK(cond, ...)                                                           \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
            abort();                                                                    \
        }                                                                               \
    } while (0)

/* The input as a NUL-terminated heap copy (it ends at its first NUL for C-string APIs). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* The whole of s[0..len) as one JSON value with nothing but whitespace after it,
 * as json-c reads it: strictly (RFC 8259) or leniently (json-c's default, which is
 * what sluice parses with). NULL if it is not. */
static inline struct json_object *fuzz_json(const char *s, size_t len, int strict)
{
    if (len > 0x7fffffff)
        return NULL;
    struct json_tokener *tok = json_tokener_new();
    if (!tok)
        abort();
    if (strict)
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    struct json_object *o = json_tokener_parse_ex(tok, s, (int)len);
    enum json_tokener_error err = json_tokener_get_error(tok);
    size_t used = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    while (used < len && (s[used] == ' ' || s[used] == '\t' || s[used] == '\r' || s[used] == '\n'))
        used++;
    if (err != json_tokener_success || used != len || !o) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* 1 when s[0..len) is one strict JSON object. */
static inline int fuzz_is_json_object(const char *s, size_t len)
{
    struct json_object *o = fuzz_json(s, len, 1);
    int ok = o && json_object_is_type(o, json_type_object);
    json_object_put(o);
    return ok;
}

/* 1 when s[0..len) is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF). Written here from the RFC, not taken from lib/buf.c, so
 * it checks what sluice writes independently. */
static inline int fuzz_utf8(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        unsigned c = p[i];
        size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!n || len - i < n)
            return 0;
        uint32_t cp = n == 1 ? c : c & (0x7F >> n);
        for (size_t k = 1; k < n; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + k] & 0x3F);
        }
        static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += n;
    }
    return 1;
}

/* A member of o of type t, or NULL. */
static inline struct json_object *fuzz_member(struct json_object *o, const char *key, enum json_type t)
{
    struct json_object *v;
    return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, t) ? v : NULL;
}

#endif
