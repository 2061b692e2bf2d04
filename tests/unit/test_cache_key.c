/* test_cache_key.c: the exact cache's key (fcgi/cache_key.h, R-CACHE-1, R-CACHE-2):
 * every field that decides an answer changes the key, what cannot does not,
 * member order does not, the tenant does. */
#include "check.h"

#include "cache_key.h"

#include <json-c/json.h>
#include <string.h>

#define BASE                                                                                                   \
    "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,"                 \
    "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},"                                           \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],"    \
    "\"tool_choice\":\"auto\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"                     \
    "{\"role\":\"user\",\"content\":\"hello\"}]}"

static void key_of(const struct cache_key_in *in, const char *body, char hex[65])
{
    struct cache_key_in k = *in;
    k.body = json_tokener_parse(body);
    CHECK(k.body != NULL, "test body does not parse: %s", body);
    hex[0] = '\0';
    CHECK(cache_key_hash(&k, hex) == 0, "no key for %s", body);
    CHECK(strlen(hex) == 64, "key is not 64 hex: %s", hex);
    json_object_put(k.body);
}

static const struct cache_key_in base_in = {
    .tenant_id = 1, .endpoint_id = 2, .routed_model = "target", .path = "/v1/chat/completions",
    .stream = 0, .want_usage = 0, .extra = NULL,
};

