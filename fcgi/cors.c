/* cors.c: CORS decisions and header lines (R-API-7). sluice is the only CORS
 * authority: upstream Access-Control-* headers are dropped by the relay. */
#include "cors.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#define CORS_MAX_AGE_S 600

/* What the OpenAI and Anthropic SDKs and sluice's own headers need; a browser
 * asks for each by name, case-insensitively. */
static const char allow_headers[] =
    "authorization, content-type, x-api-key, anthropic-version, anthropic-beta, "
    "anthropic-dangerous-direct-browser-access, idempotency-key, x-request-id, x-session-id, "
    "openai-organization, openai-project, openai-beta, x-stainless-os, x-stainless-lang, "
    "x-stainless-package-version, x-stainless-runtime, x-stainless-runtime-version, x-stainless-arch, "
    "x-stainless-retry-count, x-stainless-timeout, x-stainless-helper-method, x-stainless-async, "
    "x-stainless-poll-helper, x-stainless-custom-poll-interval";

/* Response headers a page may read besides the safelisted ones. */
static const char expose_headers[] =
    "x-request-id, request-id, x-routed-model, x-routed-endpoint, retry-after, x-ratelimit-limit, "
    "x-ratelimit-remaining, x-ratelimit-reset, x-quota-reset, x-should-retry, x-session-id, x-session-affinity, "
    "x-fallback, x-degradation-level, x-idempotent-replayed, x-routing-reason, server-timing";

/* scheme://host[:port], nothing a header line could smuggle. */
static int origin_shape_ok(const char *o)
{
    const char *sep = strstr(o, "://");
    if (!sep || sep == o || strlen(o) > 255)
        return 0;
    for (const char *p = o; *p; p++)
        if (!(isalnum((unsigned char)*p) || strchr(":/.-_[]", *p)))
            return 0;
    return sep[3] != '\0';
}

int cors_origin_allowed(const char *list, const char *origin)
{
    if (!list || !*list || !origin || !origin_shape_ok(origin))
        return 0;
    size_t on = strlen(origin);
    for (const char *p = list; *p;) {
        p += strspn(p, ", \t");
        size_t n = strcspn(p, ", \t");
        if (n == 1 && *p == '*')
            return 1;
        /* A listed origin may end in '/', as people copy it from the address bar. */
        size_t cmp = n > 0 && p[n - 1] == '/' ? n - 1 : n;
        if (cmp == on && strncasecmp(p, origin, on) == 0)
            return 1;
        p += n;
    }
    return 0;
}

/* Is the requested header name a token (RFC 9110 tchar) not already listed? */
static int header_extra(const char *name, size_t n)
{
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)name[i]) || name[i] == '-' || name[i] == '_'))
            return 0;
    for (const char *p = allow_headers; *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && strncasecmp(p, name, n) == 0)
            return 0;
        p += k;
        p += strspn(p, ", ");
    }
    return 1;
}

const char *cors_preflight_headers(struct arena *a, const char *requested)
{
    char *extra = arena_alloc(a, requested ? strlen(requested) + 1 : 1);
    size_t used = 0;
    for (const char *p = requested ? requested : ""; *p;) {
        p += strspn(p, ", \t");
        size_t n = strcspn(p, ", \t");
        if (header_extra(p, n)) {
            if (used)
                extra[used++] = ',';
            for (size_t i = 0; i < n; i++)
                extra[used++] = (char)tolower((unsigned char)p[i]);
        }
        p += n;
    }
    extra[used] = '\0';
    return arena_printf(a, "Access-Control-Allow-Methods: GET, POST, DELETE, OPTIONS\r\n"
                           "Access-Control-Allow-Headers: %s%s%s\r\n"
                           "Access-Control-Max-Age: %d\r\n",
                        allow_headers, used ? ", " : "", extra, CORS_MAX_AGE_S);
}

/* Timing-Allow-Origin: without it a page sees Server-Timing's names but
 * zero durations (Resource Timing), exposed or not (R-OBS-5). */
const char *cors_response_headers(struct arena *a, const char *origin)
{
    return arena_printf(a, "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\nAccess-Control-Expose-Headers: %s\r\n"
                           "Timing-Allow-Origin: %s\r\n",
                        origin, expose_headers, origin);
}
