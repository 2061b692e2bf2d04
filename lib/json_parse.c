/* json_parse.c: json-c parsing with one tokener per thread (see json_parse.h). */
#include "json_parse.h"

#include <limits.h>

enum { KEEP_MAX = 1 << 20 };    /* a larger input may have grown the tokener's buffer as large */

static _Thread_local struct json_tokener *tl_tok;

struct json_object *json_parse(const char *s, size_t n, int flags, size_t *end)
{
    if (n > INT_MAX)
        return NULL;
    if (!tl_tok && !(tl_tok = json_tokener_new()))
        return NULL;
    json_tokener_reset(tl_tok);
    json_tokener_set_flags(tl_tok, flags);
    struct json_object *o = json_tokener_parse_ex(tl_tok, s, (int)n);
    int ok = json_tokener_get_error(tl_tok) == json_tokener_success;
    if (!ok) {
        json_object_put(o);
        o = NULL;
    }
    if (end)
        *end = json_tokener_get_parse_end(tl_tok);
    /* json_tokener_reset leaves a half-read \u escape (a high surrogate) of a
     * parse that stopped inside one: the next caller's text would pair with it.
     * And its string buffer keeps the size of the largest string it read
     * (handle() frees any worker buffer over 1 MiB). A fresh one then. */
    if (!ok || n > KEEP_MAX)
        json_parse_thread_end();
    return o;
}

void json_parse_thread_end(void)
{
    if (tl_tok)
        json_tokener_free(tl_tok);
    tl_tok = NULL;
}
