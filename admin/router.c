/* router.c: the dispatch table of the management API, /api/v1/... (R-ADM-1, R-SEC-8). */
#include "router.h"

#include "api_live.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

/* Every path of the API. Fields:
 *   method   the HTTP method; a path known under other methods answers 405
 *   pattern  segments after /api/v1/: literals, {id} = a positive integer,
 *            {name} = one %-decoded segment (model names without '/')
 *   handler  admin/api_*.c
 *   flags    ROUTER_PUBLIC: served without a credential
 * /api/v1/proxy/... is the data plane's (FastCGI) and never reaches this table. */
static const struct router_route router_routes[] = {
    {"POST", "auth/login", api_login, ROUTER_PUBLIC},
    {"POST", "auth/logout", api_logout, 0},
    {"GET", "auth/me", api_me, 0},

    {"GET", "tenants", api_tenants_list, 0},
    {"POST", "tenants", api_tenants_create, 0},
    {"GET", "tenants/{id}", api_tenants_get, 0},
    {"PUT", "tenants/{id}", api_tenants_update, 0},
    {"PATCH", "tenants/{id}", api_tenants_update, 0},
    {"DELETE", "tenants/{id}", api_tenants_delete, 0},

    {"GET", "users", api_users_list, 0},
    {"POST", "users", api_users_create, 0},
    {"GET", "users/{id}", api_users_get, 0},
    {"PUT", "users/{id}", api_users_update, 0},
    {"PATCH", "users/{id}", api_users_update, 0},
    {"DELETE", "users/{id}", api_users_delete, 0},

    {"GET", "endpoints", api_endpoints_list, 0},
    {"POST", "endpoints", api_endpoints_create, 0},
    {"GET", "endpoints/{id}", api_endpoints_get, 0},
    {"PUT", "endpoints/{id}", api_endpoints_update, 0},
    {"PATCH", "endpoints/{id}", api_endpoints_update, 0},
    {"DELETE", "endpoints/{id}", api_endpoints_delete, 0},
    {"POST", "endpoints/{id}/rotate-key", api_endpoints_rotate, 0},
    {"POST", "endpoints/{id}/test", api_endpoints_test, 0},
    {"GET", "endpoints/{id}/replicas", api_replicas_list, 0},
    {"POST", "endpoints/{id}/replicas", api_replicas_create, 0},
    {"GET", "endpoints/{id}/replicas/{id}", api_replicas_get, 0},
    {"PUT", "endpoints/{id}/replicas/{id}", api_replicas_update, 0},
    {"PATCH", "endpoints/{id}/replicas/{id}", api_replicas_update, 0},
    {"DELETE", "endpoints/{id}/replicas/{id}", api_replicas_delete, 0},

    {"GET", "model-routes", api_routes_list, 0},
    {"POST", "model-routes", api_routes_create, 0},
    {"GET", "model-routes/{id}", api_routes_get, 0},
    {"PUT", "model-routes/{id}", api_routes_update, 0},
    {"PATCH", "model-routes/{id}", api_routes_update, 0},
    {"DELETE", "model-routes/{id}", api_routes_delete, 0},

    {"GET", "tenant/api-keys", api_keys_list, 0},
    {"POST", "tenant/api-keys", api_keys_create, 0},
    {"GET", "tenant/api-keys/{id}", api_keys_get, 0},
    {"PUT", "tenant/api-keys/{id}", api_keys_update, 0},
    {"PATCH", "tenant/api-keys/{id}", api_keys_update, 0},
    {"DELETE", "tenant/api-keys/{id}", api_keys_delete, 0},
    {"GET", "tenant/api-keys/{id}/routing-policy", api_keys_policy_get, 0},
    {"PUT", "tenant/api-keys/{id}/routing-policy", api_keys_policy_set, 0},
    {"GET", "tenant/usage", api_usage, 0},
    {"GET", "requests", api_requests_list, 0},
    {"GET", "requests/{id}", api_requests_get, 0},

    /* Model names may hold '/': ?name= on the collection path, or {name} without '/'. */
    {"GET", "models/routing-policies", api_policies_list, 0},
    {"POST", "models/routing-policies", api_policies_set, 0},
    {"PUT", "models/routing-policies", api_policies_set, 0},
    {"DELETE", "models/routing-policies", api_policies_delete, 0},
    {"GET", "models/routing-policies/{name}", api_policies_get, 0},
    {"PUT", "models/routing-policies/{name}", api_policies_set, 0},
    {"DELETE", "models/routing-policies/{name}", api_policies_delete, 0},

    {"GET", "system/inference-config", api_config_get, 0},
    {"PUT", "system/inference-config", api_config_set, 0},
    {"PATCH", "system/inference-config", api_config_set, 0},
    {"GET", "system/settings-schema", api_settings_schema, 0},

    {"GET", "nodes", api_nodes_list, 0},
    {"POST", "nodes", api_nodes_create, 0},
    {"GET", "nodes/{id}", api_nodes_get, 0},
    {"PUT", "nodes/{id}", api_nodes_update, 0},
    {"PATCH", "nodes/{id}", api_nodes_update, 0},
    {"DELETE", "nodes/{id}", api_nodes_delete, 0},
    {"POST", "nodes/{id}/temperature", api_nodes_temperature, 0},

    {"GET", "quotas", api_quotas_list, 0},
    {"POST", "quotas", api_quotas_create, 0},
    {"GET", "quotas/{id}", api_quotas_get, 0},
    {"PATCH", "quotas/{id}", api_quotas_update, 0},
    {"PUT", "quotas/{id}", api_quotas_update, 0},
    {"DELETE", "quotas/{id}", api_quotas_delete, 0},

    {"GET", "cache", api_cache_stats, 0},
    {"DELETE", "cache", api_cache_clear, 0},
    {"GET", "cache/semantic-hits", api_cache_hits, 0},

    {"GET", "rules", api_rules_list, 0},
    {"POST", "rules", api_rules_create, 0},
    {"GET", "rules/{id}", api_rules_get, 0},
    {"DELETE", "rules/{id}", api_rules_delete, 0},

    {"GET", "semantic-rules", api_semrules_list, 0},
    {"POST", "semantic-rules", api_semrules_create, 0},
    {"DELETE", "semantic-rules/{id}", api_semrules_delete, 0},

    {"GET", "audit-log", api_audit_list, 0},
    {"GET", "alerts", api_alerts_list, 0},
    {"GET", "alerts/{id}", api_alerts_get, 0},
    {"POST", "alerts/{id}/resolve", api_alerts_resolve, 0},

    {"GET", "live", api_live, 0},
};
#define ROUTER_NROUTES (sizeof router_routes / sizeof router_routes[0])

