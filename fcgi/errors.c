/* errors.c: the error code table and the OpenAI error body (R-API-2). */
#include "errors.h"

#include <string.h>

/* code, HTTP status, type, x-should-retry:false, Retry-After, meaning */
const struct error_def error_table[] = {
    {"invalid_json", 400, "invalid_request_error", 1, 0, "the request body is not valid JSON"},
    {"missing_field", 400, "invalid_request_error", 1, 0, "a required field is absent (param names it)"},
    {"invalid_type", 400, "invalid_request_error", 1, 0, "a field has the wrong type (param names it)"},
    {"invalid_body", 400, "invalid_request_error", 1, 0, "the body ended before its Content-Length"},
    {"invalid_header", 400, "invalid_request_error", 1, 0, "a header value contains CR/LF or is too long"},
    {"invalid_path", 400, "invalid_request_error", 1, 0, "the pass-through path is not allowed"},
    {"invalid_api_key", 401, "invalid_request_error", 1, 0, "no key, unknown key or revoked key"},
    {"permission_denied", 403, "permission_error", 1, 0, "the key may not use this endpoint or header"},
    {"model_not_found", 404, "invalid_request_error", 1, 0, "no route for this model in the caller's tenant"},
    {"endpoint_not_found", 404, "invalid_request_error", 1, 0, "no such endpoint for /api/v1/proxy"},
    {"not_found", 404, "invalid_request_error", 1, 0, "no such path"},
    {"method_not_allowed", 405, "invalid_request_error", 1, 0, "wrong HTTP method for this path"},
    {"request_too_large", 413, "invalid_request_error", 1, 0, "the body is over limits.max_body_bytes"},
    {"upstream_error", 502, "server_error", 0, 0, "the upstream failed before answering (after the retry)"},
    {"upstream_bad_response", 502, "server_error", 0, 0, "the upstream answer could not be read"},
    {"no_backends_available", 503, "server_error", 0, 1, "the model exists but no replica is healthy"},
    {"shutting_down", 503, "server_error", 0, 1, "the responder is stopping"},
    {"upstream_timeout", 504, "server_error", 0, 0, "no first byte within the endpoint's first-byte timeout"},
    {"upstream_idle_timeout", 504, "server_error", 0, 0, "the upstream stopped sending for longer than the idle timeout"},
    {"IDEMPOTENCY_REQUEST_IN_PROGRESS", 409, "invalid_request_error", 0, 0, "a request with this Idempotency-Key is still running (SDKs retry 409)"},
    {"IDEMPOTENCY_RESULT_NOT_STORED", 409, "invalid_request_error", 1, 0, "the key already succeeded but its response was past the storage budget"},
    {"IDEMPOTENCY_KEY_BODY_MISMATCH", 422, "invalid_request_error", 1, 0, "the Idempotency-Key was used with another body"},
    {"QPS_EXCEEDED", 429, "rate_limit_error", 0, 0, "the key's requests per second (any one-second window)"},
    {"CONCURRENCY_EXCEEDED", 429, "rate_limit_error", 0, 0, "the key's requests in flight across the pool"},
    {"DAILY_LIMIT_EXCEEDED", 429, "rate_limit_error", 1, 0, "the key's calls today (billing time zone)"},
    {"MONTHLY_QUOTA_EXCEEDED", 429, "rate_limit_error", 1, 0, "the key's calls this month"},
    {"TPM_EXCEEDED", 429, "rate_limit_error", 0, 0, "the key's tokens per minute"},
    {"MONTHLY_TOKEN_QUOTA_EXCEEDED", 429, "rate_limit_error", 1, 0, "the key's tokens this month"},
    {"too_many_auth_failures", 429, "rate_limit_error", 0, 0, "too many authentication failures from this address"},
    {"service_waking", 503, "server_error", 0, 1, "the model's replicas are waking up; not ready within the wait (Retry-After wake.retry_after_s)"},
    {"wake_queued_gpu_borrowed", 503, "server_error", 0, 1, "the model sleeps on a node whose GPUs are lent out (Retry-After wake.node_retry_after_s)"},
    {"wake_failed_node_offline", 503, "server_error", 0, 1, "the model sleeps on an offline node, or its wake call failed (Retry-After wake.node_retry_after_s)"},
    {"no_auto_candidates", 503, "server_error", 0, 1, "model auto: no routed model is enabled, healthy and capable"},
    {"no_auto_candidates_for_purpose", 503, "server_error", 0, 1, "model auto: no model serves this kind of request"},
    {"auto_routing_all_failed", 502, "server_error", 0, 0, "model auto: every candidate failed before answering"},
    {"internal_error", 500, "server_error", 0, 0, "a bug or resource failure inside sluice"},
};
const int error_table_len = (int)(sizeof error_table / sizeof error_table[0]);

const struct error_def *errors_find(const char *code)
{
    for (int i = 0; i < error_table_len; i++)
        if (strcmp(error_table[i].code, code) == 0)
            return &error_table[i];
    return errors_find("internal_error");
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
