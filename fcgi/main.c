/* main.c: sluice-fcgi, the data plane: options -> config -> threads -> accept loop,
 * and the table of routes every request is dispatched through. */
#include "access_log.h"
#include "account.h"
#include "admit.h"
#include "auto.h"
#include "auth.h"
#include "cache.h"
#include "content_rules.h"
#include "conf.h"
#include "cors.h"
#include "count.h"
#include "db.h"
#include "drive.h"
#include "fcgiwire.h"
#include "fit.h"
#include "gate.h"
#include "forward.h"
#include "guard.h"
#include "json_parse.h"
#include "log.h"
#include "metrics_render.h"
#include "models.h"
#include "observe.h"
#include "kv_redis.h"
#include "park.h"
#include "passive_share.h"
#include "redis_eval.h"
#include "reply.h"
#include "request.h"
#include "route.h"
#include "screen.h"
#include "secret.h"
#include "semvec.h"
#include "shadow.h"
#include "shm.h"
#include "snapshot.h"
#include "spans.h"
#include "supervise.h"
#include "usage_writer.h"
#include "util.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static struct conf conf;               /* read-only after start-up, but for SIGHUP's live options */
static struct conf conf_file;          /* what sluice.conf said (before environment overrides) */
static const char *conf_path;          /* -c or SLUICE_CONF, NULL: the defaults */
static struct shm shm;                 /* this process's mapping of the state file */
static atomic_int stopping;
static atomic_int cut;                 /* the grace ran out: end what still runs (R-DEP-6) */
static atomic_int inflight;

/* SIGHUP, one changed option: said in the log, a log moved. */
static int conf_changed(void *arg, const char *name, const char *was, const char *now, enum conf_change how,
                        const void *value)
{
    (void)arg;
    if (how == CONF_CHANGE_LOG) {
        const char *path = value;
        return strcmp(name, "log_file") == 0 ? log_move(path)
             : strcmp(name, "access_log") == 0 ? access_log_move(path)
             : strcmp(name, "trace_log") == 0 ? spans_move(path) : -1;
    }
    if (how == CONF_CHANGE_APPLIED)
        log_info("SIGHUP: %s %s -> %s", name, was, now);
    else
        log_warn("SIGHUP: %s %s -> %s needs a restart of the pool to take effect; the value it started with holds",
                 name, was, now);
    return 0;
}

/* SIGHUP (R-DEP-5): the options that can change live take their new values,
 * what needs a restart is said so, then the logs are reopened (logrotate). */
static void reload(void)
{
    if (conf_path && conf_reload(&conf, &conf_file, conf_path, conf_changed, NULL) != 0)
        log_error("SIGHUP: %s refused (its errors are on standard error); the running configuration stays",
                  conf_path);
    log_set_level(log_level_of(conf.log_level));
    log_reopen();
    access_log_reopen();
    spans_reopen();
    log_info("SIGHUP: configuration re-read, log files reopened");
}

/* GET /v1/models, /v1/models/{id}: a data-plane call too (R-KEY-0), no tokens. */
static void serve_models(struct request *r)
{
    if (admit_request(r) == 0)
        models_reply(r);
}

/* Inference: guard, screen, admit, route (the plan), fit, drive. guard and
 * screen run before admit (the token pre-deduction needs the parsed
 * max_tokens, and a request that is invalid or blocked anyway spends no
 * quota); fit after route, which knows the model and the replica. */
static void serve_inference(struct request *r)
{
    /* The guards' own time goes to the access log (guard_us): their cost per
     * request is measured where it is spent (bench/guards.py). */
    int64_t t0 = mono_us();
    int refused = guard_check(r) != 0 || screen_input(r) != 0;
    r->obs.guard_us = mono_us() - t0;
    if (refused || admit_request(r) != 0)
        return;
    semvec_prepare(r);              /* R-SEM-2: model auto's embeddings, themselves routed */
    if (route_plan(r) != 0)
        return;
    t0 = mono_us();
    refused = fit_check(r) != 0;
    r->obs.guard_us += mono_us() - t0;
    if (!refused)
        drive_run(r);
}

