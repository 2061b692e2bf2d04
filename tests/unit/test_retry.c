/* test_retry.c: what may follow an attempt (fcgi/retry.h: R-HC-8, R-AUTO-5, R-SSE-4/5). */
#include "check.h"

#include "retry.h"

#define D ATTEMPT_DONE
#define C ATTEMPT_CONNECT
#define B ATTEMPT_BROKEN
#define F ATTEMPT_FIRST_BYTE
#define I ATTEMPT_IDLE
#define G ATTEMPT_CLIENT_GONE
#define L ATTEMPT_TOO_LARGE
#define X ATTEMPT_REFUSED

static const struct {
    const char *name;
    struct retry_facts f;          /* outcome, status, sse, data_sent, headers_sent, replica_retries, is_auto, early_error */
    int failed, other_replica, next_model;
    enum retry_final final;
    enum error_code code;
} cases[] = {
    /* R-HC-8: before the first byte, once on another replica */
    {"connect failure, first try", {C, 0, 0, 0, 0, 0, 0, 0}, 1, 1, 1, FINAL_ERROR, ERR_UPSTREAM_ERROR},
    {"connect failure after a retry", {C, 0, 0, 0, 0, 1, 0, 0}, 1, 0, 1, FINAL_ERROR, ERR_UPSTREAM_ERROR},
    {"502 before data", {D, 502, 0, 0, 0, 0, 0, 0}, 1, 1, 1, FINAL_PASS_UPSTREAM, ERR_NONE},
    {"503 before data", {D, 503, 0, 0, 0, 0, 0, 0}, 1, 1, 1, FINAL_PASS_UPSTREAM, ERR_NONE},
    {"529 (Anthropic overloaded) before data", {D, 529, 0, 0, 0, 0, 0, 0}, 1, 1, 1, FINAL_PASS_UPSTREAM, ERR_NONE},
    {"504 before data", {D, 504, 0, 0, 0, 0, 0, 0}, 1, 1, 1, FINAL_PASS_UPSTREAM, ERR_NONE},
    {"503 after the retry: passed on", {D, 503, 0, 0, 0, 1, 0, 0}, 1, 0, 1, FINAL_PASS_UPSTREAM, ERR_NONE},
    {"500 is not retried, still a failure", {D, 500, 0, 0, 0, 0, 0, 0}, 1, 0, 0, FINAL_DELIVER, ERR_NONE},
    {"501 is not retried", {D, 501, 0, 0, 0, 0, 0, 0}, 1, 0, 0, FINAL_DELIVER, ERR_NONE},
    /* 4xx: passes through, not degraded, not a replica failure */
    {"400 passes through", {D, 400, 0, 0, 0, 0, 1, 0}, 0, 0, 0, FINAL_DELIVER, ERR_NONE},
    {"429 passes through", {D, 429, 0, 0, 0, 0, 0, 0}, 0, 0, 0, FINAL_DELIVER, ERR_NONE},
    {"404 passes through", {D, 404, 0, 0, 0, 0, 0, 0}, 0, 0, 0, FINAL_DELIVER, ERR_NONE},
    {"200 delivered", {D, 200, 0, 0, 0, 0, 0, 0}, 0, 0, 0, FINAL_DELIVER, ERR_NONE},
    {"200 stream delivered", {D, 200, 1, 1, 1, 0, 0, 0}, 0, 0, 0, FINAL_DELIVER, ERR_NONE},
    /* a read timeout is never retried */
    {"first-byte timeout", {F, 0, 0, 0, 0, 0, 0, 0}, 1, 0, 0, FINAL_ERROR, ERR_UPSTREAM_TIMEOUT},
    {"first-byte timeout, auto", {F, 0, 0, 0, 0, 0, 1, 0}, 1, 0, 0, FINAL_ERROR, ERR_UPSTREAM_TIMEOUT},
    {"idle timeout", {I, 200, 1, 1, 1, 0, 0, 0}, 1, 0, 0, FINAL_ERROR, ERR_UPSTREAM_IDLE_TIMEOUT},
    /* R-SSE-5: a stream that failed while the guard held everything back */
    {"stream broken before content", {B, 200, 1, 0, 0, 0, 0, 0}, 1, 1, 1, FINAL_ERROR, ERR_UPSTREAM_ERROR},
    {"stream broken before content, head sent by a keep-alive", {B, 200, 1, 0, 1, 0, 0, 0}, 1, 1, 0, FINAL_ERROR,
     ERR_UPSTREAM_ERROR},
    /* R-SSE-4: once a byte went out, no retry of any kind */
    {"stream broken after content", {B, 200, 1, 1, 1, 0, 0, 0}, 1, 0, 0, FINAL_ERROR, ERR_UPSTREAM_ERROR},
    {"stream broken after content, auto", {B, 200, 1, 1, 1, 0, 1, 0}, 1, 0, 0, FINAL_ERROR, ERR_UPSTREAM_ERROR},
    {"buffered body broken", {B, 200, 0, 0, 0, 0, 0, 0}, 1, 0, 0, FINAL_ERROR, ERR_UPSTREAM_BAD_RESPONSE},
    /* R-AUTO-5: model auto degrades, and says so when every candidate failed */
    {"auto: connect failure", {C, 0, 0, 0, 0, 0, 1, 0}, 1, 1, 1, FINAL_ERROR, ERR_AUTO_ROUTING_ALL_FAILED},
    {"auto: 503 after the retry", {D, 503, 0, 0, 0, 1, 1, 0}, 1, 0, 1, FINAL_ERROR, ERR_AUTO_ROUTING_ALL_FAILED},
    /* the rest */
    {"too large", {L, 200, 0, 0, 0, 0, 0, 0}, 0, 0, 0, FINAL_ERROR, ERR_UPSTREAM_BAD_RESPONSE},
    {"client gone", {G, 200, 1, 1, 1, 0, 0, 0}, 0, 0, 0, FINAL_CLIENT_GONE, ERR_NONE},
    {"refused by the adapter", {X, 0, 0, 0, 0, 0, 0, 0}, 0, 0, 0, FINAL_REFUSED, ERR_NONE},
    {"shutdown grace over", {ATTEMPT_SHUTDOWN, 200, 1, 1, 1, 0, 0, 0}, 0, 0, 0, FINAL_ERROR, ERR_SHUTTING_DOWN},
    {"server error event before content", {B, 200, 1, 0, 0, 0, 0, 1}, 1, 1, 1, FINAL_UPSTREAM_EVENT, ERR_NONE},
    {"server error event before content, auto", {B, 200, 1, 0, 0, 1, 1, 1}, 1, 0, 1, FINAL_UPSTREAM_EVENT,
     ERR_NONE},
    {"refused by the adapter, auto", {X, 0, 0, 0, 0, 0, 1, 0}, 0, 0, 0, FINAL_REFUSED, ERR_NONE},
};

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct retry_decision d;
        retry_decide(&cases[i].f, &d);
        CHECK(d.failed == cases[i].failed, "%s: failed %d", cases[i].name, d.failed);
        /* Only outcomes the replica caused are reported (a refusal, a client leaving, a
         * response over sluice's own cap or the shutdown say nothing about it). */
        int silent = cases[i].f.outcome == ATTEMPT_REFUSED || cases[i].f.outcome == ATTEMPT_CLIENT_GONE ||
                     cases[i].f.outcome == ATTEMPT_TOO_LARGE || cases[i].f.outcome == ATTEMPT_SHUTDOWN;
        CHECK(d.report == !silent, "%s: report %d", cases[i].name, d.report);
        CHECK(d.other_replica == cases[i].other_replica, "%s: other_replica %d", cases[i].name, d.other_replica);
        CHECK(d.next_model == cases[i].next_model, "%s: next_model %d", cases[i].name, d.next_model);
        CHECK(d.final == cases[i].final, "%s: final %d", cases[i].name, (int)d.final);
        if (cases[i].final == FINAL_ERROR)
            CHECK(d.code == cases[i].code, "%s: code %s", cases[i].name,
                  d.code != ERR_NONE ? errors_get(d.code)->code : "(none)");
    }
    return check_done();
}
