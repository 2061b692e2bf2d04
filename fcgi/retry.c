/* retry.c: one place for the rules of what may be tried after a failure. */
#include "retry.h"

#include <string.h>

/* 529 is Anthropic's overloaded: a 503 by another number (native Messages pass-through). */
static int retryable_status(long s) { return s == 502 || s == 503 || s == 504 || s == 529; }

void retry_decide(const struct retry_facts *f, struct retry_decision *d)
{
    memset(d, 0, sizeof *d);
    d->code = ERR_NONE;
    /* R-HC-8: a connection failure or a 502/503/504 before the first response
     * byte; R-SSE-5: a stream that failed while the guard still held it back. */
    int before_data =
        f->outcome == ATTEMPT_CONNECT || (f->outcome == ATTEMPT_DONE && retryable_status(f->status)) ||
        (f->outcome == ATTEMPT_BROKEN && f->sse && !f->data_sent);
    if (before_data) {
        d->report = d->failed = 1;
        /* Once any byte went out, nothing is tried again (R-AUTO-5, R-SSE-4). */
        d->other_replica = !f->data_sent && f->replica_retries == 0;
        d->next_model = !f->data_sent && !f->headers_sent;
        if (f->early_error) {
            d->final = FINAL_UPSTREAM_EVENT;    /* the upstream's own words, not a generic 502 */
        } else if (f->is_auto) {
            d->final = FINAL_ERROR;
            d->code = ERR_AUTO_ROUTING_ALL_FAILED;
        } else if (f->outcome == ATTEMPT_DONE) {
            d->final = FINAL_PASS_UPSTREAM;     /* pass the upstream's own 5xx on */
        } else {
            d->final = FINAL_ERROR;
            d->code = ERR_UPSTREAM_ERROR;
            d->message = f->data_sent || f->headers_sent ? "the upstream stream broke"
                                                         : "the upstream could not be reached";
        }
        return;
    }
    switch (f->outcome) {
    case ATTEMPT_DONE:
        d->report = 1;
        d->failed = f->status >= 500;
        d->final = FINAL_DELIVER;            /* a 4xx passes through, never degraded */
        break;
    case ATTEMPT_FIRST_BYTE:                 /* a read timeout is never retried (R-HC-8) */
        d->report = d->failed = 1;
        d->final = FINAL_ERROR;
        d->code = ERR_UPSTREAM_TIMEOUT;
        break;
    case ATTEMPT_IDLE:
        d->report = d->failed = 1;
        d->final = FINAL_ERROR;
        d->code = ERR_UPSTREAM_IDLE_TIMEOUT;
        break;
    case ATTEMPT_BROKEN:
        d->report = d->failed = 1;
        d->final = FINAL_ERROR;
        d->code = f->data_sent ? ERR_UPSTREAM_ERROR : ERR_UPSTREAM_BAD_RESPONSE;
        d->message = "the upstream response ended early";
        break;
    case ATTEMPT_TOO_LARGE:
        d->final = FINAL_ERROR;
        d->code = ERR_UPSTREAM_BAD_RESPONSE;
        d->message = "the upstream response is over the size limit";
        break;
    case ATTEMPT_REFUSED:
        /* Not the replica's fault and not a retry: an endpoint of another
         * protocol may express the request; refused only when none can. */
        d->other_endpoint = 1;
        d->final = FINAL_REFUSED;
        break;
    case ATTEMPT_SHUTDOWN:
        d->final = FINAL_ERROR;
        d->code = ERR_SHUTTING_DOWN;
        d->message = "the gateway is shutting down";
        break;
    case ATTEMPT_PARKED:                     /* not an end: forward_resume gives the real one */
    case ATTEMPT_CLIENT_GONE:
    case ATTEMPT_CONNECT:
        d->final = FINAL_CLIENT_GONE;
        break;
    }
}