/* POST /v1/messages/count_tokens (R-ANT-7): an anthropic endpoint counts
 * natively; for any other the answer is the estimate the token pre-deduction
 * uses, without an upstream call. Spends a call, never tokens. */
static void serve_count_tokens(struct request *r)
{
    if (guard_check(r) != 0 || admit_request(r) != 0)
        return;
    int native = route_model_speaks(r, PROTO_ANTHROPIC);
    if (native == 0)
        count_reply(r);             /* no replica taken, woken or waited for */
    else if (native > 0 && route_plan(r) == 0)
        r->ep->protocol == PROTO_ANTHROPIC ? drive_run(r) : count_reply(r);
}

/* R-API-7: a browser's preflight, answered here and never authenticated. */
static void serve_preflight(struct request *r)
{
    if (!r->cors_origin) {
        reply_error(r, ERR_CORS_ORIGIN_NOT_ALLOWED, NULL, NULL);
        return;
    }
    const char *extra = cors_preflight_headers(r->arena, request_header(r, "Access-Control-Request-Headers"));
    reply_head(r, 204, NULL, extra);
}

/* The data-plane route table (R-API-1, DESIGN.md stage 0): one row per path.
 * Anything else is 404 before authentication, a known path with another
 * method 405 (R-SEC-8: the responder checks its own path and method).
 *   method   NULL: any method
 *   path     exact, or a prefix when it ends in '/'
 *   kind     what the later stages see in r->kind
 *   ingress  the protocol the caller speaks there
 *   serve    the stages after auth */
static const struct path_row {
    const char *method;
    const char *path;
    enum req_kind kind;
    enum ingress ingress;
    void (*serve)(struct request *r);
} path_table[] = {
    {"POST", "/v1/chat/completions", REQ_CHAT, INGRESS_OPENAI, serve_inference},
    {"POST", "/v1/completions", REQ_COMPLETIONS, INGRESS_OPENAI, serve_inference},
    {"POST", "/v1/embeddings", REQ_EMBEDDINGS, INGRESS_OPENAI, serve_inference},
    {"POST", "/v1/messages", REQ_MESSAGES, INGRESS_ANTHROPIC, serve_inference},
    {"POST", "/v1/messages/count_tokens", REQ_COUNT_TOKENS, INGRESS_ANTHROPIC, serve_count_tokens},
    {"POST", "/v1/responses", REQ_RESPONSES, INGRESS_OPENAI, serve_inference},
    {NULL, "/v1/responses/", REQ_RESPONSE_OP, INGRESS_OPENAI, serve_inference},   /* guard checks the method */
    {"GET", "/v1/models", REQ_MODELS, INGRESS_OPENAI, serve_models},
    {"GET", "/v1/models/", REQ_MODELS, INGRESS_OPENAI, serve_models},
    {NULL, "/api/v1/proxy/", REQ_PROXY, INGRESS_NONE, serve_inference},
    {"GET", "/metrics", REQ_METRICS, INGRESS_NONE, metrics_serve},   /* its own token, not a key (R-OBS-1) */
};

static int path_matches(const struct path_row *row, const char *path)
{
    size_t n = strlen(row->path);
    return row->path[n - 1] == '/' ? strncmp(path, row->path, n) == 0 : strcmp(path, row->path) == 0;
}

/* The row a path belongs to, whatever the method (NULL: none): also for a
 * request refused while it was read (413), which never reaches dispatch. */
static const char *route_pattern_of(const char *path)
{
    for (size_t i = 0; path && i < sizeof path_table / sizeof path_table[0]; i++)
        if (path_matches(&path_table[i], path))
            return path_table[i].path;
    return NULL;
}

