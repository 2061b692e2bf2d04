/* shadow.c: shadow traffic (R-SHD-1). The request thread decides, picks the
 * mirror's replica and builds its upstream request with the mirror endpoint's
 * own protocol adapter (a few microseconds, no I/O); everything else happens on
 * the shadow thread: the transfer (bounded by shadow.timeout_ms and the
 * endpoint's phase timeouts), the reading of its answer, the metrics, the
 * shadow usage event and, once the client's answer is known, the comparison. */
#include "shadow.h"

#include "account.h"
#include "balance.h"
#include "forward.h"
#include "log.h"
#include "metrics.h"
#include "proto.h"
#include "serving.h"
#include "shadow_cmp.h"
#include "upstream.h"
#include "usage_writer.h"
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SHADOW_MAIN_BODY_MAX (1u << 20)   /* the client's buffered answer kept for the exact-match flag */

struct shadow_job {
    struct shadow_job *next;
    /* what the mirror sends (built on the request thread) */
    char *url, *body;
    size_t len;
    struct curl_slist *headers;
    int connect_timeout_ms, first_byte_timeout_ms, idle_timeout_ms;
    /* who and what, for the record and the labels */
    char request_id[80], route[24], endpoint[128], model[160], routed_model[160], path[96];
    int64_t tenant_id, user_id, key_id, endpoint_id, replica_id, route_id;
    int replica_slot, stream;
    enum shadow_shape mirror_shape, client_shape;
    int64_t begin_us, ts_ms;
    /* the transfer (shadow thread only) */
    CURL *easy;
    struct shadow_reader rd;
    long status;
    char content_type[128];
    int in_1xx, body_started, timed_out;
    int64_t start_us, last_us, ttft_us, end_us;
    int mirror_done;
    struct shadow_side mirror;
    const char *outcome;
    /* the client's answer (set under S.mu by the request thread) */
    int main_done;
    struct shadow_side client;
    char *main_body;
    size_t main_len;
};

