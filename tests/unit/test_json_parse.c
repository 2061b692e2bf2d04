/* test_json_parse.c: the per-thread tokener (lib/json_parse.h) carries nothing
 * from one parse into the next: not a failed parse's half-read escape. */
#include "check.h"

#include "json_parse.h"

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

int main(void)
{
    test_failed_parse_leaves_nothing();
    return check_done();
}