static void dispatch(struct request *r)
{
    const struct path_row *row = NULL;
    r->kind = REQ_UNKNOWN;
    for (size_t i = 0; i < sizeof path_table / sizeof path_table[0] && !row; i++) {
        if (!path_matches(&path_table[i], r->path))
            continue;
        r->kind = path_table[i].kind;
        r->ingress = path_table[i].ingress;       /* a 405 there is in the path's protocol too */
        if (!path_table[i].method || strcmp(path_table[i].method, r->method) == 0)
            row = &path_table[i];
    }
    /* R-API-7: an allowed Origin is echoed on whatever this request answers. */
    int options = strcmp(r->method, "OPTIONS") == 0;
    const char *origin = *r->snap->cors_origins || options ? request_header(r, "Origin") : NULL;
    if (origin && *origin && cors_origin_allowed(r->snap->cors_origins, origin))
        r->cors_origin = origin;
    /* With CORS off the pass-through's OPTIONS is the upstream's, as before. */
    if (r->kind != REQ_UNKNOWN && origin && options && (r->kind != REQ_PROXY || *r->snap->cors_origins)) {
        serve_preflight(r);
        return;
    }
    if (!row) {
        if (r->kind != REQ_UNKNOWN)
            reply_error(r, ERR_METHOD_NOT_ALLOWED, NULL, NULL);
        else
            reply_error(r, ERR_NOT_FOUND, arena_printf(r->arena, "Unknown path %s", r->path), NULL);
        return;
    }
    /* R-ANT-7: a models listing is answered in the protocol anthropic-version says. */
    if (row->kind == REQ_MODELS && request_header(r, "anthropic-version"))
        r->ingress = INGRESS_ANTHROPIC;
    if (row->kind != REQ_METRICS && auth_caller(r) != 0)
        return;
    row->serve(r);
}

/* The request's end: limits given back, usage, logs, memory. On its thread,
 * or on the stream loop after a park. */
static void handle_end(struct worker *w)
{
    struct request *r = w->req;
    gate_release(&shm, &r->hold);   /* a place taken for a request that never forwarded (a local count) */
    admit_finish(r);
    auto_finish(r);
    semvec_end(r);
    if (r->kind != REQ_MODELS && !r->replayed)
        account_record(r);
    shadow_end(r);                  /* R-SHD-1: the client's answer, for its mirror's comparison */
    cache_end(r);
    if (r->kind != REQ_METRICS)
        observe_end(r);
    json_object_put(r->json);
    snapshot_release(r->snap);
    arena_clear(&w->arena);
    if (w->resp.cap > (1u << 20))
        buf_free(&w->resp);    /* do not keep a huge buffer per idle thread */
    if (w->out.cap > (1u << 20))
        buf_free(&w->out);
}

/* 1 when the request parked: its worker went to the stream loop. */
static int handle(struct worker *w)
{
    struct request *r = w->req;
    memset(r, 0, sizeof *r);
    r->w = w;
    r->arena = &w->arena;
    r->conf = &conf;
    r->shm = &shm;
    r->start_ms = now_ms();
    r->start_mono = mono_ms();
    r->caller.endpoint = -1;
    r->plan.pinned = -1;
    r->wait_ep = -1;
    r->wait_only_rep = -1;
    r->obs.start_us = mono_us();
    r->obs.guard_us = -1;
    r->may_park = park_running();
    r->snap = snapshot_acquire();
    int read_ok = request_read(r) == 0;
    r->route_pattern = route_pattern_of(r->path);
    observe_begin(r);
    if (read_ok) {
        if (atomic_load(&stopping))
            reply_error(r, ERR_SHUTTING_DOWN, NULL, NULL);
        else
            dispatch(r);
    } else {
        auth_identify(r);       /* a 413 is recorded for its key (R-USE-4) */
    }
    if (r->parked_attempt)
        return 1;
    handle_end(w);
    return 0;
}

/* ---- the worker pool ----
 * A request holds its thread from first byte to last (a stream for minutes),
 * so the pool grows while every thread is busy instead of leaving requests in
 * the listen backlog: whenever fewer than POOL_SPARE threads wait in accept,
 * one more is started, up to pool.max_threads. The pool.threads a responder
 * starts with stay; a thread beyond them that finishes a request while
 * pool.threads others wait ends, so memory follows the load back down. (Not
 * on a timer: libfcgi's accept cannot time out, and a poll on the shared
 * listening socket would wake every idle thread for each connection.) */
