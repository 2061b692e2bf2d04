/* anthropic.h: OpenAI chat <-> Anthropic Messages translation (SPEC §18, R-ANT-1..3).
 *
 * Pure: plain data in, plain data out, no sockets, no request struct, so every
 * direction is unit-tested with tables (tests/unit/test_anthropic.c). The
 * anthropic protocol adapter (proto_anthropic.c) is the only caller. */
#ifndef SLUICE_ANTHROPIC_H
#define SLUICE_ANTHROPIC_H

#include "buf.h"
#include "errors.h"
#include "usage.h"
#include "xlate.h"

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

/* R-ANT-3: an OpenAI chat.completions body (parsed object) -> a Messages body
 * appended to out. model: the name the upstream knows; default_max_tokens: used
 * when neither max_tokens nor max_completion_tokens is given; stream: the
 * caller asked for a stream. 0, or -1 with *f filled (nothing is ever dropped
 * silently: an unmappable parameter, top-level or nested, is an error; a body
 * over out's max is ERR_REQUEST_TOO_LARGE; an unknown top-level field's param
 * is its key inside chat). On -1 out is as it was. */
int anthropic_request(struct json_object *chat, const char *model, int64_t default_max_tokens, int stream,
                      struct buf *out, struct xlate_fail *f);

/* Finish reason for a Messages stop_reason (end_turn -> stop, ...); never NULL. */
const char *anthropic_finish_reason(const char *stop_reason);

/* A non-stream Message body -> a chat.completion body appended to out; usage
 * (prompt tokens include cache reads and writes) and finish reason filled.
 * created: epoch seconds for the "created" field; model: the name to report.
 * 0, or -1 when the body is not a Message or the answer does not fit out's max:
 * then out is as it was, *u is zeroed and finish is "". */
int anthropic_response(const char *body, size_t len, const char *model, int64_t created, struct buf *out,
                       struct usage *u, char *finish, size_t finish_size);

/* An upstream error answer (any body) -> the OpenAI error shape appended to out,
 * with the status the OpenAI SDKs classify the same way (529 overloaded -> 503).
 * Returns that status; *retry_after is set to 1 when a Retry-After should be sent. */
int anthropic_error(long status, const char *body, size_t len, struct buf *out, int *retry_after);

/* Stream translation state, one per attempt (caller-owned, no heap). */
struct anthropic_stream {
    char id[128];                 /* Message id from message_start */
    char model[256];              /* model name reported in chunks */
    int64_t created;
    int64_t input_tokens, output_tokens, cache_read, cache_creation;
    int block_tool[64];           /* content block index -> tool call index + 1, 0 = not a tool */
    int n_tools;
    long last_tool_block;         /* block index of the latest tool_use start, -1 = none: it */
    int last_tool;                /* maps blocks past block_tool's end to their tool call index */
    const char *finish;           /* finish reason of the latest non-null message_delta
                                   * stop_reason (static string), NULL = none seen yet */
    int done;                     /* message_stop was handled: finish, usage, [DONE] sent */
    int failed;                   /* an error event was translated */
};

/* Emits one OpenAI SSE data payload (a compact chat.completion.chunk JSON, an
 * {"error":...} object, or the literal [DONE]); the caller frames it as
 * "data: ...\n\n". data has len bytes and data[len] is '\0'; it is valid only
 * during the call. Returns 0, or -1 to stop (client gone). */
typedef int (*anthropic_emit_fn)(void *ctx, const char *data, size_t len);

/* model: the name to report; created: epoch seconds. */
void anthropic_stream_init(struct anthropic_stream *s, const char *model, int64_t created);

/* One upstream SSE event (its event: name, possibly empty, and its data) ->
 * zero or more payloads through emit, in order:
 *   message_start                      -> role chunk {"role":"assistant","content":""}
 *   content_block_start text           -> nothing
 *   content_block_start tool_use       -> tool_calls delta [{index,id,type,function{name,arguments:""}}]
 *   content_block_delta text_delta     -> content delta
 *   content_block_delta input_json_delta -> tool_calls delta [{index,function{arguments}}]
 *   message_delta                      -> nothing: its stop_reason (the latest non-null one wins;
 *                                         Anthropic may send several message_delta events) and its
 *                                         usage (cumulative: the latest counts win) are recorded
 *   message_stop                       -> exactly one finish chunk (delta {}, finish_reason from the
 *                                         recorded stop_reason, "stop" when none), one usage chunk
 *                                         ("choices":[] and "usage"; always: the relay drops it when
 *                                         the client did not ask for include_usage), then [DONE].
 *                                         A stream that ends without message_stop has no finish.
 *   ping, content_block_stop, unknown  -> nothing
 *   error                              -> {"error":{message,type,param:null,code}} (R-SSE-4)
 * u is updated with the usage seen so far. Returns 0, -1 when emit asked to stop. */
int anthropic_stream_event(struct anthropic_stream *s, const char *event, size_t event_len, const char *data,
                           size_t data_len, struct usage *u, anthropic_emit_fn emit, void *ctx);

#endif
