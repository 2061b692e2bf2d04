/* xlate.c: the JSON reading and writing both translation directions share (xlate.h). */
#include "xlate.h"

#include "usage.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- writing a request ----------------------------------------------------- */

void xlate_begin(struct xlate *x, struct buf *out, struct xlate_fail *f)
{
    memset(x, 0, sizeof *x);
    x->out = out;
    x->f = f;
    x->start = out->len;
    f->code = ERR_NONE;
    f->param = NULL;
    f->param_buf[0] = '\0';
    f->message[0] = '\0';
}

int xlate_end(struct xlate *x, int rc)
{
    if (rc == 0 && x->overflow)
        rc = xlate_fail(x, ERR_REQUEST_TOO_LARGE, NULL,
                        "the translated request is larger than the upstream body limit");
    if (rc != 0)
        xlate_rewind(x->out, x->start);
    return rc;
}

int xlate_fail(struct xlate *x, enum error_code code, const char *param, const char *fmt, ...)
{
    va_list ap;
    x->f->code = code;
    x->f->param = param;
    va_start(ap, fmt);
    vsnprintf(x->f->message, sizeof x->f->message, fmt, ap);
    va_end(ap);
    return -1;
}

const char *xlate_path(struct xlate *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->f->param_buf, sizeof x->f->param_buf, fmt, ap);
    va_end(ap);
    return x->f->param_buf;
}

void xlate_put(struct xlate *x, const char *s)
{
    if (buf_puts(x->out, s) != 0)
        x->overflow = 1;
}

void xlate_put_json_str(struct xlate *x, const char *s, size_t n)
{
    if (buf_json_str(x->out, s, n) != 0)
        x->overflow = 1;
}

void xlate_put_str(struct xlate *x, struct json_object *s)
{
    xlate_put_json_str(x, json_object_get_string(s), (size_t)json_object_get_string_len(s));
}

void xlate_put_value(struct xlate *x, struct json_object *v) { xlate_put(x, xlate_compact(v)); }

void xlate_put_model(struct xlate *x, struct json_object *body, const char *model)
{
    struct json_object *m;
    if (model)
        xlate_put_json_str(x, model, strlen(model));
    else if (xlate_get(body, "model", json_type_string, &m) == 1)
        xlate_put_str(x, m);
    else
        xlate_put(x, "\"\"");
}

void xlate_put_sampling(struct xlate *x, struct json_object *temperature, struct json_object *top_p,
                        struct json_object *top_k)
{
    const struct {
        const char *key;
        struct json_object *v;
    } fields[] = {{",\"temperature\":", temperature}, {",\"top_p\":", top_p}, {",\"top_k\":", top_k}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].v) {
            xlate_put(x, fields[i].key);
            xlate_put_value(x, fields[i].v);
        }
}

const char *xlate_compact(struct json_object *v)
{
    return json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* ---- checking caller JSON ---------------------------------------------------- */

int xlate_get(struct json_object *o, const char *key, enum json_type t, struct json_object **v)
{
    if (!json_object_object_get_ex(o, key, v) || !*v)
        return 0;
    return json_object_is_type(*v, t) ? 1 : -1;
}

int xlate_str_is(struct json_object *v, const char *s)
{
    return json_object_is_type(v, json_type_string) && strcmp(json_object_get_string(v), s) == 0;
}

int xlate_is_number(struct json_object *v)
{
    return json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double);
}

int xlate_check_type(struct xlate *x, const char *name, struct json_object *v, enum json_type t, const char *what)
{
    if (json_object_is_type(v, t))
        return 0;
    return xlate_fail(x, ERR_INVALID_TYPE, name, "%s must be %s", name, what);
}

int xlate_check_string(struct xlate *x, const char *name, struct json_object *v)
{
    return xlate_check_type(x, name, v, json_type_string, "a string");
}

int xlate_check_array(struct xlate *x, const char *name, struct json_object *v)
{
    return xlate_check_type(x, name, v, json_type_array, "an array");
}

int xlate_check_object(struct xlate *x, const char *name, struct json_object *v)
{
    return xlate_check_type(x, name, v, json_type_object, "an object");
}

int xlate_check_int(struct xlate *x, const char *name, struct json_object *v)
{
    return xlate_check_type(x, name, v, json_type_int, "an integer");
}

int xlate_check_bool(struct xlate *x, const char *name, struct json_object *v)
{
    return xlate_check_type(x, name, v, json_type_boolean, "a boolean");
}

int xlate_read_fields(struct xlate *x, struct json_object *o, const struct xlate_field *table, size_t n,
                      struct json_object **v, const char **unknown)
{
    json_object_object_foreach(o, key, val) {
        const struct xlate_field *row = NULL;
        for (size_t i = 0; i < n && !row; i++)
            if (strcmp(table[i].name, key) == 0)
                row = &table[i];
        if (!row) {
            *unknown = key;
            return 1;
        }
        if (!val)
            continue;               /* null means absent */
        if (row->check(x, row->name, val) != 0)
            return -1;
        if (row->slot)
            v[row->slot] = val;
    }
    return 0;
}

/* ---- reading upstream JSON --------------------------------------------------- */

/* s as a JSON object; whole: only whitespace may follow it. */
static struct json_object *parse_object(const char *s, size_t len, int whole)
{
    if (!s || len == 0 || len > 0x7fffffff)
        return NULL;
    struct json_tokener *tok = json_tokener_new();
    struct json_object *o = json_tokener_parse_ex(tok, s, (int)len);
    if (json_tokener_get_error(tok) != json_tokener_success) {
        json_object_put(o);
        o = NULL;
    }
    for (size_t i = o && whole ? json_tokener_get_parse_end(tok) : len; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') {
            json_object_put(o);
            o = NULL;
            break;
        }
    json_tokener_free(tok);
    if (o && !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        o = NULL;
    }
    return o;
}

struct json_object *xlate_parse(const char *s, size_t len) { return parse_object(s, len, 1); }

struct json_object *xlate_parse_head(const char *s, size_t len) { return parse_object(s, len, 0); }

struct json_object *xlate_member(struct json_object *o, const char *key, enum json_type t)
{
    struct json_object *v;
    return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, t) ? v : NULL;
}

const char *xlate_member_str(struct json_object *o, const char *key, size_t *len)
{
    struct json_object *v = xlate_member(o, key, json_type_string);
    if (len)
        *len = v ? (size_t)json_object_get_string_len(v) : 0;
    return v ? json_object_get_string(v) : NULL;
}

const char *xlate_member_text(struct json_object *o, const char *key, size_t *len)
{
    const char *s = xlate_member_str(o, key, len);
    return s && *len ? s : NULL;
}

int xlate_member_count(struct json_object *o, const char *key, int64_t *n)
{
    struct json_object *v = xlate_member(o, key, json_type_int);
    if (!v)
        return 0;
    *n = json_object_get_int64(v);
    if (*n < 0)
        *n = 0;
    if (*n > USAGE_COUNT_MAX)
        *n = USAGE_COUNT_MAX;
    return 1;
}

void xlate_rewind(struct buf *out, size_t len)
{
    out->len = len;
    if (out->data)
        out->data[len] = '\0';
}