enum { POOL_SPARE = 2 };
static atomic_int threads_total;       /* started and not ended */
static atomic_int threads_idle;        /* waiting for a request */
static pthread_attr_t worker_attr;

static void *worker_main(void *arg);

/* Workers a parked stream gave back, for the next thread that parks one. */
enum { SPARE_WORKERS_MAX = 64 };
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static struct worker *spare_workers;
static int spare_count;

static struct worker *worker_new(int index)
{
    struct worker *w = xcalloc(1, sizeof *w);
    w->index = index;
    w->cut = &cut;
    arena_init(&w->arena);
    fcgi_conn_init(&w->fcgi);
    w->req = xcalloc(1, sizeof *w->req);
    buf_init(&w->resp, 0);
    buf_init(&w->out, 0);
    w->curl = curl_easy_init();
    w->multi = curl_multi_init();
    if (!w->curl || !w->multi) {
        if (w->curl)
            curl_easy_cleanup(w->curl);
        if (w->multi)
            curl_multi_cleanup(w->multi);
        free(w);
        return NULL;
    }
    forward_curl_init(w);
    w->rng = ((uint64_t)getpid() << 32) ^ (uint64_t)now_ms() ^ ((uint64_t)(index + 1) * 0x9E3779B97F4A7C15ULL);
    if (!w->rng)
        w->rng = 1;
    return w;
}

static void worker_free(struct worker *w)
{
    curl_multi_cleanup(w->multi);
    curl_easy_cleanup(w->curl);
    if (w->side)
        curl_easy_cleanup(w->side);
    buf_free(&w->resp);
    buf_free(&w->out);
    fcgi_conn_free(&w->fcgi);
    arena_free(&w->arena);
    free(w->req);
    free(w);
}

/* A worker for a thread whose own went to the stream loop. */
static struct worker *worker_spare(int index)
{
    pthread_mutex_lock(&spare_lock);
    struct worker *w = spare_workers;
    if (w) {
        spare_workers = w->next_free;
        spare_count--;
    }
    pthread_mutex_unlock(&spare_lock);
    if (w) {
        w->index = index;
        return w;
    }
    return worker_new(index);
}

/* A parked request's end, as its thread would have ended it. */
static void finish_parked(struct worker *w)
{
    handle_end(w);
    int fd;
    char *rest;
    size_t len;
    if (fcgi_finish_unsent(&w->fcgi, &fd, &rest, &len))
        park_drain(fd, rest, len);      /* the loop sends it: the client reads slowly */
    atomic_fetch_sub(&inflight, 1);
    pthread_mutex_lock(&spare_lock);
    int keep = spare_count < SPARE_WORKERS_MAX;
    if (keep) {
        w->next_free = spare_workers;
        spare_workers = w;
        spare_count++;
    }
    pthread_mutex_unlock(&spare_lock);
    if (!keep)
        worker_free(w);
}

static void resume_parked(struct worker *w);

/* The ends of parked requests, off the loop: handle_end may wait (a locked
 * database for idempotency or quotas, a Redis `state` that does not answer,
 * a full usage queue's back-pressure), and on the loop that wait would hold
 * up every stream. FINISHERS threads per responder take them in turn (not a
 * thread per end: thread-local caches would be made and freed each time), so
 * one end that waits holds up none of the others. */
enum { FINISHERS = 2 };
static pthread_mutex_t finish_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t finish_cond = PTHREAD_COND_INITIALIZER;
static struct worker *finish_head, *finish_tail;     /* linked by next_free */
static int finishers;

static void *finisher_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&finish_lock);
        while (!finish_head)
            pthread_cond_wait(&finish_cond, &finish_lock);
        struct worker *w = finish_head;
        finish_head = w->next_free;
        if (!finish_head)
            finish_tail = NULL;
        pthread_mutex_unlock(&finish_lock);
        finish_parked(w);
    }
    return NULL;
}

