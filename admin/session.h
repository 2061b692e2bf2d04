/* session.h: who is calling the management API — login sessions with their CSRF
 * tokens, member keys, and the slow-down of failed logins (R-ADM-2, R-SEC-5, R-SEC-6). */
#ifndef SLUICE_ADMIN_SESSION_H
#define SLUICE_ADMIN_SESSION_H

#include "api.h"

#define SESSION_COOKIE "sluice_session"
#define SESSION_CSRF_LEN 43

/* Establishes the caller of c's request from "Authorization: Bearer" (member key
 * sk-tenant-..., or a session token) or the session cookie; with the cookie, writes
 * need X-CSRF-Token equal to the session's (constant-time). 0 with c->actor set, or
 * -1 with the answer set (401, 403, 429). */
int session_authenticate(struct api_ctx *c, int write);

/* Sets c->actor and c->user_name from the user's row (role, tenant, key ceiling). */
int session_load_actor(struct api_ctx *c, int64_t user_id);

/* R-SEC-6: seconds the user name (may be NULL) or the client address must still wait,
 * 0 when neither is locked out. */
int64_t session_locked(struct api_ctx *c, const char *username);
/* Counts one failed login for the name and the address (locks them past the limit). */
void session_failure(struct api_ctx *c, const char *username);
/* A good login clears its name's count (the address keeps its own). */
void session_success(struct api_ctx *c, const char *username);

/* Verifies name and password. The user's id on success, 0 when wrong (the same
 * time is spent whether or not the user exists), -1 on a database error. */
int64_t session_check_password(struct api_ctx *c, const char *username, const char *password);

/* A new session for user_id: the token (cookie value, shown only in Set-Cookie),
 * its CSRF token and expiry. 0 or -1. Expired sessions are swept at the same time. */
int session_create(struct api_ctx *c, int64_t user_id, char *token, size_t token_cap,
                   char *csrf, size_t csrf_cap, int64_t *expires);
/* Ends the caller's session (session auth only). 0 or -1. */
int session_end(struct api_ctx *c);

#endif
