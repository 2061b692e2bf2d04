/* test_errors.c: the error code table and errors_body JSON (fcgi/errors.h, R-API-2). */
#include "check.h"

#include "buf.h"
#include "errors.h"

#include <json-c/json.h>
#include <string.h>

/* The types the OpenAI SDKs know; sluice's own errors use only these. */
static const char *const known_types[] = {"invalid_request_error", "permission_error",
                                          "server_error", "authentication_error",
                                          "rate_limit_error", "not_found_error", NULL};

static int type_known(const char *t)
{
    for (int i = 0; known_types[i]; i++)
        if (strcmp(known_types[i], t) == 0)
            return 1;
    return 0;
}

/* Does the code look like an identifier: [a-z0-9_]+, or all upper case
 * [A-Z0-9_]+ as SPEC §12-13 spells the key-limit and idempotency codes? */
static int code_ok(const char *c)
{
    if (!c || !*c)
        return 0;
    int lower = 0, upper = 0;
    for (; *c; c++) {
        lower |= *c >= 'a' && *c <= 'z';
        upper |= *c >= 'A' && *c <= 'Z';
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return 0;
    }
    return !(lower && upper);
}

/* Lookups: each code the rest of sluice uses maps to its own status (R-API-2). */
static const struct {
    const char *code;
    int status;
    const char *type;
    const char *want_code;  /* the row errors_find must return */
} lookups[] = {
    {"invalid_json", 400, "invalid_request_error", "invalid_json"},
    {"missing_field", 400, "invalid_request_error", "missing_field"},
    {"invalid_header", 400, "invalid_request_error", "invalid_header"},  /* R-SEC-4 */
    {"invalid_path", 400, "invalid_request_error", "invalid_path"},      /* R-SEC-3 */
    {"invalid_api_key", 401, "invalid_request_error", "invalid_api_key"},
    {"permission_denied", 403, "permission_error", "permission_denied"},
    {"model_not_found", 404, "invalid_request_error", "model_not_found"},    /* R-RT-6 */
    {"no_backends_available", 503, "server_error", "no_backends_available"}, /* R-RT-6 */
    {"upstream_timeout", 504, "server_error", "upstream_timeout"},
    {"internal_error", 500, "server_error", "internal_error"},
    /* unknown codes fall back to internal_error 500 */
    {"no_such_code", 500, "server_error", "internal_error"},
    {"", 500, "server_error", "internal_error"},
    {"INVALID_JSON", 500, "server_error", "internal_error"},
    {"invalid_json ", 500, "server_error", "internal_error"},
};

/* Bodies: the message as given must come back unchanged after a JSON round trip. */
static const struct {
    const char *code;
    const char *message;    /* NULL: the row's meaning is used */
    const char *param;      /* NULL: "param":null */
} bodies[] = {
    {"invalid_json", "plain message", NULL},
    {"missing_field", "model is required", "model"},
    {"invalid_type", "say \"hi\"", "messages"},
    {"invalid_header", "line one\nline two\r\n", NULL},
    {"invalid_path", "tab\there and back\\slash", "path\"x"},
    {"internal_error", "ctl \x01\x02\x1f\x7f end", NULL},
    {"upstream_error", "utf-8: h\xc3\xa9llo \xe2\x82\xac", "p\n"},
    {"not_found", "", ""},
    {"model_not_found", NULL, NULL},
    {"no_backends_available", "</script><!-- {\"error\":1} -->", NULL},
};