static void start_finishers(void)
{
    for (int i = 0; i < FINISHERS; i++) {
        pthread_t t;
        if (pthread_create(&t, &worker_attr, finisher_main, NULL) == 0)
            finishers++;
    }
    if (!finishers)
        log_warn("no finisher thread (%s): parked requests end on the stream loop", strerror(errno));
}

static void finish_later(struct worker *w)
{
    if (!finishers) {
        finish_parked(w);           /* no finisher: here, as it was */
        return;
    }
    w->next_free = NULL;
    pthread_mutex_lock(&finish_lock);
    if (finish_tail)
        finish_tail->next_free = w;
    else
        finish_head = w;
    finish_tail = w;
    pthread_cond_signal(&finish_cond);
    pthread_mutex_unlock(&finish_lock);
}

/* A retry after a parked attempt failed before any data went out: the next
 * attempt waits and connects on a thread, never on the stream loop. */
static void *continue_parked(void *arg)
{
    struct worker *w = arg;
    fcgi_set_nonblocking(&w->fcgi, 0);  /* a thread's writes wait, as any thread's */
    drive_continue(w->req);
    if (w->req->parked_attempt)
        park_hand(w, resume_parked);
    else
        finish_parked(w);
    spans_thread_end();
    content_rules_thread_end();
    json_parse_thread_end();
    return NULL;
}

/* Called by the stream loop when a parked transfer ended: the answer's last
 * bytes here (writes that never wait), the rest of the end on a thread. */
static void resume_parked(struct worker *w)
{
    pthread_t t;
    if (drive_resume(w->req)) {
        finish_later(w);
        return;
    }
    if (pthread_create(&t, &worker_attr, continue_parked, w) == 0)
        return;                     /* worker_attr makes it detached: t may be gone already */
    log_warn("request %s: no thread for its retry (%s): it runs on the stream loop", w->req->request_id,
             strerror(errno));
    w->req->may_park = 0;
    drive_continue(w->req);
    finish_parked(w);
}

/* Starts one more worker unless the pool is at its ceiling. 0 started. */
static int pool_grow(void)
{
    int max = conf.pool_max_threads > conf.pool_threads ? conf.pool_max_threads : conf.pool_threads;
    int n = atomic_load(&threads_total);
    do {
        if (n >= max)
            return -1;
    } while (!atomic_compare_exchange_weak(&threads_total, &n, n + 1));
    struct worker *w = worker_new(n);
    pthread_t t;
    if (w && pthread_create(&t, &worker_attr, worker_main, w) == 0)
        return 0;
    int e = errno;
    atomic_fetch_sub(&threads_total, 1);
    if (w)
        worker_free(w);
    static _Atomic int64_t warned_ms;
    int64_t now = mono_ms(), last = atomic_load(&warned_ms);
    if (now - last > 10000 && atomic_compare_exchange_strong(&warned_ms, &last, now))
        log_warn("cannot start worker thread %d (%s): requests wait for a free one (logged every 10 s)", n,
                 strerror(e));
    return -1;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    int index = w->index, extra = index >= conf.pool_threads;
    while (!atomic_load(&stopping)) {
        if (!w && !(w = worker_spare(index))) {
            log_error("no memory for a worker: this thread ends");
            break;
        }
        atomic_fetch_add(&threads_idle, 1);
        int rc = fcgi_accept(&w->fcgi, FCGI_LISTENSOCK_FILENO);
        int idle = atomic_fetch_sub(&threads_idle, 1) - 1;
        if (rc < 0) {
            /* EMFILE: back off and keep the thread (DESIGN.md pool sizing). */
            if (!atomic_load(&stopping))
                log_warn("accept: %s", strerror(errno));
            struct timespec pause = {0, 100 * 1000000};
            nanosleep(&pause, NULL);
            continue;
        }
        if (idle < POOL_SPARE)
            pool_grow();
        atomic_fetch_add(&inflight, 1);
        if (handle(w)) {
            /* The stream loop has the worker now, and ends the request; this
             * thread takes another worker for its next one, if it stays. */
            park_hand(w, resume_parked);
            w = NULL;
        } else {
            fcgi_finish(&w->fcgi);
            atomic_fetch_sub(&inflight, 1);
        }
        if (extra && atomic_load(&threads_idle) >= conf.pool_threads)
            break;
    }
    if (atomic_load(&stopping))
        return NULL;       /* the process is ending: its memory goes with it */
    spans_thread_end();
    content_rules_thread_end();
    json_parse_thread_end();
    if (w)
        worker_free(w);
    atomic_fetch_sub(&threads_total, 1);
    return NULL;
}

