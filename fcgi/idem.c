/* idem.c: begin / replay / finish of Idempotency-Key records (SPEC §13). */
#include "idem.h"
#include "idem_owner.h"

#include "arena.h"
#include "log.h"
#include "shm.h"
#include "util.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char SQL_GET[] =
    "SELECT fingerprint, state, owner_pid, owner_start, status, content_type, body, expires_at, body IS NULL,"
    " owner_host, created_at FROM idempotency WHERE scope = ?1 AND idem_key = ?2";
/* A claim is one statement: the primary key decides between two requests of one
 * key, on every host, with no transaction and no lock of the whole database. */
static const char SQL_CLAIM[] =
    "INSERT INTO idempotency (key_id, scope, idem_key, fingerprint, state, owner_pid, owner_start, owner_host,"
    " owner_token, created_at, expires_at) VALUES (0, ?1, ?2, ?3, 'in_progress', ?4, ?5, ?6, ?7, ?8, ?9)"
    " ON CONFLICT (scope, idem_key) DO NOTHING";
/* A new record in an expired one's place, only if it is still the one that was read. */
static const char SQL_REPLACE[] =
    "UPDATE idempotency SET key_id = 0, fingerprint = ?3, state = 'in_progress', owner_pid = ?4, owner_start = ?5,"
    " owner_host = ?6, owner_token = ?7, status = NULL, content_type = NULL, headers = NULL, body = NULL,"
    " body_bytes = 0, created_at = ?8, expires_at = ?9"
    " WHERE scope = ?1 AND idem_key = ?2 AND created_at = ?10 AND expires_at = ?11";
/* R-IDEM-3: a dead owner's record taken over, only if nobody else did first; it
 * lives a whole TTL from now and dates from now, as a new claim would. */
static const char SQL_OWNER[] =
    "UPDATE idempotency SET owner_pid = ?3, owner_start = ?4, owner_host = ?5, owner_token = ?6, expires_at = ?7,"
    " created_at = ?11 WHERE scope = ?1 AND idem_key = ?2 AND state = 'in_progress' AND owner_pid IS ?8"
    " AND owner_start IS ?9 AND owner_host IS ?10";
/* The end of a request touches the record only while it is still its claim's. */
static const char SQL_DONE[] =
    "UPDATE idempotency SET state = 'done', status = ?3, content_type = ?4, body = ?5, body_bytes = ?6,"
    " owner_pid = NULL WHERE scope = ?1 AND idem_key = ?2 AND owner_token = ?7 AND state = 'in_progress'";
static const char SQL_DEL[] =
    "DELETE FROM idempotency WHERE scope = ?1 AND idem_key = ?2 AND owner_token = ?3 AND state = 'in_progress'";
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

/* ---- who owns a record ---------------------------------------------------- */

/* This host: machine id, host name, PID namespace and boot id. A PID and start
 * time mean a process only where (and in the boot) they were written;
 * SLUICE_HOST_ID names the host instead, for setups that hide those. */
static char host_id[200];
static int64_t boot_ms;                 /* when this host booted (wall clock), 0 unknown */
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void read_line(const char *path, char *out, size_t n)
{
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(out, (int)n, f))
        out[strcspn(out, "\r\n")] = 0;
    fclose(f);
}

static void host_id_init(void)
{
    FILE *f = fopen("/proc/stat", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "btime ", 6) == 0)
            boot_ms = strtoll(line + 6, NULL, 10) * 1000;
    if (f)
        fclose(f);
    const char *env = getenv("SLUICE_HOST_ID");
    if (env && *env) {
        /* A name given: the same name is this host, any other another host. */
        snprintf(host_id, sizeof host_id, "id:%s", env);
        for (char *p = host_id; *p; p++)
            if (*p == '|')
                *p = '_';
        return;
    }
    char machine[64], name[80] = "", pidns[64] = "", boot[64];
    read_line("/etc/machine-id", machine, sizeof machine);
    if (gethostname(name, sizeof name - 1) != 0)
        name[0] = 0;
    ssize_t n = readlink("/proc/self/ns/pid", pidns, sizeof pidns - 1);    /* "pid:[4026531836]" */
    pidns[n > 0 ? n : 0] = 0;
    read_line("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
    snprintf(host_id, sizeof host_id, "%s|%s|%s|%s", machine, name, pidns, boot);
}

static const char *my_host(void)
{
    pthread_once(&host_once, host_id_init);
    return host_id;
}

/* ---- begin ------------------------------------------------------------------ */