static struct {
    pthread_mutex_t mu;
    struct shadow_job *incoming;  /* handed over, not started (under mu) */
    CURLM *multi;
    const struct conf *conf;
    struct shm *shm;
    atomic_int started;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- the pool-wide cap: this process's row counts its mirrors in flight ---- */

static int slot_take(struct shm *shm, int64_t max)
{
    if (shm->row < 0 || max <= 0)
        return -1;
    _Atomic int32_t *mine = &shm->r->procs[shm->row].shadow_inflight;
    /* count first, then sum: two processes racing for the last place may both
     * give up, but never both run past the cap */
    atomic_fetch_add(mine, 1);
    if (shm_row_sum(shm, offsetof(struct shm_proc, shadow_inflight), 0) > max) {
        atomic_fetch_sub(mine, 1);
        return -1;
    }
    return 0;
}

static void slot_release(struct shm *shm)
{
    if (shm->row >= 0)
        atomic_fetch_sub(&shm->r->procs[shm->row].shadow_inflight, 1);
}

/* ---- metrics ---- */

static void count(struct shm *shm, const char *route, const char *outcome)
{
    char l[SHM_MET_LABELS];
    int n = metrics_label(l, sizeof l, 0, "route", route);
    if (n >= 0)
        n = metrics_label(l, sizeof l, (size_t)n, "outcome", outcome);
    if (n < 0)
        metrics_drop(shm);
    else
        metrics_add(shm, MET_SHADOW_REQUESTS, l, 1);
}

static void record_metrics(struct shadow_job *j)
{
    char l[SHM_MET_LABELS], t[SHM_MET_LABELS];
    int n = metrics_label(l, sizeof l, 0, "route", j->route);
    if (n < 0) {
        metrics_drop(S.shm);
        return;
    }
    int64_t now = now_ms();
    int failed = strcmp(j->outcome, "ok") != 0;
    count(S.shm, j->route, j->outcome);
    metrics_observe(S.shm, MET_SHADOW_DURATION, l, j->mirror.latency_us, failed, now);
    if (j->mirror.ttft_us > 0)
        metrics_observe(S.shm, MET_SHADOW_TTFT, l, j->mirror.ttft_us, failed, now);
    static const char *const dir[] = {"prompt", "completion"};
    int64_t v[] = {j->mirror.prompt_tokens, j->mirror.completion_tokens};
    for (int i = 0; i < 2; i++) {
        if (v[i] <= 0)
            continue;
        memcpy(t, l, (size_t)n + 1);            /* the route label, then the direction */
        if (metrics_label(t, sizeof t, (size_t)n, "direction", dir[i]) >= 0)
            metrics_add(S.shm, MET_SHADOW_TOKENS, t, (uint64_t)v[i]);
        else
            metrics_drop(S.shm);
    }
}

/* R-SHD-1: the mirror's own record: shadow = 1 keeps it out of every report,
 * aggregate and quota; no settlement, no quota counters. */
static void record_usage(const struct shadow_job *j)
{
    struct usage_record *u = xcalloc(1, sizeof *u);
    u->shadow = 1;
    u->ts_ms = j->ts_ms;
    str_copy(u->request_id, sizeof u->request_id, j->request_id);
    u->tenant_id = j->tenant_id;
    u->user_id = j->user_id;
    u->key_id = j->key_id;
    u->endpoint_id = j->endpoint_id;
    u->replica_id = j->replica_id;
    u->route_id = j->route_id;
    str_copy(u->model, sizeof u->model, j->model);
    str_copy(u->routed_model, sizeof u->routed_model, j->routed_model);
    str_copy(u->path, sizeof u->path, j->path);
    u->prompt_tokens = j->mirror.prompt_tokens;
    u->completion_tokens = j->mirror.completion_tokens;
    u->latency_ms = j->mirror.latency_us / 1000;
    u->ttft_ms = j->mirror.ttft_us / 1000;
    u->status = j->status ? (int)j->status : 502;
    u->stream = j->stream;
    u->usage_estimated = !j->rd.u.found;
    if (strcmp(j->outcome, "ok") != 0)
        str_copy(u->error_code, sizeof u->error_code,
                 strcmp(j->outcome, "timeout") == 0 ? "shadow_timeout" : "shadow_error");
    if (usage_writer_offer(u) != 0) {       /* a backlog: the clients' records go first */
        log_warn("request %s: shadow usage record dropped (usage queue backlog)", j->request_id);
        free(u);
    }
}

/* ---- the job ---- */

static void job_free(struct shadow_job *j)
{
    if (!j)
        return;
    curl_slist_free_all(j->headers);
    shadow_reader_free(&j->rd);
    free(j->url);
    free(j->body);
    free(j->main_body);
    free(j);
}

/* Both sides are done: the comparison line and its counter, then the job goes. */
static void job_compare(struct shadow_job *j)
{
    if (j->main_body && j->client.status >= 200 && j->client.status < 300 && !j->stream)
        j->client.has_text =
            shadow_text_hash(j->client_shape, j->main_body, j->main_len, &j->client.text_hash, &j->client.text_len);
    struct shadow_cmp c;
    shadow_compare(&j->client, &j->mirror, &c);
    char fields[512];
    shadow_cmp_format(&c, &j->client, &j->mirror, fields, sizeof fields);
    log_info("request %s: shadow route=%s mirror=%s outcome=%s %s", j->request_id, j->route, j->endpoint, j->outcome,
             fields);
    char l[SHM_MET_LABELS];
    int n = metrics_label(l, sizeof l, 0, "route", j->route);
    if (n >= 0)
        n = metrics_label(l, sizeof l, (size_t)n, "status_match", c.status_match ? "true" : "false");
    if (n >= 0)
        n = metrics_label(l, sizeof l, (size_t)n, "exact_match", c.exact < 0 ? "na" : c.exact ? "true" : "false");
    if (n < 0)
        metrics_drop(S.shm);
    else
        metrics_add(S.shm, MET_SHADOW_COMPARISONS, l, 1);
    job_free(j);
}

static size_t header_cb(char *p, size_t size, size_t n, void *ud)
{
    struct shadow_job *j = ud;
    size_t len = size * n;
    j->last_us = mono_us();
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        const char *sp = memchr(p, ' ', len);
        long status = sp ? strtol(sp + 1, NULL, 10) : 0;
        j->in_1xx = status >= 100 && status < 200;
        if (!j->in_1xx)
            j->status = status;
        return len;
    }
    if (!j->in_1xx && len > 13 && strncasecmp(p, "content-type:", 13) == 0) {
        size_t k = len - 13 < sizeof j->content_type - 1 ? len - 13 : sizeof j->content_type - 1;
        memcpy(j->content_type, p + 13, k);
        j->content_type[k] = '\0';
    }
    return len;
}

