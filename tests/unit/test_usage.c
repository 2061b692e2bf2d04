/* test_usage.c: token usage from bodies, stream chunk kinds and usage:null stripping (fcgi/usage.h, R-USE-1, R-USE-2). */
#include "check.h"

#include "usage.h"

#include <stdint.h>
#include <string.h>

/* R-USE-1: non-stream usage read from the JSON body. */
static const struct {
    const char *name;
    const char *body;
    int found;
    int64_t prompt, completion;
} bodies[] = {
    /* R-KEY-0: an Anthropic Message through the pass-through counts too */
    {"anthropic message",
     "{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"}],"
     "\"usage\":{\"input_tokens\":12,\"output_tokens\":6,\"cache_creation_input_tokens\":3,"
     "\"cache_read_input_tokens\":4}}",
     1, 19, 6},
    {"anthropic message without cache counts",
     "{\"type\":\"message\",\"usage\":{\"input_tokens\":7,\"output_tokens\":2}}", 1, 7, 2},
    /* R-KEY-5: an upstream's absurd counts are clamped, so no sum of them overflows */
    {"huge counts clamped",
     "{\"usage\":{\"prompt_tokens\":3000000000000000000,\"completion_tokens\":9223372036854775807}}",
     1, 1000000000000LL, 1000000000000LL},
    {"an empty usage object is no usage", "{\"id\":\"x\",\"usage\":{}}", 0, 0, 0},
    {"a foreign usage object is no usage", "{\"id\":\"x\",\"usage\":{\"seconds\":3}}", 0, 0, 0},
    {"chat completion",
     "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m\","
     "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},"
     "\"finish_reason\":\"stop\"}],"
     "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":34,\"total_tokens\":46}}",
     1, 12, 34},
    {"embeddings (no completion_tokens)",
     "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,\"embedding\":[0.1,-0.2]}],"
     "\"model\":\"e\",\"usage\":{\"prompt_tokens\":8,\"total_tokens\":8}}",
     1, 8, 0},
    {"usage first", "{\"usage\":{\"completion_tokens\":5,\"prompt_tokens\":7},\"choices\":[]}", 1, 7, 5},
    {"large counts", "{\"usage\":{\"prompt_tokens\":3000000000,\"completion_tokens\":1}}", 1, 3000000000LL, 1},
    {"negative counts clamp to 0", "{\"usage\":{\"prompt_tokens\":-5,\"completion_tokens\":-1}}", 1, 0, 0},
    {"no usage", "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"content\":\"hi\"}}]}", 0, 0, 0},
    {"usage null", "{\"id\":\"x\",\"usage\":null}", 0, 0, 0},
    {"usage not an object", "{\"usage\":12}", 0, 0, 0},
    {"\"usage\" only inside a string", "{\"content\":\"the \\\"usage\\\" word\"}", 0, 0, 0},
    {"invalid JSON", "{\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3", 0, 0, 0},
    {"not JSON at all", "usage: prompt_tokens=1", 0, 0, 0},
    {"JSON array", "[{\"usage\":{\"prompt_tokens\":1}}]", 0, 0, 0},
    {"empty", "", 0, 0, 0},
};

