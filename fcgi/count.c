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
    const char *extra = arena_printf(r->arena, "%s%s%sContent-Length: %d\r\n", r->ep ? "X-Routed-Endpoint: " : "",
                                     r->ep ? r->ep->name : "", r->ep ? "\r\n" : "", len);
    if (reply_head(r, 200, "application/json", extra) == 0)
        reply_body(r, body, (size_t)len, 0);
    r->data_sent = 1;
}
