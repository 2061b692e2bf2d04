/* usage_writer.c: queue + one thread per responder writing usage in batches. */
#include "usage_writer.h"

#include "arena.h"
#include "db.h"
#include "log.h"
#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static struct usage_record *q_head, *q_tail;   /* owned by the queue until written */
static int q_len, q_stop;
static pthread_t q_thread;
static const struct conf *q_conf;
static sqlite3 *q_db;
static sqlite3_stmt *st_event, *st_daily;

static const char SQL_EVENT[] =
    "INSERT INTO usage_events (ts_ms, request_id, tenant_id, user_id, key_id, endpoint_id, replica_id,"
    " route_id, model, routed_model, path, prompt_tokens, completion_tokens, latency_ms, ttft_ms, status,"
    " error_code, finish_reason, retries, stream) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
static const char SQL_DAILY[] =
    "INSERT INTO usage_daily (day, tenant_id, user_id, key_id, model, requests, errors, prompt_tokens,"
    " completion_tokens) VALUES (?,?,?,?,?,1,?,?,?) ON CONFLICT (day, tenant_id, user_id, key_id, model)"
    " DO UPDATE SET requests = requests + 1, errors = errors + excluded.errors,"
    " prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
    " completion_tokens = completion_tokens + excluded.completion_tokens";

static int bind_text(sqlite3_stmt *st, int i, const char *s)
{
    return s && *s ? sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

static int write_one(const struct usage_record *u)
{
    sqlite3_stmt *e = st_event;
    sqlite3_reset(e);
    sqlite3_bind_int64(e, 1, u->ts_ms);
    sqlite3_bind_text(e, 2, u->request_id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(e, 3, u->tenant_id);
    sqlite3_bind_int64(e, 4, u->user_id);
    sqlite3_bind_int64(e, 5, u->key_id);
    sqlite3_bind_int64(e, 6, u->endpoint_id);
    sqlite3_bind_int64(e, 7, u->replica_id);
    sqlite3_bind_int64(e, 8, u->route_id);
    sqlite3_bind_text(e, 9, u->model, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(e, 10, u->routed_model, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(e, 11, u->path, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(e, 12, u->prompt_tokens);
    sqlite3_bind_int64(e, 13, u->completion_tokens);
    sqlite3_bind_int64(e, 14, u->latency_ms);
    sqlite3_bind_int64(e, 15, u->ttft_ms);
    sqlite3_bind_int(e, 16, u->status);
    bind_text(e, 17, u->error_code);
    bind_text(e, 18, u->finish_reason);
    sqlite3_bind_int(e, 19, u->retries);
    sqlite3_bind_int(e, 20, u->stream);
    if (sqlite3_step(e) != SQLITE_DONE)
        return -1;
    char day[11];
    day_string(u->ts_ms, day);
    sqlite3_stmt *d = st_daily;
    sqlite3_reset(d);
    sqlite3_bind_text(d, 1, day, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(d, 2, u->tenant_id);
    sqlite3_bind_int64(d, 3, u->user_id);
    sqlite3_bind_int64(d, 4, u->key_id);
    sqlite3_bind_text(d, 5, u->model, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(d, 6, u->status >= 400 ? 1 : 0);
    sqlite3_bind_int64(d, 7, u->prompt_tokens);
    sqlite3_bind_int64(d, 8, u->completion_tokens);
    return sqlite3_step(d) == SQLITE_DONE ? 0 : -1;
}

/* One transaction for the batch; on failure the batch is retried later, so a
 * busy database delays records but does not drop them. */
static int write_batch(struct usage_record *list)
{
    if (db_exec(q_db, "BEGIN IMMEDIATE") != 0)
        return -1;
    for (struct usage_record *u = list; u; u = u->next)
        if (write_one(u) != 0) {
            log_error("usage write failed: %s", sqlite3_errmsg(q_db));
            db_exec(q_db, "ROLLBACK");
            return -1;
        }
    return db_exec(q_db, "COMMIT");
}

static void free_list(struct usage_record *u)
{
    while (u) {
        struct usage_record *next = u->next;
        free(u);
        u = next;
    }
}

static void *writer_main(void *arg)
{
    (void)arg;
    struct usage_record *pending = NULL;
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
        }
        pthread_cond_broadcast(&q_cond);
        pthread_mutex_unlock(&q_lock);
        if (pending) {
            if (write_batch(pending) == 0) {
                free_list(pending);
                pending = NULL;
            } else {
                struct timespec pause = {0, 100 * 1000000};
                nanosleep(&pause, NULL);
                if (stop)
                    continue;
            }
        }
        pthread_mutex_lock(&q_lock);
        int done = q_stop && !q_head && !pending;
        pthread_mutex_unlock(&q_lock);
        if (done)
            break;
    }
    return NULL;
}

int usage_writer_start(const struct conf *c)
{
    q_conf = c;
    q_db = db_open(c->database, 0);
    if (!q_db)
        return -1;
    if (sqlite3_prepare_v3(q_db, SQL_EVENT, -1, SQLITE_PREPARE_PERSISTENT, &st_event, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(q_db, SQL_DAILY, -1, SQLITE_PREPARE_PERSISTENT, &st_daily, NULL) != SQLITE_OK) {
        log_error("usage writer: %s", sqlite3_errmsg(q_db));
        return -1;
    }
    return pthread_create(&q_thread, NULL, writer_main, NULL) == 0 ? 0 : -1;
}

void usage_writer_enqueue(struct usage_record *rec)
{
    rec->next = NULL;
    pthread_mutex_lock(&q_lock);
    /* Past queue_max the request thread waits: back-pressure, never loss. */
    while (q_len >= q_conf->usage_queue_max && !q_stop)
        pthread_cond_wait(&q_cond, &q_lock);
    if (q_tail)
        q_tail->next = rec;
    else
        q_head = rec;
    q_tail = rec;
    q_len++;
    if (q_len >= q_conf->usage_batch_max)
        pthread_cond_signal(&q_cond);
    pthread_mutex_unlock(&q_lock);
}

void usage_writer_stop(void)
{
    pthread_mutex_lock(&q_lock);
    q_stop = 1;
    pthread_cond_broadcast(&q_cond);
    pthread_mutex_unlock(&q_lock);
    pthread_join(q_thread, NULL);
    sqlite3_finalize(st_event);
    sqlite3_finalize(st_daily);
    db_close(q_db);
}
