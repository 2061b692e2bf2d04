/* idem.c: begin / replay / finish of Idempotency-Key records (SPEC §13). */
#include "idem.h"

#include "arena.h"
#include "log.h"
#include "shm.h"

#include <string.h>
#include <unistd.h>

static const char SQL_GET[] =
    "SELECT fingerprint, state, owner_pid, owner_start, status, content_type, body, expires_at, body IS NULL"
    " FROM idempotency WHERE scope = ?1 AND idem_key = ?2";
static const char SQL_PUT[] =
    "INSERT INTO idempotency (key_id, scope, idem_key, fingerprint, state, owner_pid, owner_start,"
    " created_at, expires_at) VALUES (0, ?1, ?2, ?3, 'in_progress', ?4, ?5, ?6, ?7)"
    " ON CONFLICT (scope, idem_key) DO UPDATE SET key_id = excluded.key_id, fingerprint = excluded.fingerprint,"
    " state = excluded.state, owner_pid = excluded.owner_pid, owner_start = excluded.owner_start, status = NULL,"
    " content_type = NULL, headers = NULL, body = NULL, body_bytes = 0, created_at = excluded.created_at,"
    " expires_at = excluded.expires_at";      /* a new record in the old one's place, as REPLACE would */
static const char SQL_OWNER[] =
    "UPDATE idempotency SET owner_pid = ?3, owner_start = ?4 WHERE scope = ?1 AND idem_key = ?2";
static const char SQL_DONE[] =
    "UPDATE idempotency SET state = 'done', status = ?3, content_type = ?4, body = ?5, body_bytes = ?6,"
    " owner_pid = NULL WHERE scope = ?1 AND idem_key = ?2";
static const char SQL_DEL[] = "DELETE FROM idempotency WHERE scope = ?1 AND idem_key = ?2";
static const char SQL_EXPIRE[] =
    "DELETE FROM idempotency WHERE (scope, idem_key) IN (SELECT scope, idem_key FROM idempotency"
    " WHERE expires_at < ?1 AND state = 'done' LIMIT ?2)";
static const char SQL_BUDGET[] = "SELECT count(*), total(body_bytes) FROM idempotency";

int idem_parse_key(const char *h, char out[129])
{
    size_t n = 0;
    if (*h == '"') {
        for (h++; *h && *h != '"'; h++) {
            if (*h == '\\') {
                h++;
                if (*h != '"' && *h != '\\')
                    return -1;
            }
            if ((unsigned char)*h < 0x20 || (unsigned char)*h > 0x7e || n >= 128)
                return -1;
            out[n++] = *h;
        }
        if (*h != '"' || h[1] != '\0')
            return -1;
    } else {
        for (; *h; h++) {
            unsigned char c = (unsigned char)*h;
            if (c <= 0x20 || c > 0x7e || c == '"' || c == '\\' || c == ',' || c == ';' || n >= 128)
                return -1;
            out[n++] = *h;
        }
    }
    out[n] = '\0';
    return n > 0 ? 0 : -1;
}

static char *col_dup(struct arena *a, struct sdb_stmt *st, int i, size_t *len)
{
    const void *p = sdb_column_blob(st, i);
    size_t n = (size_t)sdb_column_bytes(st, i);
    if (len)
        *len = n;
    return p ? arena_strndup(a, p, n) : NULL;
}

static enum idem_begin idem_insert(struct dbconn *c, const char *scope, const char *key, const char *fp,
                                   int64_t now, int64_t ttl_ms)
{
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_IDEM_PUT, SQL_PUT);
    if (!st)
        return IDEM_DB_ERROR;
    int me = getpid();
    sdb_bind_text(st, 1, scope, -1, SDB_STATIC);
    sdb_bind_text(st, 2, key, -1, SDB_STATIC);
    sdb_bind_text(st, 3, fp, -1, SDB_STATIC);
    sdb_bind_int(st, 4, me);
    sdb_bind_int64(st, 5, (int64_t)shm_proc_start_time(me));
    sdb_bind_int64(st, 6, now);
    sdb_bind_int64(st, 7, now + ttl_ms);
    int rc = sdb_step(st);
    sdb_reset(st);
    return rc == SDB_DONE ? IDEM_OWNED : IDEM_DB_ERROR;
}

