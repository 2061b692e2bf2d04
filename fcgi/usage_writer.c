/* usage_writer.c: queue + one thread per responder writing usage in batches. */
#include "usage_writer.h"

#include "arena.h"
#include "db.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static struct usage_record *q_head, *q_tail;   /* owned by the queue until written */
static int q_len, q_stop;
static pthread_t q_thread;
static const struct conf *q_conf;
static struct sdb *q_db;
static struct sdb_stmt *st_daily, *st_route, *st_settle;
/* The event INSERT for 1, 2, 4 ... EVENT_ROWS_MAX rows (st_events[k]: 2^k rows): a batch's
 * events go in a few statements, not one each. Per statement SQLite opens and frees a
 * cursor on the table and on each of its indexes and halts the program; one INSERT a row
 * paid that ~16 k instructions per event, as much as the rows' own B-tree inserts (issue 17). */
enum { EVENT_COLS = 30, EVENT_SIZES = 6, EVENT_ROWS_MAX = 1 << (EVENT_SIZES - 1) };
static struct sdb_stmt *st_events[EVENT_SIZES];
static struct shm *q_shm;                     /* set before start, then read-only */
static int pending_len;                       /* records taken from the queue, not yet written */

/* A database that stopped taking the writes: said once when it starts and
 * once when it ends, not once per retry (the writer retries 10 times a second). */
struct outage {
    int64_t since_ms;             /* mono_ms() of the first failed batch, 0 = writable */
    int64_t failures;             /* failed batches */
    int64_t written;              /* records written since it ended, until the backlog is gone */
    int64_t recovered_ms;         /* the first batch written again, 0 = still failing */
};
static struct outage outage;
static char last_error[256];      /* sdb_errmsg of the failed batch, before its ROLLBACK */

/* EVENT_COLS columns; followed by one "(?,...)" per row (event_prepare). */
static const char SQL_EVENT[] =
    "INSERT INTO usage_events (ts_ms, request_id, tenant_id, user_id, key_id, endpoint_id, replica_id,"
    " route_id, model, routed_model, path, prompt_tokens, completion_tokens, latency_ms, ttft_ms, status,"
    " error_code, finish_reason, retries, stream, usage_estimated, cache_read_tokens, cache_creation_tokens,"
    " reasoning_tokens, queue_ms, cached, content_rule, affinity, cache, shadow) VALUES ";
static const char SQL_DAILY[] =
    "INSERT INTO usage_daily (day, tenant_id, user_id, key_id, model, requests, errors, prompt_tokens,"
    " completion_tokens) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (day, tenant_id, user_id, key_id, model)"
    " DO UPDATE SET requests = requests + excluded.requests, errors = errors + excluded.errors,"
    " prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
    " completion_tokens = completion_tokens + excluded.completion_tokens";

/* The same sums by endpoint and replica (the report by endpoint / replica, issue 16). */
static const char SQL_ROUTE[] =
    "INSERT INTO usage_daily_route (day, tenant_id, user_id, endpoint_id, replica_id, model, requests, errors,"
    " prompt_tokens, completion_tokens) VALUES (?,?,?,?,?,?,?,?,?,?)"
    " ON CONFLICT (day, tenant_id, user_id, endpoint_id, replica_id, model)"
    " DO UPDATE SET requests = requests + excluded.requests, errors = errors + excluded.errors,"
    " prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
    " completion_tokens = completion_tokens + excluded.completion_tokens";

/* Token sums saturate at 2^62 in SQL too: an addition that overflows would turn
 * the counter into a REAL, which the schema refuses (R-KEY-5). */
static const char SQL_SETTLE[] =
    "INSERT INTO quota_counters (key_id, period, tokens) VALUES (?1, ?2, max(min(?3, 4611686018427387904), 0))"
    " ON CONFLICT (key_id, period) DO UPDATE SET tokens = CASE WHEN ?3 > 4611686018427387904 - tokens"
    " THEN 4611686018427387904 ELSE max(tokens + ?3, 0) END";

static const char SQL_QUOTA_ADD[] =
    "INSERT INTO quota_counters (key_id, period, calls, tokens)"
    " VALUES (?1, ?2, max(?3, 0), max(min(?4, 4611686018427387904), 0))"
    " ON CONFLICT (key_id, period) DO UPDATE SET calls = max(calls + ?3, 0),"
    " tokens = CASE WHEN ?4 > 4611686018427387904 - tokens THEN 4611686018427387904 ELSE max(tokens + ?4, 0) END";
