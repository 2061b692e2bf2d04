/* session.c: look a login session up by its token (R-AUTH-1: sessions work on the data plane). */
#include "session.h"

#include "util.h"

#include <string.h>
#include <time.h>

int session_token_shape(const char *token)
{
    if (!token || strncmp(token, SESSION_TOKEN_PREFIX, sizeof SESSION_TOKEN_PREFIX - 1) != 0 ||
        strlen(token) != SESSION_TOKEN_LEN)
        return 0;
    for (const char *p = token + sizeof SESSION_TOKEN_PREFIX - 1; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
            return 0;
    return 1;
}

int session_lookup(struct sdb *db, const char *token, int64_t *user_id)
{
    char hash[65];
    if (!db || !session_token_shape(token))
        return -1;
    /* Looked up by SHA-256: equal hashes are the only match, so the comparison
     * reveals nothing of the token (R-SEC-6). */
    sha256_hex(token, strlen(token), hash);
    struct sdb_stmt *st = NULL;
    int ret = -1;
    if (sdb_prepare(db, "SELECT user_id FROM sessions WHERE token_hash = ?1"
                           " AND expires_at > ?2", &st) != SDB_OK)
        return -1;
    if (sdb_bind_text(st, 1, hash, 64, SDB_TRANSIENT) == SDB_OK &&
        sdb_bind_int64(st, 2, (int64_t)time(NULL)) == SDB_OK &&
        sdb_step(st) == SDB_ROW) {
        *user_id = sdb_column_int64(st, 0);
        ret = 0;
    }
    sdb_finalize(st);
    return ret;
}
