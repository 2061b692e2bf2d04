/* session.h: admin login sessions, also valid as data-plane credentials (R-AUTH-1, R-ADM-2). */
#ifndef SLUICE_SESSION_H
#define SLUICE_SESSION_H

#include "sdb.h"
#include <stdint.h>

/* A session token is "ses-" + 43 characters [A-Za-z0-9]. The admin CGI sets it as
 * the cookie sluice_session (HttpOnly, SameSite=Strict); elsewhere it is presented as
 * "Authorization: Bearer ses-...". Only its SHA-256 is stored (sessions.token_hash);
 * expires_at is in epoch seconds. */
#define SESSION_TOKEN_PREFIX "ses-"
#define SESSION_TOKEN_RANDOM 43
#define SESSION_TOKEN_LEN (sizeof SESSION_TOKEN_PREFIX - 1 + SESSION_TOKEN_RANDOM)

/* 1 when token has the shape of a session token (prefix, length, alphabet). */
int session_token_shape(const char *token);

/* 0 with *user_id set when token names a live (unexpired) session; -1 otherwise
 * (malformed, unknown, expired, database error). Thread-safe on its own connection;
 * the token is hashed, never logged. */
int session_lookup(struct sdb *db, const char *token, int64_t *user_id);

#endif
