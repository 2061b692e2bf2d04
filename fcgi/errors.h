/* errors.h: every error sluice itself produces, as OpenAI-style bodies (R-API-2). */
#ifndef SLUICE_ERRORS_H
#define SLUICE_ERRORS_H

#include "buf.h"

/* One enumerator per row of errors.def: reply_error(r, ERR_NO_BACKENDS_AVAILABLE, ...)
 * does not compile with a misspelt code. */
enum error_code {
#define ERROR_ROW(id, code, status, type, no_retry, retry_after, meaning) ERR_##id,
#include "errors.def"
#undef ERROR_ROW
    ERR_COUNT
};
/* "no error" where a decision returns one or none. */
#define ERR_NONE ERR_COUNT

struct error_def {
    const char *code;
    int status;
    const char *type;
    int no_retry;           /* send x-should-retry: false (retrying cannot help) */
    int retry_after;        /* send Retry-After (seconds from configuration) */
    const char *meaning;
};

/* Indexed by enum error_code. */
extern const struct error_def error_table[ERR_COUNT];
extern const int error_table_len;

static inline const struct error_def *errors_get(enum error_code c)
{
    return &error_table[(unsigned)c < ERR_COUNT ? c : ERR_INTERNAL_ERROR];
}

/* The row whose code is the string, or the internal_error row when unknown
 * (for codes read back from outside, e.g. tests and records). */
const struct error_def *errors_find(const char *code);

/* {"error":{"message":..,"type":..,"param":..|null,"code":..}} appended to out. */
int errors_body(struct buf *out, const struct error_def *e, const char *message, const char *param);

/* R-ANT-6: the Anthropic error type the Anthropic SDKs expect for an HTTP
 * status (401 authentication_error, 429 rate_limit_error, 529 and 503
 * overloaded_error, other 5xx api_error, ...). */
const char *errors_anthropic_type(int status);
/* R-API-8: the Responses API's stream error event data,
 * {"type":"error","code":..,"message":..,"param":..|null}, appended to out. */
int errors_body_responses(struct buf *out, const char *code, const char *message, const char *param);
/* {"type":"error","error":{"type":..,"message":..}} appended to out. */
int errors_body_anthropic(struct buf *out, const char *type, const char *message);

#endif