static struct sdb_stmt *st_quota;

/* What the schema refused (a retry would not cure it). */
static int refused(int rc)
{
    return (rc & 0xff) == SDB_CONSTRAINT || (rc & 0xff) == SDB_MISMATCH || (rc & 0xff) == SDB_TOOBIG;
}

/* Steps a write of the batch: 0 done, or refused by the schema (that one record's
 * row is logged and left out: a bad record must never stop the writer for
 * good); -1 for anything a retry may cure (busy, locked, I/O). */
static int step_kept(struct sdb_stmt *st, const char *what)
{
    int rc = sdb_step(st);
    if (rc == SDB_DONE)
        return 0;
    if (refused(rc)) {
        log_error("usage writer: a %s was refused by the database (%s); left out", what,
                  sdb_errmsg(sdb_stmt_db(st)));
        return 0;
    }
    return -1;
}

static int quota_add(int64_t key_id, const char *period, int64_t calls, int64_t tokens)
{
    sdb_reset(st_quota);
    sdb_bind_int64(st_quota, 1, key_id);
    sdb_bind_text(st_quota, 2, period, -1, SDB_TRANSIENT);
    sdb_bind_int64(st_quota, 3, calls);
    sdb_bind_int64(st_quota, 4, tokens);
    return step_kept(st_quota, "quota counter update");
}

/* The batch's texts are bound SDB_STATIC: the records and sums they point into live
 * until write_batch returns, and every statement that holds them is reset before it
 * does (release_binds). A copy of each (TRANSIENT) cost ~3 % of a request (issue 17). */
static int bind_text(struct sdb_stmt *st, int i, const char *s)
{
    return s && *s ? sdb_bind_text(st, i, s, -1, SDB_STATIC) : sdb_bind_null(st, i);
}

static void release_binds(void)
{
    for (int k = 0; k < EVENT_SIZES; k++)
        sdb_reset(st_events[k]);
    sdb_reset(st_daily);
    sdb_reset(st_route);
}

/* Binds u as the row whose first parameter is b + 1. */
static void bind_event(struct sdb_stmt *e, int b, const struct usage_record *u)
{
    sdb_bind_int64(e, b + 1, u->ts_ms);
    sdb_bind_text(e, b + 2, u->request_id, -1, SDB_STATIC);
    sdb_bind_int64(e, b + 3, u->tenant_id);
    sdb_bind_int64(e, b + 4, u->user_id);
    sdb_bind_int64(e, b + 5, u->key_id);
    sdb_bind_int64(e, b + 6, u->endpoint_id);
    sdb_bind_int64(e, b + 7, u->replica_id);
    sdb_bind_int64(e, b + 8, u->route_id);
    sdb_bind_text(e, b + 9, u->model, -1, SDB_STATIC);
    sdb_bind_text(e, b + 10, u->routed_model, -1, SDB_STATIC);
    sdb_bind_text(e, b + 11, u->path, -1, SDB_STATIC);
    sdb_bind_int64(e, b + 12, u->prompt_tokens);
    sdb_bind_int64(e, b + 13, u->completion_tokens);
    sdb_bind_int64(e, b + 14, u->latency_ms);
    sdb_bind_int64(e, b + 15, u->ttft_ms);
    sdb_bind_int(e, b + 16, u->status);
    bind_text(e, b + 17, u->error_code);
    bind_text(e, b + 18, u->finish_reason);
    sdb_bind_int(e, b + 19, u->retries);
    sdb_bind_int(e, b + 20, u->stream);
    sdb_bind_int(e, b + 21, u->usage_estimated);
    sdb_bind_int64(e, b + 22, u->cache_read_tokens);
    sdb_bind_int64(e, b + 23, u->cache_creation_tokens);
    sdb_bind_int64(e, b + 24, u->reasoning_tokens);
    sdb_bind_int64(e, b + 25, u->queue_ms);
    sdb_bind_int(e, b + 26, u->cached);
    bind_text(e, b + 27, u->content_rule);
    bind_text(e, b + 28, u->affinity);
    bind_text(e, b + 29, u->cache_outcome);
    sdb_bind_int(e, b + 30, u->shadow);
}

/* Inserts rows[0..n) (n <= EVENT_ROWS_MAX) in list order, so their ids are those one
 * INSERT each would give: the largest statement that fits, then the rest. A row the
 * schema refuses fails its whole statement (SQLite undoes the statement's rows only):
 * those rows are then written one by one, so only the bad one is left out (step_kept). */
