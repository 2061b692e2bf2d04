/* fuzz_pathcheck.c: pass-through path and header checks (fcgi/pathcheck.c, R-SEC-3, R-SEC-4)
 * on client-chosen REQUEST_URIs and header values.
 *
 * Invariants of an accepted pass-through path: the endpoint name is the URI's next
 * segment, non-empty, without blanks, control bytes, '%', '\\', '/' or '?'; the rest
 * is the remainder of the URI and begins with '/'; raw, it holds no control byte,
 * space, backslash or '#'; percent-decoded once (as the upstream reads it) its path
 * holds no control byte, no backslash and no "." or ".." segment, and its query no
 * control byte. Header values and ids are accepted exactly when a plain reference
 * check of the documented rule accepts them. */
#include "fuzz.h"

#include "pathcheck.h"

#define PREFIX "/api/v1/proxy/"

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int bad_byte(unsigned char c) { return c < 0x20 || c == 0x7f; }

/* Percent-decodes s[0..n) into out (n + 1 bytes); -1 on a broken escape. */
static long decode(const char *s, size_t n, char *out)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            out[w++] = s[i];
            continue;
        }
        int hi = i + 1 < n ? hexval((unsigned char)s[i + 1]) : -1, lo = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
        if (hi < 0 || lo < 0)
            return -1;
        out[w++] = (char)(hi * 16 + lo);
        i += 2;
    }
    out[w] = '\0';
    return (long)w;
}

static void check_accepted(const char *uri, const char *endpoint, size_t cap, const char *rest)
{
    size_t plen = strlen(PREFIX), elen = strlen(endpoint);
    FUZZ_CHECK(strncmp(uri, PREFIX, plen) == 0, "accepted without the prefix: %s", uri);
    FUZZ_CHECK(elen > 0 && elen < cap, "endpoint of %zu bytes (cap %zu)", elen, cap);
    FUZZ_CHECK(strncmp(uri + plen, endpoint, elen) == 0, "endpoint %s is not the URI's segment", endpoint);
    for (size_t i = 0; i < elen; i++) {
        unsigned char c = (unsigned char)endpoint[i];
        FUZZ_CHECK(c > 0x20 && c != 0x7f && c != '%' && c != '\\' && c != '/' && c != '?',
                   "endpoint byte 0x%02x", c);
    }
    FUZZ_CHECK(rest == uri + plen + elen, "rest is not the remainder of the URI");
    FUZZ_CHECK(rest[0] == '/', "rest does not begin with '/': %s", rest);
    size_t n = strlen(rest);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)rest[i];
        FUZZ_CHECK(!bad_byte(c) && c != ' ' && c != '\\' && c != '#', "raw byte 0x%02x at %zu of %s", c, i, rest);
    }
    size_t path_len = strcspn(rest, "?");
    char *dec = malloc(n + 1);
    if (!dec)
        abort();
    long d = decode(rest, path_len, dec);
    FUZZ_CHECK(d >= 0, "a broken escape was accepted: %s", rest);
    for (long i = 0; i < d; i++)
        FUZZ_CHECK(!bad_byte((unsigned char)dec[i]) && dec[i] != '\\', "decoded path byte 0x%02x: %s",
                   (unsigned char)dec[i], rest);
    /* Segments of the decoded path: none may be "." or "..". */
    const char *seg = dec, *end = dec + d;
    while (seg <= end) {
        const char *slash = memchr(seg, '/', (size_t)(end - seg));
        const char *e = slash ? slash : end;
        size_t l = (size_t)(e - seg);
        FUZZ_CHECK(!((l == 1 && seg[0] == '.') || (l == 2 && seg[0] == '.' && seg[1] == '.')),
                   "dot segment in accepted path %s (decoded %s)", rest, dec);
        if (!slash)
            break;
        seg = slash + 1;
    }
    if (path_len < n) {
        d = decode(rest + path_len + 1, n - path_len - 1, dec);
        FUZZ_CHECK(d >= 0, "a broken escape in the query was accepted: %s", rest);
        for (long i = 0; i < d; i++)
            FUZZ_CHECK(!bad_byte((unsigned char)dec[i]), "decoded query byte 0x%02x: %s", (unsigned char)dec[i],
                       rest);
    }
    free(dec);
}

static void check_uri(const char *uri, size_t cap)
{
    char *endpoint = malloc(cap);
    if (!endpoint)
        abort();
    const char *rest = NULL;
    enum pathcheck_result r = pathcheck_proxy(uri, endpoint, cap, &rest);
    FUZZ_CHECK(r == PATH_OK || r == PATH_INVALID || r == PATH_NO_ENDPOINT, "result %d", (int)r);
    if (r == PATH_OK)
        check_accepted(uri, endpoint, cap, rest);
    free(endpoint);
}

/* The documented rules, written the plain way. */
static int header_ref(const char *v, size_t max)
{
    size_t n = strlen(v);
    return n <= max && !strchr(v, '\r') && !strchr(v, '\n');
}

static int id_ref(const char *v, size_t max)
{
    size_t n = strlen(v);
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *s = fuzz_cstr(data, size);
    size_t n = strlen(s);
    /* As given (the prefix itself is checked), and under the prefix. */
    char *uri = malloc(strlen(PREFIX) + n + 1);
    if (!uri)
        abort();
    memcpy(uri, PREFIX, strlen(PREFIX));
    memcpy(uri + strlen(PREFIX), s, n + 1);
    static const size_t caps[] = {129, 5, 1};     /* guard's name buffer, a short one, none */
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        check_uri(s, caps[i]);
        check_uri(uri, caps[i]);
    }
    static const size_t maxes[] = {0, 1, 8, 80, 8192};
    for (size_t i = 0; i < sizeof maxes / sizeof maxes[0]; i++) {
        FUZZ_CHECK(pathcheck_header_ok(s, maxes[i]) == header_ref(s, maxes[i]), "header_ok(max %zu) disagrees",
                   maxes[i]);
        FUZZ_CHECK(pathcheck_id_ok(s, maxes[i]) == id_ref(s, maxes[i]), "id_ok(max %zu) disagrees", maxes[i]);
    }
    free(uri);
    free(s);
    return 0;
}
