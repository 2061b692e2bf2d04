/* cache_store.c: the exact cache's writes, on the usage writer's thread and
 * connection (cache_store.h).
 *
 * The running total of cached bytes lives in the shared state (the
 * sluice_cache_bytes gauge, and what the size cap is checked against), so no
 * batch sums the table: every change to it is made while this writer holds
 * SQLite's write lock (its batch transaction), and undone if the batch rolls
 * back. One writer of the pool sums the table again every CACHE_SUM_MS (and
 * when the state file is new), which also catches up deletions made by anyone
 * else. */
#include "cache_store.h"

#include "log.h"
#include "metrics.h"
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SUM_MS 60000          /* an operator's `cache clear` shows in the gauge within a minute */
#define CACHE_EXPIRE_MS 60000
#define HIT_KEYS 64                   /* distinct keys whose hits one batch adds up */

static const char SQL_PUT[] =
    "INSERT INTO cache_entries (key_hash, kind, tenant_id, model, routed_model, endpoint_id, stream, content_type,"
    " body, chunks, prompt_tokens, completion_tokens, bytes, created_ms, expires_ms)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
static const char SQL_DEL_KEY[] = "DELETE FROM cache_entries WHERE key_hash = ?1 RETURNING kind, bytes";
static const char SQL_HITS[] = "UPDATE cache_entries SET hits = hits + ?2 WHERE key_hash = ?1";
static const char SQL_EXPIRE[] =
    "DELETE FROM cache_entries WHERE key_hash IN (SELECT key_hash FROM cache_entries WHERE expires_ms <= ?1"
    " LIMIT 1000) RETURNING kind, bytes";
static const char SQL_EVICT[] =
    "DELETE FROM cache_entries WHERE key_hash IN (SELECT key_hash FROM cache_entries ORDER BY created_ms"
    " LIMIT ?1) RETURNING kind, bytes";
/* R-CACHE-4: the vector as float32 little-endian; the audit. */
static const char SQL_SEM_PUT[] =
    "INSERT INTO semantic_entries (scope_hash, key_hash, tenant_id, model, embed_model, dims, vector, prompt,"
    " created_ms, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
static const char SQL_SEM_AUDIT[] =
    "INSERT INTO semantic_hits (ts_ms, request_id, tenant_id, model, similarity, entry_id, key_hash, prompt,"
    " matched) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
/* The oldest semantic entries past the cap go with their answers (the
 * semantic_entries rows follow by ON DELETE CASCADE). */
static const char SQL_SEM_EVICT[] =
    "DELETE FROM cache_entries WHERE key_hash IN (SELECT key_hash FROM semantic_entries ORDER BY created_ms, id"
    " LIMIT max((SELECT count(*) FROM semantic_entries) - ?1, 0)) RETURNING kind, bytes";
static const char SQL_SUM[] = "SELECT kind, total(bytes) FROM cache_entries GROUP BY kind";

static const char *const kind_names[] = {"exact", "semantic"};

/* Owned by the usage writer's thread (the only caller), for the process's life. */
static struct {
    struct sdb *db;
    const struct conf *conf;
    struct shm *shm;
    struct sdb_stmt *put, *del_key, *hits, *expire, *evict, *sum, *sem_put, *sem_audit, *sem_evict;
    int64_t last_expire_ms;
    /* this batch, until cache_store_done */
    int64_t delta[2];             /* applied to the shared total, undone on rollback */
    int64_t stores[2], evictions[2];
    int summed;                   /* this batch set the shared totals from the table */
    int changed;                  /* this batch changed the table's bytes (a replace may net to 0) */
    int sem_puts;                 /* semantic entries this batch added (the cap is checked then) */
    struct { char key[65]; int64_t n; } hit[HIT_KEYS];
    int n_hit;
} cs;

static int prepare(const char *sql, struct sdb_stmt **st)
{
    if (sdb_prepare_persistent(cs.db, sql, st) == SDB_OK)
        return 0;
    log_error("cache store: %s", sdb_errmsg(cs.db));
    return -1;
}

int cache_store_open(struct sdb *db, const struct conf *c, struct shm *s)
{
    memset(&cs, 0, sizeof cs);
    cs.db = db;
    cs.conf = c;
    cs.shm = s && s->r ? s : NULL;
    if (prepare(SQL_PUT, &cs.put) || prepare(SQL_DEL_KEY, &cs.del_key) || prepare(SQL_HITS, &cs.hits) ||
        prepare(SQL_EXPIRE, &cs.expire) || prepare(SQL_EVICT, &cs.evict) || prepare(SQL_SUM, &cs.sum) ||
        prepare(SQL_SEM_PUT, &cs.sem_put) || prepare(SQL_SEM_AUDIT, &cs.sem_audit) ||
        prepare(SQL_SEM_EVICT, &cs.sem_evict))
        return -1;
    return 0;
}