static size_t write_cb(char *p, size_t size, size_t n, void *ud)
{
    struct shadow_job *j = ud;
    size_t len = size * n;
    int64_t now = mono_us();
    j->last_us = now;
    if (!j->body_started) {
        j->body_started = 1;
        /* a stream asked for, answered with an event stream (an error is JSON) */
        j->rd.stream = j->stream && strcasestr(j->content_type, "text/event-stream") != NULL;
        if (!j->rd.stream)
            j->ttft_us = now - j->start_us;
    }
    if (shadow_reader_feed(&j->rd, p, len) > 0 && !j->ttft_us)
        j->ttft_us = now - j->start_us;
    return len;
}

/* The shadow thread's own transfer: a fresh easy handle on the thread's multi
 * handle (which keeps the connections alive between mirrors). */
static int job_start(struct shadow_job *j)
{
    CURL *c = curl_easy_init();
    if (!c)
        return -1;
    j->easy = c;
    j->start_us = j->last_us = mono_us();
    upstream_safe_defaults(c);
    curl_easy_setopt(c, CURLOPT_PRIVATE, j);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_URL, j->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, j->headers);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, j->body ? j->body : "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->len);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)j->connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)S.conf->shadow_timeout_ms);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, j);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, j);
    if (j->replica_slot >= 0)
        shm_active_add(S.shm, j->replica_slot, 1);
    if (curl_multi_add_handle(S.multi, c) != CURLM_OK) {
        if (j->replica_slot >= 0)
            shm_active_add(S.shm, j->replica_slot, -1);
        curl_easy_cleanup(c);
        j->easy = NULL;
        return -1;
    }
    return 0;
}

/* The mirror's transfer ended (result, or a timeout of ours): its side, its
 * outcome, its metrics and record; the place in the cap goes back at once. */
static void job_finish(struct shadow_job *j, int transport_ok)
{
    if (j->easy) {
        curl_multi_remove_handle(S.multi, j->easy);
        curl_easy_cleanup(j->easy);
        j->easy = NULL;
        if (j->replica_slot >= 0)
            shm_active_add(S.shm, j->replica_slot, -1);
    }
    j->end_us = mono_us();
    shadow_reader_end(&j->rd, j->status);
    j->outcome = shadow_outcome(j->timed_out, j->status, transport_ok, &j->rd);
    j->mirror.status = (int)j->status;
    j->mirror.latency_us = j->end_us - j->start_us;
    j->mirror.ttft_us = j->ttft_us;
    j->mirror.prompt_tokens = j->rd.u.prompt_tokens;
    j->mirror.completion_tokens = j->rd.u.completion_tokens;
    j->mirror.has_text = j->rd.has_text;
    j->mirror.text_hash = j->rd.text_hash;
    j->mirror.text_len = j->rd.text_len;
    j->mirror_done = 1;
    slot_release(S.shm);
    record_metrics(j);
    record_usage(j);
}

