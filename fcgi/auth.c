/* auth.c: resolve the presented key against the snapshot (DESIGN.md stage 2). */
#include "auth.h"

#include "admit.h"
#include "dbpool.h"
#include "session.h"
#include "pathcheck.h"
#include "reply.h"
#include "util.h"

#include <string.h>
#include <strings.h>

/* The key from "Authorization: Bearer <key>", else from "x-api-key: <key>"
 * (the Anthropic SDKs' header, R-ANT-7; accepted on every path), or NULL. */
static const char *auth_bearer(const struct request *r)
{
    const char *h = request_param(r, "HTTP_AUTHORIZATION");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
        /* Not a Bearer (none, or a proxy's Basic): the Anthropic SDKs' header. */
        h = request_param(r, "HTTP_X_API_KEY");
        while (h && *h == ' ')
            h++;
        return h && *h ? h : NULL;
    }
    h += 7;
    while (*h == ' ')
        h++;
    return *h ? h : NULL;
}

/* R-SEC-6: a failed credential: 429 when its client is over the failure
 * budget, else counted and 401. Always -1. */
static int auth_fail(struct request *r, const char *credential, const char *message)
{
    if (admit_auth_blocked(r, credential))
        return -1;
    admit_auth_failed(r, credential);
    reply_error(r, ERR_INVALID_API_KEY, message, NULL);
    return -1;
}

/* R-AUTH-3: only an operator may act for another tenant (X-Sluice-Tenant). */
static int auth_tenant_override(struct request *r)
{
    struct caller *c = &r->caller;
    const char *as = request_header(r, "X-Sluice-Tenant");
    if (as && *as) {
        if (c->role != ROLE_OPERATOR) {
            reply_error(r, ERR_PERMISSION_DENIED, "X-Sluice-Tenant is for operators only.", NULL);
            return -1;
        }
        const struct snap_tenant *t = snapshot_tenant_by_name(r->snap, as);
        if (!t) {
            reply_error(r, ERR_PERMISSION_DENIED, "X-Sluice-Tenant names no tenant.", NULL);
            return -1;
        }
        c->tenant_id = t->id;
    }
    return 0;
}

/* R-AUTH-1: an admin login session is a credential on the data plane too; the
 * caller is its user (no key, so no key limits). */
static int auth_session(struct request *r, const char *token)
{
    int64_t user_id = 0;
    struct dbconn *c = dbpool_get();
    int ok = session_lookup(c->db, token, &user_id) == 0;
    struct sdb_stmt *st = NULL;
    if (ok && sdb_prepare(c->db, "SELECT tenant_id, role, name FROM users WHERE id = ?1", &st) ==
                  SDB_OK) {
        sdb_bind_int64(st, 1, user_id);
        ok = sdb_step(st) == SDB_ROW;
        if (ok) {
            const char *role = (const char *)sdb_column_text(st, 1);
            r->caller.tenant_id = sdb_column_int64(st, 0);
            r->caller.user_id = user_id;
            r->caller.role = !role ? ROLE_MEMBER : strcmp(role, "operator") == 0 ? ROLE_OPERATOR
                             : strcmp(role, "admin") == 0                       ? ROLE_ADMIN
                                                                                : ROLE_MEMBER;
            r->caller.user_name = arena_strdup(r->arena, (const char *)sdb_column_text(st, 2));
        }
    } else {
        ok = 0;
    }
    sdb_finalize(st);
    dbpool_put(c);
    if (!ok)
        return auth_fail(r, token, "The session is unknown or has expired.");
    r->caller.endpoint = -1;
    /* R-SEC-5: a session is limited by its user's ceiling, as a key of the user would be. */
    r->caller.key = snapshot_session_limits(r->snap, r->caller.user_id);
    return auth_tenant_override(r);
}

void auth_identify(struct request *r)
{
    const char *key = auth_bearer(r);
    if (!key || strncmp(key, "sk-", 3) != 0 || strlen(key) > 256)
        return;
    char hash[65];
    sha256_hex(key, strlen(key), hash);
    const struct snap_key *k = snapshot_find_key(r->snap, hash);
    if (!k || !ct_equal(k->hash, hash, 64))
        return;
    r->caller.tenant_id = k->tenant_id;
    r->caller.user_id = k->user_id;
    r->caller.key_id = k->id;
}

int auth_caller(struct request *r)
{
    const char *key = auth_bearer(r);
    if (key && session_token_shape(key))
        return auth_session(r, key);
    if (!key || strncmp(key, "sk-", 3) != 0 || strlen(key) > 256)
        return auth_fail(r, key, key ? "Incorrect API key provided."
                                     : "You didn't provide an API key. Use Authorization: Bearer <key> or x-api-key: <key>.");
    /* R-AUTH-2: only the SHA-256 is compared; the snapshot is the key cache,
     * replaced within config.poll_ms of a revocation. */
    char hash[65];
    sha256_hex(key, strlen(key), hash);
    const struct snap_key *k = snapshot_find_key(r->snap, hash);
    if (!k || !ct_equal(k->hash, hash, 64))
        return auth_fail(r, key, "Incorrect API key provided.");
    struct caller *c = &r->caller;
    c->tenant_id = k->tenant_id;
    c->user_id = k->user_id;
    c->key_id = k->id;
    c->endpoint = k->endpoint;
    c->role = k->role;
    c->user_name = k->user_name;
    c->key = k;

    return auth_tenant_override(r);
}
