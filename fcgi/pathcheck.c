/* pathcheck.c: the pass-through path can only name a path under the replica. */
#include "pathcheck.h"

#include "buf.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PROXY_PREFIX "/api/v1/proxy/"

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Is segment [s, e) "." or ".." once percent-decoded? A ';' ends the part
 * that counts: servers that take path parameters read "..;x" as "..". */
static int dot_segment(const char *s, const char *e)
{
    int dots = 0;
    const char *semi = memchr(s, ';', (size_t)(e - s));
    if (semi)
        e = semi;
    while (s < e) {
        if (*s == '.') {
            s++;
        } else if (*s == '%' && e - s >= 3 && s[1] == '2' && (s[2] == 'e' || s[2] == 'E')) {
            s += 3;
        } else {
            return 0;
        }
        dots++;
    }
    return dots == 1 || dots == 2;
}

/* The path part, percent-decoded once, is well-formed UTF-8: an overlong form
 * such as %c0%ae (a '.' to a lenient decoder) is refused. */
static int path_utf8(const char *path)
{
    size_t n = strcspn(path, "?");
    unsigned char *d = malloc(n + 1);
    if (!d)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (path[i] == '%' && i + 2 < n + 1 && hexval((unsigned char)path[i + 1]) >= 0 &&
            hexval((unsigned char)path[i + 2]) >= 0) {
            d[k++] = (unsigned char)(hexval((unsigned char)path[i + 1]) * 16 + hexval((unsigned char)path[i + 2]));
            i += 2;
        } else {
            d[k++] = (unsigned char)path[i];
        }
    }
    int ok = 1;
    for (size_t i = 0, len; ok && i < k; i += len)
        ok = (len = utf8_sequence(d + i, k - i)) > 0;
    free(d);
    return ok;
}

enum pathcheck_result pathcheck_proxy(const char *uri, char *endpoint, size_t cap, const char **rest)
{
    size_t plen = strlen(PROXY_PREFIX);
    if (strncmp(uri, PROXY_PREFIX, plen) != 0)
        return PATH_INVALID;
    const char *name = uri + plen;
    const char *slash = strchr(name, '/');
    const char *q = strchr(name, '?');
    if (!slash || (q && q < slash) || slash == name)
        return PATH_NO_ENDPOINT;
    size_t n = (size_t)(slash - name);
    if (n >= cap)
        return PATH_INVALID;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= 0x20 || c == 0x7f || c == '%' || c == '\\')
            return PATH_INVALID;
    }
    memcpy(endpoint, name, n);
    endpoint[n] = '\0';
    /* Scan the remainder: segments of the path, then the query. */
    const char *p = slash;
    int in_query = 0;
    const char *seg = p + 1;
    for (; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c == 0x7f || c == '\\' || c == '#' || c == ' ')
            return PATH_INVALID;
        if (c == '%') {
            int hi = hexval((unsigned char)p[1]), lo = hi >= 0 ? hexval((unsigned char)p[2]) : -1;
            if (hi < 0 || lo < 0)
                return PATH_INVALID;
            int v = hi * 16 + lo;
            /* In the path an escape may not stand for anything a server would
             * act on once it decodes: '%' (a second round of decoding), '.',
             * '/', '\\', '?' or '#'. Escapes pass on as written, never
             * decoded here, so what is checked is what the replica gets. */
            if (v < 0x20 || v == 0x7f ||
                (!in_query && (v == '/' || v == '\\' || v == '%' || v == '.' || v == '?' || v == '#')))
                return PATH_INVALID;
        }
        if (!in_query && (c == '/' || c == '?')) {
            if (p > slash && dot_segment(seg, p))
                return PATH_INVALID;
            seg = p + 1;
            if (c == '?')
                in_query = 1;
        }
    }
    if (!in_query && dot_segment(seg, p))
        return PATH_INVALID;
    if (!path_utf8(slash))
        return PATH_INVALID;
    *rest = slash;
    return PATH_OK;
}

int pathcheck_header_ok(const char *v, size_t max)
{
    size_t n = 0;
    for (; v[n]; n++)
        if (v[n] == '\r' || v[n] == '\n' || n >= max)
            return 0;
    return 1;
}

int pathcheck_id_ok(const char *v, size_t max)
{
    size_t n = 0;
    for (; v[n]; n++) {
        unsigned char c = (unsigned char)v[n];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || n >= max)
            return 0;
    }
    return n > 0;
}