static int write_events(const struct usage_record *const *rows, int n)
{
    while (n > 0) {
        int k = EVENT_SIZES - 1;
        while ((1 << k) > n)
            k--;
        struct sdb_stmt *e = st_events[k];
        sdb_reset(e);
        for (int i = 0; i < 1 << k; i++)
            bind_event(e, i * EVENT_COLS, rows[i]);
        if (k == 0) {
            if (step_kept(e, "usage event") != 0)
                return -1;
        } else {
            int rc = sdb_step(e);
            if (rc != SDB_DONE && !refused(rc))
                return -1;
            sdb_reset(e);
            for (int i = 0; rc != SDB_DONE && i < 1 << k; i++) {
                sdb_reset(st_events[0]);
                bind_event(st_events[0], 0, rows[i]);
                if (step_kept(st_events[0], "usage event") != 0)
                    return -1;
            }
        }
        rows += 1 << k;
        n -= 1 << k;
    }
    return 0;
}

/* One row of usage_daily (by key) or usage_daily_route (by endpoint and replica),
 * summed over the batch's records of the same group. */
struct daily_sum {
    int by_route;
    char day[11];
    const struct usage_record *first;
    int64_t requests, errors, prompt_tokens, completion_tokens;
};

static int same_group(const struct daily_sum *d, const char *day, const struct usage_record *u)
{
    const struct usage_record *f = d->first;
    return strcmp(d->day, day) == 0 && f->tenant_id == u->tenant_id && f->user_id == u->user_id &&
           (d->by_route ? f->endpoint_id == u->endpoint_id && f->replica_id == u->replica_id
                        : f->key_id == u->key_id) && strcmp(f->model, u->model) == 0;
}

static int write_daily(const struct daily_sum *d)
{
    struct sdb_stmt *st = d->by_route ? st_route : st_daily;
    int i = 1;
    sdb_reset(st);
    sdb_bind_text(st, i++, d->day, -1, SDB_STATIC);
    sdb_bind_int64(st, i++, d->first->tenant_id);
    sdb_bind_int64(st, i++, d->first->user_id);
    if (d->by_route) {
        sdb_bind_int64(st, i++, d->first->endpoint_id);
        sdb_bind_int64(st, i++, d->first->replica_id);
    } else
        sdb_bind_int64(st, i++, d->first->key_id);
    sdb_bind_text(st, i++, d->first->model, -1, SDB_STATIC);
    sdb_bind_int64(st, i++, d->requests);
    sdb_bind_int64(st, i++, d->errors);
    sdb_bind_int64(st, i++, d->prompt_tokens);
    sdb_bind_int64(st, i++, d->completion_tokens);
    int rc = step_kept(st, d->by_route ? "daily route aggregate" : "daily aggregate");
    if (rc == 0)
        sdb_reset(st);            /* d may be reused for another group (daily_add) */
    return rc;
}

/* Adds u to its group of sums[0..*n) (max groups; full: written and started again). */
static int daily_add(struct daily_sum *sums, int *n, int max, int by_route, const char *day,
                     const struct usage_record *u)
{
    int i = 0;
    while (i < *n && !same_group(&sums[i], day, u))
        i++;
    if (i == *n) {
        if (*n == max) {
            for (int k = 0; k < *n; k++)
                if (write_daily(&sums[k]) != 0)
                    return -1;
            *n = i = 0;
        }
        memset(&sums[i], 0, sizeof sums[i]);
        sums[i].by_route = by_route;
        str_copy(sums[i].day, sizeof sums[i].day, day);
        sums[i].first = u;
        (*n)++;
    }
    sums[i].requests++;
    sums[i].errors += u->status >= 400;
    sums[i].prompt_tokens += u->prompt_tokens;
    sums[i].completion_tokens += u->completion_tokens;
    return 0;
}

/* The quota counter additions of a batch, summed per key and period: a busy
 * key costs two UPSERTs per batch (its day and its month), not two per
 * request. They are pure additions, so their sum is the same in any order; a
 * settlement later in the batch sees its own reservation counted already, as
 * it would one by one (the reservation is always enqueued first). */
struct quota_sum {
    int64_t key_id, calls, tokens;
    char period[16];
};

static int quota_sums_write(struct quota_sum *q, int n)
{
    for (int i = 0; i < n; i++)
        if (quota_add(q[i].key_id, q[i].period, q[i].calls, q[i].tokens) != 0)
            return -1;
    return 0;
}

