/* idem_owner.h: is the owner of an in-progress Idempotency-Key record still running
 * (R-IDEM-3), when several gateway hosts share the records (issue 19)? A record names
 * its owner by PID, process start time and host (machine id | host name | PID
 * namespace | boot id): the PID means a process only there, in that boot. Pure. */
#ifndef SLUICE_IDEM_OWNER_H
#define SLUICE_IDEM_OWNER_H

#include <stdint.h>

enum idem_owner_at { IDEM_OWNER_HERE, IDEM_OWNER_REBOOTED, IDEM_OWNER_ELSEWHERE };

/* From the record's owner_host and this host's identity. NULL or "": a record
 * from before the host was kept, written here. */
enum idem_owner_at idem_owner_where(const char *owner_host, const char *me);

/* alive_here: the PID check, which means something only here. An owner on another
 * host is taken to run until its record expires, so a request never runs twice. */
int idem_owner_running(enum idem_owner_at where, int alive_here, int64_t expires_at, int64_t now);

#endif
