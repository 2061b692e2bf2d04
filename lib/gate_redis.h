/* gate_redis.h: places under replica, endpoint and layer caps, counted across every
 * gateway host (issue 19; R-PRIO-1 and R-KEY-6 with a Redis `state`).
 *
 * lib/gate.c still decides on its host first (its queue, its fairness, its counts
 * that survive a killed process); a place it takes or grants is then also taken
 * here, by one atomic script on the server's clock, so a GPU server's
 * max_concurrency holds in total over the hosts. A place is a lease in a ZSET
 * (member: the lease id, score: its expiry), renewed while its request lives
 * (lib/redis_eval.h): a host that dies gives its places back within the lease. A
 * refusal leaves a mark beside the ZSET; a release that finds the mark tells every
 * host on the news channel (lib/redis_bus.h), so waiters elsewhere try again at
 * once. Keys share the hash tag {cap}:
 *   sluice:{cap}:r:ID, sluice:{cap}:e:ID, sluice:{cap}:q:ID   ZSET lease -> expiry ms
 *   ...:w                                                    "somebody was refused" (5 s) */
#ifndef SLUICE_GATE_REDIS_H
#define SLUICE_GATE_REDIS_H

#include <stddef.h>
#include <stdint.h>

#define GATE_REDIS_MAX_CAPS 4          /* a replica, its endpoint, two quota layers */

/* One cap a place counts against: kind 'r' replica, 'e' endpoint, 'q' quota layer;
 * the row's id (the same on every host) and the cap of this host's snapshot. */
struct gate_cap {
    char kind;
    int64_t id;
    int cap;
};

/* At start; url: sluice.conf's `state` ("": the count stays on this host). 0, or -1 (logged). */
int gate_redis_start(const char *url);
/* Is the count across hosts on? */
int gate_redis_on(void);
/* Takes a place in each of caps[0..n) under a new lease (written to lease, at
 * least 48 bytes). 0 taken (and renewed until released); 1 + i: caps[i] is full
 * across hosts, nothing taken; -1: the store did not answer, nothing taken. */
int gate_redis_take(const struct gate_cap *caps, int n, char *lease, size_t lease_n);
/* The lease is no longer renewed, and ends by itself (no Redis call). */
void gate_redis_abandon(const struct gate_cap *caps, int n, const char *lease);
/* Gives the lease's places back; tells the other hosts when somebody was refused one. */
void gate_redis_release(const struct gate_cap *caps, int n, const char *lease);

/* The news of a release: "gate r:ID e:ID q:ID". Writes it for caps[0..n); the length, 0 when it does not fit. */
size_t gate_news_format(const struct gate_cap *caps, int n, char *out, size_t size);
/* Reads a news text of n bytes into caps (kind and id; at most max): how many, 0
 * when it is not this news (other listeners' messages share the channel) or is bad. */
int gate_news_parse(const char *msg, size_t n, struct gate_cap *caps, int max);

#endif
