/* kstate.c: the pure parts of the key-limit state: outages, fail policy, backoff. */
#include "kstate.h"

int kstate_outage_note(struct kstate_outage *o, int ok, int64_t now_ms)
{
    if (ok) {
        if (!o->down)
            return 0;
        o->down = 0;
        return 2;
    }
    if (o->down) {
        o->failures++;
        return 0;
    }
    o->down = 1;
    o->since_ms = now_ms;
    o->failures = 1;
    return 1;
}

int kstate_fail_admits(int fail_closed) { return !fail_closed; }

const char *kstate_policy_name(int fail_closed) { return fail_closed ? "fail_closed" : "fail_open"; }

int64_t kstate_backoff_ms(int failures)
{
    if (failures <= 0)
        return 0;
    int64_t ms = 100;
    for (int i = 1; i < failures && ms < 2000; i++)
        ms *= 2;
    return ms > 2000 ? 2000 : ms;
}
