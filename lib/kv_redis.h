/* kv_redis.h: small pool-wide numbers with a lifetime in the `state` Redis, shared by
 * every gateway host (issue 19: the affinity table and the response-id pins, which
 * each host also keeps in its state file; the wake under way of a sleeping endpoint). A store that does not answer reads as
 * "none": the host's own table still holds what it saw itself. */
#ifndef SLUICE_KV_REDIS_H
#define SLUICE_KV_REDIS_H

#include <stdint.h>

/* url: sluice.conf's `state` ("": off). 0, or -1 (logged) for a bad url or a build
 * without hiredis. */
int kv_start(const char *url);
/* Is there a shared store? */
int kv_on(void);
/* vals[i]: the number under keys[i], 0 for none. One round trip. 0, or -1 (not answered). */
int kv_get(const char *const *keys, int n, int64_t *vals, int timeout_ms);
/* keys[i] holds vals[i] for ttl_ms from now. One round trip. 0, or -1. */
int kv_put(const char *const *keys, const int64_t *vals, int n, int64_t ttl_ms, int timeout_ms);

/* Sets key to val for ttl_ms unless it is set (SET NX PX ... GET). 1: set; 0: it was
 * already, *held gets its number; -1 not answered. */
int kv_claim(const char *key, int64_t val, int64_t ttl_ms, int64_t *held, int timeout_ms);
/* Removes key. 0, or -1. */
int kv_del(const char *key, int timeout_ms);

#endif
