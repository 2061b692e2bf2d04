/* passive.h: passive replica protection, bans and circuits (R-HC-5), as pure functions
 * over a plain copy of the shared fields. */
#ifndef SLUICE_PASSIVE_H
#define SLUICE_PASSIVE_H

#include "shm.h"

#include <stdint.h>

struct passive_state {
    int64_t ban_until_ms, open_until_ms;
    int failures, trials;
    enum circuit_state circuit;
};

struct passive_conf {
    int ban_ms, circuit_failures, circuit_open_ms, half_open_trials;
};

/* The replica's fields of the shared state (slot < 0: all zero) and back; the
 * caller holds the pool lock where it decides on what it read. */
void passive_load(const struct shm *shm, int slot, struct passive_state *p);
void passive_store(struct shm *shm, int slot, const struct passive_state *p);

/* May the replica take a request now? (read-only) */
int passive_available(const struct passive_state *s, const struct passive_conf *c, int64_t now);
/* The replica was chosen: hands out a half-open trial when the circuit is past
 * its open time. Returns 1 when the state changed, 0 when nothing changed, -1
 * when every trial is already out (the choice must be made again). */
int passive_on_pick(struct passive_state *s, const struct passive_conf *c, int64_t now);
/* A proxy failure: ban; open the circuit after circuit_failures in a row or
 * on a failed half-open trial. */
void passive_on_failure(struct passive_state *s, const struct passive_conf *c, int64_t now);
/* A success closes everything. Returns 1 when the state changed. */
int passive_on_success(struct passive_state *s);
/* A trial was handed out but its request never went to the replica (the
 * answer cache served it): the trial goes back, so the next request may try
 * at once instead of after circuit_open_ms. Returns 1 when the state changed. */
int passive_on_unused(struct passive_state *s);

/* ---- across gateway hosts (passive_share.c, issue 19) ---- */

/* What another host saw of a replica, as durations from the moment it said so
 * (the hosts' clocks need not agree). */
struct passive_news {
    int failed;                 /* 1: a failure (ban, maybe circuit open); 0: a success */
    int64_t ban_left_ms, open_left_ms;
    int failures;
    enum circuit_state circuit;
};
/* The news of a replica's state just after a failure or success seen here. */
void passive_news_of(const struct passive_state *s, int failed, int64_t now, struct passive_news *n);
/* Another host's news applied here: a ban or an open circuit lasts the longer of
 * the two; a success closes everything, as one here would. 1 when it changed. */
int passive_on_news(struct passive_state *s, const struct passive_news *n, int64_t now);
/* The news as one line ("fail BAN_LEFT CIRCUIT OPEN_LEFT FAILURES" / "ok") and back:
 * bytes written (0 when it does not fit), and 0 / -1 for a line that is not news. */
size_t passive_news_format(const struct passive_news *n, char *out, size_t cap);
int passive_news_parse(const char *line, struct passive_news *n);

#endif
