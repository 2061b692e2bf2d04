/* session.c: authentication of management API requests — sessions, CSRF, member keys,
 * login throttling (R-ADM-2, R-AUTH-1, R-SEC-1, R-SEC-6). */
#include "session.h"

#include "log.h"
#include "../lib/session.h"   /* lib's session.h: token shape; "session.h" is ours */
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MEMBER_KEY_PREFIX "sk-tenant-"
#define KEY_MAX 256
#define IP_FAILURE_FACTOR 10    /* an address may fail this many times more than one name */

/* A yescrypt hash of a password nobody knows, made with the same parameters as
 * real ones: a login for a missing user costs the same one hash (no user probing). */
static const char session_dummy_hash[] =
    "$y$j9T$NJKSFMtM.dw69KczFeX5F0$CqZG7XlN8/9bSUpggzmW6sq9toHED1VxQ8pjy9BAGSD";

static struct sdb_stmt *session_stmt(struct sdb *db, const char *sql)
{
    struct sdb_stmt *st = NULL;
    if (sdb_prepare(db, sql, &st) != SDB_OK) {
        log_error("sqlite: %s", sdb_errmsg(db));
        return NULL;
    }
    return st;
}

static int64_t session_now(void) { return (int64_t)time(NULL); }

/* ---- the caller ---------------------------------------------------------------- */

int session_load_actor(struct api_ctx *c, int64_t user_id)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *u = ops_user_get(c->db, user_id, &err);
    if (!u)
        return -1;
    c->actor.role = authz_role_parse(api_json_str(u, "role"));
    c->actor.user_id = user_id;
    c->actor.tenant_id = api_json_i64(u, "tenant_id");
    struct json_object *ceil = NULL;
    json_object_object_get_ex(u, "key_ceiling", &ceil);
    api_limits_from_json(ceil, &c->actor.ceiling);
    snprintf(c->user_name, sizeof c->user_name, "%s", api_json_str(u, "name") ? api_json_str(u, "name") : "?");
    json_object_put(u);
    return c->actor.role == AUTHZ_NOBODY ? -1 : 0;
}

/* R-AUTH-1 on the API: a member key acts as its user, within the key's own limits. */
static int session_by_key(struct api_ctx *c, const char *key)
{
    char hash[65];
    if (strncmp(key, MEMBER_KEY_PREFIX, sizeof MEMBER_KEY_PREFIX - 1) != 0 || strlen(key) > KEY_MAX)
        return -1;
    sha256_hex(key, strlen(key), hash);
    struct sdb_stmt *st = session_stmt(c->db, "SELECT id, user_id FROM api_keys WHERE key_hash = ?1"
                                    " AND revoked_at IS NULL");
    int64_t kid = 0, uid = 0;
    if (!st)
        return -1;
    sdb_bind_text(st, 1, hash, 64, SDB_TRANSIENT);
    if (sdb_step(st) == SDB_ROW) {
        kid = sdb_column_int64(st, 0);
        uid = sdb_column_int64(st, 1);
    }
    sdb_finalize(st);
    if (!kid || session_load_actor(c, uid) != 0)
        return -1;
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *k = ops_key_get(c->db, kid, &err);
    if (!k)
        return -1;
    struct authz_limits kl, user = c->actor.ceiling;
    api_limits_from_json(k, &kl);
    authz_limits_min(&c->actor.ceiling, &user, &kl);
    json_object_put(k);
    c->auth = API_AUTH_KEY;
    c->key_id = kid;
    return 0;
}

/* 1 live, 0 unknown, -2 expired, -1 error. */
static int session_by_token(struct api_ctx *c, const char *token)
{
    if (!session_token_shape(token))
        return 0;
    sha256_hex(token, strlen(token), c->session_hash);
    struct sdb_stmt *st = session_stmt(c->db, "SELECT user_id, csrf_token, expires_at FROM sessions"
                                    " WHERE token_hash = ?1");
    if (!st)
        return -1;
    sdb_bind_text(st, 1, c->session_hash, 64, SDB_TRANSIENT);
    int rc = 0;
    int64_t uid = 0;
    if (sdb_step(st) == SDB_ROW) {
        uid = sdb_column_int64(st, 0);
        const char *csrf = (const char *)sdb_column_text(st, 1);
        snprintf(c->csrf_token, sizeof c->csrf_token, "%s", csrf ? csrf : "");
        c->session_expires = sdb_column_int64(st, 2);
        rc = c->session_expires > session_now() ? 1 : -2;
    }
    sdb_finalize(st);
    if (rc == 1 && session_load_actor(c, uid) != 0)
        rc = 0;
    return rc;
}

static int session_refuse(struct api_ctx *c, const char *code, const char *msg)
{
    api_error(c, 401, code, NULL, "%s", msg);
    return -1;
}

