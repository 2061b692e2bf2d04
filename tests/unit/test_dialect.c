/* test_dialect.c: what each caller protocol's stream events are (fcgi/dialect.h,
 * R-SSE-5 hold and fail-over, R-USE-1/2 metering, R-API-8 response ids). */
#include "check.h"

#include "dialect.h"

#include <string.h>

struct dcase {
    enum dialect d;
    const char *event, *data;
    enum chunk_kind kind;
    int server_error, counts;
    long long prompt, completion, cache_read, cache_creation, reasoning;   /* -1: no usage */
    const char *finish, *response_id;
};

static const struct dcase cases[] = {
    /* OpenAI chat chunks */
    {DIALECT_CHAT, "", "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}",
     CHUNK_ROLE_ONLY, 0, 0, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_CHAT, "", "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}", CHUNK_CONTENT, 0, 1, -1, 0, 0,
     0, 0, "", ""},
    {DIALECT_CHAT, "", "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}", CHUNK_CONTENT, 0, 0,
     -1, 0, 0, 0, 0, "length", ""},
    {DIALECT_CHAT, "", "{\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4,"
                       "\"prompt_tokens_details\":{\"cached_tokens\":5},\"completion_tokens_details\":"
                       "{\"reasoning_tokens\":2}}}",
     CHUNK_USAGE_ONLY, 0, 0, 9, 4, 5, 0, 2, "", ""},
    {DIALECT_CHAT, "", "[DONE]", CHUNK_DONE, 0, 0, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_CHAT, "", "{\"error\":{\"message\":\"x\",\"type\":\"server_error\"}}", CHUNK_ERROR, 1, 0, -1, 0, 0, 0,
     0, "", ""},
    {DIALECT_CHAT, "", "{\"error\":{\"message\":\"x\",\"type\":\"invalid_request_error\"}}", CHUNK_ERROR, 0, 0, -1,
     0, 0, 0, 0, "", ""},
    /* Anthropic Messages events */
    {DIALECT_MESSAGES, "message_start", "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":"
     "{\"input_tokens\":25,\"output_tokens\":1,\"cache_read_input_tokens\":7,\"cache_creation_input_tokens\":3}}}",
     CHUNK_ROLE_ONLY, 0, 0, 35, 1, 7, 3, 0, "", ""},
    {DIALECT_MESSAGES, "content_block_start", "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
     "{\"type\":\"text\",\"text\":\"\"}}", CHUNK_ROLE_ONLY, 0, 0, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_MESSAGES, "ping", "{\"type\":\"ping\"}", CHUNK_ROLE_ONLY, 0, 0, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_MESSAGES, "content_block_delta", "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
     "{\"type\":\"text_delta\",\"text\":\"Hello\"}}", CHUNK_CONTENT, 0, 1, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_MESSAGES, "", "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
     "\"text\":\"unnamed\"}}", CHUNK_CONTENT, 0, 1, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_MESSAGES, "content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}", CHUNK_CONTENT, 0, 0,
     -1, 0, 0, 0, 0, "", ""},
    {DIALECT_MESSAGES, "message_delta", "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\","
     "\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}", CHUNK_CONTENT, 0, 0, 0, 15, 0, 0, 0, "tool_use", ""},
    {DIALECT_MESSAGES, "message_stop", "{\"type\":\"message_stop\"}", CHUNK_CONTENT, 0, 0, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_MESSAGES, "error", "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"O\"}}",
     CHUNK_ERROR, 1, 0, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_MESSAGES, "error", "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"I\"}}",
     CHUNK_ERROR, 0, 0, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_MESSAGES, "", "not json", CHUNK_OTHER, 0, 0, -1, 0, 0, 0, 0, "", ""},
    /* OpenAI Responses events */
    {DIALECT_RESPONSES, "response.created", "{\"type\":\"response.created\",\"sequence_number\":0,\"response\":"
     "{\"id\":\"resp_abc\",\"status\":\"in_progress\",\"usage\":null}}", CHUNK_ROLE_ONLY, 0, 0, -1, 0, 0, 0, 0, "",
     "resp_abc"},
    {DIALECT_RESPONSES, "response.in_progress", "{\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_abc\"}}",
     CHUNK_ROLE_ONLY, 0, 0, -1, 0, 0, 0, 0, "", "resp_abc"},
    {DIALECT_RESPONSES, "response.output_item.added", "{\"type\":\"response.output_item.added\",\"item\":{}}",
     CHUNK_ROLE_ONLY, 0, 0, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_RESPONSES, "response.output_text.delta", "{\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}",
     CHUNK_CONTENT, 0, 1, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_RESPONSES, "", "{\"type\":\"response.function_call_arguments.delta\",\"delta\":\"{\"}", CHUNK_CONTENT, 0,
     1, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_RESPONSES, "response.output_text.done", "{\"type\":\"response.output_text.done\",\"text\":\"Hi\"}",
     CHUNK_CONTENT, 0, 0, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_RESPONSES, "response.completed", "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_abc\","
     "\"status\":\"completed\",\"error\":null,\"usage\":{\"input_tokens\":20,\"input_tokens_details\":"
     "{\"cached_tokens\":8},\"output_tokens\":6,\"output_tokens_details\":{\"reasoning_tokens\":3},"
     "\"total_tokens\":26}}}", CHUNK_CONTENT, 0, 0, 20, 6, 8, 0, 3, "completed", ""},
    {DIALECT_RESPONSES, "response.incomplete", "{\"type\":\"response.incomplete\",\"response\":{\"status\":"
     "\"incomplete\",\"usage\":{\"input_tokens\":2,\"output_tokens\":9,\"input_tokens_details\":{}}}}",
     CHUNK_CONTENT, 0, 0, 2, 9, 0, 0, 0, "incomplete", ""},
    {DIALECT_RESPONSES, "error", "{\"type\":\"error\",\"code\":\"server_error\",\"message\":\"x\",\"param\":null}",
     CHUNK_ERROR, 1, 0, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_RESPONSES, "error", "{\"type\":\"error\",\"code\":\"invalid_prompt\",\"message\":\"x\"}", CHUNK_ERROR, 0,
     0, -1, 0, 0, 0, 0, "", ""},
    {DIALECT_RESPONSES, "response.failed", "{\"type\":\"response.failed\",\"response\":{\"status\":\"failed\","
     "\"error\":{\"code\":\"server_error\",\"message\":\"x\"}}}", CHUNK_ERROR, 1, 0, -1, 0, 0, 0, 0, "", ""},
};

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct dcase *c = &cases[i];
        /* A chat chunk is parsed only while held; the other dialects always read names. */
        for (int parse = c->d == DIALECT_CHAT; parse <= 1; parse++) {
            struct event_facts f;
            dialect_classify(c->d, parse, c->event, strlen(c->event), c->data, strlen(c->data), &f);
            CHECK(f.kind == c->kind, "case %zu (%s): kind %d, want %d", i, c->data, f.kind, c->kind);
            CHECK(f.server_error == c->server_error, "case %zu: server_error %d", i, f.server_error);
            CHECK(f.counts == c->counts, "case %zu: counts %d", i, f.counts);
            CHECK_STR(f.finish, c->finish, c->data);
            CHECK_STR(f.response_id, c->response_id, c->data);
            CHECK(f.usage.found == (c->prompt >= 0), "case %zu: usage found %d", i, f.usage.found);
            if (c->prompt >= 0) {
                CHECK_INT(f.usage.prompt_tokens, c->prompt, "prompt");
                CHECK_INT(f.usage.completion_tokens, c->completion, "completion");
                CHECK_INT(f.usage.cache_read_tokens, c->cache_read, "cache read");
                CHECK_INT(f.usage.cache_creation_tokens, c->cache_creation, "cache creation");
                CHECK_INT(f.usage.reasoning_tokens, c->reasoning, "reasoning");
            }
        }
    }
    /* Which usage is a stream's last word (a stream cut after message_start is
     * charged at least what was relayed, account.c). */
    static const struct { enum dialect d; const char *event, *data; int final; } fin[] = {
        {DIALECT_MESSAGES, "message_start", "{\"type\":\"message_start\",\"message\":{\"usage\":"
         "{\"input_tokens\":5,\"output_tokens\":1}}}", 0},
        {DIALECT_MESSAGES, "message_delta", "{\"type\":\"message_delta\",\"delta\":{},\"usage\":"
         "{\"output_tokens\":9}}", 1},
        {DIALECT_CHAT, "", "{\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}", 1},
        {DIALECT_CHAT, "", "{\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":1,"
         "\"completion_tokens\":1}}", 0},                                    /* continuous usage stats */
        {DIALECT_CHAT, "", "{\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":"
         "{\"prompt_tokens\":1,\"completion_tokens\":4}}", 1},
        {DIALECT_RESPONSES, "response.completed", "{\"type\":\"response.completed\",\"response\":{\"usage\":"
         "{\"input_tokens\":3,\"output_tokens\":4,\"output_tokens_details\":{}}}}", 1},
    };
    for (size_t i = 0; i < sizeof fin / sizeof fin[0]; i++) {
        struct event_facts g;
        dialect_classify(fin[i].d, 1, fin[i].event, strlen(fin[i].event), fin[i].data, strlen(fin[i].data), &g);
        CHECK(g.usage.found && g.usage_final == fin[i].final, "final case %zu: found %d final %d", i, g.usage.found,
              g.usage_final);
    }
    /* An error chunk is seen even on the unparsed hot path. */
    struct event_facts f;
    const char *err = "{\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}";
    dialect_classify(DIALECT_CHAT, 0, "", 0, err, strlen(err), &f);
    CHECK(f.kind == CHUNK_ERROR && f.server_error, "hot path error: kind %d", f.kind);
    /* The hot path: an unparsed chat content chunk, and [DONE]. */
    const char *hot = "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}";
    dialect_classify(DIALECT_CHAT, 0, "", 0, hot, strlen(hot), &f);
    CHECK(f.kind == CHUNK_CONTENT && f.counts == 1 && !f.usage.found, "hot path");
    dialect_classify(DIALECT_CHAT, 0, "", 0, "[DONE]", 6, &f);
    CHECK(f.kind == CHUNK_DONE, "hot [DONE]");
    return check_done();
}
