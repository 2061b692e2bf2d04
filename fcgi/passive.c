/* passive.c: the ban / circuit state machine of R-HC-5, and its fields in the shared state. */
#include "passive.h"

#include <stdio.h>
#include <string.h>

void passive_load(const struct shm *shm, int slot, struct passive_state *p)
{
    memset(p, 0, sizeof *p);
    if (slot < 0)
        return;
    const struct shm_replica *s = &shm->r->replicas[slot];
    p->ban_until_ms = atomic_load(&s->ban_until_ms);
    p->open_until_ms = atomic_load(&s->open_until_ms);
    p->failures = atomic_load(&s->failures);
    p->trials = atomic_load(&s->trials);
    p->circuit = (enum circuit_state)atomic_load(&s->circuit);
}

void passive_store(struct shm *shm, int slot, const struct passive_state *p)
{
    struct shm_replica *s = &shm->r->replicas[slot];
    atomic_store(&s->ban_until_ms, p->ban_until_ms);
    atomic_store(&s->open_until_ms, p->open_until_ms);
    atomic_store(&s->failures, p->failures);
    atomic_store(&s->trials, p->trials);
    atomic_store(&s->circuit, (int)p->circuit);
}

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

void passive_news_of(const struct passive_state *s, int failed, int64_t now, struct passive_news *n)
{
    memset(n, 0, sizeof *n);
    n->failed = failed;
    if (!failed)
        return;
    n->ban_left_ms = s->ban_until_ms > now ? s->ban_until_ms - now : 0;
    n->open_left_ms = s->circuit == CIRCUIT_OPEN && s->open_until_ms > now ? s->open_until_ms - now : 0;
    n->failures = s->failures;
    n->circuit = s->circuit;
}

int passive_on_news(struct passive_state *s, const struct passive_news *n, int64_t now)
{
    if (!n->failed)
        return passive_on_success(s);
    int changed = 0;
    if (now + n->ban_left_ms > s->ban_until_ms) {
        s->ban_until_ms = now + n->ban_left_ms;
        changed = 1;
    }
    if (n->failures > s->failures) {
        s->failures = n->failures;
        changed = 1;
    }
    /* An open circuit there is open here; a half-open one here keeps its trials. */
    if (n->circuit == CIRCUIT_OPEN && (s->circuit != CIRCUIT_OPEN || now + n->open_left_ms > s->open_until_ms)) {
        s->circuit = CIRCUIT_OPEN;
        s->open_until_ms = now + n->open_left_ms;
        s->trials = 0;
        changed = 1;
    }
    return changed;
}

size_t passive_news_format(const struct passive_news *n, char *out, size_t cap)
{
    int w = n->failed ? snprintf(out, cap, "fail %lld %d %lld %d", (long long)n->ban_left_ms, (int)n->circuit,
                                 (long long)n->open_left_ms, n->failures)
                      : snprintf(out, cap, "ok");
    return w > 0 && (size_t)w < cap ? (size_t)w : 0;
}

int passive_news_parse(const char *line, struct passive_news *n)
{
    memset(n, 0, sizeof *n);
    if (strcmp(line, "ok") == 0)
        return 0;
    long long ban, open;
    int circuit, failures, end = 0;
    if (sscanf(line, "fail %lld %d %lld %d%n", &ban, &circuit, &open, &failures, &end) != 4 || line[end] ||
        ban < 0 || open < 0 || ban > 86400000LL || open > 86400000LL || failures < 0 ||
        (circuit != CIRCUIT_CLOSED && circuit != CIRCUIT_OPEN && circuit != CIRCUIT_HALF_OPEN))
        return -1;
    n->failed = 1;
    n->ban_left_ms = ban;
    n->open_left_ms = open;
    n->circuit = (enum circuit_state)circuit;
    n->failures = failures;
    return 0;
}
