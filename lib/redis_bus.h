/* redis_bus.h: one Redis channel the responders of every gateway host share, for news
 * a host must tell the others at once (issue 19): a replica banned, or its circuit
 * opened, on one host is out on every host (fcgi/passive_share.c); a place under a
 * cap freed on one host is tried again by the waiters of every host (lib/gate.c).
 * Every listener gets every message and keeps those of its own form. Pub/sub, not
 * storage: a message sent while Redis is down is lost, so only news that expires by
 * itself, or has a slower fallback, goes here. */
#ifndef SLUICE_REDIS_BUS_H
#define SLUICE_REDIS_BUS_H

#include <stddef.h>

/* The channel (a script that publishes by itself names it too). */
#define REDIS_BUS_CHANNEL "sluice:passive"

/* Called on the bus's thread for every message of the channel, the process's own too. */
typedef void redis_bus_fn(const char *msg, size_t n, void *arg);

/* Adds a listener (at most 4; at start, before messages matter). 0, or -1. */
int redis_bus_listen(redis_bus_fn *fn, void *arg);
/* url: sluice.conf's `state` (a Redis). The first call starts the thread that
 * subscribes (and subscribes again after an outage); later calls do nothing.
 * 0, or -1 (logged) without hiredis or a bad url. */
int redis_bus_start(const char *url);
/* Queues msg (at most 256 bytes) for the channel: a thread of the bus sends it,
 * waiting at most timeout_ms on Redis, so the caller never waits. 0, or -1 (the
 * queue is full while Redis is slow or down: dropped). */
int redis_bus_publish(const char *msg, size_t n, int timeout_ms);

#endif
