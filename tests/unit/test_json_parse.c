/* test_json_parse.c: the per-thread tokener (lib/json_parse.h) carries nothing
 * from one parse into the next: not a failed parse's half-read escape, not the
 * memory a large value grew it to. */
#include "check.h"

#include "json_parse.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static const char *str_of(struct json_object *o)
{
    return o && json_object_is_type(o, json_type_string) ? json_object_get_string(o) : NULL;
}

/* json_tokener_reset leaves a high surrogate of a failed parse in the tokener:
 * the next caller's "\u00e9" came out as U+FFFD + é, and a lone low surrogate
 * (U+FFFD) paired with the other request's high one into an emoji. */
static void test_failed_parse_leaves_nothing(void)
{
    static const char *bad[] = {"\"\\ud83d", "\"\\ud83d\\u00zz\"", "{\"a\":\"\\ud83d"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(json_parse(bad[i], strlen(bad[i]), 0, NULL) == NULL, "%s is not JSON", bad[i]);
        struct json_object *o = json_parse("\"\\u00e9\"", 8, 0, NULL);
        CHECK_STR(str_of(o), "\xc3\xa9", "after a failed parse, \\u00e9 is e-acute alone");
        json_object_put(o);
        CHECK(json_parse(bad[i], strlen(bad[i]), JSON_TOKENER_STRICT, NULL) == NULL, "strict: %s", bad[i]);
        o = json_parse("\"\\ude00\"", 8, 0, NULL);
        CHECK_STR(str_of(o), "\xef\xbf\xbd", "a lone low surrogate stays U+FFFD");
        json_object_put(o);
    }
    /* flags are the caller's each time */
    struct json_object *o = json_parse("[1,]", 4, JSON_TOKENER_STRICT, NULL);
    CHECK(o == NULL, "strict refuses a trailing comma");
    o = json_parse("[1,]", 4, 0, NULL);
    CHECK(o != NULL, "lenient takes it after a strict parse");
    json_object_put(o);
    size_t end = 0;
    o = json_parse("{}x", 3, 0, &end);
    CHECK(o && end == 2, "end after the value: %zu", end);
    json_object_put(o);
}

static size_t heap_in_use(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

/* handle() frees a worker's buffers over 1 MiB; the tokener's string buffer
 * grew to the largest string the thread ever parsed and stayed. */
static void test_large_value_not_kept(void)
{
    size_t n = 4u << 20;
    json_object_put(json_parse("1", 1, 0, NULL));
    size_t before = heap_in_use();
    char *s = malloc(n + 3);
    s[0] = '"';
    memset(s + 1, 'a', n);
    s[n + 1] = '"';
    s[n + 2] = 0;
    struct json_object *o = json_parse(s, n + 2, 0, NULL);
    CHECK(o && json_object_get_string_len(o) == (int)n, "the large string parses");
    json_object_put(o);
    free(s);
    size_t after = heap_in_use();
    CHECK(after < before + (1u << 20), "no large buffer kept: %zu bytes more in use", after - before);
    o = json_parse("{\"a\":1}", 7, 0, NULL);
    CHECK(o != NULL, "and the next parse works");
    json_object_put(o);
    json_parse_thread_end();
}

int main(void)
{
    test_failed_parse_leaves_nothing();
    test_large_value_not_kept();
    return check_done();
}
