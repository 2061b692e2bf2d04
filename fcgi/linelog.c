/* linelog.c: a file of lines with a writer thread of its own (linelog.h). */
#include "linelog.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define LL_QUEUE_MAX 16384        /* lines waiting; past this they are dropped */
#define LL_WAKE_AT 1024           /* a burst wakes the writer before its pause ends */
#define LL_PAUSE_MS 100           /* otherwise it writes what came every 100 ms */
#define LL_IOV 256

struct linelog_line {
    struct linelog_line *next;
    size_t len;
    char text[];
};

void linelog_put(struct linelog *l, struct shm *shm, const char *text, size_t len)
{
    if (l->fd < 0 || len == 0)
        return;
    struct linelog_line *line = malloc(sizeof *line + len);
    if (line) {
        line->next = NULL;
        line->len = len;
        memcpy(line->text, text, len);
        pthread_mutex_lock(&l->lock);
        if (l->len < LL_QUEUE_MAX && !l->stop) {
            if (l->tail)
                l->tail->next = line;
            else
                l->head = line;
            l->tail = line;
            if (++l->len == LL_WAKE_AT)
                pthread_cond_signal(&l->cond);
            pthread_mutex_unlock(&l->lock);
            return;
        }
        pthread_mutex_unlock(&l->lock);
        free(line);
    }
    atomic_fetch_add(&l->dropped, 1);
    metrics_add(shm, l->dropped_metric, "", 1);
}

/* Appends the lines with as few writes as there are LL_IOV-line groups; with
 * O_APPEND each write lands whole, after the other responders' lines. */
static void write_lines(struct linelog *l, struct linelog_line *list)
{
    struct iovec iov[LL_IOV];
    while (list) {
        int n = 0;
        for (; list && n < LL_IOV; list = list->next, n++) {
            iov[n].iov_base = list->text;
            iov[n].iov_len = list->len;
        }
        if (writev(l->fd, iov, n) < 0)
            log_warn("%s %s: %s; %d lines lost (is the disk full?)", l->what, l->path, strerror(errno), n);
    }
}

static void free_lines(struct linelog_line *p)
{
    while (p) {
        struct linelog_line *next = p->next;
        free(p);
        p = next;
    }
}

static void say_dropped(struct linelog *l)
{
    uint64_t n = atomic_exchange(&l->dropped, 0);
    if (n)
        log_warn("%s: %llu lines dropped, the writer's queue (%d lines) was full; %s is on a slow disk?"
                 " (counted in %s)", l->what, (unsigned long long)n, LL_QUEUE_MAX, l->path,
                 metric_get(l->dropped_metric)->name);
}

static void *writer_main(void *arg)
{
    struct linelog *l = arg;
    /* Signals are main's (sigwait): this thread must never take a SIGHUP. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    thread_background();
    for (;;) {
        pthread_mutex_lock(&l->lock);
        if (!l->head && !l->stop) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t ns = ts.tv_nsec + (int64_t)LL_PAUSE_MS * 1000000;
            ts.tv_sec += ns / 1000000000;
            ts.tv_nsec = ns % 1000000000;
            pthread_cond_timedwait(&l->cond, &l->lock, &ts);
        }
        struct linelog_line *list = l->head;
        l->head = l->tail = NULL;
        l->len = 0;
        int stop = l->stop;
        pthread_mutex_unlock(&l->lock);
        write_lines(l, list);
        free_lines(list);
        say_dropped(l);
        if (stop && !list)
            break;
    }
    return NULL;
}

static int open_file(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
}

int linelog_open(struct linelog *l, const char *what, const char *path, enum metric_id dropped_metric)
{
    memset(l, 0, sizeof *l);
    l->fd = -1;
    l->what = what;
    l->dropped_metric = dropped_metric;
    if (!path || !*path)
        return 0;
    str_copy(l->path, sizeof l->path, path);
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->cond, NULL);
    int fd = open_file(l->path);
    if (fd < 0) {
        log_error("cannot open the %s %s: %s (set it to \"\" in sluice.conf to turn it off)", what, l->path,
                  strerror(errno));
        return -1;
    }
    l->fd = fd;
    if (pthread_create(&l->thread, NULL, writer_main, l) != 0) {
        log_error("%s: cannot start its writer thread: %s", what, strerror(errno));
        close(fd);
        l->fd = -1;
        return -1;
    }
    return 0;
}

int linelog_move(struct linelog *l, const char *path)
{
    if (l->fd < 0 || !*path || strlen(path) >= sizeof l->path)
        return -1;
    /* The new file first: one that cannot be opened leaves the log where it is
     * (and the change is reported as needing a restart, not as done). */
    int fd = open_file(path);
    if (fd < 0) {
        log_error("SIGHUP: cannot open the new %s %s: %s", l->what, path, strerror(errno));
        return -1;
    }
    int rc = dup3(fd, l->fd, O_CLOEXEC);
    close(fd);
    if (rc < 0)
        return -1;
    pthread_mutex_lock(&l->lock);
    str_copy(l->path, sizeof l->path, path);
    pthread_mutex_unlock(&l->lock);
    return 0;
}

void linelog_reopen(struct linelog *l)
{
    if (l->fd < 0)
        return;
    int fd = open_file(l->path);
    if (fd < 0) {
        log_error("SIGHUP: cannot reopen the %s %s: %s; still writing to the old file", l->what, l->path,
                  strerror(errno));
        return;
    }
    /* As log_reopen: the writer's descriptor now names the new file, and a
     * writev in flight finishes in the old one. */
    if (dup3(fd, l->fd, O_CLOEXEC) < 0)
        log_error("SIGHUP: cannot reopen the %s %s: %s", l->what, l->path, strerror(errno));
    close(fd);
}

void linelog_close(struct linelog *l)
{
    if (l->fd < 0)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = 1;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);
    /* The descriptor stays open: a late request's put after this is dropped, never a write to a closed fd. */
}
