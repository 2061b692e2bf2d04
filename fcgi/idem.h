/* idem.h: Idempotency-Key records in the system of record (SQLite or PostgreSQL),
 * shared by the pool and every gateway host, surviving restarts (R-IDEM-1..3). */
#ifndef SLUICE_IDEM_H
#define SLUICE_IDEM_H

#include "dbpool.h"

#include <stddef.h>
#include <stdint.h>

/* R-IDEM-1: the header's key: a quoted sf-string ("...", with \" and \\
 * escapes) or a bare token, 1..128 printable bytes. 0 and out filled, or -1. */
int idem_parse_key(const char *header, char out[129]);

enum idem_begin {
    IDEM_OWNED,             /* first time (or the previous owner died): go ahead */
    IDEM_IN_PROGRESS,       /* 409 */
    IDEM_MISMATCH,          /* 422 */
    IDEM_REPLAY,            /* stored response in the replay fields */
    IDEM_NOT_STORED,        /* done, but past the budget no snapshot was kept */
    IDEM_DB_ERROR
};

/* The stored answer of a finished request; strings owned by the caller (arena). */
struct idem_replay {
    int status;
    char *content_type;
    char *body;
    size_t body_len;
};

#define IDEM_TOKEN_LEN 33           /* a claim's random id, hex */

struct arena;
/* token: this claim's id (when IDEM_OWNED), for its done or release. */
enum idem_begin idem_begin(struct dbconn *c, const char *scope, const char *key, const char *fingerprint,
                           int64_t now, int64_t ttl_ms, struct idem_replay *out, struct arena *a,
                           char token[IDEM_TOKEN_LEN]);
/* Success: keep the response (body NULL past the budget). Only while the record
 * is still this claim's (0 either way), -1 on a database error. */
int idem_done(struct dbconn *c, const char *scope, const char *key, const char *token, int status,
              const char *content_type, const char *body, size_t body_len);
/* Failure or refusal: forget the record so the client may try again (the same). */
int idem_release(struct dbconn *c, const char *scope, const char *key, const char *token);
/* Deletes expired records; at most `limit` per call. */
int idem_expire(struct dbconn *c, int64_t now, int limit);
/* Records and stored bytes now held (R-IDEM-3 budgets). */
int idem_usage(struct dbconn *c, int64_t *records, int64_t *bytes);

#endif
