/* wake.c: lazy wake of a sleeping endpoint, from the route stage (SPEC §9, R-WAKE-1..3).
 *
 * One request in the pool holds the endpoint's wake lease (shm_endpoint
 * wake_state / wake_started_ms, claimed under the pool lock): it sends the
 * wake calls and polls readiness. Every other request for the endpoint waits
 * on the shared state until a replica is marked awake, the wake fails, or its
 * own wait bound ends. A lease lasts one wait bound, so a waker that died or
 * gave up is replaced by the next request still waiting.
 *
 * With a Redis `state` (issue 19) the lease is claimed across hosts too
 * (sluice:wake:ID, for the same bound): the host that gets it sends the wake
 * calls; a host whose waker finds it held only polls readiness, so many
 * requests over many hosts still cause one wake. A failed wake is told there
 * for the others to answer with; a store that does not answer leaves the wake
 * to each host. */
#include "wake.h"
#include "upstream.h"

#include "errors.h"
#include "kv_redis.h"
#include "log.h"
#include "reply.h"
#include "serving.h"
#include "util.h"

#include <curl/curl.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAKE_MAX 64             /* sleeping replicas woken at once */
#define WAKE_BODY_MAX 4096      /* of a wake or readiness answer, kept for /is_sleeping */

struct wake_set {
    int idx[WAKE_MAX];          /* sleeping replicas on online nodes (or none) */
    int reached[WAKE_MAX];      /* the wake call got through to it */
    int n;
    int borrowed, offline;      /* sleeping replicas on such nodes */
};

struct wake_body {
    char data[WAKE_BODY_MAX + 1];
    size_t len;
};

static int replica_awake(const struct request *r, const struct snap_replica *rep)
{
    return rep->slot >= 0 && atomic_load(&r->shm->r->replicas[rep->slot].awake);
}

int wake_needed(const struct request *r, const struct snap_endpoint *e)
{
    for (int i = 0; i < e->n_replicas; i++) {
        const struct snap_replica *rep = &r->snap->replicas[e->first_replica + i];
        if (rep->state == REPLICA_SLEEPING && !replica_awake(r, rep))
            return 1;
    }
    return 0;
}

static void wake_collect(const struct request *r, const struct snap_endpoint *e, struct wake_set *ws)
{
    memset(ws, 0, sizeof *ws);
    for (int i = 0; i < e->n_replicas; i++) {
        int idx = e->first_replica + i;
        const struct snap_replica *rep = &r->snap->replicas[idx];
        if (rep->state != REPLICA_SLEEPING || replica_awake(r, rep))
            continue;
        enum node_status ns = rep->node >= 0 ? r->snap->nodes[rep->node].status : NODE_ONLINE;
        if (ns == NODE_BORROWED)
            ws->borrowed++;
        else if (ns == NODE_OFFLINE)
            ws->offline++;
        else if (ws->n < WAKE_MAX)
            ws->idx[ws->n++] = idx;
    }
}

/* R-WAKE-2: 503 with the wake codes' own Retry-After (not errors.retry_after_s). */
static void wake_reply(struct request *r, enum error_code code, int retry_after_s, const char *message)
{
    const struct error_def *e = errors_get(code);
    r->error_code = e->code;
    struct buf *b = &r->w->out;
    buf_reset(b);
    errors_body(b, e, message, NULL);
    const char *extra = arena_printf(r->arena, "%sRetry-After: %d\r\nContent-Length: %zu\r\n",
                                     e->no_retry ? "x-should-retry: false\r\n" : "", retry_after_s, b->len);
    if (reply_head(r, e->status, "application/json", extra) == 0)
        reply_body(r, b->data, b->len, 0);
}

static size_t wake_write(char *p, size_t size, size_t n, void *arg)
{
    struct wake_body *b = arg;
    size_t len = size * n, room = WAKE_BODY_MAX - b->len;
    memcpy(b->data + b->len, p, len < room ? len : room);
    b->len += len < room ? len : room;
    b->data[b->len] = '\0';
    return len;
}