/* Adds one addition to the sums; writes them when the table is full. */
static int quota_sum_add(struct quota_sum *q, int *n, int max, int64_t key_id, const char *period, int64_t calls,
                         int64_t tokens)
{
    int i = 0;
    while (i < *n && !(q[i].key_id == key_id && strcmp(q[i].period, period) == 0))
        i++;
    if (i == *n) {
        if (*n == max) {
            if (quota_sums_write(q, *n) != 0)
                return -1;
            *n = i = 0;
        }
        q[i].key_id = key_id;
        q[i].calls = q[i].tokens = 0;
        str_copy(q[i].period, sizeof q[i].period, period);
        (*n)++;
    }
    q[i].calls += calls;
    q[i].tokens += tokens;
    return 0;
}

/* One transaction for the batch: every event, then the daily aggregates summed
 * per group (a busy key costs one UPSERT per batch, not one per request). On
 * failure the batch is retried later, so a busy database delays records but
 * does not drop them. */
static int write_batch(struct usage_record *list)
{
    enum { MAX_GROUPS = 64 };
    struct daily_sum sums[MAX_GROUPS], rsums[MAX_GROUPS];
    int nsums = 0, nrsums = 0;
    /* Not db_exec: its generic "sqlite:" line would say the same as the outage's. */
    if (sdb_exec(q_db, "BEGIN IMMEDIATE") != SDB_OK) {
        str_copy(last_error, sizeof last_error, sdb_errmsg(q_db));
        return -1;
    }
    enum { MAX_QUOTA_SUMS = 64 };
    struct quota_sum qs[MAX_QUOTA_SUMS];
    int nqs = 0;
    for (struct usage_record *u = list; u; u = u->next)
        if (u->quota_key_id &&
            ((u->quota_calls && quota_sum_add(qs, &nqs, MAX_QUOTA_SUMS, u->quota_key_id, u->quota_day, u->quota_calls,
                                              0) != 0) ||
             quota_sum_add(qs, &nqs, MAX_QUOTA_SUMS, u->quota_key_id, u->quota_month, u->quota_calls,
                           u->quota_tokens) != 0))
            goto fail;
    if (quota_sums_write(qs, nqs) != 0)
        goto fail;
    /* The events first, in list order (their ids), then what each record adds beside its
     * event: nothing of that reads usage_events. */
    const struct usage_record *rows[EVENT_ROWS_MAX];
    int nrows = 0;
    for (struct usage_record *u = list; u; u = u->next) {
        if (u->no_event)
            continue;
        rows[nrows++] = u;
        if (nrows == EVENT_ROWS_MAX) {
            if (write_events(rows, nrows) != 0)
                goto fail;
            nrows = 0;
        }
    }
    if (nrows && write_events(rows, nrows) != 0)
        goto fail;
    for (struct usage_record *u = list; u; u = u->next) {
        if (u->no_event)
            continue;
        /* R-CACHE-3: stored with the event that produced it, off the response path. */
        if ((u->cache && cache_store_put(u->cache) != 0) ||
            (u->cache_hit_key[0] && cache_store_hit(u->cache_hit_key) != 0) ||
            (u->sem_audit && cache_store_audit(u->sem_audit) != 0))
            goto fail;
        if (u->settle_key_id) {
            sdb_reset(st_settle);
            sdb_bind_int64(st_settle, 1, u->settle_key_id);
            sdb_bind_text(st_settle, 2, u->settle_period, -1, SDB_TRANSIENT);
            sdb_bind_int64(st_settle, 3, u->settle_tokens);
            if (step_kept(st_settle, "token settlement") != 0)
                goto fail;
        }
        /* R-SHD-1: a mirror's record stays out of every aggregate the reports read. */
        if (u->shadow)
            continue;
        char day[11];
        day_string(u->ts_ms, day);
        if (daily_add(sums, &nsums, MAX_GROUPS, 0, day, u) != 0 ||
            daily_add(rsums, &nrsums, MAX_GROUPS, 1, day, u) != 0)
            goto fail;
    }
    for (int k = 0; k < nsums; k++)
        if (write_daily(&sums[k]) != 0)
            goto fail;
    for (int k = 0; k < nrsums; k++)
        if (write_daily(&rsums[k]) != 0)
            goto fail;
    if (cache_store_trim(now_ms()) != 0)
        goto fail;
    release_binds();
    if (db_exec(q_db, "COMMIT") == 0) {
        cache_store_done(1);
        return 0;
    }
fail:
    str_copy(last_error, sizeof last_error, sdb_errmsg(q_db));
    release_binds();
    cache_store_done(0);            /* undone while the write lock is still held: no re-sum sees half */
    db_exec(q_db, "ROLLBACK");
    return -1;
}