void cache_store_close(void)
{
    struct sdb_stmt *all[] = {cs.put, cs.del_key, cs.hits, cs.expire, cs.evict, cs.sum, cs.sem_put, cs.sem_audit,
                           cs.sem_evict};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sdb_finalize(all[i]);
    memset(&cs, 0, sizeof cs);
}

static int kind_of(const char *name)
{
    return name && strcmp(name, "semantic") == 0 ? CACHE_KIND_SEMANTIC : CACHE_KIND_EXACT;
}

static void total_add(int kind, int64_t n)
{
    cs.changed = 1;
    cs.delta[kind] += n;
    if (cs.shm)
        atomic_fetch_add(&cs.shm->r->metrics.cache_bytes[kind], n);
}

static int64_t total_now(void)
{
    if (!cs.shm)
        return cs.delta[0] + cs.delta[1];
    return atomic_load(&cs.shm->r->metrics.cache_bytes[0]) + atomic_load(&cs.shm->r->metrics.cache_bytes[1]);
}

/* Steps a DELETE ... RETURNING kind, bytes to its end, taking what it removed
 * off the total; *rows counts the rows per kind. 0, or -1. */
static int delete_rows(struct sdb_stmt *st, int64_t rows[2])
{
    int rc;
    while ((rc = sdb_step(st)) == SDB_ROW) {
        int kind = kind_of((const char *)sdb_column_text(st, 0));
        total_add(kind, -sdb_column_int64(st, 1));
        if (rows)
            rows[kind]++;
    }
    sdb_reset(st);
    return rc == SDB_DONE ? 0 : -1;
}

/* The shared totals from the table: when the state file is new, and by one
 * writer of the pool every CACHE_SUM_MS. Inside the transaction and only
 * before this batch changed anything, so the sum and the batch's later deltas
 * (undone on a rollback) add up. */
static int sum_if_due(int64_t now)
{
    if (!cs.shm || cs.summed || cs.changed)
        return 0;
    _Atomic int64_t *at = &cs.shm->r->metrics.cache_summed_ms;
    int64_t last = atomic_load(at);
    if (last && now - last < CACHE_SUM_MS)
        return 0;
    if (!atomic_compare_exchange_strong(at, &last, now))
        return 0;                   /* another writer does it */
    cs.summed = 1;
    int64_t sum[2] = {0, 0};
    int rc;
    sdb_reset(cs.sum);
    while ((rc = sdb_step(cs.sum)) == SDB_ROW)
        sum[kind_of((const char *)sdb_column_text(cs.sum, 0))] += (int64_t)sdb_column_double(cs.sum, 1);
    sdb_reset(cs.sum);
    if (rc != SDB_DONE) {
        atomic_store(at, last);     /* try again with the next batch */
        return -1;
    }
    for (int k = 0; k < 2; k++)
        atomic_store(&cs.shm->r->metrics.cache_bytes[k], sum[k]);
    return 0;
}

static _Atomic int64_t pending_bytes;

int cache_store_hold(size_t bytes, int64_t max_entry_bytes)
{
    int64_t budget = 4 * max_entry_bytes > (16LL << 20) ? 4 * max_entry_bytes : 16LL << 20;
    if (atomic_fetch_add(&pending_bytes, (int64_t)bytes) + (int64_t)bytes > budget) {
        atomic_fetch_sub(&pending_bytes, (int64_t)bytes);
        return 0;
    }
    return 1;
}

void cache_store_entry_free(struct cache_entry *e)
{
    if (!e)
        return;
    atomic_fetch_sub(&pending_bytes, (int64_t)e->held);
    free(e->sem);
    free(e);
}