/* One blocking call on a handle of its own (wakes are rare; the worker's
 * forwarding handle keeps its fixed options). Returns the HTTP status, or 0
 * when no answer came; *connected tells a timeout after connecting (the wake
 * is under way: vLLM's /wake_up answers only when awake) from an unreachable host. */
static long wake_http(CURL *c, const struct request *r, const struct snap_endpoint *e, const char *url,
                      int post, int64_t timeout_ms, struct wake_body *body, int *connected)
{
    curl_easy_reset(c);
    upstream_safe_defaults(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)e->connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_ms < 50 ? 50 : timeout_ms));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, wake_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    struct curl_slist *h = NULL;
    if (e->upstream_auth && *e->upstream_auth)
        h = curl_slist_append(h, arena_printf(r->arena, "Authorization: Bearer %s", e->upstream_auth));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (post) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
    } else {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }
    body->len = 0;
    body->data[0] = '\0';
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_off_t connect_us = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connect_us);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(h);
    *connected = rc == CURLE_OK || connect_us > 0;
    return rc == CURLE_OK ? status : 0;
}

/* R-WAKE-1: POST the endpoint's wake URL once, or each replica's /wake_up.
 * 0 when at least one call got through (an error status counts as refused). */
static int wake_call(struct request *r, CURL *c, const struct snap_endpoint *e, struct wake_set *ws,
                     int64_t deadline)
{
    struct wake_body body;
    int any = 0, connected;
    int64_t budget = r->conf->wake_call_timeout_ms;
    if (e->wake_url) {
        int64_t left = deadline - now_ms();
        long st = wake_http(c, r, e, e->wake_url, 1, left < budget ? left : budget, &body, &connected);
        any = (st >= 200 && st < 300) || (st == 0 && connected);
        for (int i = 0; i < ws->n; i++)
            ws->reached[i] = any;
        log_info("request %s: endpoint %s: wake URL answered %ld", r->request_id, e->name, st);
        return any ? 0 : -1;
    }
    for (int i = 0; i < ws->n; i++) {
        const struct snap_replica *rep = &r->snap->replicas[ws->idx[i]];
        int64_t left = deadline - now_ms();
        long st = wake_http(c, r, e, arena_printf(r->arena, "%s/wake_up", rep->url), 1,
                            left < budget ? left : budget, &body, &connected);
        ws->reached[i] = (st >= 200 && st < 300) || (st == 0 && connected);
        any |= ws->reached[i];
        log_info("request %s: endpoint %s: POST /wake_up to replica %lld: %ld", r->request_id, e->name,
                 (long long)rep->id, st);
    }
    return any ? 0 : -1;
}

/* Ready: the health path answers 2xx and a vLLM replica no longer says it sleeps. */
static int wake_ready(struct request *r, CURL *c, const struct snap_endpoint *e,
                      const struct snap_replica *rep, int64_t deadline)
{
    struct wake_body body;
    int connected;
    int64_t left = deadline - now_ms(), cap = r->conf->health_timeout_ms;
    const char *path = e->health_path && *e->health_path ? e->health_path : "/health";
    long st = wake_http(c, r, e, arena_printf(r->arena, "%s%s", rep->url, path), 0, left < cap ? left : cap,
                        &body, &connected);
    if (st < 200 || st > 299)
        return 0;
    if (!rep->engine || strcmp(rep->engine, "vllm") != 0)
        return 1;
    left = deadline - now_ms();
    st = wake_http(c, r, e, arena_printf(r->arena, "%s/is_sleeping", rep->url), 0, left < cap ? left : cap,
                   &body, &connected);
    if (st != 200)
        return st != 0;     /* no such route (older vLLM): health decides */
    struct json_object *j = json_tokener_parse(body.data), *v;
    int sleeping = j && json_object_object_get_ex(j, "is_sleeping", &v) && json_object_get_boolean(v);
    json_object_put(j);
    return !sleeping;
}

