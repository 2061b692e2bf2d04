/* test_usage_scan.c: a response's usage object read without json-c (fcgi/usage_scan.c,
 * issue 17) gives what json-c's reading of the same text gives: the shapes upstreams send
 * take the plain path; random usage objects, tricky ones among them (keys twice, nulls,
 * fractions, escapes, comments, deep objects, cuts), give the same usage either way. */
#include "check.h"

#include "usage.h"
#include "usage_scan.h"

#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* What json-c makes of obj: its object written out again as standard JSON and read by the
 * chunk classifier's json-c path (usage_read), or not found when json-c refuses the text. */
static struct usage reference(const char *obj, size_t n)
{
    struct usage u;
    memset(&u, 0, sizeof u);
    struct json_tokener *tok = json_tokener_new();
    struct json_object *o = json_tokener_parse_ex(tok, obj, (int)n);
    if (json_tokener_get_error(tok) == json_tokener_success && json_object_is_type(o, json_type_object)) {
        char body[8192];
        snprintf(body, sizeof body, "{\"choices\":[],\"usage\":%s}", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        usage_classify_chunk(body, strlen(body), &u);
    }
    json_object_put(o);
    json_tokener_free(tok);
    return u;
}

/* usage_from_body of {"id":"x","usage":obj}: the scan when obj is plain, else json-c. */
static struct usage fast(const char *obj, size_t n)
{
    char body[8192];
    int len = snprintf(body, sizeof body, "{\"id\":\"x\",\"usage\":%.*s", (int)n, obj);
    struct usage u;
    usage_from_body(body, (size_t)len, &u);
    return u;
}

static int same(const struct usage *a, const struct usage *b)
{
    return a->found == b->found && a->prompt_tokens == b->prompt_tokens && a->completion_tokens == b->completion_tokens &&
           a->cache_read_tokens == b->cache_read_tokens && a->cache_creation_tokens == b->cache_creation_tokens &&
           a->reasoning_tokens == b->reasoning_tokens;
}

static void test_plain_shapes(void)
{
    static const struct {
        const char *obj;
        int64_t p, c, cr, cw, r;
    } cases[] = {
        {"{\"prompt_tokens\":9,\"completion_tokens\":12,\"total_tokens\":21}", 9, 12, 0, 0, 0},
        {"{\"prompt_tokens\": 19, \"completion_tokens\": 10, \"total_tokens\": 29,\n"
         "  \"prompt_tokens_details\": {\"cached_tokens\": 4, \"audio_tokens\": 0},\n"
         "  \"completion_tokens_details\": {\"reasoning_tokens\": 3, \"audio_tokens\": 0,"
         " \"accepted_prediction_tokens\": 0, \"rejected_prediction_tokens\": 0}}", 19, 10, 4, 0, 3},
        {"{\"input_tokens\":12,\"output_tokens\":6,\"cache_creation_input_tokens\":3,\"cache_read_input_tokens\":4}",
         19, 6, 4, 3, 0},
        {"{\"input_tokens\":36,\"input_tokens_details\":{\"cached_tokens\":5},\"output_tokens\":87,"
         "\"output_tokens_details\":{\"reasoning_tokens\":7},\"total_tokens\":123}", 36, 87, 5, 0, 7},
        {"{\"prompt_tokens\":5,\"completion_tokens\":null,\"completion_tokens_details\":null}", 5, 0, 0, 0, 0},
        {"{\"prompt_tokens\":5,\"prompt_tokens\":\"x\",\"completion_tokens\":-3,\"x\":{\"y\":true,\"z\":false}}",
         0, 0, 0, 0, 0},
        {"{}", 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct usage_seen seen;
        CHECK(usage_scan(cases[i].obj, strlen(cases[i].obj), &seen) == 1, "plain text scanned: %s", cases[i].obj);
        struct usage u = fast(cases[i].obj, strlen(cases[i].obj)), ref = reference(cases[i].obj, strlen(cases[i].obj));
        CHECK(same(&u, &ref), "as json-c: %s", cases[i].obj);
        CHECK(u.prompt_tokens == cases[i].p && u.completion_tokens == cases[i].c && u.cache_read_tokens == cases[i].cr &&
                  u.cache_creation_tokens == cases[i].cw && u.reasoning_tokens == cases[i].r,
              "counts of %s: %lld %lld %lld %lld %lld", cases[i].obj, (long long)u.prompt_tokens,
              (long long)u.completion_tokens, (long long)u.cache_read_tokens, (long long)u.cache_creation_tokens,
              (long long)u.reasoning_tokens);
    }
    /* not plain: json-c decides */
    static const char *const refused[] = {
        "{\"prompt_tokens\":1.0}", "{\"prompt_tokens\":1e3}", "{\"prompt_tokens\":007}",
        "{\"prompt_tokens\":3000000000000000000}", "{\"prompt\\u005ftokens\":4}", "{/* c */\"prompt_tokens\":4}",
        "{\"prompt_tokens\":4,}", "{\"a\":[1]}", "{\"a\":{\"b\":{\"c\":1}}}", "{\"prompt_tokens\":4", "{'a':1}",
        "{\"prompt_tokens\":NaN}", "{\"prompt_tokens\":4x}",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        struct usage_seen seen;
        CHECK(usage_scan(refused[i], strlen(refused[i]), &seen) == 0, "left to json-c: %s", refused[i]);
        struct usage u = fast(refused[i], strlen(refused[i])), ref = reference(refused[i], strlen(refused[i]));
        CHECK(same(&u, &ref), "as json-c: %s", refused[i]);
    }
}

static uint64_t rng = 17;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static const char *const keys[] = {
    "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "cache_creation_input_tokens",
    "cache_read_input_tokens", "total_tokens", "cached_tokens", "reasoning_tokens", "prompt_tokens_details",
    "completion_tokens_details", "input_tokens_details", "output_tokens_details", "x", "",
};
static const char *const values[] = {
    "0", "7", "-3", "-0", "12345", "999999999999999999", "1000000000001", "null", "true", "false", "\"s\"",
    "\"\"", "1.5", "2e3", "01", "9223372036854775807", "18446744073709551615", "[]", "[1,2]", "\"a\\\"b\"",
    "\"\xc3\xa9\"", "nul", "True",
};
static const char *const spaces[] = {"", "", "", " ", "\n  ", "\t", "\r\n"};

static void gen_object(char *out, size_t cap, size_t *n, int depth)
{
#define PUT(...) (*n += (size_t)snprintf(out + *n, *n < cap ? cap - *n : 0, __VA_ARGS__))
    PUT("{%s", spaces[rnd(7)]);
    int pairs = (int)rnd(depth == 1 ? 7 : 4);
    for (int i = 0; i < pairs; i++) {
        if (i)
            PUT("%s,%s", spaces[rnd(7)], spaces[rnd(7)]);
        PUT("\"%s\"%s:%s", keys[rnd(sizeof keys / sizeof keys[0])], spaces[rnd(7)], spaces[rnd(7)]);
        if (depth < 3 && rnd(4) == 0)
            gen_object(out, cap, n, depth + 1);
        else
            PUT("%s", values[rnd(sizeof values / sizeof values[0])]);
    }
    if (rnd(40) == 0)
        PUT(",");                  /* a trailing comma */
    PUT("%s}", spaces[rnd(7)]);
#undef PUT
}

static void test_random_objects(void)
{
    int plain = 0, mismatches = 0;
    for (int i = 0; i < 30000; i++) {
        char obj[4096];
        size_t n = 0;
        gen_object(obj, sizeof obj, &n, 1);
        if (n >= sizeof obj)
            continue;
        if (rnd(20) == 0)
            n = rnd((unsigned)n) + 1;   /* cut short */
        else if (rnd(10) == 0)
            n += (size_t)snprintf(obj + n, sizeof obj - n, "%s", rnd(2) ? "}garbage" : ",\"more\":1}");
        struct usage_seen seen;
        plain += usage_scan(obj, n, &seen);
        struct usage u = fast(obj, n), ref = reference(obj, n);
        if (!same(&u, &ref) && mismatches++ < 5)
            CHECK(0, "as json-c: %.*s: found %d %lld %lld %lld %lld %lld, json-c %d %lld %lld %lld %lld %lld", (int)n,
                  obj, u.found, (long long)u.prompt_tokens, (long long)u.completion_tokens,
                  (long long)u.cache_read_tokens, (long long)u.cache_creation_tokens, (long long)u.reasoning_tokens,
                  ref.found, (long long)ref.prompt_tokens, (long long)ref.completion_tokens,
                  (long long)ref.cache_read_tokens, (long long)ref.cache_creation_tokens,
                  (long long)ref.reasoning_tokens);
    }
    CHECK(mismatches == 0, "%d random usage objects read otherwise than json-c reads them", mismatches);
    CHECK(plain > 5000, "the plain path was taken (%d of 30000)", plain);
}

int main(void)
{
    test_plain_shapes();
    test_random_objects();
    return check_done();
}