/* R-CACHE-4: the semantic entry of the answer just stored. */
static int sem_put(const struct cache_entry *e)
{
    const struct semantic_part *p = e->sem;
    unsigned char *blob = malloc(p->dims * 4 + 1);
    if (!blob)
        abort();
    for (size_t i = 0; i < p->dims; i++) {
        uint32_t u;
        memcpy(&u, &p->vec[i], 4);
        blob[4 * i] = (unsigned char)u, blob[4 * i + 1] = (unsigned char)(u >> 8);
        blob[4 * i + 2] = (unsigned char)(u >> 16), blob[4 * i + 3] = (unsigned char)(u >> 24);
    }
    struct sdb_stmt *st = cs.sem_put;
    sdb_reset(st);
    sdb_bind_text(st, 1, p->scope_hash, -1, SDB_STATIC);
    sdb_bind_text(st, 2, e->key_hash, -1, SDB_STATIC);
    sdb_bind_int64(st, 3, e->tenant_id);
    sdb_bind_text(st, 4, e->model, -1, SDB_STATIC);
    sdb_bind_text(st, 5, p->embed_model, -1, SDB_STATIC);
    sdb_bind_int64(st, 6, (int64_t)p->dims);
    sdb_bind_blob64(st, 7, blob, p->dims * 4, SDB_STATIC);
    sdb_bind_text(st, 8, p->prompt, -1, SDB_STATIC);
    sdb_bind_int64(st, 9, e->created_ms);
    sdb_bind_int64(st, 10, e->expires_ms);
    int rc = sdb_step(st);
    sdb_reset(st);
    sdb_clear_bindings(st);
    free(blob);
    if (rc == SDB_DONE) {
        cs.sem_puts++;
        return 0;
    }
    if ((rc & 0xff) == SDB_CONSTRAINT || (rc & 0xff) == SDB_TOOBIG) {
        log_warn("cache store: a semantic entry was refused by the database (%s); only its exact key is kept",
                 sdb_errmsg(cs.db));
        return 0;
    }
    return -1;
}

int cache_store_audit(const struct semantic_audit *a)
{
    struct sdb_stmt *st = cs.sem_audit;
    sdb_reset(st);
    sdb_bind_int64(st, 1, a->ts_ms);
    sdb_bind_text(st, 2, a->request_id, -1, SDB_STATIC);
    sdb_bind_int64(st, 3, a->tenant_id);
    sdb_bind_text(st, 4, a->model, -1, SDB_STATIC);
    sdb_bind_double(st, 5, a->similarity);
    sdb_bind_int64(st, 6, a->entry_id);
    sdb_bind_text(st, 7, a->key_hash, -1, SDB_STATIC);
    sdb_bind_text(st, 8, a->prompt, -1, SDB_STATIC);
    sdb_bind_text(st, 9, a->matched, -1, SDB_STATIC);
    int rc = sdb_step(st);
    sdb_reset(st);
    sdb_clear_bindings(st);
    if (rc == SDB_DONE)
        return 0;
    if ((rc & 0xff) == SDB_CONSTRAINT || (rc & 0xff) == SDB_TOOBIG) {
        log_warn("cache store: a semantic hit audit row was refused by the database (%s); left out",
                 sdb_errmsg(cs.db));
        return 0;
    }
    return -1;
}

int cache_store_put(const struct cache_entry *e)
{
    if (sum_if_due(e->created_ms) != 0)
        return -1;
    /* A key stored again (two misses raced, or the old one expired) replaces it. */
    sdb_reset(cs.del_key);
    sdb_bind_text(cs.del_key, 1, e->key_hash, -1, SDB_STATIC);
    if (delete_rows(cs.del_key, NULL) != 0)
        return -1;
    struct sdb_stmt *st = cs.put;
    int64_t bytes = (int64_t)(e->body_len + e->chunks_len);
    sdb_reset(st);
    sdb_bind_text(st, 1, e->key_hash, -1, SDB_STATIC);
    sdb_bind_text(st, 2, kind_names[e->kind], -1, SDB_STATIC);
    sdb_bind_int64(st, 3, e->tenant_id);
    sdb_bind_text(st, 4, e->model, -1, SDB_STATIC);
    sdb_bind_text(st, 5, e->routed_model, -1, SDB_STATIC);
    sdb_bind_int64(st, 6, e->endpoint_id);
    sdb_bind_int(st, 7, e->stream);
    sdb_bind_text(st, 8, e->content_type, -1, SDB_STATIC);
    sdb_bind_blob64(st, 9, e->body, e->body_len, SDB_STATIC);
    if (e->chunks)
        sdb_bind_blob64(st, 10, e->chunks, e->chunks_len, SDB_STATIC);
    else
        sdb_bind_null(st, 10);
    sdb_bind_int64(st, 11, e->prompt_tokens);
    sdb_bind_int64(st, 12, e->completion_tokens);
    sdb_bind_int64(st, 13, bytes);
    sdb_bind_int64(st, 14, e->created_ms);
    sdb_bind_int64(st, 15, e->expires_ms);
    int rc = sdb_step(st);
    sdb_reset(st);
    sdb_clear_bindings(st);
    if (rc == SDB_DONE) {
        total_add(e->kind, bytes);
        cs.stores[e->kind]++;
        return e->sem ? sem_put(e) : 0;
    }
    if ((rc & 0xff) == SDB_CONSTRAINT || (rc & 0xff) == SDB_TOOBIG) {
        /* A bad entry must never stop the usage writer: it is left out. */
        log_warn("cache store: an answer was refused by the database (%s); not cached", sdb_errmsg(cs.db));
        return 0;
    }
    return -1;
}

