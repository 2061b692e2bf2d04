/* log.c: diagnostics as whole lines with time, PID, file and line. */
#include "log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int log_fd = 2;
static enum log_level log_max = LOG_INFO;
static char log_program[32] = "sluice";
static char log_path[512];

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

void log_set_level(enum log_level level) { log_max = level; }

void log_write(enum log_level level, const char *file, int line, const char *fmt, ...)
{
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    if (level > log_max)
        return;
    char buf[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    const char *base = strrchr(file, '/');
    int n = snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%d] %s %s:%d: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, log_program, (int)getpid(),
                     names[level], base ? base + 1 : file, line);
    if (n < 0 || (size_t)n >= sizeof buf)
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
    buf[len++] = '\n';
    ssize_t w = write(log_fd, buf, len);
    (void)w;
}
