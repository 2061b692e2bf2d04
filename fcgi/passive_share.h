/* passive_share.h: bans and open circuits told to every gateway host (issue 19).
 *
 * With sluice.conf's `state` a Redis, a replica one host bans (or whose circuit it
 * opens, R-HC-5) is out on every host within a Redis round trip, and a success
 * that closes it closes it everywhere: each responder publishes what changed on
 * the channel sluice:passive and applies what the others publish to its host's
 * shared state (lib/redis_bus.h). Without `state` nothing is sent: the state
 * file already holds one host's bans. */
#ifndef SLUICE_PASSIVE_SHARE_H
#define SLUICE_PASSIVE_SHARE_H

#include "passive.h"

#include <stdint.h>

/* At start; state: sluice.conf's `state` ("": nothing to share). 0 or -1 (logged). */
int passive_share_start(const char *state, struct shm *shm);
/* What a failure or success just did to the replica's state, for the other hosts.
 * No-op without a shared state. */
void passive_share_tell(int64_t replica_id, const struct passive_state *ps, int failed, int timeout_ms);

#endif