#define CONFIG_MIN_GAP_MS 20   /* between two loads told by NOTIFY (PostgreSQL) */

/* Publishes a new snapshot whenever the configuration version moves (R-CFG-1),
 * and reaps shared-state rows of dead responders once a second. */
static void *config_main(void *arg)
{
    struct sdb *db = arg;
    /* From the version the published snapshot was built from, not the database's
     * now: a change committed in between must not wait for the next one. */
    struct snapshot *first = snapshot_acquire();
    int64_t seen = first->version, last_reap = 0, last_warn = 0, last_load = 0;
    snapshot_release(first);
    while (!atomic_load(&stopping)) {
        /* PostgreSQL tells of a change another host committed at once (NOTIFY on
         * the version); the poll stays, for a notice lost with its connection. */
        if (sdb_wait_notice(db, "sluice_config", conf.config_poll_ms) < 0) {
            struct timespec pause = {conf.config_poll_ms / 1000, (conf.config_poll_ms % 1000) * 1000000L};
            nanosleep(&pause, NULL);
        } else if (mono_ms() - last_load < CONFIG_MIN_GAP_MS) {
            /* a burst of changes (healthd marking replicas) is loaded once, not once each */
            int64_t left = CONFIG_MIN_GAP_MS - (mono_ms() - last_load);
            struct timespec gap = {0, left * 1000000L};
            nanosleep(&gap, NULL);
        }
        int64_t t0 = mono_ms();
        int64_t v = snapshot_db_version(db);
        if (v < 0 && t0 - last_warn >= 10000) {
            log_warn("configuration version unreadable (%s); retrying every poll", sdb_errmsg(db));
            last_warn = t0;
        }
        if (v >= 0 && v != seen) {
            struct snapshot *s = snapshot_load(db, &shm);
            if (s) {
                /* The version the snapshot read in its own transaction: a change
                 * committed after the poll is in it already, not loaded twice. */
                seen = s->version;
                redis_eval_tune(s->state_lease_ms, s->state_timeout_ms);
                snapshot_publish(s);
                last_load = mono_ms();
                log_info("configuration version %lld loaded", (long long)seen);
            }
        }
        /* R-CFG-1 promises 2 s: say so when a poll alone takes a second. */
        if (mono_ms() - t0 >= 1000)
            log_warn("configuration poll took %lld ms", (long long)(mono_ms() - t0));
        if (mono_ms() - last_reap >= 1000) {
            shm_reap(&shm);
            last_reap = mono_ms();
        }
    }
    return NULL;
}

static void raise_fd_limit(int threads)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = (rlim_t)threads * 4 + 256;
    /* Parked streams hold no thread but four descriptors each (client, upstream,
     * curl's wake-up pair): as many as the front server sends, not the threads. */
    if (conf.pool_park_streams && want < 65536)
        want = 65536;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The pool.threads a responder starts with; more come as the load needs them. */
static void start_pool(void)
{
    pthread_attr_init(&worker_attr);
    pthread_attr_setstacksize(&worker_attr, 256 * 1024);
    pthread_attr_setdetachstate(&worker_attr, PTHREAD_CREATE_DETACHED);
    /* Counted, not looped: the first threads may grow the pool themselves
     * (a request at once) up to a pool.max_threads equal to pool.threads. */
    while (atomic_load(&threads_total) < conf.pool_threads)
        if (pool_grow() != 0 && atomic_load(&threads_total) < conf.pool_threads) {
            log_error("cannot start worker thread %d: %s", atomic_load(&threads_total), strerror(errno));
            exit(1);
        }
}

