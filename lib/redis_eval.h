/* redis_eval.h: atomic scripts on the `state` Redis, for the modules that keep exact
 * pool-wide state there (issue 19): kstate_redis.c (key limits), gate_redis.c (places
 * under replica, endpoint and layer caps) and kv_redis.c (affinity, pins, wakes). What they share lives here once:
 *   - one connection per thread, a short timeout, reconnects with a process-wide
 *     backoff (kstate_backoff_ms), one log line per outage (kstate_outage_note);
 *   - scripts registered at start, loaded at each connect, called by EVALSHA (a
 *     flushed script cache loads them again);
 *   - leases: ZSET members scored by their expiry, re-added by one thread every third
 *     of the lease time while their holder lives, so a host that dies stops renewing
 *     and what it held frees within the lease. */
#ifndef SLUICE_REDIS_EVAL_H
#define SLUICE_REDIS_EVAL_H

#include <stddef.h>

/* url: sluice.conf's `state`. The first call starts the client (later calls only
 * return its result). 0; -1 (logged) for a bad url, or a build without hiredis. */
int redis_eval_start(const char *url);
/* Is the client running in this process? */
int redis_eval_on(void);
/* The settings' state_lease_seconds and state_timeout_ms, as last seen (defaults 10 s, 200 ms). */
void redis_eval_tune(int lease_ms, int timeout_ms);
int redis_eval_lease_ms(void);
int redis_eval_timeout_ms(void);
/* Registers a script (its text lives for ever); its number for redis_eval_call. */
int redis_eval_script(const char *lua);
/* A lease id no other holder on any host has. */
void redis_eval_lease_id(char *out, size_t n);
/* The lease `member` in ZSET `key` is renewed until redis_lease_forget. */
void redis_lease_keep(const char *key, const char *member);
void redis_lease_forget(const char *key, const char *member);
/* Opens this thread's connection now (a wrong address is then in the log at start):
 * 0, or -1 (the outage noted). */
int redis_eval_connect_now(void);
/* The description of the url, without its password, for logs. */
const char *redis_eval_url_text(void);

#ifdef SLUICE_HIREDIS
#include <hiredis/hiredis.h>
/* EVALSHA of script s: the reply (the caller frees it), or NULL when the store did not
 * answer or the script failed (logged once per outage; the outage noted). */
redisReply *redis_eval_call(int s, int nkeys, const char **keys, int nargs, const char **args, int timeout_ms);
/* This thread's connection for plain commands (lib/kv_redis.c), opened unless the
 * backoff says wait: NULL then (the outage noted). */
redisContext *redis_eval_conn(int timeout_ms);
/* What became of a plain command on it: ok 0 drops the connection (the next call
 * opens another) and notes the outage; ok 1 may end one. */
void redis_eval_conn_done(int ok);
/* Did the server close c (a restart, a client timeout) rather than answer slowly?
 * The command never ran: dropped, a new connection may well work. */
int redis_eval_conn_closed(redisContext *c);
#endif

#endif
