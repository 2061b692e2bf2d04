/* drive.c: the attempt loop: forward one attempt, report it to the serving
 * view, let retry.c say what may follow, take the next attempt from the plan. */
#include "drive.h"

#include "cache.h"
#include "forward.h"
#include "gate.h"
#include "log.h"
#include "queue.h"
#include "reply.h"
#include "retry.h"
#include "route.h"
#include "screen.h"
#include "serving.h"
#include "shadow.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *outcome_name(enum attempt_outcome o, long status)
{
    static const char *names[] = {"answered", "connection failed", "response broken", "first-byte timeout",
                                  "idle timeout", "client gone", "response too large", "refused",
                                  "shutting down", "parked"};
    if (o == ATTEMPT_DONE && status >= 500)
        return "server error";
    return (unsigned)o < sizeof names / sizeof names[0] ? names[o] : "failed";
}

/* What the operator reads in a failure line: the outcome, with the socket's
 * error for a connection that failed (refused, timed out) or the upstream's
 * status for an answer. Only computed for failures. */
static const char *failure_reason(struct request *r, const struct snap_endpoint *ep, const struct attempt *a)
{
    const char *what = outcome_name(a->outcome, a->status);
    if (a->outcome == ATTEMPT_CONNECT) {
        long os_errno = 0;
        curl_easy_getinfo(r->w->curl, CURLINFO_OS_ERRNO, &os_errno);
        int64_t took_ms = a->obs ? (a->obs->end_us - a->obs->start_us) / 1000 : -1;
        if (os_errno == ECONNREFUSED)
            return "connection refused (nothing listens there)";
        if (ep && ep->connect_timeout_ms > 0 && took_ms >= ep->connect_timeout_ms)
            return arena_printf(r->arena, "connect timeout (%d ms)", ep->connect_timeout_ms);
        if (os_errno)
            return arena_printf(r->arena, "connection failed: %s", strerror((int)os_errno));
        return what;
    }
    if (a->outcome == ATTEMPT_FIRST_BYTE && ep)
        return arena_printf(r->arena, "first-byte timeout (%d ms)", ep->first_byte_timeout_ms);
    if (a->outcome == ATTEMPT_IDLE && ep)
        return arena_printf(r->arena, "idle timeout (%d ms)", ep->idle_timeout_ms);
    if (a->status)
        return arena_printf(r->arena, "%s (HTTP %ld)", what, a->status);
    return what;
}

/* Nothing more is tried: the answer, or the error, goes to the client. */
static void drive_finish(struct request *r, struct attempt *a, const struct retry_decision *d)
{
    switch (d->final) {
    case FINAL_DELIVER:
    case FINAL_PASS_UPSTREAM:
        forward_deliver(r, a);
        break;
    case FINAL_UPSTREAM_EVENT:
        relay_finish_failed(&a->relay);
        break;
    case FINAL_ERROR:
        reply_error(r, d->code, d->message, NULL);
        break;
    case FINAL_REFUSED:
        reply_error(r, a->refusal.code, a->refusal.message, a->refusal.param);
        break;
    case FINAL_CLIENT_GONE:
        if (a->outcome == ATTEMPT_CLIENT_GONE) {
            r->error_code = errors_get(ERR_CLIENT_DISCONNECTED)->code;
            snprintf(r->finish_reason, sizeof r->finish_reason, "client_disconnected");
            log_info("request %s: client disconnected; upstream transfer aborted", r->request_id);
        }
        break;
    }
}

/* R-PRIO-1: every candidate was full: the attempt comes from the queue's
 * grant. 0, or -1 after replying (or with the client gone). */
static int drive_wait(struct request *r)
{
    for (int tries = 0; tries <= SHM_WAIT_EXCLUDED; tries++) {
        if (queue_wait(r) != 0)
            return -1;
        if (route_granted(r) == 0)
            return 0;
        queue_turn_down(r);         /* it went down meanwhile: wait on, without it */
    }
    reply_error(r, ERR_NO_BACKENDS_AVAILABLE, NULL, NULL);
    return -1;
}

/* After an attempt: report it, and say whether another one follows (1) or
 * the request's answer is settled (0). */