enum idem_begin idem_begin(struct dbconn *c, const char *scope, const char *key, const char *fp,
                           int64_t now, int64_t ttl_ms, struct idem_replay *out, struct arena *a)
{
    /* One write transaction: two requests with the same key never both own it. */
    if (dbpool_exec(c, "BEGIN IMMEDIATE") != 0)
        return IDEM_DB_ERROR;
    enum idem_begin res = IDEM_DB_ERROR;
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_IDEM_GET, SQL_GET);
    if (!st)
        goto out;
    sdb_bind_text(st, 1, scope, -1, SDB_STATIC);
    sdb_bind_text(st, 2, key, -1, SDB_STATIC);
    int rc = sdb_step(st);
    /* An expired record may be replaced, unless its request is still running
     * (a stream longer than the TTL must not run twice). */
    int expired = rc == SDB_ROW && sdb_column_int64(st, 7) < now &&
                  !(sdb_column_text(st, 1) && strcmp((const char *)sdb_column_text(st, 1), "in_progress") == 0 &&
                    shm_proc_alive(sdb_column_int(st, 2), (uint64_t)sdb_column_int64(st, 3)));
    if (rc == SDB_DONE || expired) {
        sdb_reset(st);
        res = idem_insert(c, scope, key, fp, now, ttl_ms);
        goto out;
    }
    if (rc != SDB_ROW)
        goto out_reset;
    const char *have_fp = (const char *)sdb_column_text(st, 0);
    const char *state = (const char *)sdb_column_text(st, 1);
    if (!have_fp || strcmp(have_fp, fp) != 0) {
        res = IDEM_MISMATCH;
    } else if (state && strcmp(state, "in_progress") == 0) {
        int pid = sdb_column_int(st, 2);
        uint64_t start = (uint64_t)sdb_column_int64(st, 3);
        if (shm_proc_alive(pid, start)) {
            res = IDEM_IN_PROGRESS;
        } else {
            /* R-IDEM-3: the owner died mid-request; this request takes over. */
            sdb_reset(st);
            struct sdb_stmt *o = dbpool_stmt(c, DBQ_IDEM_OWNER, SQL_OWNER);
            int me = getpid();
            if (o) {
                sdb_bind_text(o, 1, scope, -1, SDB_STATIC);
                sdb_bind_text(o, 2, key, -1, SDB_STATIC);
                sdb_bind_int(o, 3, me);
                sdb_bind_int64(o, 4, (int64_t)shm_proc_start_time(me));
                res = sdb_step(o) == SDB_DONE ? IDEM_OWNED : IDEM_DB_ERROR;
                sdb_reset(o);
            }
            log_info("idempotency key of a dead owner (pid %d) taken over", pid);
            goto out;
        }
    } else if (sdb_column_int(st, 8)) {
        res = IDEM_NOT_STORED;
    } else {
        out->status = sdb_column_int(st, 4);
        out->content_type = col_dup(a, st, 5, NULL);
        out->body = col_dup(a, st, 6, &out->body_len);
        res = IDEM_REPLAY;
    }
out_reset:
    sdb_reset(st);
out:
    if (res == IDEM_DB_ERROR || dbpool_exec(c, "COMMIT") != 0) {
        /* A failed COMMIT can leave the transaction open: never hand the
         * connection back holding the write lock. */
        dbpool_exec(c, "ROLLBACK");
        res = IDEM_DB_ERROR;
    }
    return res;
}

int idem_done(struct dbconn *c, const char *scope, const char *key, int status, const char *content_type,
              const char *body, size_t body_len)
{
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_IDEM_DONE, SQL_DONE);
    if (!st)
        return -1;
    sdb_bind_text(st, 1, scope, -1, SDB_STATIC);
    sdb_bind_text(st, 2, key, -1, SDB_STATIC);
    sdb_bind_int(st, 3, status);
    if (content_type)
        sdb_bind_text(st, 4, content_type, -1, SDB_STATIC);
    if (body)
        sdb_bind_blob64(st, 5, body, body_len, SDB_STATIC);
    sdb_bind_int64(st, 6, body ? (int64_t)body_len : 0);
    int rc = sdb_step(st);
    sdb_reset(st);
    return rc == SDB_DONE ? 0 : -1;
}

int idem_release(struct dbconn *c, const char *scope, const char *key)
{
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_IDEM_DEL, SQL_DEL);
    if (!st)
        return -1;
    sdb_bind_text(st, 1, scope, -1, SDB_STATIC);
    sdb_bind_text(st, 2, key, -1, SDB_STATIC);
    int rc = sdb_step(st);
    sdb_reset(st);
    return rc == SDB_DONE ? 0 : -1;
}

int idem_expire(struct dbconn *c, int64_t now, int limit)
{
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_IDEM_EXPIRE, SQL_EXPIRE);
    if (!st)
        return -1;
    sdb_bind_int64(st, 1, now);
    sdb_bind_int(st, 2, limit);
    int rc = sdb_step(st);
    sdb_reset(st);
    return rc == SDB_DONE ? sdb_changes(c->db) : -1;
}

int idem_usage(struct dbconn *c, int64_t *records, int64_t *bytes)
{
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_IDEM_BUDGET, SQL_BUDGET);
    if (!st)
        return -1;
    int rc = sdb_step(st);
    if (rc == SDB_ROW) {
        *records = sdb_column_int64(st, 0);
        *bytes = (int64_t)sdb_column_double(st, 1);
    }
    sdb_reset(st);
    return rc == SDB_ROW ? 0 : -1;
}
