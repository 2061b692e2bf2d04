/* api_usage.c: GET /api/v1/tenant/usage — reports from the daily aggregates: members see
 * their own, admins their tenant, the operator everything (R-USE-6, R-USE-7); as JSON or,
 * with format=csv, as a download of the same rows (issue 16). */
#include "api.h"

#include "buf.h"

#include <stdlib.h>
#include <string.h>

/* One CSV cell (RFC 4180): quoted when it holds a comma, quote or line break. A text
 * that a spreadsheet would run as a formula (= + - @ first) gets a leading ' so a
 * model or key name cannot become one. null is an empty cell. */
static void csv_cell(struct buf *b, struct json_object *v)
{
    if (!v)
        return;
    if (!json_object_is_type(v, json_type_string)) {
        buf_puts(b, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
        return;
    }
    const char *s = json_object_get_string(v);
    int formula = s[0] && strchr("=+-@\t\r", s[0]) != NULL;
    if (!formula && !strpbrk(s, ",\"\r\n")) {
        buf_puts(b, s);
        return;
    }
    buf_puts(b, "\"");
    if (formula)
        buf_puts(b, "'");
    for (const char *p = s; *p; p++) {
        buf_append(b, p, 1);
        if (*p == '"')
            buf_append(b, "\"", 1);
    }
    buf_puts(b, "\"");
}

/* The report's rows as text/csv: a header line of the JSON rows' members, then a line each. */
static void usage_csv(struct api_ctx *c, struct json_object *res, const char *group)
{
    struct json_object *cols = NULL, *rows = NULL;
    json_object_object_get_ex(res, "columns", &cols);
    json_object_object_get_ex(res, "rows", &rows);
    struct buf b;
    buf_init(&b, 0);
    size_t nc = cols ? json_object_array_length(cols) : 0;
    for (size_t i = 0; i < nc; i++) {
        if (i)
            buf_puts(&b, ",");
        csv_cell(&b, json_object_array_get_idx(cols, i));
    }
    buf_puts(&b, "\r\n");
    for (size_t r = 0; rows && r < json_object_array_length(rows); r++) {
        struct json_object *row = json_object_array_get_idx(rows, r);
        for (size_t i = 0; i < nc; i++) {
            if (i)
                buf_puts(&b, ",");
            csv_cell(&b, json_object_object_get(row, json_object_get_string(json_object_array_get_idx(cols, i))));
        }
        buf_puts(&b, "\r\n");
    }
    c->text = b.data ? b.data : strdup("");
    if (!c->text)
        abort();
    c->text_len = b.len;
    c->text_type = "text/csv; charset=utf-8";
    c->status = 200;
    api_header(c, "Content-Disposition: attachment; filename=\"usage-by-%s.csv\"", group);
    json_object_put(res);
}

void api_usage(struct api_ctx *c)
{
    char tenant[256], from_buf[16], to_buf[16], group_buf[16], format_buf[8];
    const char *from, *to, *group_by, *format;
    struct ops_list l = {0};
    struct ops_error err;
    ops_error_clear(&err);
    if (api_page(c, &l) != 0 || api_query_str(c, "tenant", tenant, sizeof tenant, &l.tenant) != 0 ||
        api_query_id(c, "tenant_id", &l.tenant_id) != 0 ||
        api_query_id(c, "user_id", &l.user_id) != 0 ||
        api_query_str(c, "from", from_buf, sizeof from_buf, &from) != 0 ||
        api_query_str(c, "to", to_buf, sizeof to_buf, &to) != 0 ||
        api_query_str(c, "group_by", group_buf, sizeof group_buf, &group_by) != 0 ||
        api_query_str(c, "format", format_buf, sizeof format_buf, &format) != 0 ||
        api_scope(c, AUTHZ_USAGE, &l) != 0)
        return;
    if (format && strcmp(format, "json") != 0 && strcmp(format, "csv") != 0) {
        api_error(c, 400, "invalid_value", "format", "format must be json or csv");
        return;
    }
    struct json_object *res = ops_usage(c->db, &l, group_by, from, to, &err);
    if (res && format && strcmp(format, "csv") == 0) {
        struct json_object *g = NULL;
        json_object_object_get_ex(res, "group_by", &g);
        usage_csv(c, res, g ? json_object_get_string(g) : "model");
        return;
    }
    api_list_result(c, res, "rows", &err);
}
