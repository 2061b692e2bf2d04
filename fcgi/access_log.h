/* access_log.h: one JSON line per data-plane request (R-OBS-2), written by a
 * thread of its own so the response never waits for the disk. */
#ifndef SLUICE_ACCESS_LOG_H
#define SLUICE_ACCESS_LOG_H

#include "conf.h"
#include "request.h"

int access_log_start(const struct conf *c);   /* 0, or -1 (logged) */
void access_log_write(const struct request *r);
int access_log_move(const char *path);          /* SIGHUP: a new access_log (linelog_move) */
void access_log_reopen(void);                 /* SIGHUP: after logrotate moved the file */
void access_log_stop(void);                   /* writes what is queued */

#endif
