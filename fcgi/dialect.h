/* dialect.h: what one stream event of the caller's protocol is. The relay
 * holds what comes before the first content (R-SSE-5), drops the usage chunk
 * the client did not ask for (R-USE-2), fails over an early server error and
 * meters the stream (R-USE-1) by these facts, whatever the protocol.
 * Pure: tests/unit/test_dialect.c. */
#ifndef SLUICE_DIALECT_H
#define SLUICE_DIALECT_H

#include "usage.h"

#include <stddef.h>

enum dialect {
    DIALECT_CHAT,           /* OpenAI chat / completions chunks, [DONE] */
    DIALECT_MESSAGES,       /* Anthropic Messages events (message_start ... message_stop) */
    DIALECT_RESPONSES,      /* OpenAI Responses events (response.created ... response.completed) */
};

struct event_facts {
    enum chunk_kind kind;   /* CHUNK_ROLE_ONLY: nothing generated yet (held by the stream guard) */
    struct usage usage;     /* usage.found: the event carries usage */
    int usage_final;        /* ... the stream's last word on it (the usage chunk, message_delta,
                             * response.completed); message_start's is only the start */
    int server_error;       /* CHUNK_ERROR caused by the upstream's side: may be failed over */
    int counts;             /* content that produced tokens (the estimate without usage) */
    char finish[32];        /* the finish or stop reason the event states, or "" */
    char response_id[129];  /* DIALECT_RESPONSES: the id response.created names, or "" */
};

/* Classifies one event (its event: name, possibly empty, and data). For
 * DIALECT_CHAT, parse = 0 lets content chunks without a usage object be
 * classified without parsing (the hot path of a long stream). */
void dialect_classify(enum dialect d, int parse, const char *event, size_t event_len, const char *data, size_t len,
                      struct event_facts *f);

#endif
