/* dbpool.h: a few SQLite connections shared by a responder's worker threads for
 * the writes the request path must make itself (quota UPSERTs R-KEY-4,
 * idempotency records R-IDEM-3) and the exact cache's lookup (R-CACHE-2). Statements are prepared once per connection. */
#ifndef SLUICE_DBPOOL_H
#define SLUICE_DBPOOL_H

#include <stdint.h>
#include "sdb.h"

enum dbq {
    DBQ_QUOTA_CALLS, DBQ_QUOTA_TOKENS, DBQ_QUOTA_REFUND_CALLS, DBQ_QUOTA_SETTLE_TOKENS,
    DBQ_IDEM_GET, DBQ_IDEM_PUT, DBQ_IDEM_REPLACE, DBQ_IDEM_OWNER, DBQ_IDEM_DONE, DBQ_IDEM_DEL, DBQ_IDEM_EXPIRE,
    DBQ_IDEM_BUDGET,
    DBQ_CACHE_GET,
    DBQ_SEM_CANDIDATES,           /* R-CACHE-4: cache_semantic.c */
    DBQ_COUNT
};

/* One connection; owned by the pool, lent to one thread at a time. */
struct dbconn {
    struct sdb *db;
    struct sdb_stmt *st[DBQ_COUNT];
};

int dbpool_init(const char *path, int n, int wait_ms, int64_t mmap_bytes);
struct dbconn *dbpool_get(void);        /* waits for a free connection */
void dbpool_put(struct dbconn *c);
/* The statement for q, prepared on first use (sdb_prepare_persistent) and
 * reset with bindings cleared; NULL on error (logged). */
struct sdb_stmt *dbpool_stmt(struct dbconn *c, enum dbq q, const char *sql);
int dbpool_exec(struct dbconn *c, const char *sql);

#endif
