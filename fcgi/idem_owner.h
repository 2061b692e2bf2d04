/* idem_owner.h: is the owner of an in-progress Idempotency-Key record still running
 * (R-IDEM-3), when several gateway hosts share the records (issue 19)? A record names
 * its owner by PID, process start time and host (machine id | host name | PID
 * namespace | boot id): the PID means a process only there, in that boot. Pure. */
#ifndef SLUICE_IDEM_OWNER_H
#define SLUICE_IDEM_OWNER_H

#include <stdint.h>

enum idem_owner_at { IDEM_OWNER_HERE, IDEM_OWNER_REBOOTED, IDEM_OWNER_ELSEWHERE };

/* From the record's owner_host and this host's identity. A NULL or "" owner is a
 * record from before the host was kept: written here when null_is_here (a database
 * file, one machine), else anywhere. created_ms: the record's; boot_ms: when this
 * host booted (wall clock ms). */
enum idem_owner_at idem_owner_where(const char *owner_host, const char *me, int null_is_here, int64_t created_ms,
                                    int64_t boot_ms);

/* alive_here: the PID check, which means something only here. An owner on another
 * host is taken to run until its record expires, so a request never runs twice. */
int idem_owner_running(enum idem_owner_at where, int alive_here, int64_t expires_at, int64_t now);

#endif