/* Is the transfer past one of its bounds: shadow.timeout_ms overall, the
 * mirror endpoint's first-byte and idle timeouts? */
static int job_overdue(const struct shadow_job *j, int64_t now)
{
    if (now - j->start_us >= S.conf->shadow_timeout_ms * 1000)
        return 1;
    if (!j->status && j->first_byte_timeout_ms > 0 && now - j->start_us >= (int64_t)j->first_byte_timeout_ms * 1000)
        return 1;
    return j->status && j->idle_timeout_ms > 0 && now - j->last_us >= (int64_t)j->idle_timeout_ms * 1000;
}

static void *shadow_main(void *arg)
{
    (void)arg;
    struct shadow_job *active = NULL, *waiting = NULL;
    for (;;) {
        pthread_mutex_lock(&S.mu);
        struct shadow_job *in = S.incoming;
        S.incoming = NULL;
        pthread_mutex_unlock(&S.mu);
        while (in) {
            struct shadow_job *j = in;
            in = in->next;
            if (job_start(j) != 0)
                job_finish(j, 0);
            j->next = j->mirror_done ? waiting : active;
            if (j->mirror_done)
                waiting = j;
            else
                active = j;
        }
        int running = 0;
        curl_multi_perform(S.multi, &running);
        int msgs;
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(S.multi, &msgs))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct shadow_job *j = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&j);
            if (!j || j->mirror_done)
                continue;
            if (msg->data.result == CURLE_OPERATION_TIMEDOUT)
                j->timed_out = 1;
            job_finish(j, msg->data.result == CURLE_OK);
        }
        int64_t now = mono_us();
        /* finished transfers move to the waiting list; overdue ones are cut */
        for (struct shadow_job **pp = &active; *pp;) {
            struct shadow_job *j = *pp;
            if (!j->mirror_done && job_overdue(j, now)) {
                j->timed_out = 1;
                job_finish(j, 0);
            }
            if (j->mirror_done) {
                *pp = j->next;
                j->next = waiting;
                waiting = j;
            } else {
                pp = &j->next;
            }
        }
        /* a job whose client answer is in too is compared and freed */
        pthread_mutex_lock(&S.mu);
        struct shadow_job *ready = NULL;
        for (struct shadow_job **pp = &waiting; *pp;) {
            struct shadow_job *j = *pp;
            if (j->main_done) {
                *pp = j->next;
                j->next = ready;
                ready = j;
            } else {
                pp = &j->next;
            }
        }
        pthread_mutex_unlock(&S.mu);
        while (ready) {
            struct shadow_job *j = ready;
            ready = j->next;
            job_compare(j);
        }
        /* woken by curl, by a new job or a client answer (curl_multi_wakeup), or
         * in time for the nearest timeout check */
        curl_multi_poll(S.multi, NULL, 0, active ? 100 : 1000, NULL);
    }
    return NULL;
}

int shadow_start(const struct conf *c, struct shm *s)
{
    S.conf = c;
    S.shm = s;
    S.multi = curl_multi_init();
    if (!S.multi) {
        log_error("shadow: no curl multi handle; mirrors are off");
        return -1;
    }
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &a, shadow_main, NULL);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        log_error("shadow: cannot start its thread; mirrors are off");
        return -1;
    }
    atomic_store(&S.started, 1);
    return 0;
}

/* ---- the request thread's part ---- */

/* The mirror endpoint's replica, chosen as its balancer would (bans, circuits
 * and health respected); NULL when none is in service. */
