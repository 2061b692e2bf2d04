/* count.c: a token count without an upstream (R-ANT-7). The number is the one
 * admission reserves with, so a client that budgets by it is never surprised
 * by a TPM refusal the count did not predict. */
#include "count.h"

#include "reply.h"

#include <stdio.h>

void count_reply(struct request *r)
{
    char body[48];
    int64_t n = r->prompt_estimate > 0 ? r->prompt_estimate : (int64_t)(r->body_len / 4) + 1;
    int len = snprintf(body, sizeof body, "{\"input_tokens\":%lld}", (long long)n);
    const char *extra = arena_printf(r->arena, "X-Routed-Endpoint: %s\r\nContent-Length: %d\r\n", r->ep->name, len);
    if (reply_head(r, 200, "application/json", extra) == 0)
        reply_body(r, body, (size_t)len, 0);
    r->data_sent = 1;
}
