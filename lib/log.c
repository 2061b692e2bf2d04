/* log.c: diagnostics as whole lines with time, PID, file and line; repeated
 * errors collapsed per call site (log.h). */
#include "log.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int log_fd = 2;
static enum log_level log_max = LOG_INFO;
static char log_program[32] = "sluice";
static char log_path[512];

/* The call sites seen, hashed by file:line. A few dozen sites ever warn in
 * one process; a site that finds no slot takes over the oldest nearby one. */
#define LOG_SITES 64
#define LOG_PROBE 4
#define LOG_SUMMARY_ROOM 320      /* one summary line, at most */
static pthread_mutex_t sites_lock = PTHREAD_MUTEX_INITIALIZER;
static struct log_site sites[LOG_SITES];
static atomic_int sites_pending;  /* sites with a count not yet written: lines skip the lock at 0 */
static atomic_int repeat_window_ms = 1000;

static const char *level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

int log_open(const char *path, const char *program)
{
    if (program)
        snprintf(log_program, sizeof log_program, "%s", program);
    if (!path || !*path || strcmp(path, "-") == 0)
        return 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        return -1;
    log_fd = fd;
    snprintf(log_path, sizeof log_path, "%s", path);
    return 0;
}

int log_reopen(void)
{
    if (!log_path[0])
        return 0;
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        return -1;
    /* dup2 swaps the file under the same descriptor: a thread writing at
     * this moment writes to the old file or the new one, never to a closed fd. */
    dup3(fd, log_fd, O_CLOEXEC);
    close(fd);
    return 0;
}

int log_move(const char *path)
{
    if (!log_path[0] || !*path || strcmp(path, "-") == 0 || strlen(path) >= sizeof log_path)
        return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        return -1;      /* the log stays where it is; the change is reported as not taken */
    int rc = dup3(fd, log_fd, O_CLOEXEC);
    close(fd);
    if (rc < 0)
        return -1;
    snprintf(log_path, sizeof log_path, "%s", path);
    return 0;
}

void log_set_level(enum log_level level) { log_max = level; }

enum log_level log_level_of(const char *word)
{
    return strcmp(word, "error") == 0 ? LOG_ERROR : strcmp(word, "warn") == 0 ? LOG_WARN
         : strcmp(word, "debug") == 0 ? LOG_DEBUG : LOG_INFO;
}

void log_set_repeat_window_ms(int ms) { atomic_store(&repeat_window_ms, ms > 0 ? ms : 0); }

int log_site_admit(struct log_site *s, int64_t now_ms, int64_t window_ms, uint32_t *repeated)
{
    *repeated = 0;
    if (s->open && now_ms - s->window_start_ms < window_ms) {
        s->suppressed++;
        return 0;
    }
    *repeated = s->suppressed;
    s->suppressed = 0;
    s->open = 1;
    s->window_start_ms = now_ms;
    return 1;
}

static int64_t mono_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "<time> program[pid] LEVEL file:line: " into buf; its length, or -1. */
static int line_prefix(char *buf, size_t cap, enum log_level level, const char *file, int line)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    const char *base = strrchr(file, '/');
    int n = snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%d] %s %s:%d: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, log_program, (int)getpid(),
                     level_names[level], base ? base + 1 : file, line);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* Appends the summary of site s (n lines counted) to out; the new length.
 * Under sites_lock. */
static size_t summary_append(char *out, size_t cap, size_t len, const struct log_site *s, uint32_t n)
{
    if (cap - len < LOG_SUMMARY_ROOM)
        return len;
    int p = line_prefix(out + len, LOG_SUMMARY_ROOM, s->level, s->file, s->line);
    if (p < 0)
        return len;
    int m = snprintf(out + len + p, LOG_SUMMARY_ROOM - (size_t)p, "last message repeated %u times (\"%.120s\")\n",
                     n, s->fmt);
    if (m < 0 || (size_t)(p + m) >= LOG_SUMMARY_ROOM)
        return len;
    return len + (size_t)p + (size_t)m;
}

/* Appends the summaries of the sites whose window has passed with a count
 * (as many as fit; the rest wait for the next line); all of them when force.
 * A site still inside its window keeps counting: an INFO line per request
 * must not turn each collapsed error into a summary line. Under sites_lock. */
static size_t take_pending(char *out, size_t cap, size_t len, const struct log_site *except, int force)
{
    int64_t now = mono_now_ms(), window = atomic_load(&repeat_window_ms);
    for (int i = 0; i < LOG_SITES && atomic_load(&sites_pending) > 0; i++) {
        struct log_site *s = &sites[i];
        if (s == except || !s->suppressed || cap - len < LOG_SUMMARY_ROOM ||
            (!force && now - s->window_start_ms < window))
            continue;
        len = summary_append(out, cap, len, s, s->suppressed);
        s->suppressed = 0;
        atomic_fetch_sub(&sites_pending, 1);
    }
    return len;
}