static const struct snap_replica *mirror_replica(struct request *r, const struct snap_endpoint *ep)
{
    enum { MAX = 64 };
    struct balance_cand c[MAX];
    const struct snap_replica *reps[MAX];
    int n = 0;
    int64_t now = now_ms();
    for (int i = 0; i < ep->n_replicas && n < MAX; i++) {
        const struct snap_replica *rep = &r->snap->replicas[ep->first_replica + i];
        if (!serving_replica_up(r, rep, now) || !serving_replica_open(r, rep, now))
            continue;
        memset(&c[n], 0, sizeof c[n]);
        c[n].weight = rep->weight;
        c[n].active = rep->slot >= 0 ? shm_active_sum(r->shm, rep->slot) : 0;
        reps[n++] = rep;
    }
    int k = balance_pick(ep->algorithm, c, n, request_random(r), request_random(r));
    return k >= 0 ? reps[k] : NULL;
}

/* The model name the mirror gets: the target of the tenant's route of the same
 * model to the mirror endpoint when there is one, else the client's name. */
static const char *mirror_model(const struct request *r, int mirror_ep)
{
    const struct snap_route *first;
    int n = snapshot_routes(r->snap, r->route->tenant_id, r->model, &first);
    for (int i = 0; i < n; i++)
        if (first[i].endpoint == mirror_ep)
            return first[i].target_model ? first[i].target_model : r->model;
    return r->model;
}

static void refuse_line(struct request *r, const char *route, const char *ep, const char *outcome, const char *why)
{
    count(r->shm, route, outcome);
    log_info("request %s: shadow route=%s mirror=%s outcome=%s (%s)", r->request_id, route, ep, outcome, why);
}

void shadow_begin(struct request *r)
{
    const struct snap_route *rt = r->route;
    if (r->shadow_tried || !rt || rt->mirror < 0 || rt->mirror == rt->endpoint || rt->mirror_percent <= 0 ||
        !r->json || !r->model)
        return;
    r->shadow_tried = 1;
    if (r->kind != REQ_CHAT && r->kind != REQ_COMPLETIONS && r->kind != REQ_MESSAGES)
        return;
    if (!atomic_load(&S.started) || !shadow_wanted(rt->mirror_percent, r->request_id))
        return;
    const struct snap_endpoint *mep = &r->snap->endpoints[rt->mirror];
    char route[24];
    snprintf(route, sizeof route, "%lld", (long long)rt->id);
    if (slot_take(r->shm, r->conf->shadow_max_inflight) != 0) {
        refuse_line(r, route, mep->name, "dropped", "shadow.max_inflight mirrors are in flight");
        return;
    }
    const struct snap_replica *rep = mirror_replica(r, mep);
    if (!rep) {
        slot_release(r->shm);
        refuse_line(r, route, mep->name, "error", "no replica of the mirror is in service");
        return;
    }
    /* The mirror endpoint's adapter builds from r as if it were this request's
     * attempt there; what it changes of r is put back for the real attempt. */
    const struct snap_endpoint *ep = r->ep;
    const struct snap_replica *replica = r->replica;
    const char *routed = r->routed_model, *fwd_body = r->fwd_body;
    size_t fwd_len = r->fwd_len;
    struct json_object *mv = NULL;
    const char *json_model = json_object_object_get_ex(r->json, "model", &mv)
                             ? arena_strdup(r->arena, json_object_get_string(mv)) : NULL;
    r->ep = mep;
    r->replica = rep;
    r->routed_model = mirror_model(r, rt->mirror);
    const struct proto_ops *ops = forward_adapter(r);
    struct proto_request pr = {0};
    struct proto_refusal why = {0};
    int rc = ops->build(r, &pr, &why);
    struct shadow_job *j = NULL;
    if (rc == 0) {
        j = xcalloc(1, sizeof *j);
        j->url = strdup(arena_cat(r->arena, rep->url, pr.path ? pr.path : "", NULL));
        j->body = malloc(pr.len + 1);
        if (j->body) {
            memcpy(j->body, pr.body ? pr.body : "", pr.len);
            j->body[pr.len] = '\0';
        }
        j->len = pr.len;
        j->headers = pr.headers;
        str_copy(j->routed_model, sizeof j->routed_model, r->routed_model);
    } else {
        curl_slist_free_all(pr.headers);
    }
    r->ep = ep;
    r->replica = replica;
    r->routed_model = routed;
    r->fwd_body = fwd_body;
    r->fwd_len = fwd_len;
    if (json_model && (!json_object_object_get_ex(r->json, "model", &mv) ||
                       strcmp(json_object_get_string(mv), json_model) != 0))
        json_object_object_add(r->json, "model", json_object_new_string(json_model));
    if (!j || !j->url || !j->body) {
        job_free(j);
        slot_release(r->shm);
        refuse_line(r, route, mep->name, "error",
                    rc != 0 ? errors_get(why.code)->code : "out of memory");
        return;
    }
    j->connect_timeout_ms = mep->connect_timeout_ms;
    j->first_byte_timeout_ms = mep->first_byte_timeout_ms;
    j->idle_timeout_ms = mep->idle_timeout_ms;
    str_copy(j->request_id, sizeof j->request_id, r->request_id);
    str_copy(j->route, sizeof j->route, route);
    str_copy(j->endpoint, sizeof j->endpoint, mep->name);
    str_copy(j->model, sizeof j->model, r->model);
    str_copy(j->path, sizeof j->path, r->path ? r->path : "");
    j->tenant_id = r->caller.tenant_id;
    j->user_id = r->caller.user_id;
    j->key_id = r->caller.key_id;
    j->endpoint_id = mep->id;
    j->replica_id = rep->id;
    j->replica_slot = rep->slot;
    j->route_id = rt->id;
    j->stream = r->stream;
    j->mirror_shape = mep->protocol == PROTO_ANTHROPIC ? SHADOW_ANTHROPIC : SHADOW_OPENAI;
    j->client_shape = r->ingress == INGRESS_ANTHROPIC ? SHADOW_ANTHROPIC : SHADOW_OPENAI;
    j->begin_us = mono_us();
    j->ts_ms = now_ms();
    shadow_reader_init(&j->rd, j->mirror_shape, r->stream, (size_t)r->conf->max_sse_event_bytes,
                       (size_t)r->conf->max_response_bytes);
    r->shadow = j;
    pthread_mutex_lock(&S.mu);
    j->next = S.incoming;
    S.incoming = j;
    pthread_mutex_unlock(&S.mu);
    curl_multi_wakeup(S.multi);
}

