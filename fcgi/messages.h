/* messages.h: Anthropic Messages callers <-> OpenAI chat upstreams (POST /v1/messages
 * from the Anthropic SDKs and Claude Code, served by vLLM or OpenAI).
 *
 * The reverse of anthropic.h, with its rules: pure (plain data in, plain data
 * out, no sockets, no request struct), so every direction is unit-tested with
 * tables (tests/unit/test_messages.c); nothing the caller sends is dropped
 * silently (an unmappable field is unsupported_parameter, param naming it),
 * except what asks for nothing (cache_control, thinking disabled, ...), each
 * listed where it is handled. Everything written is compact JSON. The request
 * direction is messages.c; answers, errors and streams are messages_stream.c. */
#ifndef SLUICE_MESSAGES_H
#define SLUICE_MESSAGES_H

#include "buf.h"
#include "errors.h"
#include "usage.h"
#include "xlate.h"

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

/* A Messages request body (parsed) -> an OpenAI chat.completions body appended
 * to out. model: the name the upstream knows (NULL: the body's own "model").
 * stream: the caller asked for a stream; then the chat body has "stream":true
 * and "stream_options":{"include_usage":true}. 0, or -1 with *f filled
 * (ERR_UNSUPPORTED_PARAMETER with param naming the field, ERR_INVALID_TYPE /
 * ERR_INVALID_VALUE / ERR_MISSING_FIELD for malformed input,
 * ERR_REQUEST_TOO_LARGE with param NULL when out's max is hit; param is
 * static or f->param_buf, never inside msg). On -1 out is as it was. A final
 * assistant message (a prefill) is sent with vLLM's
 * "continue_final_message":true,"add_generation_prompt":false, so the answer
 * continues it (an upstream without the extension refuses the request). */
int messages_request(struct json_object *msg, const char *model, int stream, struct buf *out,
                     struct xlate_fail *f);

/* A chat.completion body -> a Message body appended to out, from choices[0]:
 * content [thinking (reasoning_content or reasoning)][text][tool_use...]. u is
 * filled (prompt_tokens = all input, cache_read_tokens from
 * prompt_tokens_details.cached_tokens, reasoning_tokens from
 * completion_tokens_details; found 0 when the body has no usage) and the
 * Message's stop_reason written to stop_reason ("stop_sequence" when vLLM's
 * choices[0].stop_reason names the stop string matched). model: the name to
 * report (NULL: the body's). 0, or -1 when body is not a chat.completion or
 * the Message does not fit out's max: then out is as it was, *u is zeroed and
 * stop_reason is "". */
int messages_response(const char *body, size_t len, const char *model, struct buf *out, struct usage *u,
                      char *stop_reason, size_t stop_size);

/* An upstream OpenAI-shaped error answer (any body, maybe not JSON) -> the
 * Anthropic error body {"type":"error","error":{"type":errors_anthropic_type(status),
 * "message":...}} appended to out. The message is error.message (or a
 * top-level message / detail string, or error itself when a string), else
 * "upstream answered <status>". Returns the status to send: status itself
 * (the Anthropic SDKs classify by it), or 502 when status is not 400..599. */
int messages_error(long status, const char *body, size_t len, struct buf *out);

/* The stop_reason for an OpenAI finish_reason: stop -> end_turn, length ->
 * max_tokens, tool_calls / function_call -> tool_use, content_filter ->
 * refusal, anything else or NULL -> end_turn. Never NULL (static strings). */
const char *messages_stop_reason(const char *finish_reason);

/* ---- stream ---------------------------------------------------------------- */

/* Emits one Anthropic SSE event: its name ("message_start", ...) and its data,
 * compact JSON of len bytes with data[len] == '\0'; both are valid only during
 * the call. The caller frames it as "event: <name>\ndata: <data>\n\n".
 * Returns 0, or -1 to stop (client gone). */
typedef int (*messages_emit_fn)(void *ctx, const char *event, const char *data, size_t len);

enum messages_block { MB_NONE, MB_TEXT, MB_THINKING, MB_TOOL };

#define MESSAGES_STREAM_TOOLS 64

/* Stream translation state, one per attempt (caller-owned, no heap). */
struct messages_stream {
    char model[256];              /* model reported in message_start ("" until init or a chunk gives one) */
    int started;                  /* message_start sent */
    int blocks;                   /* content blocks started: the next block's index */
    enum messages_block open;     /* kind of the open block, MB_NONE = none */
    int open_tool;                /* OpenAI tool call index of the open tool_use block */
    int tool_block[MESSAGES_STREAM_TOOLS];  /* tool call index -> its block index + 1, 0 = not seen */
    const char *stop_reason;      /* from the latest finish_reason (static), NULL = none seen */
    char stop_sequence[256];      /* vLLM's matched stop string, "" = none (or too long to keep) */
    int refusal;                  /* a refusal delta was sent as text: end_turn becomes refusal */
    int64_t prompt, completion, cached, reasoning;  /* from the usage chunk */
    int done;                     /* [DONE] was translated: message_stop sent (or emit stopped it) */
    int failed;                   /* an error chunk was translated */
};

/* model: the name to report (NULL: the first chunk's model). */
void messages_stream_init(struct messages_stream *s, const char *model);

/* One upstream event's data (len bytes, no NUL needed: a chat.completion.chunk
 * JSON, an {"error":...} object, or the literal [DONE]) -> zero or more
 * Anthropic events through emit:
 *   the first JSON chunk (not an error)  -> message_start (usage 0/0: counts come in message_delta)
 *   reasoning_content / reasoning delta   -> thinking block: content_block_start, thinking_delta
 *   content delta                         -> text block: content_block_start, text_delta
 *   refusal delta (OpenAI)                -> text_delta too; end_turn is then reported as refusal
 *   tool_calls delta, a new tool index    -> tool_use block: content_block_start {id,name,input:{}}
 *                                            (a call without an id gets "call_<index>")
 *   tool_calls arguments                  -> input_json_delta on that call's block
 *   a block of another kind than the open one closes it first (content_block_stop);
 *   ping follows the message's first content_block_start only;
 *   finish_reason, vLLM's stop_reason     -> recorded
 *   usage (any chunk with a usage object) -> recorded, and copied to *u (u may be NULL)
 *   [DONE]                                -> content_block_stop of the open block, message_delta
 *                                            (stop_reason, stop_sequence, usage), message_stop;
 *                                            message_start first when no chunk came
 *   {"error":...}                         -> error event; failed = 1. Its type: errors_anthropic_type
 *                                            of a numeric code 400..599, else Anthropic's own type
 *                                            names stay, server_error -> api_error, *overload* ->
 *                                            overloaded_error, *rate_limit* -> rate_limit_error, else
 *                                            api_error. No message_start is sent for it.
 *   not JSON, empty content, role only    -> nothing (but message_start for the first JSON chunk)
 * Nothing is emitted after [DONE] or an error. 0, or -1 when emit said stop
 * (then call no more). */
int messages_stream_chunk(struct messages_stream *s, const char *data, size_t len, struct usage *u,
                          messages_emit_fn emit, void *ctx);

int messages_stream_failed(const struct messages_stream *s);   /* an error chunk was translated */
int messages_stream_done(const struct messages_stream *s);     /* [DONE] was translated */

#endif
