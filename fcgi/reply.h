/* reply.h: writing the response to the front server, noticing when the client left. */
#ifndef SLUICE_REPLY_H
#define SLUICE_REPLY_H

#include "errors.h"
#include "request.h"

/* Status line and headers; extra is "Name: value\r\n..." or NULL. 0 or -1 (client gone). */
int reply_head(struct request *r, int status, const char *content_type, const char *extra);
/* Body bytes; flush pushes them through lighttpd at once (SSE). 0 or -1 (client gone). */
int reply_body(struct request *r, const char *data, size_t len, int flush);
/* R-SSE-6: has the front server closed the FastCGI connection (the client left)? */
int reply_client_closed(struct request *r);
/* An error from sluice itself (R-API-2). Before the head: a JSON error reply;
 * after a stream began: a data: {"error":...} event (R-SSE-4). */
void reply_error(struct request *r, enum error_code code, const char *message, const char *param);
/* An error body already in the caller's protocol as the event that ends a
 * stream: `event: error` + data for Anthropic callers, `data:` for OpenAI's. */
void reply_error_event(struct request *r, const char *body, size_t len);
/* The same with extra header lines ("Name: value\r\n"). */
void reply_error_extra(struct request *r, enum error_code code, const char *message, const char *extra_headers);

/* A key-limit refusal (R-KEY-2): 429 with the SPEC §12 body and headers. */
struct limit_info {
    enum error_code code;           /* ERR_QPS_EXCEEDED, ... */
    int64_t limit, current, remaining;
    int64_t reset_s;                /* epoch seconds when the window or quota resets */
    int64_t retry_after_s;
    int64_t quota_reset_s;          /* day/month boundary for quotas, else 0 */
    int no_retry;
    const char *message;            /* NULL: the standard rate-limit sentence */
    const char *scope;              /* R-KEY-6 layer: "per_tenant", ...; NULL = "per_api_key" */
};
void reply_limit(struct request *r, const struct limit_info *li);
/* A limit's 429 from its numbers: scope NULL = per_api_key; retry_ms until the window
 * frees, or quota_reset_s (a day or month boundary: also X-Quota-Reset and
 * x-should-retry: false); message NULL = the standard sentence. */
void reply_limit_refusal(struct request *r, enum error_code code, const char *scope, int64_t limit, int64_t current,
                         int64_t retry_ms, int64_t quota_reset_s, const char *message);

#endif
