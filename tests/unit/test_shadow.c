/* test_shadow.c: the pure parts of shadow traffic (fcgi/shadow_cmp.h, R-SHD-1):
 * the mirror decision, reading mirror answers of both protocols (whole and
 * byte by byte), the outcome words and the comparison with the client's answer. */
#include "check.h"

#include "shadow_cmp.h"

#include <stdio.h>
#include <string.h>

static void test_wanted(void)
{
    CHECK(!shadow_wanted(0, "abc"), "0 %% never");
    CHECK(shadow_wanted(100, "abc"), "100 %% always");
    CHECK(!shadow_wanted(-5, "abc") && shadow_wanted(250, "abc"), "out of range clamps");
    int n10 = 0, n50 = 0, same = 1;
    char id[32];
    for (int i = 0; i < 10000; i++) {
        snprintf(id, sizeof id, "req-%08d", i);
        n10 += shadow_wanted(10, id);
        n50 += shadow_wanted(50, id);
        same &= shadow_wanted(37, id) == shadow_wanted(37, id);
        /* a request mirrored at 10 % is mirrored at every larger share */
        if (shadow_wanted(10, id) && !shadow_wanted(50, id))
            same = 0;
    }
    CHECK(n10 > 850 && n10 < 1150, "10 %% of 10000 ids: %d", n10);
    CHECK(n50 > 4700 && n50 < 5300, "50 %% of 10000 ids: %d", n50);
    CHECK(same, "the same id is decided the same way, and shares nest");
}

/* Feeds s whole (step 0) or in pieces of step bytes, then ends it. */
static void read_all(struct shadow_reader *rd, enum shadow_shape shape, int stream, const char *s, size_t step,
                     long status)
{
    shadow_reader_init(rd, shape, stream, 65536, 1 << 20);
    size_t n = strlen(s);
    if (!step)
        step = n ? n : 1;
    for (size_t i = 0; i < n; i += step)
        shadow_reader_feed(rd, s + i, i + step <= n ? step : n - i);
    shadow_reader_end(rd, status);
}

static const char OPENAI_STREAM[] =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"total_tokens\":9}}\n\n"
    "data: [DONE]\n\n";

static const char ANTHROPIC_STREAM[] =
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,"
    "\"cache_read_input_tokens\":2,\"output_tokens\":1}}}\n\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"Hi\"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"!\"}}\n\n"
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":4}}\n\n"
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

static void test_streams(void)
{
    size_t steps[] = {0, 1, 7};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        struct shadow_reader rd;
        read_all(&rd, SHADOW_OPENAI, 1, OPENAI_STREAM, steps[k], 200);
        CHECK(rd.done && !rd.failed, "openai stream ends (step %zu)", steps[k]);
        CHECK_INT(rd.content_events, 2, "openai content events");
        CHECK_INT(rd.u.prompt_tokens, 7, "openai prompt tokens");
        CHECK_INT(rd.u.completion_tokens, 2, "openai completion tokens");
        CHECK_STR(shadow_outcome(0, 200, 1, &rd), "ok", "complete openai stream");
        shadow_reader_free(&rd);

        read_all(&rd, SHADOW_ANTHROPIC, 1, ANTHROPIC_STREAM, steps[k], 200);
        CHECK(rd.done && !rd.failed, "anthropic stream ends (step %zu)", steps[k]);
        CHECK_INT(rd.content_events, 2, "anthropic content events");
        CHECK_INT(rd.u.prompt_tokens, 7, "anthropic input + cache reads");
        CHECK_INT(rd.u.completion_tokens, 4, "anthropic output tokens (message_delta's)");
        CHECK_STR(shadow_outcome(0, 200, 1, &rd), "ok", "complete anthropic stream");
        shadow_reader_free(&rd);
    }
    /* died mid-stream: no end event, the transport saw a clean close or not */
    struct shadow_reader rd;
    char cut[sizeof OPENAI_STREAM];
    memcpy(cut, OPENAI_STREAM, sizeof cut);
    cut[strstr(OPENAI_STREAM, "data: {\"choices\":[],") - OPENAI_STREAM] = '\0';
    read_all(&rd, SHADOW_OPENAI, 1, cut, 0, 200);
    CHECK(!rd.done, "a cut stream has no end");
    CHECK_STR(shadow_outcome(0, 200, 1, &rd), "error", "a cut stream is an error");
    CHECK_STR(shadow_outcome(0, 200, 0, &rd), "error", "a broken transfer is an error");
    CHECK_STR(shadow_outcome(1, 200, 0, &rd), "timeout", "a timed-out transfer is a timeout");
    shadow_reader_free(&rd);
    /* an error event after content */
    read_all(&rd, SHADOW_ANTHROPIC, 1,
             "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"a\"}}\n\n"
             "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n", 0, 200);
    CHECK(rd.failed, "anthropic error event");
    CHECK_STR(shadow_outcome(0, 200, 1, &rd), "error", "an error event is an error");
    shadow_reader_free(&rd);
    read_all(&rd, SHADOW_OPENAI, 1, "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n", 0, 200);
    CHECK(rd.failed, "openai error chunk");
    shadow_reader_free(&rd);
}