int router_is_write(const char *method)
{
    return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One path segment %-decoded into out; -1 when malformed, control or '/' inside. */
static int router_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int ch = (unsigned char)s[i];
        if (ch == '%') {
            int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return -1;
            ch = hi * 16 + lo;
            i += 2;
        }
        if (ch < 0x20 || ch == 0x7f || ch == '/' || o + 1 >= cap)
            return -1;
        out[o++] = (char)ch;
    }
    out[o] = '\0';
    return o > 0 ? 0 : -1;
}

/* Whether path (after the prefix) matches pattern; fills params when it does. */
static int router_try(struct api_ctx *c, const char *pattern, const char *path)
{
    int nids = 0, nnames = 0;
    const char *p = pattern, *s = path;
    for (;;) {
        size_t plen = strcspn(p, "/"), slen = strcspn(s, "/");
        if (slen == 0)
            return 0;                       /* empty segment: "//" or a trailing '/' */
        if (plen == 4 && strncmp(p, "{id}", 4) == 0) {
            char num[24];
            if (slen >= sizeof num || nids >= API_MAX_PARAMS)
                return 0;
            memcpy(num, s, slen);
            num[slen] = '\0';
            if (num[0] < '1' || num[0] > '9' || parse_i64(num, 1, INT64_MAX, &c->ids[nids]) != 0)
                return 0;
            nids++;
        } else if (plen == 6 && strncmp(p, "{name}", 6) == 0) {
            if (nnames >= API_MAX_PARAMS ||
                router_decode(s, slen, c->names[nnames], sizeof c->names[0]) != 0)
                return 0;
            nnames++;
        } else if (plen != slen || strncmp(p, s, plen) != 0) {
            return 0;
        }
        p += plen;
        s += slen;
        if (!*p || !*s)
            break;
        p++;
        s++;
    }
    if (*p || *s)
        return 0;
    c->nids = nids;
    c->nnames = nnames;
    return 1;
}

enum router_result router_match(struct api_ctx *c, const struct router_route **route,
                                char *allow, size_t allow_len)
{
    const char *path = c->req->path;
    size_t plen = sizeof API_PREFIX - 1;
    allow[0] = '\0';
    /* R-SEC-8: only our own prefix, never the data plane's pass-through, and no
     * dot segments or encoded separators that a server might normalise differently. */
    if (strncmp(path, API_PREFIX, plen) != 0 || strncmp(path + plen, "proxy/", 6) == 0 ||
        strstr(path, "/./") || strstr(path, "/../") || strstr(path, "%2f") || strstr(path, "%2F"))
        return ROUTER_NOT_FOUND;
    path += plen;
    int path_known = 0;
    size_t used = 0;
    for (size_t i = 0; i < ROUTER_NROUTES; i++) {
        if (!router_try(c, router_routes[i].pattern, path))
            continue;
        if (strcmp(router_routes[i].method, c->req->method) == 0) {
            *route = &router_routes[i];
            return ROUTER_MATCH;
        }
        path_known = 1;
        int w = snprintf(allow + used, allow_len - used, "%s%s", used ? ", " : "",
                         router_routes[i].method);
        if (w > 0 && (size_t)w < allow_len - used)
            used += (size_t)w;
    }
    return path_known ? ROUTER_BAD_METHOD : ROUTER_NOT_FOUND;
}