/* This claim's owner: PID, start time, host and the claim's own token. */
static void bind_owner(struct sdb_stmt *st, int at, const char *token)
{
    int me = getpid();
    sdb_bind_int(st, at, me);
    sdb_bind_int64(st, at + 1, (int64_t)shm_proc_start_time(me));
    sdb_bind_text(st, at + 2, my_host(), -1, SDB_STATIC);
    sdb_bind_text(st, at + 3, token, -1, SDB_STATIC);
}

static void new_token(char out[IDEM_TOKEN_LEN])
{
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        uint64_t x = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)out;
        memcpy(b, &x, 8);
        memcpy(b + 8, &x, 8);
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* 1 this request owns a new record, 0 one is there already, -1 error. */
static int idem_claim(struct dbconn *c, const char *scope, const char *key, const char *fp, int64_t now,
                      int64_t ttl_ms, const char *token)
{
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_IDEM_PUT, SQL_CLAIM);
    if (!st)
        return -1;
    sdb_bind_text(st, 1, scope, -1, SDB_STATIC);
    sdb_bind_text(st, 2, key, -1, SDB_STATIC);
    sdb_bind_text(st, 3, fp, -1, SDB_STATIC);
    bind_owner(st, 4, token);
    sdb_bind_int64(st, 8, now);
    sdb_bind_int64(st, 9, now + ttl_ms);
    int rc = sdb_step(st);
    sdb_reset(st);
    return rc != SDB_DONE ? -1 : sdb_changes(c->db) > 0;
}

/* What was read of the record, copied before the statement is reset. */
struct seen {
    char fp[80], state[16], host[200];
    int has_pid, has_start, has_host, body_null, status;
    int pid;
    int64_t start, expires_at, created_at;
};

static int int_or_null(struct sdb_stmt *st, int i, int *has)
{
    *has = sdb_column_type(st, i) != SDB_NULL;
    return sdb_column_int(st, i);
}

static void bind_int_or_null(struct sdb_stmt *st, int i, int has, int64_t v)
{
    if (has)
        sdb_bind_int64(st, i, v);
    else
        sdb_bind_null(st, i);
}

/* 1 this request got it (the update matched the record as read), 0 another did first, -1 error. */
static int idem_cas(struct dbconn *c, struct sdb_stmt *st)
{
    int rc = sdb_step(st);
    sdb_reset(st);
    return rc != SDB_DONE ? -1 : sdb_changes(c->db) > 0;
}