/* Each body differs from BASE in one field that changes the answer. */
static const struct {
    const char *what, *body;
} changes_body[] = {
    {"temperature", "{\"model\":\"m\",\"temperature\":0.5,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,"
                    "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
                    "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
                    "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"top_p", "{\"model\":\"m\",\"temperature\":0,\"top_p\":0.9,\"max_tokens\":64,\"seed\":7,\"n\":1,"
              "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
              "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
              "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"max_tokens", "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":65,\"seed\":7,\"n\":1,"
                   "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
                   "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
                   "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"max_completion_tokens instead",
     "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_completion_tokens\":64,\"seed\":7,\"n\":1,"
     "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
     "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
     "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"seed", "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":8,\"n\":1,"
             "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
             "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
             "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"n", "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":2,"
          "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
          "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
          "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"stop", "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,"
             "\"stop\":[\"\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
             "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
             "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"response_format", "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,"
                        "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"json_object\"},\"tools\":[{\"type\":"
                        "\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],"
                        "\"tool_choice\":\"auto\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                        "{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"tools schema", "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,"
                     "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
                     "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"array\"}}}],\"tool_choice\":\"auto\","
                     "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"tool_choice", "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,"
                    "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
                    "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"none\","
                    "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"system prompt", "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,"
                      "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
                      "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
                      "\"messages\":[{\"role\":\"system\",\"content\":\"be long\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"user message", "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,"
                     "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
                     "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
                     "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello!\"}]}"},
    {"message order", "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,"
                      "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
                      "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
                      "\"messages\":[{\"role\":\"user\",\"content\":\"hello\"},{\"role\":\"system\",\"content\":\"be brief\"}]}"},
    {"public model name", "{\"model\":\"m2\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,"
                          "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
                          "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
                          "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"another field (logprobs)",
     "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,\"logprobs\":true,"
     "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
     "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
     "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"a string that looks like a number", "{\"model\":\"m\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":\"7\",\"n\":1,"
                     "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
                     "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
                     "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
};

/* Each body is BASE written differently, or with a field that cannot change the answer. */
static const struct {
    const char *what, *body;
} same_body[] = {
    {"member order", "{\"messages\":[{\"content\":\"be brief\",\"role\":\"system\"},{\"content\":\"hello\",\"role\":\"user\"}],"
                     "\"tool_choice\":\"auto\",\"tools\":[{\"function\":{\"parameters\":{\"type\":\"object\"},\"name\":\"f\"},"
                     "\"type\":\"function\"}],\"response_format\":{\"type\":\"text\"},\"stop\":[\"\\n\\n\"],\"n\":1,"
                     "\"seed\":7,\"max_tokens\":64,\"top_p\":1,\"temperature\":0,\"model\":\"m\"}"},
    {"0.0 and 1.0", "{\"model\":\"m\",\"temperature\":0.0,\"top_p\":1.0,\"max_tokens\":64,\"seed\":7,\"n\":1,"
                    "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
                    "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
                    "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"whitespace", "{ \"model\" : \"m\", \"temperature\" : 0, \"top_p\" : 1, \"max_tokens\" : 64, \"seed\" : 7, \"n\" : 1,\n"
                   "\"stop\" : [ \"\\n\\n\" ], \"response_format\" : { \"type\" : \"text\" }, \"tools\" : [ { \"type\" : "
                   "\"function\", \"function\" : { \"name\" : \"f\", \"parameters\" : { \"type\" : \"object\" } } } ],\n"
                   "\"tool_choice\" : \"auto\", \"messages\" : [ { \"role\" : \"system\", \"content\" : \"be brief\" },"
                   " { \"role\" : \"user\", \"content\" : \"hello\" } ] }"},
    {"user, metadata, store, hints", "{\"model\":\"m\",\"user\":\"u-42\",\"metadata\":{\"a\":\"b\"},\"store\":true,"
                     "\"prompt_cache_key\":\"p\",\"safety_identifier\":\"s\",\"temperature\":0,\"top_p\":1,\"max_tokens\":64,"
                     "\"seed\":7,\"n\":1,\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":"
                     "\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
                     "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
    {"stream: false (stream is a part of its own)",
     "{\"model\":\"m\",\"stream\":false,\"temperature\":0,\"top_p\":1,\"max_tokens\":64,\"seed\":7,\"n\":1,"
     "\"stop\":[\"\\n\\n\"],\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\","
     "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],\"tool_choice\":\"auto\","
     "\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"hello\"}]}"},
};

static void test_body_fields(void)
{
    char base[65], k[65];
    key_of(&base_in, BASE, base);
    for (size_t i = 0; i < sizeof changes_body / sizeof changes_body[0]; i++) {
        key_of(&base_in, changes_body[i].body, k);
        CHECK(strcmp(k, base) != 0, "%s does not change the key", changes_body[i].what);
    }
    for (size_t i = 0; i < sizeof same_body / sizeof same_body[0]; i++) {
        key_of(&base_in, same_body[i].body, k);
        CHECK(strcmp(k, base) == 0, "%s changes the key", same_body[i].what);
    }
}

/* Every part outside the body changes the key. */
static void test_parts(void)
{
    struct cache_key_in v[8];
    const char *what[8] = {"tenant", "endpoint", "routed model", "path", "stream", "usage chunk (stream)",
                           "headers", "routed model vs path boundary"};
    for (int i = 0; i < 8; i++)
        v[i] = base_in;
    v[0].tenant_id = 3;
    v[1].endpoint_id = 9;
    v[2].routed_model = "target-v2";
    v[3].path = "/v1/completions";
    v[4].stream = 1;
    v[5].stream = 1, v[5].want_usage = 1;
    v[6].extra = "anthropic-version: 2023-06-01";
    v[7].routed_model = "target\npath=x";
    char base[65], s[65], k[65];
    key_of(&base_in, BASE, base);
    for (int i = 0; i < 8; i++) {
        key_of(&v[i], BASE, k);
        CHECK(strcmp(k, base) != 0, "the %s does not change the key", what[i]);
    }
    /* the usage chunk is a part only of a stream */
    struct cache_key_in u = base_in;
    u.want_usage = 1;
    key_of(&u, BASE, k);
    CHECK(strcmp(k, base) == 0, "want_usage changes the key of a non-stream request");
    /* a stream with and without the usage chunk: different answers */
    key_of(&v[4], BASE, s);
    key_of(&v[5], BASE, k);
    CHECK(strcmp(s, k) != 0, "a stream with the usage chunk has the key of one without");
    /* stream_options: include_usage is the usage part, the rest stays in the body */
    const char *so1 = "{\"model\":\"m\",\"messages\":[],\"stream_options\":{\"include_usage\":true}}";
    const char *so2 = "{\"model\":\"m\",\"messages\":[],\"stream_options\":{}}";
    const char *so3 = "{\"model\":\"m\",\"messages\":[],\"stream_options\":{\"include_obfuscation\":false}}";
    char a[65], b[65], c[65];
    key_of(&v[4], so1, a);
    key_of(&v[4], so2, b);
    key_of(&v[4], so3, c);
    CHECK(strcmp(a, b) == 0, "include_usage counted twice (body and part)");
    CHECK(strcmp(b, c) != 0, "another stream option does not change the key");
    /* a deeper "user" member is content, not the top-level end-user id */
    const char *d1 = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"user\":\"a\"}]}";
    const char *d2 = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"user\":\"b\"}]}";
    key_of(&base_in, d1, a);
    key_of(&base_in, d2, b);
    CHECK(strcmp(a, b) != 0, "a nested member named user is left out");
}

static void test_text(void)
{
    struct cache_key_in in = base_in;
    in.body = json_tokener_parse("{\"b\":[1,2.5,-0.0,1e300],\"a\":{\"y\":null,\"x\":true},\"user\":\"u\"}");
    struct buf b;
    buf_init(&b, 0);
    CHECK(cache_key_text(&in, &b) == 0, "no text");
    const char *want = "body={\"a\":{\"x\":true,\"y\":null},\"b\":[1,2.5,0,1.0000000000000001e+300]}";
    CHECK(b.data && strstr(b.data, want) != NULL, "canonical body: %s", b.data ? b.data : "(none)");
    CHECK(b.data && strstr(b.data, "tenant=1\n") != NULL, "tenant line: %s", b.data ? b.data : "");
    buf_free(&b);
    /* a body too large to key: no key, never a truncated one */
    buf_init(&b, 40);
    CHECK(cache_key_text(&in, &b) != 0, "a text past the buffer's maximum was accepted");
    buf_free(&b);
    json_object_put(in.body);
    /* not an object: no key */
    char hex[65];
    in.body = json_tokener_parse("[1]");
    CHECK(cache_key_hash(&in, hex) != 0, "an array body has a key");
    json_object_put(in.body);
}

/* R-CACHE-1: the greedy rule. */
static const struct {
    const char *body;
    int default_greedy, want;
} greedy[] = {
    {"{\"temperature\":0}", 0, 1},
    {"{\"temperature\":0.0}", 0, 1},
    {"{\"temperature\":0.7}", 1, 0},
    {"{\"temperature\":1}", 1, 0},
    {"{}", 0, 0},
    {"{}", 1, 1},
    {"{\"temperature\":null}", 0, 0},
    {"{\"temperature\":null}", 1, 1},
    {"{\"temperature\":\"0\"}", 1, 0},
};

static void test_greedy(void)
{
    for (size_t i = 0; i < sizeof greedy / sizeof greedy[0]; i++) {
        struct json_object *o = json_tokener_parse(greedy[i].body);
        CHECK(cache_key_greedy(o, greedy[i].default_greedy) == greedy[i].want, "%s with default_greedy %d",
              greedy[i].body, greedy[i].default_greedy);
        json_object_put(o);
    }
}

/* R-CACHE-4: the last user turn's text. */
static const struct {
    const char *body, *want;    /* want NULL: not semantic-cacheable */
} last_user[] = {
    {"{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":\"first\"},"
     "{\"role\":\"assistant\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"second\"}]}", "second"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"prefill\"}]}", "q"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
     "{\"type\":\"text\",\"text\":\"b\"}]}]}", "a\nb"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
     "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:x\"}}]}]}", NULL},
    {"{\"messages\":[{\"role\":\"user\",\"content\":[]}]}", NULL},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"\"}]}", NULL},
    {"{\"messages\":[{\"role\":\"user\"}]}", NULL},
    {"{\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}", NULL},
    {"{\"messages\":\"x\"}", NULL},
    {"{\"prompt\":\"complete me\"}", "complete me"},
    {"{\"prompt\":[\"a\",\"b\"]}", NULL},
    {"{\"model\":\"m\"}", NULL},
};

static void test_last_user(void)
{
    for (size_t i = 0; i < sizeof last_user / sizeof last_user[0]; i++) {
        struct json_object *o = json_tokener_parse(last_user[i].body), *where = NULL;
        CHECK(o != NULL, "test body does not parse: %s", last_user[i].body);
        struct buf b;
        buf_init(&b, 0);
        int rc = cache_key_last_user(o, &b, &where);
        if (last_user[i].want) {
            CHECK(rc == 0 && where != NULL, "no last user turn in %s", last_user[i].body);
            CHECK(rc == 0 && b.len == strlen(last_user[i].want) && memcmp(b.data, last_user[i].want, b.len) == 0,
                  "%s: expected \"%s\", got \"%.*s\"", last_user[i].body, last_user[i].want, (int)b.len,
                  b.data ? b.data : "");
        } else {
            CHECK(rc != 0 && where == NULL, "%s has a last user turn \"%.*s\"", last_user[i].body, (int)b.len,
                  b.data ? b.data : "");
        }
        buf_free(&b);
        json_object_put(o);
    }
}

/* R-CACHE-4: the scope covers all but the last user turn's text. */
static void scope_of(const struct cache_key_in *in, const char *body, char hex[65])
{
    struct cache_key_in k = *in;
    k.body = json_tokener_parse(body);
    CHECK(k.body != NULL, "test body does not parse: %s", body);
    struct json_object *where = NULL;
    struct buf b;
    buf_init(&b, 0);
    hex[0] = '\0';
    CHECK(cache_key_last_user(k.body, &b, &where) == 0, "no last user turn in %s", body);
    CHECK(cache_key_scope_hash(&k, where, hex) == 0 && strlen(hex) == 64, "no scope for %s", body);
    buf_free(&b);
    json_object_put(k.body);
}

#define SCOPE_BODY(sys, earlier, last, max)                                                                  \
    "{\"model\":\"m\",\"temperature\":0,\"max_tokens\":" max ",\"messages\":[{\"role\":\"system\",\"content\":\"" \
    sys "\"},{\"role\":\"user\",\"content\":\"" earlier "\"},{\"role\":\"assistant\",\"content\":\"ok\"},"          \
    "{\"role\":\"user\",\"content\":\"" last "\"}]}"

static void test_scope(void)
{
    char base[65], k[65], exact[65];
    scope_of(&base_in, SCOPE_BODY("be brief", "hi", "what is the capital of France", "64"), base);
    scope_of(&base_in, SCOPE_BODY("be brief", "hi", "tell me the capital of France", "64"), k);
    CHECK(strcmp(k, base) == 0, "the last user turn's text changes the scope");
    static const char *const other[] = {
        SCOPE_BODY("be long", "hi", "what is the capital of France", "64"),
        SCOPE_BODY("be brief", "hello", "what is the capital of France", "64"),
        SCOPE_BODY("be brief", "hi", "what is the capital of France", "65"),
    };
    static const char *const what[] = {"the system prompt", "an earlier message", "max_tokens"};
    for (int i = 0; i < 3; i++) {
        scope_of(&base_in, other[i], k);
        CHECK(strcmp(k, base) != 0, "%s does not change the scope", what[i]);
    }
    struct cache_key_in t = base_in, s = base_in, e = base_in;
    t.tenant_id = 99;
    s.stream = 1;
    e.endpoint_id = 7;
    const struct cache_key_in *parts[] = {&t, &s, &e};
    static const char *const pwhat[] = {"the tenant", "stream", "the endpoint"};
    for (int i = 0; i < 3; i++) {
        scope_of(parts[i], SCOPE_BODY("be brief", "hi", "what is the capital of France", "64"), k);
        CHECK(strcmp(k, base) != 0, "%s does not change the scope", pwhat[i]);
    }
    /* a scope is never an exact key of the same request */
    key_of(&base_in, SCOPE_BODY("be brief", "hi", "what is the capital of France", "64"), exact);
    CHECK(strcmp(exact, base) != 0, "the scope equals the exact key");
    /* completions: the prompt is the hole */
    char c1[65], c2[65];
    scope_of(&base_in, "{\"model\":\"m\",\"prompt\":\"one\",\"max_tokens\":5}", c1);
    scope_of(&base_in, "{\"model\":\"m\",\"prompt\":\"two\",\"max_tokens\":5}", c2);
    CHECK(strcmp(c1, c2) == 0, "a completions prompt changes the scope");
    CHECK(cache_key_scope_hash(&base_in, NULL, c1) != 0, "a scope without a hole");
}

int main(void)
{
    test_body_fields();
    test_parts();
    test_text();
    test_greedy();
    test_last_user();
    test_scope();
    return check_done();
}