/* R-SEC-6: a credential that failed counts against the client address. */
static int session_bad_credential(struct api_ctx *c, const char *code, const char *msg)
{
    session_failure(c, NULL);
    return session_refuse(c, code, msg);
}

int session_authenticate(struct api_ctx *c, int write)
{
    int64_t wait = session_locked(c, NULL);
    if (wait > 0) {
        api_header(c, "Retry-After: %lld", (long long)wait);
        api_error(c, 429, "too_many_auth_failures", NULL,
                  "too many failed authentications from this address; retry later");
        return -1;
    }
    const char *h = c->req->authorization;
    if (h && strncasecmp(h, "Bearer ", 7) == 0) {
        const char *cred = h + 7;
        while (*cred == ' ')
            cred++;
        /* A bearer credential is not sent by browsers on their own: no CSRF needed. */
        if (strncmp(cred, MEMBER_KEY_PREFIX, sizeof MEMBER_KEY_PREFIX - 1) == 0) {
            if (session_by_key(c, cred) != 0)
                return session_bad_credential(c, "invalid_api_key", "unknown or revoked key");
            return 0;
        }
        int rc = session_by_token(c, cred);
        if (rc == 1) {
            c->auth = API_AUTH_BEARER_SESSION;
            return 0;
        }
        if (rc == -2)
            return session_refuse(c, "session_expired", "the session has expired; log in again");
        if (strncmp(cred, "sk-", 3) == 0)
            return session_bad_credential(c, "invalid_api_key",
                "endpoint keys have no user; use a member key (sk-tenant-...) or log in");
        return session_bad_credential(c, "invalid_api_key", "unknown credential");
    }
    char token[SESSION_TOKEN_LEN + 2];
    if (!cgi_cookie(c->req, SESSION_COOKIE, token, sizeof token))
        return session_refuse(c, "not_authenticated",
                              "log in (POST /api/v1/auth/login) or send Authorization: Bearer");
    int rc = session_by_token(c, token);
    explicit_bzero(token, sizeof token);
    if (rc == -2)
        return session_refuse(c, "session_expired", "the session has expired; log in again");
    if (rc != 1)
        return session_bad_credential(c, "not_authenticated", "unknown session; log in again");
    c->auth = API_AUTH_SESSION;
    /* R-ADM-2: a cookie rides along with any page's request; writes prove they come
     * from our page by the token only it has read. */
    if (write) {
        const char *got = c->req->csrf;
        size_t n = strlen(c->csrf_token);
        if (!got || !*got) {
            api_error(c, 403, "csrf_token_missing", NULL, "writes need the X-CSRF-Token header");
            return -1;
        }
        if (n == 0 || strlen(got) != n || !ct_equal(got, c->csrf_token, n)) {
            api_error(c, 403, "csrf_token_invalid", NULL, "the X-CSRF-Token header is wrong");
            return -1;
        }
    }
    return 0;
}

/* ---- login throttling (R-SEC-6) ---------------------------------------------------- */

static int64_t session_scope_wait(struct api_ctx *c, const char *scope)
{
    struct sdb_stmt *st = session_stmt(c->db, "SELECT locked_until FROM login_failures WHERE scope = ?1");
    int64_t wait = 0;
    if (!st)
        return 0;
    sdb_bind_text(st, 1, scope, -1, SDB_TRANSIENT);
    if (sdb_step(st) == SDB_ROW)
        wait = sdb_column_int64(st, 0) - session_now();
    sdb_finalize(st);
    return wait > 0 ? wait : 0;
}

static void session_scope_name(char *out, size_t n, const char *kind, const char *v)
{
    snprintf(out, n, "%s:%.200s", kind, v);
}

int64_t session_locked(struct api_ctx *c, const char *username)
{
    char scope[256];
    session_scope_name(scope, sizeof scope, "ip", c->req->remote_addr);
    int64_t wait = session_scope_wait(c, scope);
    if (username) {
        session_scope_name(scope, sizeof scope, "u", username);
        int64_t w = session_scope_wait(c, scope);
        if (w > wait)
            wait = w;
    }
    return wait;
}

static void session_scope_fail(struct api_ctx *c, const char *scope, int64_t limit)
{
    int64_t now = session_now();
    /* One UPSERT: a window that ran out starts again; reaching the limit locks. */
    struct sdb_stmt *st = session_stmt(
        c->db,
        "INSERT INTO login_failures (scope, failures, first_at, locked_until)"
        " VALUES (?1, 1, ?2, CASE WHEN ?3 <= 1 THEN ?2 + ?5 ELSE 0 END)"
        " ON CONFLICT (scope) DO UPDATE SET"
        " failures = CASE WHEN first_at < ?2 - ?4 THEN 1 ELSE failures + 1 END,"
        " first_at = CASE WHEN first_at < ?2 - ?4 THEN ?2 ELSE first_at END,"
        " locked_until = CASE WHEN (CASE WHEN first_at < ?2 - ?4 THEN 1 ELSE failures + 1 END) >= ?3"
        "   THEN ?2 + ?5 ELSE locked_until END");
    if (!st)
        return;
    sdb_bind_text(st, 1, scope, -1, SDB_TRANSIENT);
    sdb_bind_int64(st, 2, now);
    sdb_bind_int64(st, 3, limit);
    sdb_bind_int64(st, 4, c->conf->admin_login_window_s);
    sdb_bind_int64(st, 5, c->conf->admin_login_lockout_s);
    if (sdb_step(st) != SDB_DONE)
        log_error("sqlite: %s", sdb_errmsg(c->db));
    sdb_finalize(st);
}