static void free_list(struct usage_record *u)
{
    while (u) {
        struct usage_record *next = u->next;
        cache_store_entry_free(u->cache);
        free(u->sem_audit);
        free(u);
        u = next;
    }
}

/* R-OBS-1: the records this responder holds and the database does not have
 * yet, queued or in the batch being written. Under q_lock. */
static void publish_backlog(void)
{
    if (q_shm && q_shm->r && q_shm->row >= 0)
        atomic_store(&q_shm->r->procs[q_shm->row].usage_backlog, q_len + pending_len);
}

static int list_len(const struct usage_record *u)
{
    int n = 0;
    for (; u; u = u->next)
        n++;
    return n;
}

static int queued(void)
{
    pthread_mutex_lock(&q_lock);
    int n = q_len;
    pthread_mutex_unlock(&q_lock);
    return n;
}

/* started: mono_ms() when the failed batch began (a busy database fails
 * only after the busy timeout: the outage began when the wait did). */
static void on_batch_failed(int n, int64_t started)
{
    n += queued();
    if (q_shm)
        metrics_add(q_shm, MET_USAGE_WRITE_FAILURES, "", 1);
    outage.failures++;
    if (!outage.since_ms || outage.recovered_ms) {
        if (!outage.since_ms)
            outage.since_ms = started;
        outage.recovered_ms = 0;
        log_error("usage writer: the database %s does not take writes (%s); %d usage records kept and retried"
                  " every 100 ms, nothing is lost while the queue (%d) has room; check the disk, its permissions"
                  " and what holds a lock on it", q_conf->database, last_error, n, q_conf->usage_queue_max);
        return;
    }
    /* Collapsed by log.c to one line a second. */
    log_error("usage writer: database still not writable after %lld s (%s); %d usage records waiting",
              (long long)((mono_ms() - outage.since_ms) / 1000), last_error, n);
}

/* After a batch was written: an outage ends when its backlog has been written. */
static void on_batch_written(int n, int queue_empty)
{
    if (!outage.since_ms)
        return;
    if (!outage.recovered_ms)
        outage.recovered_ms = mono_ms();
    outage.written += n;
    if (!queue_empty)
        return;
    log_info("usage writer: database writable again after %lld s, %lld usage records written (%lld failed batches)",
             (long long)((outage.recovered_ms - outage.since_ms + 500) / 1000), (long long)outage.written,
             (long long)outage.failures);
    memset(&outage, 0, sizeof outage);
}

static void *writer_main(void *arg)
{
    (void)arg;
    /* Signals are main's (sigwait): this thread must never take a SIGHUP. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    thread_background();
    struct usage_record *pending = NULL;
    int stop_failures = 0;
    for (;;) {
        pthread_mutex_lock(&q_lock);
        if (!q_head && !q_stop && !pending) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t ns = ts.tv_nsec + (int64_t)q_conf->usage_flush_ms * 1000000;
            ts.tv_sec += ns / 1000000000;
            ts.tv_nsec = ns % 1000000000;
            pthread_cond_timedwait(&q_cond, &q_lock, &ts);
        }
        int stop = q_stop;
        if (!pending) {
            /* Take up to batch_max records. */
            pending = q_head;
            struct usage_record *last = NULL, *u = q_head;
            for (int n = 0; u && n < q_conf->usage_batch_max; n++) {
                last = u;
                u = u->next;
                q_len--;
            }
            if (last)
                last->next = NULL;
            q_head = u;
            if (!q_head)
                q_tail = NULL;
            pending_len = list_len(pending);
        }
        pthread_cond_broadcast(&q_cond);
        pthread_mutex_unlock(&q_lock);
        /* A burst of warnings gets its "repeated N times" within a flush
         * interval even when nothing else is logged after it. */
        log_flush_repeats(0);
        int written = 0;
        if (pending) {
            int64_t started = mono_ms();
            if (write_batch(pending) == 0) {
                written = pending_len;
                free_list(pending);
                pending = NULL;
            } else {
                on_batch_failed(pending_len, started);
                if (stop && ++stop_failures > 50) {
                    /* Stopping and the database refuses for 5 s: say what is lost. */
                    log_error("usage writer: giving up on %d records at shutdown", pending_len);
                    free_list(pending);
                    pending = NULL;
                } else {
                    struct timespec pause = {0, 100 * 1000000};
                    nanosleep(&pause, NULL);
                }
            }
        }
        pthread_mutex_lock(&q_lock);
        if (!pending)
            pending_len = 0;
        publish_backlog();
        int queue_empty = !q_head;
        int done = q_stop && !q_head && !pending;
        pthread_mutex_unlock(&q_lock);
        if (written)
            on_batch_written(written, queue_empty);
        if (done)
            break;
    }
    return NULL;
}