static int attempt_done(struct request *r, struct attempt *a, const struct snap_replica *rep,
                        const struct snap_endpoint *ep)
{
    struct retry_facts f = {
        .outcome = a->outcome, .status = a->status, .sse = a->sse, .data_sent = r->data_sent,
        .headers_sent = r->headers_sent, .replica_retries = r->candidate_retries, .is_auto = r->auto_plan != NULL,
        .early_error = a->relay.abort == ABORT_FAILED_EARLY,
    };
    struct retry_decision d;
    retry_decide(&f, &d);
    const char *why = d.failed ? failure_reason(r, ep, a) : outcome_name(a->outcome, a->status);
    if (d.report)
        serving_report(r, rep, !d.failed, why);
    if (a->obs) {
        a->obs->outcome = outcome_name(a->outcome, a->status);
        a->obs->next = d.failed ? "failed" : a->outcome == ATTEMPT_CLIENT_GONE ? "client_gone" : "success";
    }
    if (d.other_endpoint && route_skip_endpoint(r) == 0) {
        log_info("request %s: endpoint %s (%s) cannot express it (%s); trying endpoint %s", r->request_id,
                 ep->name, a->proto->name, errors_get(a->refusal.code)->code, r->ep->name);
        forward_attempt_free(a);
        return 1;
    }
    if (d.other_replica && route_next_replica(r) == 0) {
        if (a->obs)
            a->obs->next = "retry";
        r->retries++;
        r->candidate_retries++;
        if (r->replica)
            log_info("request %s: endpoint %s: retrying on replica %lld (%s) after a failure of replica %lld "
                     "(%s): %s", r->request_id, ep->name, (long long)r->replica->id, r->replica->url,
                     (long long)rep->id, rep->url, why);
        else            /* every other replica is full: the retry waits in the queue */
            log_info("request %s: endpoint %s: retrying after a failure of replica %lld (%s): %s; waiting for "
                     "a free place on endpoint %s", r->request_id, ep->name, (long long)rep->id, rep->url, why,
                     r->ep->name);
        forward_attempt_free(a);
        return 1;
    }
    if (d.next_model && route_next_model(r) == 0) {
        if (a->obs)
            a->obs->next = "failover";
        r->retries++;
        r->candidate_retries = 0;
        log_info("request %s: model auto degrades to %s (level %d)", r->request_id, r->model, r->plan.pos);
        forward_attempt_free(a);
        return 1;
    }
    drive_finish(r, a, &d);
    cache_answer_end(r, a->outcome == ATTEMPT_DONE && d.final == FINAL_DELIVER);
    forward_attempt_free(a);
    return 0;
}

/* The attempt loop. A parked attempt returns with r->parked_attempt set. */
static void drive_attempts(struct request *r)
{
    for (;;) {
        if (!r->replica && drive_wait(r) != 0)
            return;
        shadow_begin(r);                    /* R-SHD-1: once, when the first attempt is admitted */
        const struct snap_replica *rep = r->replica;
        const struct snap_endpoint *ep = r->ep;
        struct attempt *a = arena_alloc(r->arena, sizeof *a);
        forward_attempt(r, a);
        if (a->outcome == ATTEMPT_PARKED) {
            a->rep = rep;                   /* its place stays taken while the transfer runs */
            a->ep = ep;
            r->parked_attempt = a;
            return;
        }
        gate_release(r->shm, &r->hold);     /* the place goes to the next waiter before any retry */
        if (!attempt_done(r, a, rep, ep))
            return;
    }
}

int drive_resume(struct request *r)
{
    struct attempt *a = r->parked_attempt;
    r->parked_attempt = NULL;
    forward_resume(r, a);
    gate_release(r->shm, &r->hold);
    return !attempt_done(r, a, a->rep, a->ep);
}

void drive_continue(struct request *r) { drive_attempts(r); }

void drive_run(struct request *r)
{
    /* R-CACHE-1: before the first attempt, the route having chosen what
     * answers (the key names the endpoint and its model name); also when the
     * plan says wait: a hit never waits. R-GUARD-3: not when output rules
     * apply: a stored answer would go out unscreened. */
    if (!screen_output_wanted(r) && cache_lookup(r) == CACHE_HIT) {
        gate_release(r->shm, &r->hold);     /* the place route took goes to the next waiter */
        serving_unused(r, r->replica);      /* and a half-open trial to the next request */
        cache_replay(r);
        return;
    }
    drive_attempts(r);
}