/* Marks every woken replica that is ready; returns how many are. */
static int wake_poll(struct request *r, CURL *c, const struct snap_endpoint *e, struct wake_set *ws,
                     int64_t deadline)
{
    int ready = 0;
    for (int i = 0; i < ws->n && now_ms() < deadline; i++) {
        const struct snap_replica *rep = &r->snap->replicas[ws->idx[i]];
        if (!ws->reached[i] || rep->slot < 0 || !wake_ready(r, c, e, rep, deadline))
            continue;
        struct shm_replica *s = &r->shm->r->replicas[rep->slot];
        /* It answers now, so a removal from before it slept is over (R-HC-2). */
        int rm = atomic_load(&s->removed);
        if (rm == SHM_RM_REMOVED || (rm == SHM_RM_UNKNOWN && !rep->healthy))
            atomic_store(&s->removed, SHM_RM_DATA_OK);
        atomic_store(&s->awake, 1);
        ready++;
    }
    return ready;
}

/* R-WAKE-3: take the endpoint's wake lease unless another request holds a live one. */
static int wake_claim(struct request *r, const struct snap_endpoint *e, int64_t now, int64_t lease_ms)
{
    if (e->slot < 0)
        return 1;
    struct shm_endpoint *se = &r->shm->r->endpoints[e->slot];
    if (shm_lock(r->shm) != 0)
        return 1;
    int won = 0;
    if (atomic_load(&se->wake_state) != SHM_WAKE_WAKING ||
        now - atomic_load(&se->wake_started_ms) >= lease_ms) {
        atomic_store(&se->wake_started_ms, now);
        atomic_store(&se->wake_state, SHM_WAKE_WAKING);
        won = 1;
    }
    shm_unlock(r->shm);
    return won;
}

enum { WAKE_ACROSS_FAILED = 2 };     /* else the claimer's own number (3 and up) */

static const char *wake_key(struct request *r, const struct snap_endpoint *e)
{
    return arena_printf(r->arena, "sluice:wake:%lld", (long long)e->id);
}

/* This host's waker asks the other hosts: 1 this host sends the wake calls (it
 * claimed the lease, or nobody answers); 0 another host's wake is under way
 * (poll only); -1 another host's wake call failed a moment ago. */
static int wake_claim_across(struct request *r, const struct snap_endpoint *e, int64_t lease_ms)
{
    if (!kv_on())
        return 1;
    int64_t held = 0, mine = 3 + (int64_t)(request_random(r) >> 4);
    int rc = kv_claim(wake_key(r, e), mine, lease_ms, &held, r->snap->state_timeout_ms);
    if (rc != 0 || held == mine)        /* mine: the claim was made by a first try that lost its answer */
        return 1;
    return held == WAKE_ACROSS_FAILED ? -1 : 0;
}

/* The end of this host's wake calls, for the other hosts: a failure stays
 * told for the retry time; a success frees the lease for the next sleep. */
static void wake_tell_across(struct request *r, const struct snap_endpoint *e, int failed)
{
    if (!kv_on())
        return;
    const char *key = wake_key(r, e);
    if (failed) {
        int64_t v = WAKE_ACROSS_FAILED;
        kv_put(&key, &v, 1, (int64_t)r->conf->wake_node_retry_after_s * 1000 + 1, r->snap->state_timeout_ms);
    } else {
        kv_del(key, r->snap->state_timeout_ms);
    }
}

static void wake_set_state(struct request *r, const struct snap_endpoint *e, enum shm_wake st)
{
    if (e->slot >= 0)
        atomic_store(&r->shm->r->endpoints[e->slot].wake_state, st);
}

static int wake_any_serving(const struct request *r, const struct snap_endpoint *e, int64_t now)
{
    for (int i = 0; i < e->n_replicas; i++)
        if (serving_replica_up(r, &r->snap->replicas[e->first_replica + i], now))
            return 1;
    return 0;
}