/* Chunk kinds: what the relay needs to know about each SSE data payload. */
static const struct {
    const char *name;
    const char *data;
    enum chunk_kind kind;
    int usage_found;
    int64_t prompt, completion;
} chunks[] = {
    {"anthropic message_start (nested usage)",
     "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":25,"
     "\"output_tokens\":1}}}", CHUNK_OTHER, 1, 25, 1},
    {"anthropic message_delta (cumulative output)",
     "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}",
     CHUNK_OTHER, 1, 0, 15},
    {"role only",
     "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}",
     CHUNK_ROLE_ONLY, 0, 0, 0},
    {"role only, full header",
     "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,"
     "\"delta\":{\"role\":\"assistant\"},\"logprobs\":null,\"finish_reason\":null}]}",
     CHUNK_ROLE_ONLY, 0, 0, 0},
    {"role only, null content and refusal",
     "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"refusal\":null},"
     "\"finish_reason\":null}]}",
     CHUNK_ROLE_ONLY, 0, 0, 0},
    {"empty delta, no finish", "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":null}]}",
     CHUNK_ROLE_ONLY, 0, 0, 0},
    {"content delta", "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}",
     CHUNK_CONTENT, 0, 0, 0},
    {"role and content",
     "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}",
     CHUNK_CONTENT, 0, 0, 0},
    {"whitespace content", "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\" \"}}]}", CHUNK_CONTENT, 0, 0, 0},
    {"tool_calls delta",
     "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\","
     "\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}",
     CHUNK_CONTENT, 0, 0, 0},
    {"role and tool_calls",
     "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0}]}}]}",
     CHUNK_CONTENT, 0, 0, 0},
    {"reasoning_content delta",
     "{\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think\"},\"finish_reason\":null}]}",
     CHUNK_CONTENT, 0, 0, 0},
    {"finish stop, empty delta", "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}",
     CHUNK_CONTENT, 0, 0, 0},
    {"finish length, role only delta",
     "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":\"length\"}]}",
     CHUNK_CONTENT, 0, 0, 0},
    {"second choice has content",
     "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}},{\"index\":1,\"delta\":{\"content\":\"x\"}}]}",
     CHUNK_CONTENT, 0, 0, 0},
    /* R-USE-1/2: the include_usage chunk */
    {"usage only",
     "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],"
     "\"usage\":{\"prompt_tokens\":17,\"completion_tokens\":42,\"total_tokens\":59}}",
     CHUNK_USAGE_ONLY, 1, 17, 42},
    {"usage only, no completion", "{\"choices\":[],\"usage\":{\"prompt_tokens\":3}}", CHUNK_USAGE_ONLY, 1, 3, 0},
    {"empty choices, no usage", "{\"choices\":[]}", CHUNK_OTHER, 0, 0, 0},
    {"empty choices, usage null", "{\"choices\":[],\"usage\":null}", CHUNK_OTHER, 0, 0, 0},
    /* continuous usage stats: usage on a content chunk is still read */
    {"content with usage",
     "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1}}",
     CHUNK_CONTENT, 1, 5, 1},
    {"content with usage null", "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],\"usage\":null}",
     CHUNK_CONTENT, 0, 0, 0},
    {"DONE", "[DONE]", CHUNK_DONE, 0, 0, 0},
    {"error object",
     "{\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\",\"param\":null,\"code\":null}}",
     CHUNK_ERROR, 0, 0, 0},
    {"error string", "{\"error\":\"boom\"}", CHUNK_ERROR, 0, 0, 0},
    {"completions text chunk",
     "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"text\":\" world\",\"index\":0,"
     "\"logprobs\":null,\"finish_reason\":null}],\"model\":\"m\"}",
     CHUNK_CONTENT, 0, 0, 0},
    {"garbage", "this is not json", CHUNK_OTHER, 0, 0, 0},
    {"truncated JSON", "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"", CHUNK_OTHER, 0, 0, 0},
    {"DONE with space", "[DONE] ", CHUNK_OTHER, 0, 0, 0},
    {"lower-case done", "[done]", CHUNK_OTHER, 0, 0, 0},
    {"JSON array", "[1,2]", CHUNK_OTHER, 0, 0, 0},
    {"JSON string", "\"x\"", CHUNK_OTHER, 0, 0, 0},
    {"object without choices", "{\"type\":\"ping\"}", CHUNK_OTHER, 0, 0, 0},
    {"empty", "", CHUNK_OTHER, 0, 0, 0},
};

/* R-USE-2: usage_strip_null removes `,"usage":null` and nothing else. */
static const struct {
    const char *in, *out;
} strips[] = {
    {"{\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}",
     "{\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}"},
    {"{\"a\":1,\"usage\":null,\"b\":2}", "{\"a\":1,\"b\":2}"},
    {",\"usage\":null,\"usage\":null", ""},
    {"{\"a\":1,\"usage\":null}{\"b\":2,\"usage\":null}", "{\"a\":1}{\"b\":2}"},
    {",\"usage\":null,\"usage\":nul", ",\"usage\":nul"},
    /* nothing else */
    {"{\"usage\":null,\"a\":1}", "{\"usage\":null,\"a\":1}"},
    /* Spaced JSON (Python servers) is stripped too. */
    {"{\"a\":1, \"usage\":null}", "{\"a\":1}"},
    {"{\"a\":1,\"usage\": null}", "{\"a\":1}"},
    {"{\"a\": 1, \"usage\" : null, \"b\": 2}", "{\"a\": 1, \"b\": 2}"},
    {"{\"a\":1,\"usage\":{\"prompt_tokens\":1}}", "{\"a\":1,\"usage\":{\"prompt_tokens\":1}}"},
    {"{\"a\":1,\"Usage\":null}", "{\"a\":1,\"Usage\":null}"},
    {"{\"c\":\"say ,\\\"usage\\\":null\"}", "{\"c\":\"say ,\\\"usage\\\":null\"}"},
    {"{\"a\":1,\"usage\":nul", "{\"a\":1,\"usage\":nul"},
    {"", ""},
    {"[DONE]", "[DONE]"},
};

