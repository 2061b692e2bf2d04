/* log.h: one diagnostic logging function for every sluice program. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Where diagnostics go; NULL or "-" means stderr. Call once at start-up. */
int log_open(const char *path, const char *program);
void log_set_level(enum log_level level);
/* Reopens the file log_open named (SIGHUP after logrotate moved it); 0 or -1. */
int log_reopen(void);

/* Writes "<time> [pid] LEVEL file:line: message" as one write(2), so lines
 * from many processes sharing the file never interleave. */
void log_write(enum log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define log_error(...) log_write(LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__)
#define log_warn(...) log_write(LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define log_info(...) log_write(LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...) log_write(LOG_DEBUG, __FILE__, __LINE__, __VA_ARGS__)

#endif
