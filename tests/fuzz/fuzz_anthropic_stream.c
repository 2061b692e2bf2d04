/* fuzz_anthropic_stream.c: an Anthropic upstream's event stream -> OpenAI chunks
 * (fcgi/anthropic_stream.c anthropic_stream_event, R-ANT-1, R-SSE-4) on any bytes.
 *
 * The bytes go through the SSE splitter (fcgi/sse.c) and each event's name is read
 * from its "event:" field by the splitter, as fcgi/proto_anthropic.c reads it, so the seeds are
 * plain Anthropic streams.
 *
 * Invariants: every payload is either the literal [DONE] or one strict JSON object
 * that fcgi/usage.c classifies as a chunk (role, content, usage-only or error: never
 * "other", so the relay's accounting sees it); nothing follows [DONE]; usage stays
 * non-negative; an emit that asks to stop stops the translation with -1. */
#include "fuzz.h"

#include "anthropic.h"
#include "sse.h"
#include "usage.h"

struct sink {
    int payloads, done, stop_after;
};

static int emit(void *ctx, const char *data, size_t len)
{
    struct sink *k = ctx;
    FUZZ_CHECK(!k->done, "a payload after [DONE]: %.*s", (int)len, data);
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        k->done = 1;
    } else {
        FUZZ_CHECK(fuzz_is_json_object(data, len), "not a strict JSON object: %.*s", (int)len, data);
        struct usage u;
        memset(&u, 0, sizeof u);
        enum chunk_kind kind = usage_classify_chunk(data, len, &u);
        FUZZ_CHECK(kind == CHUNK_ROLE_ONLY || kind == CHUNK_CONTENT || kind == CHUNK_USAGE_ONLY || kind == CHUNK_ERROR,
                   "chunk kind %d: %.*s", (int)kind, (int)len, data);
        if (kind == CHUNK_USAGE_ONLY)
            FUZZ_CHECK(u.prompt_tokens >= 0 && u.completion_tokens >= 0, "negative usage in %.*s", (int)len, data);
    }
    k->payloads++;
    return k->stop_after && k->payloads >= k->stop_after ? -1 : 0;
}

/* 0 when the stream ran to its end, -1 when emit stopped it. */
static int translate(const uint8_t *data, size_t size, const char *model, int stop_after)
{
    struct anthropic_stream s;
    struct sse_parser p;
    struct sse_event ev;
    struct sink k = {0, 0, stop_after};
    struct usage u;
    memset(&u, 0, sizeof u);
    anthropic_stream_init(&s, model, 1700000000);
    sse_init(&p, 0);
    sse_feed(&p, (const char *)data, size);
    int rc = 0, more;
    while ((more = sse_next(&p, &ev)) == 1 || (more == 0 && sse_finish(&p, &ev))) {
        if (!ev.comment_only && ev.has_data) {
            int r = anthropic_stream_event(&s, ev.event, ev.event_len, ev.data, ev.data_len, &u, emit, &k);
            FUZZ_CHECK(r == 0 || r == -1, "returned %d", r);
            FUZZ_CHECK(u.prompt_tokens >= 0 && u.completion_tokens >= 0, "negative usage %lld/%lld",
                       (long long)u.prompt_tokens, (long long)u.completion_tokens);
            if (r != 0) {
                FUZZ_CHECK(stop_after && k.payloads >= stop_after, "stopped though emit never asked to");
                rc = -1;
                break;
            }
            FUZZ_CHECK(k.done == s.done, "[DONE] sent %d, state done %d", k.done, s.done);
        }
        if (more == 0)
            break;
    }
    FUZZ_CHECK(memchr(s.id, '\0', sizeof s.id) && memchr(s.model, '\0', sizeof s.model), "id or model overran");
    sse_free(&p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 18)
        return 0;
    translate(data, size, "gpt-x", 0);
    translate(data, size, NULL, 0);
    translate(data, size, "gpt-x", 1);
    translate(data, size, "gpt-x", 3);
    return 0;
}
