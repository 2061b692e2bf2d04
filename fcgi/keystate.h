/* keystate.h: a member key's limits at the admit stage (R-KEY-2..5) over whichever
 * hot state runs, so admit.c does not know which: the mapped state file
 * (keystate_file.c, the embedded default) or a Redis `state` shared by every
 * gateway host (keystate_redis.c over lib/kstate.h, issue 19). Both keep what
 * they took in the request (struct request's admit fields) and read the
 * request's snapshot; SQLite stays the record of the call and token quotas. */
#ifndef SLUICE_KEYSTATE_H
#define SLUICE_KEYSTATE_H

#include "errors.h"
#include "request.h"

struct keystate_ops {
    const char *name;
    /* r->key's limits: 0 admitted (counted); -1 refused (the 429 or 503 is sent). */
    int (*admit)(struct request *r);
    /* R-KEY-6: a later layer refused; everything admit took goes back. */
    void (*give_back)(struct request *r);
    /* The end of an admitted request: slot freed, reservations settled to
     * `actual` billable tokens (-1: keep the estimate). */
    void (*finish)(struct request *r, int64_t actual);
};

extern const struct keystate_ops keystate_file, keystate_redis;

/* Shared by both: the 429s of R-KEY-2, the never-fitting TPM request (R-KEY-5),
 * and the tokens a request reserves (prompt estimate + max_tokens or default). */
void keystate_refuse(struct request *r, enum error_code code, int64_t limit, int64_t current, int64_t retry_ms,
                     int64_t quota_reset_s);
void keystate_refuse_never_fits(struct request *r, int64_t need);
int64_t keystate_want(const struct request *r);

#endif
