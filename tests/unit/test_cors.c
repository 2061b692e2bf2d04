/* test_cors.c: which origins may call, and the CORS header lines (fcgi/cors.h, R-API-7). */
#include "check.h"

#include "arena.h"
#include "cors.h"

#include <string.h>
#include <strings.h>

static void test_origins(void)
{
    static const struct { const char *list, *origin; int want; } cases[] = {
        {"", "https://app.example", 0},                                 /* empty: CORS off */
        {NULL, "https://app.example", 0},
        {"*", "https://app.example", 1},
        {"*", "http://127.0.0.1:8080", 1},
        {"https://app.example", "https://app.example", 1},
        {"https://app.example", "HTTPS://APP.EXAMPLE", 1},              /* ASCII case aside */
        {"https://app.example", "https://app.example.evil", 0},         /* no prefix match */
        {"https://app.example", "https://evil.app.example", 0},
        {"https://app.example", "http://app.example", 0},               /* scheme counts */
        {"https://app.example", "https://app.example:8443", 0},         /* port counts */
        {"https://a.example, https://b.example", "https://b.example", 1},
        {"https://a.example,https://b.example", "https://a.example", 1},
        {"https://a.example https://b.example", "https://b.example", 1},
        {"https://app.example/", "https://app.example", 1},             /* copied with a slash */
        {"*", "null", 0},                                               /* sandboxed pages */
        {"null", "null", 0},
        {"*", "https://app.example\r\nX-Evil: 1", 0},                   /* nothing a header could smuggle */
        {"*", "https://app example", 0},
        {"*", "", 0},
        {"*", "https://", 0},
        {"https://app.example", NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(cors_origin_allowed(cases[i].list, cases[i].origin) == cases[i].want, "case %zu: %s in [%s]", i,
              cases[i].origin ? cases[i].origin : "(null)", cases[i].list ? cases[i].list : "(null)");
}

/* Is name (case-insensitively) an element of the comma list in the header line? */
static int listed(const char *lines, const char *header, const char *name)
{
    const char *h = strcasestr(lines, header);
    if (!h)
        return 0;
    h += strlen(header);
    const char *end = strstr(h, "\r\n");
    size_t n = strlen(name);
    for (const char *p = h; p && p < end;) {
        p += strspn(p, " ,");
        size_t k = strcspn(p, ",\r");
        if (k == n && strncasecmp(p, name, n) == 0)
            return 1;
        p += k;
    }
    return 0;
}

static void test_preflight(void)
{
    struct arena a;
    arena_init(&a);
    const char *h = cors_preflight_headers(&a, "Content-Type, X-Stainless-OS, x-custom-thing, bad header, "
                                                "evil\r\nx: y, anthropic-version");
    static const char *const need[] = {"authorization", "content-type", "x-api-key", "anthropic-version",
                                       "anthropic-beta", "idempotency-key", "x-request-id", "x-session-id",
                                       "openai-organization", "openai-project", "x-stainless-os",
                                       "x-stainless-retry-count", "x-stainless-timeout", "x-custom-thing"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        CHECK(listed(h, "Access-Control-Allow-Headers:", need[i]), "%s allowed: %s", need[i], h);
    CHECK(!strstr(h, "evil") && !strstr(h, "bad header"), "only plain tokens are echoed: %s", h);
    CHECK(strstr(h, "x-stainless-os, ") != NULL && !strstr(h, "x-stainless-os, x-stainless-os"),
          "a listed header is not repeated");
    CHECK(listed(h, "Access-Control-Allow-Methods:", "POST") && listed(h, "Access-Control-Allow-Methods:", "GET") &&
          listed(h, "Access-Control-Allow-Methods:", "DELETE"), "methods: %s", h);
    CHECK(strstr(h, "Access-Control-Max-Age: 600\r\n") != NULL, "max age: %s", h);
    int lines = 0;
    for (const char *p = h; (p = strstr(p, "\r\n")); p += 2)
        lines++;
    CHECK_INT(lines, 3, "preflight lines");
    CHECK(strstr(cors_preflight_headers(&a, NULL), "Access-Control-Allow-Headers: authorization") != NULL,
          "no requested headers");

    const char *r = cors_response_headers(&a, "https://app.example");
    CHECK(strstr(r, "Access-Control-Allow-Origin: https://app.example\r\n") != NULL, "%s", r);
    CHECK(strstr(r, "Vary: Origin\r\n") != NULL, "%s", r);
    static const char *const expose[] = {"x-request-id", "x-routed-model", "retry-after", "x-ratelimit-limit",
                                         "x-ratelimit-remaining", "x-ratelimit-reset", "request-id", "x-routing-reason"};
    for (size_t i = 0; i < sizeof expose / sizeof expose[0]; i++)
        CHECK(listed(r, "Access-Control-Expose-Headers:", expose[i]), "%s exposed: %s", expose[i], r);
    arena_free(&a);
}

int main(void)
{
    test_origins();
    test_preflight();
    return check_done();
}
