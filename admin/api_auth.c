/* api_auth.c: POST /api/v1/auth/login, POST /api/v1/auth/logout, GET /api/v1/auth/me (R-ADM-2). */
#include "api.h"
#include "session.h"

#include "util.h"

#include <stdio.h>
#include <string.h>

#define LOGIN_NAME_MAX 128
#define LOGIN_PASSWORD_MAX 1024

/* The caller as the page shows it. */
static struct json_object *auth_me_json(struct api_ctx *c)
{
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *o = json_object_new_object();
    struct json_object *u = ops_user_get(c->db, c->actor.user_id, &err);
    json_object_object_add(o, "user", u);
    static const char *const kinds[] = {"none", "session", "session", "key"};
    json_object_object_add(o, "auth", json_object_new_string(kinds[c->auth]));
    if (c->auth == API_AUTH_KEY)
        json_object_object_add(o, "key_id", json_object_new_int64(c->key_id));
    if (c->auth == API_AUTH_SESSION || c->auth == API_AUTH_BEARER_SESSION)
        json_object_object_add(o, "expires_at", json_object_new_int64(c->session_expires));
    /* The page keeps the CSRF token in memory; after a reload it asks here again.
     * Another site cannot read this answer (no CORS), so handing it out is safe. */
    if (c->auth == API_AUTH_SESSION)
        json_object_object_add(o, "csrf_token", json_object_new_string(c->csrf_token));
    struct json_object *lim = json_object_new_object();
    for (int i = 0; i < AUTHZ_NLIMITS; i++)
        json_object_object_add(lim, authz_limit_names[i], json_object_new_int64(c->actor.ceiling.v[i]));
    json_object_object_add(o, "key_ceiling", lim);
    return o;
}

void api_login(struct api_ctx *c)
{
    const char *name, *password;
    if (api_body_fields(c, "username password") != 0 ||
        api_body_str(c, "username", &name, 1) != 0 || api_body_str(c, "password", &password, 1) != 0)
        return;
    if (!*name || strlen(name) > LOGIN_NAME_MAX || !*password ||
        strlen(password) > LOGIN_PASSWORD_MAX) {
        api_error(c, 400, "invalid_value", NULL, "username must be 1 to %d bytes and password 1 to %d",
                  LOGIN_NAME_MAX, LOGIN_PASSWORD_MAX);
        return;
    }
    int64_t wait = session_locked(c, name);
    if (wait > 0) {
        api_header(c, "Retry-After: %lld", (long long)wait);
        api_error(c, 429, "too_many_login_failures", NULL,
                  "too many failed logins for this name or address; retry later");
        return;
    }
    int64_t uid = session_check_password(c, name, password);
    if (uid < 0) {
        api_error(c, 500, "internal_error", NULL, "internal error");
        return;
    }
    /* One answer for an unknown name and a wrong password. */
    if (uid == 0) {
        session_failure(c, name);
        api_error(c, 401, "invalid_credentials", NULL, "wrong user name or password");
        return;
    }
    session_success(c, name);
    char token[SESSION_CSRF_LEN + 64], csrf[SESSION_CSRF_LEN + 1];
    int64_t expires;
    if (session_load_actor(c, uid) != 0 ||
        session_create(c, uid, token, sizeof token, csrf, sizeof csrf, &expires) != 0) {
        explicit_bzero(token, sizeof token);
        api_error(c, 500, "internal_error", NULL, "internal error");
        return;
    }
    c->auth = API_AUTH_SESSION;
    c->session_expires = expires;
    snprintf(c->csrf_token, sizeof c->csrf_token, "%s", csrf);
    /* R-ADM-2: HttpOnly (no script reads it), SameSite=Strict (no other site sends it). */
    api_header(c, "Set-Cookie: " SESSION_COOKIE "=%s; HttpOnly; SameSite=Strict; Path=/;"
               " Max-Age=%d%s", token, c->conf->admin_session_ttl_s, c->req->https ? "; Secure" : "");
    explicit_bzero(token, sizeof token);
    ops_set_actor(c->user_name);
    ops_set_actor_rights(c->actor.role, &c->actor.ceiling);
    struct ops_error err;
    ops_error_clear(&err);
    struct json_object *who = json_object_new_object();
    json_object_object_add(who, "user", json_object_new_string(c->user_name));
    json_object_object_add(who, "address", json_object_new_string(c->req->remote_addr));
    ops_audit_event(c->db, "login", "session", uid, c->actor.tenant_id, who, &err);
    json_object_put(who);
    api_result(c, auth_me_json(c), NULL);
}

void api_logout(struct api_ctx *c)
{
    if (api_body_fields(c, "") != 0)
        return;
    if (c->auth != API_AUTH_SESSION && c->auth != API_AUTH_BEARER_SESSION) {
        api_error(c, 400, "not_a_session", NULL, "only a login session can log out");
        return;
    }
    if (session_end(c) != 0) {
        api_error(c, 500, "internal_error", NULL, "internal error");
        return;
    }
    api_header(c, "Set-Cookie: " SESSION_COOKIE "=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0%s",
               c->req->https ? "; Secure" : "");
    struct ops_error err;
    ops_error_clear(&err);
    ops_audit_event(c->db, "logout", "session", c->actor.user_id, c->actor.tenant_id, NULL, &err);
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "ok", json_object_new_boolean(1));
    api_result(c, o, NULL);
}

void api_me(struct api_ctx *c)
{
    api_result(c, auth_me_json(c), NULL);
}
