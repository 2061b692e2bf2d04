/* linelog.h: a file of lines written by a thread of its own (the access log,
 * the trace log). A request thread hands over a finished line (one copy,
 * one short lock); the writer appends whatever has come with writev every
 * 100 ms or sooner in a burst. A full queue drops the line and counts it: a
 * slow disk must never slow the answers down. */
#ifndef SLUICE_LINELOG_H
#define SLUICE_LINELOG_H

#include "metrics.h"
#include "shm.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct linelog_line;

/* One file; owned by its module, lives from linelog_open to linelog_close. */
struct linelog {
    const char *what;             /* "access log", "trace log": names it in messages */
    enum metric_id dropped_metric;
    char path[512];
    int fd;                       /* -1: not open (then every put is a no-op) */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct linelog_line *head, *tail;
    int len, stop;
    _Atomic uint64_t dropped;     /* since the writer last said so */
    pthread_t thread;
};

/* Opens path (appending) and starts the writer; 0, or -1 (logged). */
int linelog_open(struct linelog *l, const char *what, const char *path, enum metric_id dropped_metric);
/* Queues a copy of text (one or more whole lines). */
void linelog_put(struct linelog *l, struct shm *shm, const char *text, size_t len);
/* SIGHUP: the same path again (logrotate moved the file). */
void linelog_reopen(struct linelog *l);
/* SIGHUP with a new path: the log is written there from now on. -1 (nothing
 * changed) when the file cannot be opened, or the log is off or would be turned
 * off (its writer starts and stops with the process). */
int linelog_move(struct linelog *l, const char *path);
/* Writes what is queued and stops the writer. */
void linelog_close(struct linelog *l);

static inline int linelog_on(const struct linelog *l) { return l->fd >= 0; }

#endif
