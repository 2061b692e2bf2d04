/* errors.h: every error sluice itself produces, as OpenAI-style bodies (R-API-2). */
#ifndef SLUICE_ERRORS_H
#define SLUICE_ERRORS_H

#include "buf.h"

/* One row per code; the README's error table is this table. */
struct error_def {
    const char *code;
    int status;
    const char *type;
    int no_retry;           /* send x-should-retry: false (retrying cannot help) */
    int retry_after;        /* send Retry-After (seconds from configuration) */
    const char *meaning;
};

extern const struct error_def error_table[];
extern const int error_table_len;

/* The row for code, or the internal_error row when unknown. */
const struct error_def *errors_find(const char *code);

/* {"error":{"message":..,"type":..,"param":..|null,"code":..}} appended to out. */
int errors_body(struct buf *out, const struct error_def *e, const char *message, const char *param);

#endif
