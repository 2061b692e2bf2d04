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

const char *errors_anthropic_type(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

int errors_body_anthropic(struct buf *out, const char *type, const char *message)
{
    int rc = buf_puts(out, "{\"type\":\"error\",\"error\":{\"type\":");
    rc |= buf_json_str(out, type, strlen(type));
    rc |= buf_puts(out, ",\"message\":");
    rc |= buf_json_str(out, message, strlen(message));
    rc |= buf_puts(out, "}}");
    return rc ? -1 : 0;
}

int errors_body_responses(struct buf *out, const char *code, const char *message, const char *param)
{
    int rc = buf_puts(out, "{\"type\":\"error\",\"code\":");
    rc |= buf_json_str(out, code, strlen(code));
    rc |= buf_puts(out, ",\"message\":");
    rc |= buf_json_str(out, message, strlen(message));
    rc |= buf_puts(out, ",\"param\":");
    rc |= param ? buf_json_str(out, param, strlen(param)) : buf_puts(out, "null");
    rc |= buf_puts(out, "}");
    return rc ? -1 : 0;
}
