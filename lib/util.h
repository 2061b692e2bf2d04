/* util.h: time, number parsing, hashing and random tokens shared by every program. */
#ifndef SLUICE_UTIL_H
#define SLUICE_UTIL_H

#include <stddef.h>
#include <stdint.h>

int64_t now_ms(void);          /* wall clock, milliseconds since the epoch */
int64_t mono_ms(void);         /* monotonic clock, milliseconds */
int64_t mono_us(void);         /* monotonic clock, microseconds */

/* Whole-string decimal parse with range check; 0 on success, -1 otherwise. */
int parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/* The calling thread yields to the request threads when the CPUs are busy
 * (nice +5): a usage batch or a log flush then no longer shows in their
 * latency tail. Writers that fall behind are bounded by their queues. */
void thread_background(void);

/* src into dst of cap bytes (cap > 0), cut to fit, always NUL-terminated (NULL copies as ""): the
 * snprintf(dst, cap, "%s", src) of the hot paths without its format parsing. */
void str_copy(char *dst, size_t cap, const char *src);

/* v in decimal at out (no NUL); returns the length (at most 20). The hot
 * paths' formatter: snprintf costs ten times as much per number. */
size_t fmt_i64(char *out, int64_t v);

/* SHA-256 of data as 64 lowercase hex characters plus NUL (out must hold 65). */
void sha256_hex(const void *data, size_t len, char out[65]);

/* n random bytes from the OS as URL-safe characters [A-Za-z0-9] (out holds n+1). */
void random_token(char *out, size_t n);

/* Constant-time equality of two equal-length byte strings (R-SEC-6). */
int ct_equal(const void *a, const void *b, size_t n);

/* Billing day "YYYY-MM-DD" in the process time zone (TZ set at start-up). */
void day_string(int64_t epoch_ms, char out[11]);

#endif