static void usage(void)
{
    fprintf(stderr, "usage: sluice-fcgi [-c sluice.conf]   (also SLUICE_CONF)\n"
                    "       sluice-fcgi --listen unix:PATH|127.0.0.1:PORT [--processes N] [--daemon]\n"
                    "                   [--pid-file PATH] [-c sluice.conf]\n"
                    "       sluice-fcgi --check-config -c sluice.conf\n"
                    "Runs as a FastCGI responder on fd 0, started by the web server (lighttpd's bin-path).\n"
                    "--listen opens the socket itself and keeps N responders (pool.processes) running:\n"
                    "one that dies is started again, SIGHUP is passed on, SIGTERM drains and stops them\n"
                    "(for Apache mod_proxy_fcgi and nginx, which do not start FastCGI programs).\n"
                    "--check-config reads the configuration, prints \"configuration OK\" or its errors\n"
                    "(file:line: ...) and exits 0 or 1.\n");
}

int main(int argc, char **argv)
{
    /* Signals go to one thread (sigwait): blocked before any thread exists, so
     * every thread (writers, exporter, curl's resolver) inherits the mask and a
     * SIGHUP during start-up or the drain is held for main, never fatal. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    conf_path = getenv("SLUICE_CONF");
    static const struct option longopts[] = {
        {"check-config", no_argument, NULL, 'C'}, {"listen", required_argument, NULL, 'L'},
        {"processes", required_argument, NULL, 'P'}, {"daemon", no_argument, NULL, 'D'},
        {"pid-file", required_argument, NULL, 'F'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int opt, check_only = 0;
    struct supervise_opts sup = {0};
    while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        int64_t v;
        if (opt == 'c')
            conf_path = optarg;
        else if (opt == 'C')
            check_only = 1;
        else if (opt == 'L')
            sup.listen = optarg;
        else if (opt == 'P' && parse_i64(optarg, 1, 64, &v) == 0)
            sup.processes = (int)v;
        else if (opt == 'D')
            sup.daemon = 1;
        else if (opt == 'F')
            sup.pid_file = optarg;
        else {
            if (opt == 'P')
                fprintf(stderr, "sluice-fcgi: --processes must be 1-64\n");
            usage();
            return opt == 'h' ? 0 : 2;
        }
    }
    if ((sup.processes || sup.daemon || sup.pid_file) && !sup.listen) {
        fprintf(stderr, "sluice-fcgi: --processes, --daemon and --pid-file go with --listen\n");
        return 2;
    }
    conf_defaults(&conf);
    if (conf_path && conf_load(&conf, conf_path) != 0)
        return 1;
    conf_file = conf;
    if (check_only) {
        puts(conf_path ? "configuration OK" : "configuration OK (no file: the built-in defaults)");
        return 0;
    }
    const char *ttl = getenv("SLUICE_IDEMPOTENCY_TTL_MINUTES");
    int64_t ttl_v;
    if (ttl && *ttl) {
        if (parse_i64(ttl, 1, 1440, &ttl_v) != 0) {
            fprintf(stderr, "SLUICE_IDEMPOTENCY_TTL_MINUTES must be 1-1440\n");
            return 1;
        }
        conf.idem_ttl_minutes = (int)ttl_v;
    }
    const char *tz = getenv("SLUICE_BILLING_TZ");
    setenv("TZ", tz && *tz ? tz : conf.billing_tz, 1);
    tzset();
    if (log_open(conf.log_file, "sluice-fcgi") != 0) {
        fprintf(stderr, "cannot open log file %s: %s\n", conf.log_file, strerror(errno));
        return 1;
    }
    log_set_level(log_level_of(conf.log_level));
    /* --listen: the supervisor keeps this process; each responder goes on below. */
    if (sup.listen) {
        if (!sup.processes)
            sup.processes = conf.pool_processes;
        if (sup.daemon && (!conf.log_file[0] || strcmp(conf.log_file, "-") == 0)) {
            fprintf(stderr, "sluice-fcgi: --daemon needs log_file in sluice.conf (standard error goes nowhere)\n");
            return 2;
        }
        sup.on_hup = reload;
        if (supervise(&sup, &set) != 0)
            return 1;
    }
    raise_fd_limit(conf.pool_max_threads > conf.pool_threads ? conf.pool_max_threads : conf.pool_threads);
    secret_use_key_file(conf.secrets_key_file);   /* R-SEC-9: opens upstream credentials */
    curl_global_init(CURL_GLOBAL_ALL);
    if (shm_attach(&shm, conf.state_file) != 0 || shm_register(&shm) != 0)
        return 1;
    struct sdb *cfg_db = db_open(conf.database, 0);
    if (!cfg_db)
        return 1;
    /* A busy database must not stall the config poll for seconds: give up
     * quickly and try again at the next poll (R-CFG-1). */
    sdb_busy_timeout(cfg_db, conf.config_poll_ms);
    struct snapshot *s = snapshot_load(cfg_db, &shm);
    if (!s)
        return 1;
    redis_eval_tune(s->state_lease_ms, s->state_timeout_ms);
    snapshot_publish(s);
    usage_writer_set_shm(&shm);    /* its failures and backlog in /metrics (before its thread starts) */
    if (usage_writer_start(&conf) != 0 || admit_init(&conf) != 0 || access_log_start(&conf) != 0 ||
        spans_start(&conf) != 0 || passive_share_start(conf.state, &shm) != 0 ||
        gate_share_start(&shm, conf.state) != 0 ||
        kv_start(conf.state) != 0)
        return 1;
    shadow_start(&conf, &shm);      /* R-SHD-1: without it, routes are not mirrored (logged) */
    int type;
    socklen_t tlen = sizeof type;
    if (getsockopt(FCGI_LISTENSOCK_FILENO, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0) {
        log_error("standard input is not a listening socket: sluice-fcgi is started by the front server "
                  "(lighttpd's bin-path, spawn-fcgi) or with --listen");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);

    park_start(&conf);             /* streams under way leave their threads (pool.park_streams) */
    start_pool();                   /* worker_attr: also the finishers' */
    if (park_running())
        start_finishers();
    pthread_t cfg_thread;
    pthread_create(&cfg_thread, NULL, config_main, cfg_db);
    log_info("sluice-fcgi ready: %d threads (up to %d), config version %lld", conf.pool_threads,
             conf.pool_max_threads > conf.pool_threads ? conf.pool_max_threads : conf.pool_threads,
             (long long)s->version);

    int sig = 0;
    while (sigwait(&set, &sig) == 0 && sig != SIGTERM && sig != SIGINT) {
        if (sig == SIGHUP)
            reload();               /* also logrotate's postrotate: the logs moved */
    }
    /* R-DEP-6: stop accepting, let in-flight requests finish (bounded), flush usage. */
    atomic_store(&stopping, 1);
    log_info("signal %d: draining %d in-flight requests", sig, atomic_load(&inflight));
    int64_t deadline = mono_ms() + conf.shutdown_grace_ms;
    while ((atomic_load(&inflight) > 0 || park_draining() > 0) && mono_ms() < deadline) {
        struct timespec pause = {0, 20 * 1000000};
        nanosleep(&pause, NULL);
    }
    /* R-DEP-6: what still runs ends with a shutting_down event (and a 503 usage
     * record with its tokens) rather than being cut mid-byte; the front server's
     * own grace is longer than ours, so these last bytes still reach the client. */
    if (atomic_load(&inflight) > 0) {
        log_info("grace of %d ms over: ending %d requests with shutting_down", conf.shutdown_grace_ms,
                 atomic_load(&inflight));
        atomic_store(&cut, 1);
        deadline = mono_ms() + 2000;
        while ((atomic_load(&inflight) > 0 || park_draining() > 0) && mono_ms() < deadline) {
            struct timespec pause = {0, 20 * 1000000};
            nanosleep(&pause, NULL);
        }
    }
    usage_writer_stop();
    access_log_stop();
    spans_stop();
    log_info("stopped (%d requests still in flight)", atomic_load(&inflight));
    _exit(0);
}