void session_failure(struct api_ctx *c, const char *username)
{
    char scope[256];
    int64_t max = c->conf->admin_login_max_failures;
    session_scope_name(scope, sizeof scope, "ip", c->req->remote_addr);
    session_scope_fail(c, scope, max * IP_FAILURE_FACTOR);
    if (username) {
        session_scope_name(scope, sizeof scope, "u", username);
        session_scope_fail(c, scope, max);
    }
    /* The name may be anything a client typed: logged only as a length. */
    log_warn("failed authentication from %s%s (%zu-byte user name)", c->req->remote_addr,
             username ? " at login" : "", username ? strlen(username) : (size_t)0);
}

void session_success(struct api_ctx *c, const char *username)
{
    char scope[256];
    session_scope_name(scope, sizeof scope, "u", username);
    struct sdb_stmt *st = session_stmt(c->db, "DELETE FROM login_failures WHERE scope = ?1");
    if (!st)
        return;
    sdb_bind_text(st, 1, scope, -1, SDB_TRANSIENT);
    sdb_step(st);
    sdb_finalize(st);
}

int64_t session_check_password(struct api_ctx *c, const char *username, const char *password)
{
    struct sdb_stmt *st = session_stmt(c->db, "SELECT id, password_hash FROM users WHERE name = ?1");
    if (!st)
        return -1;
    sdb_bind_text(st, 1, username, -1, SDB_TRANSIENT);
    int64_t id = 0;
    char hash[512] = "";
    int rc = sdb_step(st);
    if (rc == SDB_ROW) {
        const char *h = (const char *)sdb_column_text(st, 1);
        if (h && strlen(h) < sizeof hash) {
            id = sdb_column_int64(st, 0);
            snprintf(hash, sizeof hash, "%s", h);
        }
    }
    sdb_finalize(st);
    if (rc != SDB_ROW && rc != SDB_DONE)
        return -1;
    int ok = ops_password_verify(password, id ? hash : session_dummy_hash);
    explicit_bzero(hash, sizeof hash);
    return id && ok ? id : 0;
}

/* ---- sessions -------------------------------------------------------------------- */

int session_create(struct api_ctx *c, int64_t user_id, char *token, size_t token_cap,
                   char *csrf, size_t csrf_cap, int64_t *expires)
{
    char hash[65];
    if (token_cap < SESSION_TOKEN_LEN + 1 || csrf_cap < SESSION_CSRF_LEN + 1)
        return -1;
    memcpy(token, SESSION_TOKEN_PREFIX, sizeof SESSION_TOKEN_PREFIX - 1);
    random_token(token + sizeof SESSION_TOKEN_PREFIX - 1, SESSION_TOKEN_RANDOM);
    random_token(csrf, SESSION_CSRF_LEN);
    sha256_hex(token, strlen(token), hash);
    int64_t now = session_now();
    *expires = now + c->conf->admin_session_ttl_s;
    struct sdb_stmt *sweep = session_stmt(c->db, "DELETE FROM sessions WHERE expires_at <= ?1");
    if (sweep) {
        sdb_bind_int64(sweep, 1, now);
        sdb_step(sweep);
        sdb_finalize(sweep);
    }
    struct sdb_stmt *st = session_stmt(c->db, "INSERT INTO sessions (token_hash, user_id, csrf_token,"
                                    " created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!st)
        return -1;
    sdb_bind_text(st, 1, hash, 64, SDB_TRANSIENT);
    sdb_bind_int64(st, 2, user_id);
    sdb_bind_text(st, 3, csrf, -1, SDB_TRANSIENT);
    sdb_bind_int64(st, 4, now);
    sdb_bind_int64(st, 5, *expires);
    int rc = sdb_step(st) == SDB_DONE ? 0 : -1;
    if (rc != 0)
        log_error("sqlite: %s", sdb_errmsg(c->db));
    sdb_finalize(st);
    return rc;
}

int session_end(struct api_ctx *c)
{
    struct sdb_stmt *st = session_stmt(c->db, "DELETE FROM sessions WHERE token_hash = ?1");
    if (!st)
        return -1;
    sdb_bind_text(st, 1, c->session_hash, 64, SDB_TRANSIENT);
    int rc = sdb_step(st) == SDB_DONE ? 0 : -1;
    sdb_finalize(st);
    return rc;
}
