/* json_parse.c: json-c parsing with one tokener per thread (see json_parse.h). */
#include "json_parse.h"

#include <limits.h>

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
    if (json_tokener_get_error(tl_tok) != json_tokener_success) {
        json_object_put(o);
        o = NULL;
    }
    if (end)
        *end = json_tokener_get_parse_end(tl_tok);
    return o;
}

void json_parse_thread_end(void)
{
    if (tl_tok)
        json_tokener_free(tl_tok);
    tl_tok = NULL;
}
