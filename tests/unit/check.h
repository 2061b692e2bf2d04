/* check.h: the smallest table-driven test harness: CHECK(cond, fmt, ...) prints
 * one line per failure with file and line, and check_done() prints
 * "N passed, N failed" and returns the exit status. */
#ifndef SLUICE_CHECK_H
#define SLUICE_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (cond) {                                                            \
            check_passed++;                                                    \
        } else {                                                               \
            check_failed++;                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

#define CHECK_STR(got, want, what)                                             \
    CHECK((got) && strcmp((got), (want)) == 0, "%s: expected \"%s\", got \"%s\"", \
          (what), (want), (got) ? (got) : "(null)")

#define CHECK_INT(got, want, what)                                             \
    CHECK((long long)(got) == (long long)(want), "%s: expected %lld, got %lld", \
          (what), (long long)(want), (long long)(got))

static inline int check_done(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
