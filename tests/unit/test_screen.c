/* test_screen.c: the texts content rules read (fcgi/screen_text.h, R-GUARD-3): the
 * answer's text in each protocol's bodies and events (ids, roles, models and usage
 * left out), the request's tools, the channel an event's text continues, the start of
 * a stream's window of recent text and the held-back last word at its end. */
#include "check.h"

#include "screen_text.h"

#include <stdlib.h>

/* The answer text of a JSON document, sep between strings; a static copy. */
static const char *answer(const char *json, const char *sep)
{
    static char out[4096];
    struct json_object *o = json_tokener_parse(json);
    struct buf b;
    buf_init(&b, 0);
    if (o)
        screen_text_answer(o, 0, sep, &b);
    json_object_put(o);
    snprintf(out, sizeof out, "%.*s", (int)b.len, b.data ? b.data : "");
    buf_free(&b);
    return o ? out : "(not JSON)";
}

static void test_answers(void)
{
    static const struct {
        const char *what, *json, *want;
    } rows[] = {
        {"chat completion", "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"model\":\"m\",\"choices\":[{\"index\":0,"
         "\"message\":{\"role\":\"assistant\",\"content\":\"hello there\",\"refusal\":null},\"finish_reason\":\"stop\"}],"
         "\"usage\":{\"prompt_tokens\":3}}", "hello there|"},
        {"chat tool call", "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
         "\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"lookup\",\"arguments\":\"{\\\"q\\\":\\\"secret\\\"}\"}}]}}]}",
         "{\"q\":\"secret\"}|"},
        {"completion text", "{\"object\":\"text_completion\",\"choices\":[{\"text\":\"w1 w2\",\"index\":0}]}", "w1 w2|"},
        {"two choices", "{\"choices\":[{\"message\":{\"content\":\"a\"}},{\"message\":{\"content\":\"b\"}}]}", "a|b|"},
        {"content parts", "{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"part one\"}]}}]}",
         "part one|"},
        {"anthropic message", "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\","
         "\"content\":[{\"type\":\"text\",\"text\":\"Hi\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get\","
         "\"input\":{\"city\":\"Paris\",\"n\":2}}],\"stop_reason\":\"end_turn\"}", "Hi|Paris|"},
        {"responses output", "{\"id\":\"resp_1\",\"object\":\"response\",\"instructions\":\"be nice\",\"output\":[{"
         "\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":"
         "\"answer\"}]}],\"text\":{\"format\":{\"type\":\"text\"}}}", "answer|"},
        {"chat chunk", "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":"
         "{\"content\":\"w3 \"},\"finish_reason\":null}]}", "w3 |"},
        {"role chunk", "{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}", "|"},
        {"tool call chunk", "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
         "\"{\\\"a\"}}]}}]}", "{\"a|"},
        {"usage chunk", "{\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}", ""},
        {"anthropic text delta", "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
         "\"text\":\"abc\"}}", "abc|"},
        {"anthropic json delta", "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
         "\"partial_json\":\"{\\\"x\"}}", "{\"x|"},
        {"anthropic message_delta", "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":"
         "{\"output_tokens\":5}}", ""},
        {"responses delta", "{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"delta\":\"de\"}", "de|"},
        {"error object", "{\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}", ""},
        {"error null beside content", "{\"error\":null,\"choices\":[{\"delta\":{\"content\":\"x\"}}]}", "x|"},
        {"vLLM reasoning_content", "{\"choices\":[{\"delta\":{\"reasoning_content\":\"think\"}}]}", "think|"},
        {"OpenRouter reasoning", "{\"choices\":[{\"delta\":{\"reasoning\":\"hmm\"}}]}", "hmm|"},
        {"Responses reasoning settings", "{\"reasoning\":{\"effort\":\"low\",\"summary\":\"auto\"}}", ""},
        {"anthropic block start", "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
         "\"text\",\"text\":\"opening\"}}", "opening|"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        CHECK_STR(answer(rows[i].json, "|"), rows[i].want, rows[i].what);
    CHECK_STR(answer("{\"choices\":[{\"delta\":{\"content\":\"w1 \"}}]}", ""), "w1 ", "a stream's pieces join as sent");
}

static void test_request_text(void)
{
    struct json_object *o = json_tokener_parse(
        "[{\"role\":\"system\",\"content\":\"rules\"},{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
        "\"image_url\":{\"url\":\"http://x/secret.png\"}},{\"type\":\"text\",\"text\":\"hi\"}]}]");
    struct buf b;
    buf_init(&b, 0);
    screen_text_request(o, &b);
    CHECK(b.len == 9 && memcmp(b.data, "rules\nhi\n", 9) == 0, "request text: %.*s", (int)b.len, b.data);
    buf_free(&b);
    json_object_put(o);
}

static void test_tools_text(void)
{
    struct json_object *o = json_tokener_parse(
        "[{\"type\":\"function\",\"function\":{\"name\":\"lookup\",\"description\":\"find it\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\",\"description\":\"the query\"}}}}}]");
    struct buf b;
    buf_init(&b, 0);
    screen_text_tools(o, &b);
    CHECK(b.len == 25 && memcmp(b.data, "lookup\nfind it\nthe query\n", 25) == 0, "tools text: %.*s", (int)b.len,
          b.data);
    buf_free(&b);
    json_object_put(o);
}

/* The channel of choices[pos] of a chunk, or of an event without choices. */
static struct screen_channel channel(const char *json, int choice_pos)
{
    struct json_object *o = json_tokener_parse(json);
    struct screen_channel ch = choice_pos >= 0 ? screen_text_choice_channel(o, (size_t)choice_pos)
                                               : screen_text_event_channel(o);
    json_object_put(o);
    return ch;
}

static void test_channels(void)
{
    static const struct {
        const char *what, *json;
        int pos;
        int64_t major, minor;
    } rows[] = {
        {"choice 0 content", "{\"index\":0,\"delta\":{\"content\":\"bo\"}}", 0, 0, -1},
        {"choice 1 content", "{\"index\":1,\"delta\":{\"content\":\"xx\"}}", 0, 1, -1},
        {"no index: the position", "{\"delta\":{\"content\":\"a\"}}", 3, 3, -1},
        {"completions choice", "{\"text\":\"a\",\"index\":2}", 0, 2, -1},
        {"tool call 1 of choice 0", "{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":"
         "{\"arguments\":\"{\"}}]}}", 0, 0, 1},
        {"tool call without index", "{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{}}]}}", 0, 0, 0},
        {"anthropic block 2", "{\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"text\":\"a\"}}", -1, 2, -1},
        {"anthropic message_delta", "{\"type\":\"message_delta\",\"delta\":{}}", -1, -1, -1},
        {"responses text part", "{\"type\":\"response.output_text.delta\",\"output_index\":1,\"content_index\":0,"
         "\"delta\":\"a\"}", -1, 1, 0},
        {"responses call arguments", "{\"type\":\"response.function_call_arguments.delta\",\"output_index\":2,"
         "\"delta\":\"a\"}", -1, 2, -1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct screen_channel ch = channel(rows[i].json, rows[i].pos);
        CHECK(ch.major == rows[i].major && ch.minor == rows[i].minor, "%s: (%lld, %lld)", rows[i].what,
              (long long)ch.major, (long long)ch.minor);
    }
}

static void test_settled(void)
{
    static const struct {
        const char *what, *text;
        size_t want;
    } rows[] = {
        {"last word held back", "we kill", 3},
        {"a space settles it", "we kill ", 8},
        {"punctuation settles it", "we kill.", 8},
        {"all one word", "kill", 0},
        {"underscore and digits are word", "x a_b9", 2},
        {"UTF-8 is not held (CJK has no spaces)", "\xe7\x82\xb8\xe5\xbc\xb9", 6},
        {"ASCII after UTF-8", "\xc3\xa9" "ab", 2},
        {"empty", "", 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        CHECK_INT(screen_text_settled(rows[i].text, strlen(rows[i].text)), rows[i].want, rows[i].what);
    char run[200] = "go ";
    memset(run + 3, 'a', SCREEN_HELD_MAX);
    CHECK_INT(screen_text_settled(run, 3 + SCREEN_HELD_MAX), 3, "a run of SCREEN_HELD_MAX is held");
    run[3 + SCREEN_HELD_MAX] = 'a';
    CHECK_INT(screen_text_settled(run, 4 + SCREEN_HELD_MAX), 4 + SCREEN_HELD_MAX, "a longer run is matched at once");
}

static void test_tail(void)
{
    CHECK_INT(screen_text_tail("short", 5, 4096), 0, "short text: all of it");
    /* the window starts after the first word break inside its last keep bytes */
    const char *t = "alpha beta gamma";
    size_t at = screen_text_tail(t, strlen(t), 8);   /* last 8: "ta gamma" -> "gamma" */
    CHECK_STR(t + at, "gamma", "moved to the next word");
    /* no break at all: a UTF-8 character boundary, never inside one */
    char u[64];
    snprintf(u, sizeof u, "%s", "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");   /* 5 x e-acute, 10 bytes */
    at = screen_text_tail(u, strlen(u), 5);
    CHECK(at == 6 && ((unsigned char)u[at] & 0xC0) != 0x80, "character boundary: %zu", at);
    /* a long text keeps at most keep bytes */
    char *big = malloc(20000);
    for (int i = 0; i < 19999; i++)
        big[i] = i % 7 == 6 ? ' ' : 'x';
    big[19999] = '\0';
    at = screen_text_tail(big, 19999, SCREEN_WINDOW);
    CHECK(19999 - at <= SCREEN_WINDOW && 19999 - at > SCREEN_WINDOW - 8 && big[at - 1] == ' ',
          "window of %zu bytes", 19999 - at);
    free(big);
}

int main(void)
{
    test_answers();
    test_request_text();
    test_tools_text();
    test_channels();
    test_settled();
    test_tail();
    return check_done();
}
