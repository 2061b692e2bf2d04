/* redis_conn.h: a connection to sluice.conf's `state` Redis (hiredis), for the modules
 * that keep pool-wide state there: kstate_redis.c (key limits), redis_bus.c (news),
 * kv_redis.c (affinity). */
#ifndef SLUICE_REDIS_CONN_H
#define SLUICE_REDIS_CONN_H

#ifdef SLUICE_HIREDIS

#include "state_url.h"

#include <hiredis/hiredis.h>

/* Connects (timeout_ms for the connect and for every later call), AUTHs with the
 * URL's password and, with select_db, SELECTs its database (pub/sub channels have
 * none). NULL on failure; a refused AUTH or SELECT is logged. */
redisContext *redis_connect(const struct state_url *u, int timeout_ms, int select_db);

#endif
#endif
