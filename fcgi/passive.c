/* passive.c: the ban / circuit state machine of R-HC-5. */
#include "passive.h"

int passive_available(const struct passive_state *s, const struct passive_conf *c, int64_t now)
{
    switch (s->circuit) {
    case CIRCUIT_OPEN:
        return now >= s->open_until_ms && c->half_open_trials > 0;
    case CIRCUIT_HALF_OPEN:
        /* A trial whose outcome never came (its client left) must not keep the
         * replica out for ever: each trial window lasts circuit_open_ms. */
        return s->trials < c->half_open_trials || now >= s->open_until_ms;
    case CIRCUIT_CLOSED:
    default:
        return now >= s->ban_until_ms;
    }
}

int passive_on_pick(struct passive_state *s, const struct passive_conf *c, int64_t now)
{
    if ((s->circuit == CIRCUIT_OPEN || s->circuit == CIRCUIT_HALF_OPEN) && now >= s->open_until_ms) {
        s->circuit = CIRCUIT_HALF_OPEN;
        s->trials = 1;
        s->open_until_ms = now + c->circuit_open_ms;
        return 1;
    }
    if (s->circuit == CIRCUIT_HALF_OPEN) {
        if (s->trials >= c->half_open_trials)
            return -1;          /* another request took the last trial meanwhile */
        s->trials++;
        return 1;
    }
    return 0;
}

void passive_on_failure(struct passive_state *s, const struct passive_conf *c, int64_t now)
{
    s->failures++;
    s->ban_until_ms = now + c->ban_ms;
    if (s->circuit == CIRCUIT_HALF_OPEN || s->failures >= c->circuit_failures) {
        s->circuit = CIRCUIT_OPEN;
        s->open_until_ms = now + c->circuit_open_ms;
        s->trials = 0;
    }
}

int passive_on_unused(struct passive_state *s)
{
    if (s->circuit != CIRCUIT_HALF_OPEN || s->trials <= 0)
        return 0;
    s->trials--;
    return 1;
}

int passive_on_success(struct passive_state *s)
{
    if (s->circuit == CIRCUIT_CLOSED && s->failures == 0 && s->ban_until_ms == 0)
        return 0;
    s->circuit = CIRCUIT_CLOSED;
    s->failures = 0;
    s->trials = 0;
    s->ban_until_ms = 0;
    s->open_until_ms = 0;
    return 1;
}
