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

#endif
