/* check_json.h: JSON comparisons for the translation tests (test_anthropic.c,
 * test_messages.c). JSON in their tables is written with ' for " (q() swaps them
 * back; \\' is an escaped quote inside a string) and compared semantically with
 * json_object_equal; every output is also checked to be compact. Include after check.h. */
#ifndef SLUICE_CHECK_JSON_H
#define SLUICE_CHECK_JSON_H

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

/* ' -> " in a fresh string (the caller frees it). */
static char *q(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n + 1);
    for (size_t i = 0; i <= n; i++)
        o[i] = s[i] == '\'' ? '"' : s[i];
    return o;
}

/* Exactly n bytes as one JSON value, or NULL. */
static struct json_object *parse_n(const char *s, size_t n)
{
    struct json_tokener *tok = json_tokener_new();
    struct json_object *o = json_tokener_parse_ex(tok, s, (int)n);
    if (json_tokener_get_error(tok) != json_tokener_success || json_tokener_get_parse_end(tok) != n) {
        json_object_put(o);
        o = NULL;
    }
    json_tokener_free(tok);
    return o;
}

/* got (n bytes, may be NULL) equals want (q-notation) as JSON, and got is compact. */
static void check_json(const char *what, const char *got, size_t n, const char *want_q)
{
    char *want = q(want_q);
    struct json_object *g = got ? parse_n(got, n) : NULL, *w = parse_n(want, strlen(want));
    CHECK(w != NULL, "%s: the test's own JSON does not parse: %s", what, want);
    CHECK(g && w && json_object_equal(g, w), "%s:\n  expected %s\n  got      %.*s", what, want, (int)n,
          got ? got : "");
    if (g) {
        const char *compact = json_object_to_json_string_ext(g, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        CHECK(strlen(compact) == n && memcmp(compact, got, n) == 0, "%s: output is not compact: %.*s", what, (int)n,
              got);
    }
    json_object_put(g);
    json_object_put(w);
    free(want);
}

#endif