static int flush_hits(void)
{
    for (int i = 0; i < cs.n_hit; i++) {
        sdb_reset(cs.hits);
        sdb_bind_text(cs.hits, 1, cs.hit[i].key, -1, SDB_STATIC);
        sdb_bind_int64(cs.hits, 2, cs.hit[i].n);
        int rc = sdb_step(cs.hits);
        sdb_reset(cs.hits);
        if (rc != SDB_DONE)
            return -1;
    }
    cs.n_hit = 0;
    return 0;
}

/* Hits are added up per key and written once per batch: an UPDATE rewrites
 * the whole row, answer included. */
int cache_store_hit(const char *key_hash)
{
    for (int i = 0; i < cs.n_hit; i++)
        if (strcmp(cs.hit[i].key, key_hash) == 0) {
            cs.hit[i].n++;
            return 0;
        }
    if (cs.n_hit == HIT_KEYS && flush_hits() != 0)
        return -1;
    str_copy(cs.hit[cs.n_hit].key, sizeof cs.hit[cs.n_hit].key, key_hash);
    cs.hit[cs.n_hit++].n = 1;
    return 0;
}

int cache_store_trim(int64_t now)
{
    if (sum_if_due(now) != 0 || flush_hits() != 0)
        return -1;
    if (now - cs.last_expire_ms >= CACHE_EXPIRE_MS) {
        sdb_reset(cs.expire);
        sdb_bind_int64(cs.expire, 1, now);
        if (delete_rows(cs.expire, NULL) != 0)
            return -1;
        cs.last_expire_ms = now;
    }
    /* R-CACHE-3: the oldest answers go, one by one, until the rest fits the cap. */
    for (int round = 0; total_now() > cs.conf->cache_max_bytes && round < 100000; round++) {
        int64_t before[2] = {cs.evictions[0], cs.evictions[1]};
        sdb_reset(cs.evict);
        sdb_bind_int(cs.evict, 1, 1);
        if (delete_rows(cs.evict, cs.evictions) != 0)
            return -1;
        if (cs.evictions[0] == before[0] && cs.evictions[1] == before[1]) {
            /* Nothing left to delete, yet over the cap: the total drifted; the table says. */
            for (int k = 0; cs.shm && k < 2; k++)
                atomic_store(&cs.shm->r->metrics.cache_bytes[k], 0);
            break;
        }
    }
    /* R-CACHE-4: at most cache.semantic_max_entries semantic entries, the oldest out first. */
    if (cs.sem_puts) {
        sdb_reset(cs.sem_evict);
        sdb_bind_int64(cs.sem_evict, 1, cs.conf->semantic_max_entries);
        if (delete_rows(cs.sem_evict, cs.evictions) != 0)
            return -1;
    }
    return 0;
}

void cache_store_done(int committed)
{
    for (int k = 0; k < 2; k++) {
        if (committed && cs.shm) {
            char label[32];
            snprintf(label, sizeof label, "kind=\"%s\"", kind_names[k]);
            if (cs.stores[k])
                metrics_add(cs.shm, MET_CACHE_STORES, label, (uint64_t)cs.stores[k]);
            if (cs.evictions[k])
                metrics_add(cs.shm, MET_CACHE_EVICTIONS, label, (uint64_t)cs.evictions[k]);
        } else if (!committed && cs.shm && cs.delta[k]) {
            atomic_fetch_sub(&cs.shm->r->metrics.cache_bytes[k], cs.delta[k]);
        }
        cs.delta[k] = cs.stores[k] = cs.evictions[k] = 0;
    }
    if (!committed) {
        cs.n_hit = 0;               /* the batch is retried: its hits come again */
        cs.last_expire_ms = 0;
    }
    cs.summed = cs.changed = cs.sem_puts = 0;
}
