/* errors.c: the error code table and the OpenAI error body (R-API-2). */
#include "errors.h"

#include <string.h>

const struct error_def error_table[ERR_COUNT] = {
#define ERROR_ROW(id, code, status, type, no_retry, retry_after, meaning) \
    [ERR_##id] = {code, status, type, no_retry, retry_after, meaning},
#include "errors.def"
#undef ERROR_ROW
};
const int error_table_len = ERR_COUNT;

const struct error_def *errors_find(const char *code)
{
    for (int i = 0; i < error_table_len; i++)
        if (strcmp(error_table[i].code, code) == 0)
            return &error_table[i];
    return &error_table[ERR_INTERNAL_ERROR];
}

int errors_body(struct buf *out, const struct error_def *e, const char *message, const char *param)
{
    if (!message)
        message = e->meaning;
    int rc = buf_puts(out, "{\"error\":{\"message\":");
    rc |= buf_json_str(out, message, strlen(message));
    rc |= buf_puts(out, ",\"type\":");
    rc |= buf_json_str(out, e->type, strlen(e->type));
    rc |= buf_puts(out, ",\"param\":");
    rc |= param ? buf_json_str(out, param, strlen(param)) : buf_puts(out, "null");
    rc |= buf_puts(out, ",\"code\":");
    rc |= buf_json_str(out, e->code, strlen(e->code));
    rc |= buf_puts(out, "}}");
    return rc ? -1 : 0;
}
