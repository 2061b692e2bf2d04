/* dbpool.c: a small pool of SQLite connections for request-path writes. */
#include "dbpool.h"

#include "arena.h"
#include "db.h"
#include "log.h"

#include <pthread.h>
#include <stdio.h>

#define DBPOOL_SERVER_WAIT_MS 250

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static struct dbconn *pool;          /* the connections; owned here for the process's life */
static int *pool_free, pool_nfree, pool_n;

int dbpool_init(const char *path, int n, int wait_ms, int64_t mmap_bytes)
{
    pool = xcalloc((size_t)n, sizeof *pool);
    pool_free = xcalloc((size_t)n, sizeof *pool_free);
    for (int i = 0; i < n; i++) {
        pool[i].db = db_open(path, 0);
        if (!pool[i].db)
            return -1;
        /* The request path never waits on a locked database longer than
         * limits.quota_db_wait_ms: past it the request fails open (R-KEY-4). On a
         * PostgreSQL server a write transaction is a few round trips, not
         * microseconds, so writers queued behind one another (twenty requests
         * claiming one idempotency key, a usage batch) need longer: there the
         * wait is at least DBPOOL_SERVER_WAIT_MS. */
        sdb_busy_timeout(pool[i].db, sdb_is_server(pool[i].db) && wait_ms < DBPOOL_SERVER_WAIT_MS
                                         ? DBPOOL_SERVER_WAIT_MS : wait_ms);
        /* Every commit of the usage writer empties a reader's page cache
         * (WAL: the next read transaction sees a changed database); mapped,
         * the pages come back without a read() each (the cache lookup's p99,
         * R-CACHE-3). The price: an I/O error on a mapped page, or the file
         * cut short underneath (a restore over the live file), is a SIGBUS,
         * not an error; keys.db_mmap_bytes = 0 turns it off. */
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA mmap_size=%lld", (long long)mmap_bytes);
        sdb_exec(pool[i].db, pragma);
        pool_free[pool_nfree++] = i;
    }
    pool_n = n;
    return 0;
}

struct dbconn *dbpool_get(void)
{
    pthread_mutex_lock(&pool_lock);
    while (pool_nfree == 0)
        pthread_cond_wait(&pool_cond, &pool_lock);
    struct dbconn *c = &pool[pool_free[--pool_nfree]];
    pthread_mutex_unlock(&pool_lock);
    return c;
}

void dbpool_put(struct dbconn *c)
{
    pthread_mutex_lock(&pool_lock);
    pool_free[pool_nfree++] = (int)(c - pool);
    pthread_cond_signal(&pool_cond);
    pthread_mutex_unlock(&pool_lock);
}

struct sdb_stmt *dbpool_stmt(struct dbconn *c, enum dbq q, const char *sql)
{
    if (!c->st[q] &&
        sdb_prepare_persistent(c->db, sql, &c->st[q]) != SDB_OK) {
        log_error("sqlite prepare: %s", sdb_errmsg(c->db));
        return NULL;
    }
    sdb_reset(c->st[q]);
    sdb_clear_bindings(c->st[q]);
    return c->st[q];
}

int dbpool_exec(struct dbconn *c, const char *sql) { return db_exec(c->db, sql); }
