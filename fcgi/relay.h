/* relay.h: one upstream response on its way to the client: headers filtered,
 * body buffered or relayed event by event (R-API-1, R-API-6, R-SSE-1/2/5, R-USE-1/2). */
#ifndef SLUICE_RELAY_H
#define SLUICE_RELAY_H

#include "dialect.h"
#include "request.h"
#include "sse.h"

enum relay_mode { RELAY_UNDECIDED, RELAY_BUFFER, RELAY_SSE };
/* ABORT_FAILED_EARLY: an error event before any content while the stream-start
 * guard still held everything back (R-SSE-5): the attempt failed invisibly.
 * ABORT_BLOCKED: an output rule ended the stream (R-GUARD-3); the client has its
 * error already, and the attempt counts as answered. */
enum relay_abort { ABORT_NONE, ABORT_CLIENT_GONE, ABORT_TOO_LARGE, ABORT_FAILED_EARLY, ABORT_BLOCKED };

struct proto_ops;

/* State of one attempt; lives on the worker's stack for that attempt. */
struct relay {
    struct request *r;
    long status;                  /* upstream status of the final (non-1xx) response */
    int in_1xx;                   /* skipping the headers of an interim response */
    char content_type[128];
    struct buf headers;           /* upstream headers passed on, "Name: value\r\n" */
    enum relay_mode mode;
    struct sse_parser sse;
    struct buf held;              /* role-only chunks held by the stream-start guard */
    int holding;
    int upstream_bytes;           /* anything arrived from upstream (first byte) */
    enum relay_abort abort;
    int64_t last_upstream_ms, last_client_ms;  /* monotonic */
    const char *model_from, *model_to;         /* JSON-quoted names for R-RT-5 rewrites */
    struct buf early_error;                    /* R-SSE-5: the server-side error event that ended it early */
    const struct proto_ops *proto;             /* the attempt's adapter (translation hooks) */
    void *proto_state;                         /* its stream state, request arena */
    enum dialect dialect;                      /* the events the client receives */
};

void relay_init(struct relay *x, struct request *r);
void relay_free(struct relay *x);
size_t relay_header_cb(char *p, size_t size, size_t n, void *ud);
size_t relay_write_cb(char *p, size_t size, size_t n, void *ud);

/* ": keep-alive" after silence (R-SSE-2); the stream head goes first if needed.
 * -1 when the client has gone. */
int relay_keepalive(struct relay *x);
/* End of a good SSE response: release anything the guard still holds and any
 * unterminated trailing bytes. */
void relay_finish_sse(struct relay *x);
/* A stream that failed early when nothing more may be tried: what the guard
 * held, then the upstream's own error event (R-SSE-4). */
void relay_finish_failed(struct relay *x);
/* The buffered upstream response, rewritten where needed, to the client. */
void relay_send_buffered(struct relay *x);
/* The response head for a stream, with the routing headers. */
int relay_stream_head(struct relay *x);

#endif