void shadow_end(struct request *r)
{
    struct shadow_job *j = r->shadow;
    if (!j)
        return;
    r->shadow = NULL;
    struct shadow_side c = {0};
    c.status = account_status(r);
    /* to the end of its last upstream transfer, as the mirror's is measured (not
     * what the gateway did after it: account, the first use of a database handle) */
    int64_t end = r->obs.n_attempts > 0 && r->obs.attempts[r->obs.n_attempts - 1].end_us > j->begin_us
                  ? r->obs.attempts[r->obs.n_attempts - 1].end_us : mono_us();
    c.latency_us = end - j->begin_us;
    if (r->obs.ttft_us > 0 && r->obs.start_us + r->obs.ttft_us > j->begin_us)
        c.ttft_us = r->obs.start_us + r->obs.ttft_us - j->begin_us;
    account_billable_tokens(r, &c.prompt_tokens, &c.completion_tokens);
    if (c.prompt_tokens < 0)
        c.prompt_tokens = c.completion_tokens = 0;
    char *body = NULL;
    size_t len = 0;
    const struct buf *b = &r->w->resp;
    if (!r->stream && c.status >= 200 && c.status < 300 && b->len && b->len <= SHADOW_MAIN_BODY_MAX &&
        (body = malloc(b->len + 1))) {
        memcpy(body, b->data, b->len);
        body[b->len] = '\0';
        len = b->len;
    }
    pthread_mutex_lock(&S.mu);
    j->client = c;
    j->main_body = body;
    j->main_len = len;
    j->main_done = 1;
    pthread_mutex_unlock(&S.mu);
    curl_multi_wakeup(S.multi);
}
