/* fairq.c: the serving order of a contended queue (R-PRIO-2); see fairq.h. */
#include "fairq.h"

int64_t fairq_start(int64_t finish, int64_t vnow)
{
    return finish > vnow ? finish : vnow;
}

int64_t fairq_finish(int64_t start, int weight)
{
    return start + FAIRQ_UNIT / (weight < 1 ? 1 : weight);
}

/* Is a to be served before b? */
static int before(const struct fairq_cand *a, const struct fairq_cand *b)
{
    if (a->priority != b->priority)
        return a->priority < b->priority;
    if (a->tenant_start != b->tenant_start)
        return a->tenant_start < b->tenant_start;
    if (a->tenant_id != b->tenant_id)
        return a->tenant_id < b->tenant_id;   /* equal tags: one tenant at a time, not interleaved */
    if (a->user_start != b->user_start)
        return a->user_start < b->user_start;
    return a->seq < b->seq;
}

int fairq_pick(const struct fairq_cand *c, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (best < 0 || before(&c[i], &c[best]))
            best = i;
    return best;
}
