/* xlate.h: the JSON reading and writing both translation directions share:
 * anthropic*.c (OpenAI chat callers -> Anthropic Messages upstreams) and
 * messages*.c (Anthropic Messages callers -> OpenAI chat upstreams).
 *
 * Pure, like them: plain data in, plain data out, no sockets, no request
 * struct. The request side writes a body through struct xlate (appends that
 * remember an overflow, failures with a parameter path); the answer and
 * stream side reads upstream JSON with the typed member lookups. */
#ifndef SLUICE_XLATE_H
#define SLUICE_XLATE_H

#include "buf.h"
#include "errors.h"

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

/* Why a request could not be translated: the error row, the offending
 * parameter (or NULL) and a message for the client. */
struct xlate_fail {
    enum error_code code;         /* ERR_UNSUPPORTED_PARAMETER, ERR_INVALID_TYPE, ERR_INVALID_VALUE,
                                   * ERR_MISSING_FIELD, ERR_REQUEST_TOO_LARGE */
    const char *param;            /* NULL, a static string, param_buf (a path such as
                                   * "messages[2].content[0].text" or "tools[0].function.strict",
                                   * truncated to fit), or (anthropic_request) an unknown top-level
                                   * key inside the request body (valid while the body lives): copy
                                   * it before f or the body goes away */
    char param_buf[128];
    char message[256];
};

/* ---- writing a request ----------------------------------------------------- */

/* One request translation: where it appends and where a failure goes. */
struct xlate {
    struct buf *out;
    struct xlate_fail *f;
    int overflow;                 /* an append hit out->max */
    size_t start;                 /* out->len when the translation began */
};

/* Starts a translation that appends to out; *f is cleared. */
void xlate_begin(struct xlate *x, struct buf *out, struct xlate_fail *f);

/* Ends it: rc 0 after an overflow becomes ERR_REQUEST_TOO_LARGE (param NULL);
 * on failure out is put back as it was at xlate_begin. 0 or -1. */
int xlate_end(struct xlate *x, int rc);

/* Fills *x->f (param: see struct xlate_fail) and returns -1. */
__attribute__((format(printf, 4, 5))) int xlate_fail(struct xlate *x, enum error_code code, const char *param,
                                                     const char *fmt, ...);

/* A parameter path such as "messages[2].name", kept in f->param_buf, for xlate_fail's param. */
__attribute__((format(printf, 2, 3))) const char *xlate_path(struct xlate *x, const char *fmt, ...);

/* Appends; a failed append (out's max) sets x->overflow. */
void xlate_put(struct xlate *x, const char *s);
void xlate_put_json_str(struct xlate *x, const char *s, size_t n);   /* s (n bytes) as a JSON string literal */
void xlate_put_str(struct xlate *x, struct json_object *s);         /* a json-c string as a JSON string literal */
void xlate_put_value(struct xlate *x, struct json_object *v);       /* any value as xlate_compact writes it */

/* "model": the upstream's name as a JSON string, or (model NULL) the body's
 * own string "model", else "". */
void xlate_put_model(struct xlate *x, struct json_object *body, const char *model);

/* ,"temperature":..,"top_p":..,"top_k":.. for those given (NULL: absent), each value
 * as it came: both protocols name them alike and take the same values. */
void xlate_put_sampling(struct xlate *x, struct json_object *temperature, struct json_object *top_p,
                        struct json_object *top_k);

/* Any value as compact JSON (parsed numbers keep their original spelling);
 * valid while v lives and is not serialised again. */
const char *xlate_compact(struct json_object *v);

/* ---- checking caller JSON ---------------------------------------------------- */

/* o[key] when it has type t: 1; absent or null: 0; another type: -1. */
int xlate_get(struct json_object *o, const char *key, enum json_type t, struct json_object **v);

int xlate_str_is(struct json_object *v, const char *s);     /* v is the string s */
int xlate_is_number(struct json_object *v);                  /* an integer or a double */

/* One top-level field's check: 0, or -1 with *x->f filled. name is the field's. */
typedef int (*xlate_check_fn)(struct xlate *x, const char *name, struct json_object *v);

/* v has type t, else ERR_INVALID_TYPE "<name> must be <what>". */
int xlate_check_type(struct xlate *x, const char *name, struct json_object *v, enum json_type t, const char *what);
int xlate_check_string(struct xlate *x, const char *name, struct json_object *v);
int xlate_check_array(struct xlate *x, const char *name, struct json_object *v);
int xlate_check_object(struct xlate *x, const char *name, struct json_object *v);
int xlate_check_int(struct xlate *x, const char *name, struct json_object *v);
int xlate_check_bool(struct xlate *x, const char *name, struct json_object *v);

/* One row of a translation's table of the top-level fields it knows. */
struct xlate_field {
    const char *name;
    int slot;                     /* where the value is kept, 0 = nowhere (checked only) */
    xlate_check_fn check;
};

/* Every member of o through table (n rows), in order: a null one is skipped
 * (null means absent), any other checked by its row and, when the row has a
 * slot, kept in v[slot]. 0 when every member passed; -1 when a check failed
 * (*x->f filled); 1 with *unknown = the first key table does not have (it
 * lives as long as o; the caller refuses it, nothing after it is read). */
int xlate_read_fields(struct xlate *x, struct json_object *o, const struct xlate_field *table, size_t n,
                      struct json_object **v, const char **unknown);

/* ---- reading upstream JSON --------------------------------------------------- */

/* s (len bytes) as a JSON object with nothing after it but whitespace, or NULL. */
struct json_object *xlate_parse(const char *s, size_t len);

/* A JSON object at the start of s (len bytes), whatever follows it, or NULL. */
struct json_object *xlate_parse_head(const char *s, size_t len);

/* o[key] when o is an object and o[key] has type t, else NULL (o may be NULL). */
struct json_object *xlate_member(struct json_object *o, const char *key, enum json_type t);

/* A string member and its length in *len (len may be NULL; 0 when absent), or NULL. */
const char *xlate_member_str(struct json_object *o, const char *key, size_t *len);

/* A non-empty string member, or NULL. */
const char *xlate_member_text(struct json_object *o, const char *key, size_t *len);

/* A token count when present: 1 with *n (negative counts read as 0, counts over
 * USAGE_COUNT_MAX clamped, so sums and differences of a few never overflow,
 * whatever an upstream sends), else 0 with *n untouched. */
int xlate_member_count(struct json_object *o, const char *key, int64_t *n);

/* out back to its first len bytes (nothing half-written is left behind). */
void xlate_rewind(struct buf *out, size_t len);

#endif