int wake_endpoint(struct request *r, const struct snap_endpoint *e)
{
    const struct conf *cf = r->conf;
    struct wake_set ws;
    wake_collect(r, e, &ws);
    if (ws.n == 0) {
        /* R-WAKE-2: every sleeping replica is on a borrowed or offline node. */
        int borrowed = ws.borrowed > 0;
        log_info("request %s: endpoint %s sleeps on %s nodes only", r->request_id, e->name,
                 borrowed ? "borrowed" : "offline");
        wake_reply(r, borrowed ? ERR_WAKE_QUEUED_GPU_BORROWED : ERR_WAKE_FAILED_NODE_OFFLINE,
                   cf->wake_node_retry_after_s,
                   borrowed ? "The model's GPUs are lent out; the wake-up is queued until they return."
                            : "The model's node is offline.");
        return -1;
    }
    int64_t start_ms = (int64_t)e->start_period_seconds * 1000;
    int64_t bound = e->health_check ? (start_ms > 1000 ? start_ms : 1000) : cf->wake_no_health_wait_ms;
    if (e->health_check && bound > cf->wake_max_wait_ms)
        bound = cf->wake_max_wait_ms;
    int64_t deadline = now_ms() + bound;
    CURL *c = NULL;
    int owner = 0, caller = 0, rc = -1;     /* caller: this host sent the wake calls */
    for (int round = 0;; round++) {
        int64_t now = now_ms();
        if (wake_any_serving(r, e, now)) {          /* this or another request's wake is done */
            if (caller)
                wake_tell_across(r, e, 0);          /* the next sleep's wake is nobody's yet */
            rc = 0;
            break;
        }
        int st = e->slot >= 0 ? atomic_load(&r->shm->r->endpoints[e->slot].wake_state) : SHM_WAKE_IDLE;
        if (!owner && round > 0 && st == SHM_WAKE_FAILED) {
            wake_reply(r, ERR_WAKE_FAILED_NODE_OFFLINE, cf->wake_node_retry_after_s,
                       "The wake-up call could not reach the model's node.");
            break;
        }
        if (!owner && wake_claim(r, e, now, bound)) {
            owner = 1;
            c = curl_easy_init();
            if (!c)
                abort();
            int across = wake_claim_across(r, e, bound);
            if (across < 0) {
                wake_set_state(r, e, SHM_WAKE_FAILED);
                wake_reply(r, ERR_WAKE_FAILED_NODE_OFFLINE, cf->wake_node_retry_after_s,
                           "The wake-up call could not reach the model's node.");
                break;
            }
            if (across == 0) {
                log_info("request %s: endpoint %s is being woken by another gateway host; waiting for it "
                         "(at most %lld ms)", r->request_id, e->name, (long long)bound);
                for (int i = 0; i < ws.n; i++)
                    ws.reached[i] = 1;
            } else {
                caller = 1;
                log_info("request %s: waking endpoint %s (%d sleeping replicas, wait at most %lld ms)",
                         r->request_id, e->name, ws.n, (long long)bound);
                if (wake_call(r, c, e, &ws, deadline) != 0) {
                    wake_tell_across(r, e, 1);
                    wake_set_state(r, e, SHM_WAKE_FAILED);
                    wake_reply(r, ERR_WAKE_FAILED_NODE_OFFLINE, cf->wake_node_retry_after_s,
                               "The wake-up call could not reach the model's node.");
                    break;
                }
            }
        }
        if (owner && wake_poll(r, c, e, &ws, deadline) > 0) {
            if (caller)
                wake_tell_across(r, e, 0);
            wake_set_state(r, e, SHM_WAKE_IDLE);
            log_info("request %s: endpoint %s is awake after %lld ms", r->request_id, e->name,
                     (long long)(now_ms() - (deadline - bound)));
            rc = 0;
            break;
        }
        now = now_ms();
        if (now >= deadline) {
            /* The lease runs out with this wait; a later request takes it over. */
            wake_reply(r, ERR_SERVICE_WAKING, cf->wake_retry_after_s,
                       "The model is waking up; retry in a moment.");
            break;
        }
        int64_t pause = deadline - now < cf->wake_poll_ms ? deadline - now : cf->wake_poll_ms;
        struct timespec ts = {(time_t)(pause / 1000), (long)(pause % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (c)
        curl_easy_cleanup(c);
    return rc;
}