/* The slot of file:line, claiming one (and summing up the site it replaces
 * into out) when it is new. Under sites_lock. */
static struct log_site *site_of(const char *file, int line, uint64_t text_hash, enum log_level level,
                                const char *fmt, char *out, size_t cap, size_t *len)
{
    uintptr_t h = ((uintptr_t)file >> 3) * 31u + (uintptr_t)line + (uintptr_t)text_hash;
    struct log_site *oldest = NULL;
    for (int k = 0; k < LOG_PROBE; k++) {
        struct log_site *s = &sites[(h + (uintptr_t)k) % LOG_SITES];
        if (s->file == file && s->line == line && s->text_hash == text_hash)
            return s;
        if (!s->file) {
            oldest = s;
            break;
        }
        if (!oldest || s->window_start_ms < oldest->window_start_ms)
            oldest = s;
    }
    if (oldest->suppressed) {
        *len = summary_append(out, cap, *len, oldest, oldest->suppressed);
        atomic_fetch_sub(&sites_pending, 1);
    }
    memset(oldest, 0, sizeof *oldest);
    oldest->file = file;
    oldest->line = line;
    oldest->text_hash = text_hash;
    oldest->level = level;
    oldest->fmt = fmt;
    return oldest;
}

/* Decides whether a line of this site is written, and collects the summaries
 * due before it into out (*len). 0: the line is only counted. */
static int admit_line(enum log_level level, const char *file, int line, uint64_t text_hash, const char *fmt,
                      char *out, size_t cap, size_t *len)
{
    int window = atomic_load(&repeat_window_ms);
    int limited = level <= LOG_WARN && window > 0;
    if (!limited && atomic_load(&sites_pending) == 0)
        return 1;                 /* the common INFO line takes no lock */
    pthread_mutex_lock(&sites_lock);
    struct log_site *s = NULL;
    if (limited) {
        s = site_of(file, line, text_hash, level, fmt, out, cap, len);
        uint32_t before = s->suppressed, repeated;
        if (!log_site_admit(s, mono_now_ms(), window, &repeated)) {
            if (!before)
                atomic_fetch_add(&sites_pending, 1);
            pthread_mutex_unlock(&sites_lock);
            return 0;
        }
        if (repeated) {
            *len = summary_append(out, cap, *len, s, repeated);
            atomic_fetch_sub(&sites_pending, 1);
        }
    }
    *len = take_pending(out, cap, *len, s, 0);
    pthread_mutex_unlock(&sites_lock);
    return 1;
}

static void write_all(const char *a, size_t alen, const char *b, size_t blen)
{
    /* One writev: with O_APPEND the summaries and the line land together. */
    struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
    ssize_t w = writev(log_fd, alen ? iov : iov + 1, alen ? 2 : 1);
    (void)w;
}

void log_flush_repeats(int force)
{
    char sums[4 * LOG_SUMMARY_ROOM];
    size_t slen = 0;
    if (atomic_load(&sites_pending) == 0)
        return;
    pthread_mutex_lock(&sites_lock);
    slen = take_pending(sums, sizeof sums, 0, NULL, force);
    pthread_mutex_unlock(&sites_lock);
    if (slen)
        write_all(sums, slen, NULL, 0);
}

/* What makes two lines "identical": their text, less the request id the data
 * plane's lines start with (two requests failing alike are one repeat). */
static uint64_t text_hash_of(const char *msg, size_t n)
{
    if (n > 8 && strncmp(msg, "request ", 8) == 0) {
        const char *colon = memchr(msg + 8, ':', n - 8);
        if (colon && memchr(msg + 8, ' ', (size_t)(colon - msg - 8)) == NULL) {
            n -= (size_t)(colon - msg);
            msg = colon;
        }
    }
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)msg[i]) * 1099511628211ULL;
    return h;
}

void log_write(enum log_level level, const char *file, int line, const char *fmt, ...)
{
    if (level > log_max)
        return;
    char buf[2048];
    int n = line_prefix(buf, sizeof buf, level, file, line);
    if (n < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    char sums[4 * LOG_SUMMARY_ROOM];
    size_t slen = 0;
    if (!admit_line(level, file, line, text_hash_of(buf + n, len - (size_t)n), fmt, sums, sizeof sums, &slen))
        return;
    buf[len++] = '\n';
    write_all(sums, slen, buf, len);
}
