/* retry.h: what may follow an attempt (R-HC-8, R-AUTO-5, R-SSE-4/5), as a pure
 * decision over plain facts; the driver (drive.c) acts on it. */
#ifndef SLUICE_RETRY_H
#define SLUICE_RETRY_H

#include "errors.h"

/* How one attempt ended (forward.c). */
enum attempt_outcome {
    ATTEMPT_DONE,           /* an upstream answer, relayed or ready in the buffer */
    ATTEMPT_CONNECT,        /* no response byte: connection-level failure */
    ATTEMPT_BROKEN,         /* the body stopped early, or a stream failed before content */
    ATTEMPT_FIRST_BYTE,     /* first-byte timeout */
    ATTEMPT_IDLE,           /* idle timeout */
    ATTEMPT_CLIENT_GONE,
    ATTEMPT_TOO_LARGE,
    ATTEMPT_REFUSED,        /* the adapter cannot express the request (R-ANT-2/3) */
    ATTEMPT_SHUTDOWN,       /* the responder's shutdown grace ran out (R-DEP-6) */
    ATTEMPT_PARKED,         /* a stream under way left its thread; forward_resume ends it */
};

/* What one attempt left behind (from forward's outcome and the request). */
struct retry_facts {
    enum attempt_outcome outcome;
    long status;                  /* upstream status as the caller sees it, 0 if none */
    int sse;                      /* the answer was being relayed as a stream */
    int data_sent;                /* a response byte other than a comment reached the client */
    int headers_sent;             /* the response head went out (a keep-alive may commit it) */
    int replica_retries;          /* retries on other replicas of the current model so far */
    int is_auto;                  /* the plan is model auto's chain */
    int early_error;              /* a server-side error event ended the stream before content */
};

enum retry_final {
    FINAL_DELIVER,                /* the answer stands: send what is buffered or end the stream */
    FINAL_UPSTREAM_EVENT,         /* a stream failed early: what the guard held and the upstream's error event */
    FINAL_PASS_UPSTREAM,          /* a retryable upstream error with nothing left to try: pass it on */
    FINAL_ERROR,                  /* reply sluice's own error (code, message) */
    FINAL_REFUSED,                /* the adapter's refusal, as it gave it */
    FINAL_CLIENT_GONE,            /* nothing to send; record a disconnect */
};

struct retry_decision {
    int report;                   /* the outcome says how the replica did (R-HC-5, R-HC-2) */
    int failed;                   /* ... and it failed */
    int other_replica;            /* another replica of this model may be tried (R-HC-8: once) */
    int next_model;               /* the plan's next model may be tried (R-AUTO-5) */
    int other_endpoint;           /* the adapter refused: another endpoint (then model) may serve it */
    enum retry_final final;       /* when nothing (more) is tried */
    enum error_code code;         /* FINAL_ERROR */
    const char *message;          /* FINAL_ERROR, static */
};

void retry_decide(const struct retry_facts *f, struct retry_decision *d);

#endif