/* Spaced and compact usage objects are both seen (R-USE-1 with Python-style JSON). */
static void test_has_object(void)
{
    static const struct { const char *in; int want; } cases[] = {
        {"{\"usage\":{\"prompt_tokens\":1}}", 1}, {"{\"usage\": {\"prompt_tokens\":1}}", 1},
        {"{\"usage\" :\n {}}", 1}, {"{\"usage\":null}", 0}, {"{\"usage\": null}", 0},
        {"{\"content\":\"\\\"usage\\\":{\"}", 0}, {"no usage here", 0}, {"\"usage\"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(usage_has_object(cases[i].in, strlen(cases[i].in)) == cases[i].want, "has_object %zu: %s", i,
              cases[i].in);
}

/* R-SSE-5: which error events may be failed over. */
static void test_error_side(void)
{
    static const struct { const char *data; int server; } cases[] = {
        {"{\"error\":{\"message\":\"x\",\"type\":\"server_error\",\"param\":null,\"code\":null}}", 1},
        {"{\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\",\"code\":\"overloaded_error\"}}", 1},
        {"{\"error\":{\"type\":\"api_error\"}}", 1},
        {"{\"error\":{\"type\":\"overloaded_error\"}}", 1},
        {"{\"error\":{\"message\":\"boom\",\"code\":503}}", 1},
        {"{\"error\":{\"message\":\"long\",\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\"}}", 0},
        {"{\"error\":{\"message\":\"bad\",\"code\":400}}", 0},
        {"{\"error\":\"a string\"}", 0},
        {"{\"choices\":[]}", 0},
        {"not json", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(usage_error_is_server_side(cases[i].data, strlen(cases[i].data)) == cases[i].server, "error side: %s",
              cases[i].data);
}

int main(void)
{
    test_has_object();
    test_error_side();
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        struct usage u;
        memset(&u, 0x5a, sizeof u);     /* usage_from_body must clear it */
        int rc = usage_from_body(bodies[i].body, strlen(bodies[i].body), &u);
        CHECK(rc == bodies[i].found, "%s: returned %d, want %d", bodies[i].name, rc, bodies[i].found);
        CHECK(u.found == bodies[i].found, "%s: found %d", bodies[i].name, u.found);
        CHECK(u.prompt_tokens == bodies[i].prompt, "%s: prompt_tokens %lld, want %lld", bodies[i].name,
              (long long)u.prompt_tokens, (long long)bodies[i].prompt);
        CHECK(u.completion_tokens == bodies[i].completion, "%s: completion_tokens %lld, want %lld",
              bodies[i].name, (long long)u.completion_tokens, (long long)bodies[i].completion);
    }

    /* the length is honoured: a body followed by unrelated bytes in memory */
    {
        const char *s = "{\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":9}}GARBAGE";
        struct usage u;
        int rc = usage_from_body(s, strlen(s) - 7, &u);
        CHECK_INT(rc, 1, "length-bounded body");
        CHECK_INT(u.prompt_tokens, 2, "length-bounded prompt");
        CHECK_INT(u.completion_tokens, 9, "length-bounded completion");
    }

    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        struct usage u;
        memset(&u, 0, sizeof u);
        enum chunk_kind k = usage_classify_chunk(chunks[i].data, strlen(chunks[i].data), &u);
        CHECK(k == chunks[i].kind, "%s: kind %d, want %d", chunks[i].name, (int)k, (int)chunks[i].kind);
        CHECK(u.found == chunks[i].usage_found, "%s: usage found %d", chunks[i].name, u.found);
        if (chunks[i].usage_found) {
            CHECK(u.prompt_tokens == chunks[i].prompt, "%s: prompt_tokens %lld", chunks[i].name,
                  (long long)u.prompt_tokens);
            CHECK(u.completion_tokens == chunks[i].completion, "%s: completion_tokens %lld",
                  chunks[i].name, (long long)u.completion_tokens);
        }
        /* u is optional: the kind is the same without it */
        enum chunk_kind k2 = usage_classify_chunk(chunks[i].data, strlen(chunks[i].data), NULL);
        if (chunks[i].kind != CHUNK_USAGE_ONLY)
            CHECK(k2 == k, "%s: kind %d without u, %d with", chunks[i].name, (int)k2, (int)k);
    }

    for (size_t i = 0; i < sizeof strips / sizeof strips[0]; i++) {
        char tmp[256];
        size_t n = strlen(strips[i].in);
        memcpy(tmp, strips[i].in, n);
        memset(tmp + n, '#', sizeof tmp - n);
        size_t got = usage_strip_null(tmp, n);
        CHECK(got == strlen(strips[i].out) && memcmp(tmp, strips[i].out, got) == 0,
              "strip %zu: got \"%.*s\", want \"%s\"", i, (int)got, tmp, strips[i].out);
        CHECK(tmp[n] == '#', "strip %zu: wrote past len", i);
    }

    return check_done();
}