enum idem_begin idem_begin(struct dbconn *c, const char *scope, const char *key, const char *fp,
                           int64_t now, int64_t ttl_ms, struct idem_replay *out, struct arena *a,
                           char token[IDEM_TOKEN_LEN])
{
    new_token(token);
    /* Claim, or read what is there and act on it with a compare-and-set; a
     * record that changes between the two is looked at again. */
    for (int round = 0; round < 4; round++) {
        int claimed = idem_claim(c, scope, key, fp, now, ttl_ms, token);
        if (claimed != 0)
            return claimed > 0 ? IDEM_OWNED : IDEM_DB_ERROR;
        struct sdb_stmt *st = dbpool_stmt(c, DBQ_IDEM_GET, SQL_GET);
        if (!st)
            return IDEM_DB_ERROR;
        sdb_bind_text(st, 1, scope, -1, SDB_STATIC);
        sdb_bind_text(st, 2, key, -1, SDB_STATIC);
        int rc = sdb_step(st);
        if (rc == SDB_DONE) {               /* gone since the claim (released, expired): claim again */
            sdb_reset(st);
            continue;
        }
        if (rc != SDB_ROW) {
            sdb_reset(st);
            return IDEM_DB_ERROR;
        }
        struct seen v = {0};
        snprintf(v.fp, sizeof v.fp, "%s", sdb_column_text(st, 0) ? (const char *)sdb_column_text(st, 0) : "");
        snprintf(v.state, sizeof v.state, "%s", sdb_column_text(st, 1) ? (const char *)sdb_column_text(st, 1) : "");
        v.pid = int_or_null(st, 2, &v.has_pid);
        v.has_start = sdb_column_type(st, 3) != SDB_NULL;
        v.start = sdb_column_int64(st, 3);
        v.status = sdb_column_int(st, 4);
        v.expires_at = sdb_column_int64(st, 7);
        v.body_null = sdb_column_int(st, 8);
        v.has_host = sdb_column_type(st, 9) != SDB_NULL;
        snprintf(v.host, sizeof v.host, "%s", v.has_host ? (const char *)sdb_column_text(st, 9) : "");
        v.created_at = sdb_column_int64(st, 10);
        int in_progress = strcmp(v.state, "in_progress") == 0;
        int running = 0;
        if (in_progress) {
            const char *me = my_host();
            enum idem_owner_at where = idem_owner_where(v.has_host ? v.host : NULL, me, !sdb_is_server(c->db),
                                                        v.created_at, boot_ms);
            int here = where == IDEM_OWNER_HERE && shm_proc_alive(v.pid, (uint64_t)v.start);
            running = idem_owner_running(where, here, v.expires_at, now);
        }
        /* An expired record may be replaced, unless its request is still running
         * (a stream longer than the TTL must not run twice). */
        if (v.expires_at < now && !running) {
            sdb_reset(st);
            struct sdb_stmt *u = dbpool_stmt(c, DBQ_IDEM_REPLACE, SQL_REPLACE);
            if (!u)
                return IDEM_DB_ERROR;
            sdb_bind_text(u, 1, scope, -1, SDB_STATIC);
            sdb_bind_text(u, 2, key, -1, SDB_STATIC);
            sdb_bind_text(u, 3, fp, -1, SDB_STATIC);
            bind_owner(u, 4, token);
            sdb_bind_int64(u, 8, now);
            sdb_bind_int64(u, 9, now + ttl_ms);
            sdb_bind_int64(u, 10, v.created_at);
            sdb_bind_int64(u, 11, v.expires_at);
            int got = idem_cas(c, u);
            if (got != 0)
                return got > 0 ? IDEM_OWNED : IDEM_DB_ERROR;
            continue;
        }
        if (strcmp(v.fp, fp) != 0) {
            sdb_reset(st);
            return IDEM_MISMATCH;
        }
        if (in_progress && running) {
            sdb_reset(st);
            return IDEM_IN_PROGRESS;
        }
        if (in_progress) {
            /* R-IDEM-3: the owner died mid-request; this request takes over. */
            sdb_reset(st);
            struct sdb_stmt *o = dbpool_stmt(c, DBQ_IDEM_OWNER, SQL_OWNER);
            if (!o)
                return IDEM_DB_ERROR;
            sdb_bind_text(o, 1, scope, -1, SDB_STATIC);
            sdb_bind_text(o, 2, key, -1, SDB_STATIC);
            bind_owner(o, 3, token);
            sdb_bind_int64(o, 7, now + ttl_ms);
            bind_int_or_null(o, 8, v.has_pid, v.pid);
            bind_int_or_null(o, 9, v.has_start, v.start);
            if (v.has_host)
                sdb_bind_text(o, 10, v.host, -1, SDB_STATIC);
            else
                sdb_bind_null(o, 10);
            sdb_bind_int64(o, 11, now);     /* newer than any boot before it: never taken for a reboot's */
            int got = idem_cas(c, o);
            if (got > 0)
                log_info("idempotency key of a dead owner (pid %d) taken over", v.pid);
            if (got != 0)
                return got > 0 ? IDEM_OWNED : IDEM_DB_ERROR;
            continue;
        }
        if (v.body_null) {
            sdb_reset(st);
            return IDEM_NOT_STORED;
        }
        out->status = v.status;
        out->content_type = col_dup(a, st, 5, NULL);
        out->body = col_dup(a, st, 6, &out->body_len);
        sdb_reset(st);
        return IDEM_REPLAY;
    }
    return IDEM_IN_PROGRESS;                /* it kept changing under us: another request is at it */
}

/* A claim that is no longer the record's (replaced after it expired, on another
 * host): its end leaves the record to the claim that has it. */
static int ended(struct dbconn *c, int rc, const char *scope, const char *what)
{
    if (rc != SDB_DONE)
        return -1;
    if (sdb_changes(c->db) == 0)
        log_warn("idempotency record of %s no longer this request's (taken over after it expired): not %s",
                 scope, what);
    return 0;
}

int idem_done(struct dbconn *c, const char *scope, const char *key, const char *token, int status,
              const char *content_type, const char *body, size_t body_len)
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
    sdb_bind_text(st, 7, token, -1, SDB_STATIC);
    int rc = sdb_step(st);
    sdb_reset(st);
    return ended(c, rc, scope, "stored");
}

int idem_release(struct dbconn *c, const char *scope, const char *key, const char *token)
{
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_IDEM_DEL, SQL_DEL);
    if (!st)
        return -1;
    sdb_bind_text(st, 1, scope, -1, SDB_STATIC);
    sdb_bind_text(st, 2, key, -1, SDB_STATIC);
    sdb_bind_text(st, 3, token, -1, SDB_STATIC);
    int rc = sdb_step(st);
    sdb_reset(st);
    return ended(c, rc, scope, "released");
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
