/* test_session.c: login sessions as credentials (lib/session.h, R-AUTH-1, R-ADM-2):
 * token shape, lookup by SHA-256, expiry. */
#include "check.h"

#include "session.h"
#include "util.h"

#include "sdb.h"
#include <time.h>

static void add(struct sdb *db, const char *token, int64_t user, int64_t expires)
{
    char hash[65];
    struct sdb_stmt *st;
    sha256_hex(token, strlen(token), hash);
    sdb_prepare(db, "INSERT INTO sessions VALUES (?1, ?2, 'csrf', 0, ?3)", &st);
    sdb_bind_text(st, 1, hash, -1, SDB_TRANSIENT);
    sdb_bind_int64(st, 2, user);
    sdb_bind_int64(st, 3, expires);
    CHECK(sdb_step(st) == SDB_DONE, "insert session");
    sdb_finalize(st);
}

int main(void)
{
    static const struct {
        const char *token;
        int shape;
    } shapes[] = {
        {"ses-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 1},
        {"ses-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 0},     /* one short */
        {"ses-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 0},   /* one long */
        {"ses-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'", 0},    /* quote */
        {"sk-tenant-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        CHECK(session_token_shape(shapes[i].token) == shapes[i].shape, "shape of %s", shapes[i].token);
    CHECK(!session_token_shape(NULL), "NULL");

    struct sdb *db = sdb_open(":memory:", 1);
    sdb_exec(db, "CREATE TABLE sessions (token_hash TEXT PRIMARY KEY, user_id INTEGER, csrf_token TEXT,"
                 " created_at INTEGER, expires_at INTEGER)");
    const char *live = "ses-LiveLiveLiveLiveLiveLiveLiveLiveLiveLive123";
    const char *old = "ses-OldOldOldOldOldOldOldOldOldOldOldOldOld1234";
    add(db, live, 7, (int64_t)time(NULL) + 60);
    add(db, old, 8, (int64_t)time(NULL) - 1);
    int64_t uid = 0;
    CHECK(session_lookup(db, live, &uid) == 0 && uid == 7, "live session finds its user (%lld)",
          (long long)uid);
    uid = 0;
    CHECK(session_lookup(db, old, &uid) == -1 && uid == 0, "expired session refused");
    CHECK(session_lookup(db, "ses-UnknownUnknownUnknownUnknownUnknownUnkno", &uid) == -1, "unknown");
    CHECK(session_lookup(db, "ses-x' OR '1'='1", &uid) == -1, "malformed never reaches SQL");
    CHECK(session_lookup(NULL, live, &uid) == -1, "no database");
    sdb_close(db);
    return check_done();
}