static void test_bodies(void)
{
    struct shadow_reader rd;
    const char *oa = "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello\"}}],"
                     "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}";
    read_all(&rd, SHADOW_OPENAI, 0, oa, 5, 200);
    CHECK(rd.has_text && rd.text_len == 5, "openai text (len %zu)", rd.text_len);
    CHECK_INT(rd.u.completion_tokens, 1, "openai body tokens");
    CHECK_STR(shadow_outcome(0, 200, 1, &rd), "ok", "a 200 body");
    uint64_t oa_hash = rd.text_hash;
    shadow_reader_free(&rd);
    const char *an = "{\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"Hel\"},{\"type\":\"tool_use\"},"
                     "{\"type\":\"text\",\"text\":\"lo\"}],\"usage\":{\"input_tokens\":3,\"output_tokens\":2}}";
    read_all(&rd, SHADOW_ANTHROPIC, 0, an, 0, 200);
    CHECK(rd.has_text && rd.text_len == 5, "anthropic text blocks joined");
    CHECK(rd.text_hash == oa_hash, "the same text in either protocol hashes the same");
    CHECK_INT(rd.u.prompt_tokens, 3, "anthropic body input");
    CHECK_INT(rd.u.completion_tokens, 2, "anthropic body output");
    shadow_reader_free(&rd);
    read_all(&rd, SHADOW_OPENAI, 0, "{\"error\":{\"message\":\"no\"}}", 0, 503);
    CHECK(!rd.has_text, "an error has no text");
    CHECK_STR(shadow_outcome(0, 503, 1, &rd), "error", "a 503 is an error");
    shadow_reader_free(&rd);
    /* completions: choices[].text */
    uint64_t h;
    size_t n;
    CHECK(shadow_text_hash(SHADOW_OPENAI, "{\"choices\":[{\"text\":\"Hello\"}]}", 31, &h, &n) && h == oa_hash && n == 5,
          "completions text");
    CHECK(!shadow_text_hash(SHADOW_OPENAI, "not json", 8, &h, &n), "not JSON");
    /* a body over the cap is an error, not a truncated comparison */
    shadow_reader_init(&rd, SHADOW_OPENAI, 0, 1024, 16);
    shadow_reader_feed(&rd, oa, strlen(oa));
    shadow_reader_end(&rd, 200);
    CHECK(rd.overflow && !rd.has_text, "overflow");
    CHECK_STR(shadow_outcome(0, 200, 1, &rd), "error", "an answer over the limit");
    shadow_reader_free(&rd);
}

static void test_compare(void)
{
    struct shadow_side c = {200, 900000, 100000, 10, 20, 1, 42, 5};
    struct shadow_side m = {200, 1200000, 150000, 10, 30, 1, 42, 5};
    struct shadow_cmp x;
    shadow_compare(&c, &m, &x);
    CHECK(x.status_match, "200 and 200");
    CHECK(x.token_ratio > 1.49 && x.token_ratio < 1.51, "ratio 30/20");
    CHECK(x.ttft_known && x.ttft_delta_us == 50000, "ttft delta");
    CHECK_INT(x.latency_delta_us, 300000, "latency delta");
    CHECK_INT(x.exact, 1, "same text");
    char line[512];
    shadow_cmp_format(&x, &c, &m, line, sizeof line);
    CHECK(strstr(line, "status_match=1") && strstr(line, "token_ratio=1.500") && strstr(line, "ttft_delta_ms=50") &&
          strstr(line, "latency_delta_ms=300") && strstr(line, "exact_match=1") &&
          strstr(line, "completion_tokens=20/30") && strstr(line, "status=200/200"), "line: %s", line);
    m.text_hash = 43;
    shadow_compare(&c, &m, &x);
    CHECK_INT(x.exact, 0, "other text");
    m.status = 503;
    m.has_text = 0;
    m.ttft_us = 0;
    m.completion_tokens = 0;
    m.latency_us = 100000;
    shadow_compare(&c, &m, &x);
    CHECK(!x.status_match, "200 and 503");
    CHECK(!x.ttft_known, "no mirror ttft");
    CHECK_INT(x.exact, -1, "no mirror text: not comparable");
    CHECK_INT(x.latency_delta_us, -800000, "a faster failure");
    shadow_cmp_format(&x, &c, &m, line, sizeof line);
    CHECK(strstr(line, "ttft_delta_ms=na") && strstr(line, "exact_match=na") && strstr(line, "latency_delta_ms=-800"),
          "line: %s", line);
    c.completion_tokens = 0;
    shadow_compare(&c, &m, &x);
    CHECK(x.token_ratio < 0, "no client tokens: no ratio");
    shadow_cmp_format(&x, &c, &m, line, sizeof line);
    CHECK(strstr(line, "token_ratio=na") != NULL, "line: %s", line);
    struct shadow_side a = {.status = 201}, b = {.status = 200};
    shadow_compare(&a, &b, &x);
    CHECK(x.status_match, "any two 2xx match");
    struct shadow_side e1 = {.status = 429}, e2 = {.status = 429};
    shadow_compare(&e1, &e2, &x);
    CHECK(x.status_match, "the same error matches");
}

int main(void)
{
    test_wanted();
    test_streams();
    test_bodies();
    test_compare();
    return check_done();
}