int main(void)
{
    /* Every row: a valid code, an HTTP error status, a known type, a meaning;
     * codes unique. */
    CHECK(error_table_len > 0, "table is empty");
    for (int i = 0; i < error_table_len; i++) {
        const struct error_def *e = &error_table[i];
        CHECK(code_ok(e->code), "row %d: bad code \"%s\"", i, e->code ? e->code : "(null)");
        CHECK(e->status >= 400 && e->status <= 599, "row %d (%s): status %d", i, e->code, e->status);
        CHECK(e->type && type_known(e->type), "row %d (%s): type %s", i, e->code,
              e->type ? e->type : "(null)");
        /* 4xx are the client's fault, 5xx the server's (SDKs classify by status) */
        if (e->status >= 500)
            CHECK(strcmp(e->type, "server_error") == 0, "row %d (%s): 5xx must be server_error", i,
                  e->code);
        else
            CHECK(strcmp(e->type, "server_error") != 0, "row %d (%s): 4xx must not be server_error",
                  i, e->code);
        CHECK(e->meaning && *e->meaning, "row %d (%s): no meaning", i, e->code);
        CHECK(e->no_retry == 0 || e->no_retry == 1, "row %d (%s): no_retry %d", i, e->code, e->no_retry);
        CHECK(e->retry_after == 0 || e->retry_after == 1, "row %d (%s): retry_after %d", i, e->code,
              e->retry_after);
        for (int j = i + 1; j < error_table_len; j++)
            CHECK(strcmp(e->code, error_table[j].code) != 0, "code %s appears at rows %d and %d",
                  e->code, i, j);
        /* errors_find returns this very row */
        CHECK(errors_find(e->code) == e, "errors_find(%s) is not row %d", e->code, i);
    }

    for (size_t i = 0; i < sizeof lookups / sizeof lookups[0]; i++) {
        const struct error_def *e = errors_find(lookups[i].code);
        CHECK(e != NULL, "errors_find(\"%s\") returned NULL", lookups[i].code);
        if (!e)
            continue;
        CHECK_STR(e->code, lookups[i].want_code, lookups[i].code);
        CHECK_INT(e->status, lookups[i].status, lookups[i].code);
        CHECK_STR(e->type, lookups[i].type, lookups[i].code);
    }

    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        const struct error_def *e = errors_find(bodies[i].code);
        const char *want_msg = bodies[i].message ? bodies[i].message : e->meaning;
        struct buf b;
        buf_init(&b, 0);
        CHECK_INT(errors_body(&b, e, bodies[i].message, bodies[i].param), 0, "errors_body rc");
        CHECK(b.data != NULL, "case %zu: empty body", i);
        if (!b.data)
            continue;

        /* the raw text holds no control byte: every one is escaped */
        int raw_ctl = 0;
        for (size_t k = 0; k < b.len; k++)
            if ((unsigned char)b.data[k] < 0x20)
                raw_ctl = 1;
        CHECK(!raw_ctl, "case %zu: raw control byte in %s", i, b.data);

        struct json_tokener *tok = json_tokener_new();
        struct json_object *root = json_tokener_parse_ex(tok, b.data, (int)b.len);
        int parsed = json_tokener_get_error(tok) == json_tokener_success &&
                     json_tokener_get_parse_end(tok) == b.len;
        json_tokener_free(tok);
        CHECK(parsed && root, "case %zu: does not parse: %s", i, b.data);
        if (!parsed || !root) {
            json_object_put(root);
            buf_free(&b);
            continue;
        }
        CHECK_INT(json_object_object_length(root), 1, "top-level key count");
        struct json_object *err = NULL, *v = NULL;
        CHECK(json_object_object_get_ex(root, "error", &err) &&
                  json_object_is_type(err, json_type_object),
              "case %zu: no error object", i);
        if (err) {
            /* exactly the four keys message/type/param/code (R-API-2) */
            CHECK_INT(json_object_object_length(err), 4, "error key count");
            CHECK(json_object_object_get_ex(err, "message", &v) && json_object_is_type(v, json_type_string),
                  "case %zu: message", i);
            if (v) {
                CHECK_INT(json_object_get_string_len(v), strlen(want_msg), "message length");
                CHECK(memcmp(json_object_get_string(v), want_msg, strlen(want_msg)) == 0,
                      "case %zu: message round trip: %s", i, b.data);
            }
            v = NULL;
            CHECK(json_object_object_get_ex(err, "type", &v) && json_object_is_type(v, json_type_string),
                  "case %zu: type", i);
            if (v)
                CHECK_STR(json_object_get_string(v), e->type, "type");
            v = NULL;
            CHECK(json_object_object_get_ex(err, "code", &v) && json_object_is_type(v, json_type_string),
                  "case %zu: code", i);
            if (v)
                CHECK_STR(json_object_get_string(v), e->code, "code");
            v = NULL;
            /* get_ex returns 1 with v == NULL for a JSON null */
            CHECK(json_object_object_get_ex(err, "param", &v), "case %zu: param key missing", i);
            if (bodies[i].param) {
                CHECK(v && json_object_is_type(v, json_type_string), "case %zu: param not a string", i);
                if (v)
                    CHECK_STR(json_object_get_string(v), bodies[i].param, "param");
            } else {
                CHECK(v == NULL, "case %zu: param should be null: %s", i, b.data);
            }
        }
        json_object_put(root);
        buf_free(&b);
    }

    /* the exact text for one case, so the key order is pinned as well */
    {
        struct buf b;
        buf_init(&b, 0);
        errors_body(&b, errors_find("invalid_api_key"), "bad \"key\"\n", NULL);
        CHECK_STR(b.data,
                  "{\"error\":{\"message\":\"bad \\\"key\\\"\\n\",\"type\":\"invalid_request_error\","
                  "\"param\":null,\"code\":\"invalid_api_key\"}}",
                  "exact body");
        buf_free(&b);
    }

    /* a capped buffer that cannot hold the body: -1 */
    {
        struct buf b;
        buf_init(&b, 16);
        CHECK_INT(errors_body(&b, errors_find("internal_error"), "a long enough message", NULL), -1,
                  "errors_body over max");
        buf_free(&b);
    }

    return check_done();
}
