/* log.h: one diagnostic logging function for every sluice program. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stdint.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Where diagnostics go; NULL or "-" means stderr. Call once at start-up. */
int log_open(const char *path, const char *program);
void log_set_level(enum log_level level);
/* sluice.conf's log_level word ("error", "warn", "info", "debug"); anything else is info. */
enum log_level log_level_of(const char *word);
/* Reopens the file log_open named (SIGHUP after logrotate moved it); 0 or -1. */
int log_reopen(void);
/* SIGHUP with a new log_file: the log is written to path from now on. -1
 * (nothing changed) when it cannot be opened, or the log is standard error or
 * path is not a file ("-", ""): that needs a restart. */
int log_move(const char *path);

/* Writes "<time> [pid] LEVEL file:line: message" as one write(2), so lines
 * from many processes sharing the file never interleave.
 *
 * Repeated errors are collapsed: a WARN or ERROR line identical to one its call
 * site wrote less than a window (1 s) ago (the same text but for a leading
 * "request ID: ") is counted, not written, and "last message repeated N times" follows once the
 * window has passed: before the site's next line, or before any other line
 * written after that. INFO and DEBUG lines are events and always written. */
void log_write(enum log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The window of the collapsing above, in ms; 0 writes every line (tests). */
void log_set_repeat_window_ms(int ms);
/* Writes the "repeated" summaries of the sites whose window has passed (from
 * a thread that wakes up anyway, so a burst's count does not wait for the
 * next line); force: every count, the windows still open too (before exit). */
void log_flush_repeats(int force);

/* One call site's window: the pure decision behind the collapsing. */
struct log_site {
    const char *file;             /* NULL: free slot */
    int line;
    uint64_t text_hash;           /* the message without its "request ID: " prefix */
    enum log_level level;
    const char *fmt;              /* the template, named in the summary */
    int open;                     /* a window has started */
    int64_t window_start_ms;
    uint32_t suppressed;          /* lines counted, not written, since the last summary */
};
/* 1: write this line, after a summary of *repeated lines when that is > 0;
 * 0: count it (the site wrote a line less than window_ms ago). */
int log_site_admit(struct log_site *s, int64_t now_ms, int64_t window_ms, uint32_t *repeated);

#define log_error(...) log_write(LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__)
#define log_warn(...) log_write(LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define log_info(...) log_write(LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...) log_write(LOG_DEBUG, __FILE__, __LINE__, __VA_ARGS__)

#endif
