/* auth.c: resolve the presented key against the snapshot (DESIGN.md stage 2). */
#include "auth.h"

#include "admit.h"
#include "pathcheck.h"
#include "reply.h"
#include "util.h"

#include <string.h>
#include <strings.h>

/* The key from "Authorization: Bearer <key>", or NULL. */
static const char *auth_bearer(const struct request *r)
{
    const char *h = request_param(r, "HTTP_AUTHORIZATION");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    h += 7;
    while (*h == ' ')
        h++;
    return *h ? h : NULL;
}

int auth_caller(struct request *r)
{
    /* R-SEC-6: an address with too many failures waits, whatever it sends. */
    if (admit_auth_blocked(r))
        return -1;
    const char *key = auth_bearer(r);
    if (!key || strncmp(key, "sk-", 3) != 0 || strlen(key) > 256) {
        admit_auth_failed(r);
        reply_error(r, "invalid_api_key", key ? "Incorrect API key provided." :
                    "You didn't provide an API key. Use Authorization: Bearer <key>.", NULL);
        return -1;
    }
    /* R-AUTH-2: only the SHA-256 is compared; the snapshot is the key cache,
     * replaced within config.poll_ms of a revocation. */
    char hash[65];
    sha256_hex(key, strlen(key), hash);
    const struct snap_key *k = snapshot_find_key(r->snap, hash);
    if (!k || !ct_equal(k->hash, hash, 64)) {
        admit_auth_failed(r);
        reply_error(r, "invalid_api_key", "Incorrect API key provided.", NULL);
        return -1;
    }
    struct caller *c = &r->caller;
    c->tenant_id = k->tenant_id;
    c->user_id = k->user_id;
    c->key_id = k->id;
    c->endpoint = k->endpoint;
    c->role = k->role;
    c->user_name = k->user_name;
    c->key = k;

    /* R-AUTH-3: only an operator may act for another tenant. */
    const char *as = request_header(r, "X-Sluice-Tenant");
    if (as && *as) {
        if (c->role != ROLE_OPERATOR) {
            reply_error(r, "permission_denied", "X-Sluice-Tenant is for operators only.", NULL);
            return -1;
        }
        const struct snap_tenant *t = snapshot_tenant_by_name(r->snap, as);
        if (!t) {
            reply_error(r, "permission_denied", "X-Sluice-Tenant names no tenant.", NULL);
            return -1;
        }
        c->tenant_id = t->id;
    }
    return 0;
}