void usage_writer_set_shm(struct shm *s) { q_shm = s; }

/* st_events[k]: the event INSERT of 2^k rows. */
static int event_prepare(int k)
{
    static const char row[] = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    _Static_assert(sizeof row - 1 == 2 * EVENT_COLS + 1, "one ? a column");
    char sql[sizeof SQL_EVENT + EVENT_ROWS_MAX * sizeof row];
    size_t n = sizeof SQL_EVENT - 1;
    memcpy(sql, SQL_EVENT, n);
    for (int i = 0; i < 1 << k; i++) {
        if (i)
            sql[n++] = ',';
        memcpy(sql + n, row, sizeof row - 1);
        n += sizeof row - 1;
    }
    sql[n] = '\0';
    if (sdb_prepare_persistent(q_db, sql, &st_events[k]) != SDB_OK) {
        log_error("usage writer: %s", sdb_errmsg(q_db));
        return -1;
    }
    return 0;
}

int usage_writer_start(const struct conf *c)
{
    q_conf = c;
    q_db = db_open(c->database, 0);
    if (!q_db)
        return -1;
    for (int k = 0; k < EVENT_SIZES; k++)
        if (event_prepare(k) != 0)
            return -1;
    if (sdb_prepare_persistent(q_db, SQL_DAILY, &st_daily) != SDB_OK ||
        sdb_prepare_persistent(q_db, SQL_ROUTE, &st_route) != SDB_OK ||
        sdb_prepare_persistent(q_db, SQL_SETTLE, &st_settle) != SDB_OK ||
        sdb_prepare_persistent(q_db, SQL_QUOTA_ADD, &st_quota) != SDB_OK) {
        log_error("usage writer: %s", sdb_errmsg(q_db));
        return -1;
    }
    if (cache_store_open(q_db, c, q_shm) != 0)
        return -1;
    return pthread_create(&q_thread, NULL, writer_main, NULL) == 0 ? 0 : -1;
}

/* With q_lock held. */
static void queue_append(struct usage_record *rec)
{
    if (q_tail)
        q_tail->next = rec;
    else
        q_head = rec;
    q_tail = rec;
    q_len++;
    publish_backlog();
    if (q_len >= q_conf->usage_batch_max)
        pthread_cond_signal(&q_cond);
}

void usage_writer_enqueue(struct usage_record *rec)
{
    rec->next = NULL;
    pthread_mutex_lock(&q_lock);
    /* Past queue_max the request thread waits: back-pressure, never loss. */
    while (q_len >= q_conf->usage_queue_max && !q_stop)
        pthread_cond_wait(&q_cond, &q_lock);
    queue_append(rec);
    pthread_mutex_unlock(&q_lock);
}

int usage_writer_offer(struct usage_record *rec)
{
    rec->next = NULL;
    pthread_mutex_lock(&q_lock);
    /* Half the queue stays for the records that hold a client (R-SHD-1: a mirror never waits). */
    int full = q_len >= q_conf->usage_queue_max / 2 || q_stop;
    if (!full)
        queue_append(rec);
    pthread_mutex_unlock(&q_lock);
    return full ? -1 : 0;
}

void usage_writer_stop(void)
{
    pthread_mutex_lock(&q_lock);
    q_stop = 1;
    pthread_cond_broadcast(&q_cond);
    pthread_mutex_unlock(&q_lock);
    pthread_join(q_thread, NULL);
    log_flush_repeats(1);         /* the writer was the one flushing them */
    for (int k = 0; k < EVENT_SIZES; k++)
        sdb_finalize(st_events[k]);
    sdb_finalize(st_daily);
    sdb_finalize(st_route);
    sdb_finalize(st_settle);
    sdb_finalize(st_quota);
    cache_store_close();
    db_close(q_db);
}
