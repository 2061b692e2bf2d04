/* test_pathcheck.c: pass-through path, header value and identifier validation (fcgi/pathcheck.h, R-SEC-3, R-SEC-4). */
#include "check.h"

#include "pathcheck.h"

#include <string.h>

#define OK PATH_OK
#define BAD PATH_INVALID
#define NOEP PATH_NO_ENDPOINT

static const struct {
    const char *uri;
    size_t cap;             /* endpoint buffer size; 0 = 64 */
    enum pathcheck_result want;
    const char *endpoint;   /* when want == OK */
    const char *rest;       /* when want == OK */
} paths[] = {
    {"/api/v1/proxy/ep/v1/models", 0, OK, "ep", "/v1/models"},
    {"/api/v1/proxy/ep/v1/models?limit=2&after=x", 0, OK, "ep", "/v1/models?limit=2&after=x"},
    {"/api/v1/proxy/vllm-a_1.local/health", 0, OK, "vllm-a_1.local", "/health"},
    {"/api/v1/proxy/ep/", 0, OK, "ep", "/"},
    {"/api/v1/proxy/ep/?q=1", 0, OK, "ep", "/?q=1"},
    {"/api/v1/proxy/ep/a%20b/c", 0, OK, "ep", "/a%20b/c"},
    {"/api/v1/proxy/ep/v1/files/file-abc%3Ax", 0, OK, "ep", "/v1/files/file-abc%3Ax"},
    /* "..." and dotted names are ordinary segments */
    {"/api/v1/proxy/ep/.../x", 0, OK, "ep", "/.../x"},
    {"/api/v1/proxy/ep/a/...", 0, OK, "ep", "/a/..."},
    {"/api/v1/proxy/ep/..a/b..", 0, OK, "ep", "/..a/b.."},
    {"/api/v1/proxy/ep/.well-known/x", 0, OK, "ep", "/.well-known/x"},
    {"/api/v1/proxy/ep/a/%2e%2e%2e", 0, BAD, NULL, NULL},      /* an escaped dot is refused outright */
    /* R-SEC-3: double encoding and escapes a normalising server would act on */
    {"/api/v1/proxy/ep/%252e%252e/x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/a/%252e%252e%252fsecret", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/..%3f/x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/a%3fb", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/a%23b", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/v1%2Fmodels", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x.%2e/y", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x?q=%25", 0, OK, "ep", "/x?q=%25"},
    {"/api/v1/proxy/ep/..;x/secret", 0, BAD, NULL, NULL},       /* a path parameter after a dot segment */
    {"/api/v1/proxy/ep/a/..;/b", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/a;v=1/b", 0, OK, "ep", "/a;v=1/b"},
    {"/api/v1/proxy/ep/%c0%ae%c0%ae/x", 0, BAD, NULL, NULL},    /* overlong '.' */
    {"/api/v1/proxy/ep/caf%C3%A9", 0, OK, "ep", "/caf%C3%A9"},
    {"/api/v1/proxy/ep/bad%ff", 0, BAD, NULL, NULL},         /* the query is the upstream's business */
    /* the query is not a path: "..", "/" and "\" encoded there are fine */
    {"/api/v1/proxy/ep/x?a=../b", 0, OK, "ep", "/x?a=../b"},
    {"/api/v1/proxy/ep/x?p=..", 0, OK, "ep", "/x?p=.."},
    {"/api/v1/proxy/ep/x?p=%2F..%2Fetc", 0, OK, "ep", "/x?p=%2F..%2Fetc"},
    {"/api/v1/proxy/ep/x?a=b?c", 0, OK, "ep", "/x?a=b?c"},
    /* UTF-8 bytes are not control bytes */
    {"/api/v1/proxy/ep/caf\xc3\xa9", 0, OK, "ep", "/caf\xc3\xa9"},

    /* R-SEC-3: dot segments, raw and percent-encoded */
    {"/api/v1/proxy/ep/../x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/a/../../x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/a/..", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/..", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/..?x=1", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/%2e%2e/x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/%2E%2E/x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/%2E./x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/.%2e/x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/a/%2e%2E", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/./x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/a/.", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/%2e/x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/a/./b", 0, BAD, NULL, NULL},
    /* R-SEC-3: encoded CR/LF and other control bytes */
    {"/api/v1/proxy/ep/x%0d%0aHost:%20evil", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x%0D%0A", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x%0a", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x%00", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x%09", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x%7f", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x?q=%0d%0a", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x\r\nHost: evil", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x\ny", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x\ty", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x\x01y", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x\x7fy", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x y", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x?a=\x1b", 0, BAD, NULL, NULL},
    /* malformed percent escapes */
    {"/api/v1/proxy/ep/x%", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x%2", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x%zz", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x%g1", 0, BAD, NULL, NULL},
    /* encoded separators in the path */
    {"/api/v1/proxy/ep/a%2fb", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/a%2Fb", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/..%2f..%2fetc", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/a%5cb", 0, BAD, NULL, NULL},
    /* backslashes, raw */
    {"/api/v1/proxy/ep/a\\b", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/..\\x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x?a=\\", 0, BAD, NULL, NULL},
    /* fragments */
    {"/api/v1/proxy/ep/x#frag", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/ep/x?a=1#frag", 0, BAD, NULL, NULL},
    /* the endpoint name itself */
    {"/api/v1/proxy/e%70/x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/e\\p/x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/e p/x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/e\rp/x", 0, BAD, NULL, NULL},
    {"/api/v1/proxy/e\x7fp/x", 0, BAD, NULL, NULL},
    /* endpoint name too long for the caller's buffer (cap includes the NUL) */
    {"/api/v1/proxy/abcdefgh/x", 8, BAD, NULL, NULL},
    {"/api/v1/proxy/abcdefg/x", 8, OK, "abcdefg", "/x"},
    {"/api/v1/proxy/abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmn/x", 0, BAD, NULL, NULL},
    /* no endpoint */
    {"/api/v1/proxy/ep", 0, NOEP, NULL, NULL},
    {"/api/v1/proxy/ep?x=/y", 0, NOEP, NULL, NULL},
    {"/api/v1/proxy//x", 0, NOEP, NULL, NULL},
    {"/api/v1/proxy/", 0, NOEP, NULL, NULL},
    /* not the proxy prefix at all */
    {"/api/v1/proxyep/x", 0, BAD, NULL, NULL},
    {"/v1/models", 0, BAD, NULL, NULL},
    {"", 0, BAD, NULL, NULL},
};

static const struct {
    const char *v;
    size_t max;
    int want;
} headers[] = {
    {"application/json", 64, 1},
    {"", 64, 1},
    {"a b\tc", 64, 1},              /* tabs and spaces are fine in header values */
    {"caf\xc3\xa9", 64, 1},
    {"bad\r\nX-Evil: 1", 64, 0},    /* R-SEC-4 */
    {"bad\rvalue", 64, 0},
    {"bad\nvalue", 64, 0},
    {"trailing\r", 64, 0},
    {"\n", 64, 0},
    {"12345678", 8, 1},             /* exactly max */
    {"123456789", 8, 0},            /* over max */
    {"x", 0, 0},
    {"", 0, 1},
};

static const struct {
    const char *v;
    size_t max;
    int want;
} ids[] = {
    {"req_01HXYZ-abc.123", 64, 1},
    {"a", 64, 1},
    {"~!#$%&'()*+,-./:;<=>?@[]^_`{|}", 64, 1},
    {"", 64, 0},                    /* empty */
    {"has space", 64, 0},
    {" lead", 64, 0},
    {"has\"quote", 64, 0},
    {"\"", 64, 0},
    {"back\\slash", 64, 0},
    {"tab\there", 64, 0},
    {"cr\r", 64, 0},
    {"lf\n", 64, 0},
    {"del\x7f", 64, 0},
    {"caf\xc3\xa9", 64, 0},         /* non-ASCII */
    {"12345678", 8, 1},             /* exactly max */
    {"123456789", 8, 0},            /* over max (R-SEC-4: length-capped) */
    {"x", 0, 0},
};

int main(void)
{
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char endpoint[80];
        size_t cap = paths[i].cap ? paths[i].cap : 64;
        const char *rest = NULL;
        memset(endpoint, 'Z', sizeof endpoint);
        enum pathcheck_result r = pathcheck_proxy(paths[i].uri, endpoint, cap, &rest);
        CHECK(r == paths[i].want, "case %zu \"%s\": got %d, want %d", i, paths[i].uri, (int)r,
              (int)paths[i].want);
        /* never writes past cap */
        CHECK(endpoint[cap] == 'Z', "case %zu: endpoint written past cap", i);
        if (r == PATH_OK && paths[i].want == PATH_OK) {
            const char *ep = endpoint;
            CHECK_STR(ep, paths[i].endpoint, paths[i].uri);
            CHECK_STR(rest, paths[i].rest, paths[i].uri);
            CHECK(rest && rest[0] == '/', "case %zu: rest does not begin with /", i);
        }
    }

    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++)
        CHECK(pathcheck_header_ok(headers[i].v, headers[i].max) == headers[i].want,
              "header case %zu (max %zu): want %d", i, headers[i].max, headers[i].want);

    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        CHECK(pathcheck_id_ok(ids[i].v, ids[i].max) == ids[i].want, "id case %zu \"%s\" (max %zu): want %d",
              i, ids[i].v, ids[i].max, ids[i].want);

    return check_done();
}
