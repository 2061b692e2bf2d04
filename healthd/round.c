/* round.c: one sluice-healthd round: probe every running replica, scrape vLLM and
 * DCGM metrics, all in parallel; then record removals, recoveries and wakes in
 * one transaction and publish them to the shared state (SPEC §8). */
#include "healthd.h"

#include "log.h"
#include "util.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#define WAKE_FOLLOW_MS (10 * 60 * 1000)   /* after a wake, sleeping replicas are checked this long */

enum job_kind { JOB_HEALTH, JOB_BUSINESS, JOB_METRICS, JOB_DCGM, JOB_READY };
enum job_class { CLS_PROBE = 0, CLS_SCRAPE = 1, CLS_DCGM = 2 };

/* What this round learnt about one replica. */
struct outcome {
    int health;                 /* -1 not probed, 0 failed, 1 passed */
    int business;               /* -1 not run, 0 failed, 1 passed */
    int ready;                  /* a sleeping replica answers after a wake */
    int seen_removed;           /* shm removed value when the round started */
    char reason[160];
};

static int is(const char *s, const char *want) { return s && strcmp(s, want) == 0; }

static struct probe_job *job_add(struct probe_job *jobs, int *n, enum job_kind kind, int index,
                                 const char *url, int cls, int keep_body)
{
    struct probe_job *j = &jobs[(*n)++];
    memset(j, 0, sizeof *j);
    j->url = url;
    j->kind = kind;
    j->index = index;
    j->cls = cls;
    j->keep_body = keep_body;
    return j;
}

/* R-HC-1 business probe: one real max_tokens=1 request in the endpoint's protocol. */
static void business_job(struct arena *a, struct probe_job *j, const struct hd_endpoint *e)
{
    struct json_object *body = json_object_new_object(), *msgs = json_object_new_array(),
                       *m = json_object_new_object();
    json_object_object_add(m, "role", json_object_new_string("user"));
    json_object_object_add(m, "content", json_object_new_string("ping"));
    json_object_array_add(msgs, m);
    json_object_object_add(body, "model", json_object_new_string(e->probe_model));
    json_object_object_add(body, "messages", msgs);
    json_object_object_add(body, "max_tokens", json_object_new_int(1));
    j->body = arena_strdup(a, json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN));
    json_object_put(body);
    j->headers = curl_slist_append(NULL, "Content-Type: application/json");
    int anthropic = is(e->protocol, "anthropic");
    if (anthropic)
        j->headers = curl_slist_append(j->headers, arena_printf(a, "anthropic-version: %s",
                                                                e->anthropic_version && *e->anthropic_version
                                                                    ? e->anthropic_version : "2023-06-01"));
    if (e->upstream_auth && *e->upstream_auth)
        j->headers = curl_slist_append(j->headers, arena_printf(a, anthropic ? "x-api-key: %s" : "Authorization: Bearer %s",
                                                                e->upstream_auth));
}

static void job_reason(const struct probe_job *j, char *out, size_t n, const char *what)
{
    if (j->status)
        snprintf(out, n, "%s answered HTTP %ld", what, j->status);
    else
        snprintf(out, n, "%s: %s", what, j->error[0] ? j->error : "no answer");
}

/* R-HC-6: vLLM gauges into the shared state, the timestamp last. */
static void apply_metrics(struct shm *shm, const struct hd_replica *r, const struct probe_job *j, int64_t now)
{
    struct vllm_metrics m;
    if (r->slot < 0 || j->status != 200 || !j->resp || metrics_parse_vllm(j->resp, j->resp_len, &m) != 0)
        return;                 /* no fresh data: the old goes stale (R-LB-4) */
    struct shm_replica *s = &shm->r->replicas[r->slot];
    atomic_store(&s->waiting, m.waiting);
    atomic_store(&s->running, m.running);
    atomic_store(&s->kv_permille, m.kv_permille);
    atomic_store(&s->metrics_ms, now);
}

/* R-HC-7: the node's hottest GPU into the shared state and the database. */
static void apply_dcgm(struct round *rd, const struct hd_node *nd, const struct probe_job *j, int64_t now)
{
    int deci;
    if (j->status != 200 || !j->resp || dcgm_parse_temp(j->resp, j->resp_len, &deci) <= 0) {
        log_debug("node %s: no GPU temperature (%s)", nd->name, j->status ? "no reading" : j->error);
        return;
    }
    if (nd->slot >= 0) {
        atomic_store(&rd->shm->r->nodes[nd->slot].temp_decicelsius, deci);
        atomic_store(&rd->shm->r->nodes[nd->slot].temp_ms, now);
    }
    record_temperature(rd->db, nd->id, deci, now / 1000);
}

/* Readings pushed through the admin API reach the data plane through here. */
static void apply_pushed(struct round *rd, const struct hd_node *nd)
{
    if (nd->metrics_url || !nd->has_pushed || nd->slot < 0)
        return;
    struct shm_node *s = &rd->shm->r->nodes[nd->slot];
    int64_t at = nd->pushed_at_s * 1000;
    if (at > atomic_load(&s->temp_ms)) {
        atomic_store(&s->temp_decicelsius, nd->pushed_deci);
        atomic_store(&s->temp_ms, at);
    }
}

/* A sleeping replica is checked for readiness only while a wake is recent. */
static int wake_recent(const struct round *rd, const struct hd_endpoint *e, int64_t now)
{
    if (e->slot < 0)
        return 0;
    int64_t at = atomic_load(&rd->shm->r->endpoints[e->slot].wake_started_ms);
    return at > 0 && now - at < WAKE_FOLLOW_MS;
}

static int ready_answer(const struct hd_replica *r, const struct probe_job *j)
{
    if (j->status < 200 || j->status > 299)
        return 0;
    if (!is(r->engine, "vllm"))
        return 1;
    struct json_object *o = j->resp ? json_tokener_parse(j->resp) : NULL, *v;
    int sleeping = !o || (json_object_object_get_ex(o, "is_sleeping", &v) && json_object_get_boolean(v));
    json_object_put(o);
    return !sleeping;
}

/* R-HC-1..3: this round's health verdict for one replica, recorded. Returns 0 or -1 (database). */
static int decide(struct round *rd, struct hd_replica *r, const struct hd_endpoint *e, struct outcome *o,
                  int64_t now)
{
    int rc = 0;
    /* R-HC-2: a real request succeeded on it while removed (the data plane said so). */
    if (o->seen_removed == SHM_RM_DATA_OK && !r->healthy) {
        rc |= record_recovered(rd->db, r, e, "a request through the gateway succeeded");
        log_info("replica %lld (%s): back in service after a successful request", (long long)r->id, r->url);
        r->healthy = 1;
        r->failures = 0;
    }
    if (!e->health_check && !r->healthy) {
        /* Nothing checks it any more: it must not stay removed (and alerted) forever. */
        rc |= record_recovered(rd->db, r, e, "health checks turned off");
        r->healthy = 1;
        r->failures = 0;
    }
    if (o->health < 0)
        return rc;
    int pass = o->health == 1 && o->business != 0;
    if (pass) {
        if (!r->healthy) {
            rc |= record_recovered(rd->db, r, e, "health check passed");
            log_info("replica %lld (%s) of endpoint %s recovered", (long long)r->id, r->url, e->name);
            r->healthy = 1;
        } else {
            if (r->failures)
                rc |= record_failures(rd->db, r->id, 0);
            if (r->has_alert)       /* R-HC-4: e.g. healthy again across a restart */
                rc |= record_resolve_alert(rd->db, r->id);
        }
        r->failures = 0;
        return rc;
    }
    /* R-HC-3: failures inside the start grace do not count. */
    if (now / 1000 < r->started_s + e->start_period_seconds) {
        log_debug("replica %lld failed inside its start grace: %s", (long long)r->id, o->reason);
        return rc;
    }
    int f = r->failures + 1, threshold = e->failure_threshold > 0 ? e->failure_threshold : 1;
    if (r->healthy && f >= threshold) {
        rc |= record_removed(rd->db, r, e, f, o->reason);
        log_warn("replica %lld (%s) of endpoint %s removed after %d failed checks: %s", (long long)r->id,
                 r->url, e->name, f, o->reason);
        r->healthy = 0;
    } else {
        rc |= record_failures(rd->db, r->id, f);
    }
    r->failures = f;
    return rc;
}

/* After the commit: the shared state follows the database (R-HC-2, R-HC-4), except
 * a data-plane recovery that arrived during the round, which waits for the next. */
static void publish(struct round *rd, const struct hd_replica *r, const struct outcome *o)
{
    if (r->slot < 0)
        return;
    _Atomic int *rm = &rd->shm->r->replicas[r->slot].removed;
    int want = r->healthy ? SHM_RM_IN_SERVICE : SHM_RM_REMOVED;
    int cur = atomic_load(rm);
    if (cur == want || (cur == SHM_RM_DATA_OK && o->seen_removed != SHM_RM_DATA_OK))
        return;
    atomic_compare_exchange_strong(rm, &cur, want);
}

int round_run(struct round *rd)
{
    struct arena a;
    arena_init(&a);
    struct hd_config cfg;
    if (record_load(rd->db, &a, &cfg) != 0) {
        arena_free(&a);
        return -1;
    }
    int64_t now = now_ms();
    for (int i = 0; i < cfg.n_eps; i++)
        cfg.eps[i].slot = shm_endpoint_slot(rd->shm, cfg.eps[i].id);
    for (int i = 0; i < cfg.n_nodes; i++)
        cfg.nodes[i].slot = shm_node_slot(rd->shm, cfg.nodes[i].id);
    struct outcome *out = xcalloc((size_t)cfg.n_reps + 1, sizeof *out);
    struct probe_job *jobs = xcalloc((size_t)cfg.n_reps * 3 + (size_t)cfg.n_nodes + 1, sizeof *jobs);
    int nj = 0;
    for (int i = 0; i < cfg.n_reps; i++) {
        struct hd_replica *r = &cfg.reps[i];
        const struct hd_endpoint *e = &cfg.eps[r->ep];
        r->slot = shm_replica_slot(rd->shm, r->id);
        out[i].health = out[i].business = -1;
        out[i].seen_removed = r->slot >= 0 ? atomic_load(&rd->shm->r->replicas[r->slot].removed) : SHM_RM_UNKNOWN;
        if (is(r->state, "running") && e->health_check) {
            const char *path = e->health_path && *e->health_path ? e->health_path : "/health";
            job_add(jobs, &nj, JOB_HEALTH, i, arena_printf(&a, "%s%s", r->url, path), CLS_PROBE, 0);
            if (e->business_probe_rounds > 0 && e->probe_model && rd->seq % e->business_probe_rounds == 0)
                business_job(&a, job_add(jobs, &nj, JOB_BUSINESS, i,
                                         arena_printf(&a, "%s%s", r->url, is(e->protocol, "anthropic")
                                                                              ? "/v1/messages" : "/v1/chat/completions"),
                                         CLS_PROBE, 0), e);
        }
        if (is(r->state, "running") && is(r->engine, "vllm"))
            job_add(jobs, &nj, JOB_METRICS, i, arena_printf(&a, "%s/metrics", r->url), CLS_SCRAPE, 1);
        if (is(r->state, "sleeping") && wake_recent(rd, e, now)) {
            int vllm = is(r->engine, "vllm");
            const char *path = vllm ? "/is_sleeping" : e->health_path && *e->health_path ? e->health_path : "/health";
            job_add(jobs, &nj, JOB_READY, i, arena_printf(&a, "%s%s", r->url, path), CLS_PROBE, vllm);
        }
    }
    for (int i = 0; i < cfg.n_nodes; i++)
        if (cfg.nodes[i].metrics_url)
            job_add(jobs, &nj, JOB_DCGM, i, cfg.nodes[i].metrics_url, CLS_DCGM, 1);

    /* R-HC-1: all probes of the round at once; R-LB-2: scrapes N at a time. */
    int limits[PROBE_CLASSES] = {0, rd->conf->health_scrape_parallel, rd->conf->health_scrape_parallel, 0};
    probe_run(jobs, nj, limits, rd->conf->health_timeout_ms, rd->conf->health_timeout_ms);
    now = now_ms();

    for (int k = 0; k < nj; k++) {
        struct probe_job *j = &jobs[k];
        struct outcome *o = j->kind == JOB_DCGM ? NULL : &out[j->index];
        int ok = j->status >= 200 && j->status <= 299;
        switch ((enum job_kind)j->kind) {
        case JOB_HEALTH:
            o->health = ok;
            if (!ok)
                job_reason(j, o->reason, sizeof o->reason, "health check");
            break;
        case JOB_BUSINESS:
            o->business = ok;
            if (!ok && o->health != 0)
                job_reason(j, o->reason, sizeof o->reason, "business probe");
            break;
        case JOB_METRICS:
            apply_metrics(rd->shm, &cfg.reps[j->index], j, now);
            break;
        case JOB_READY:
            o->ready = ready_answer(&cfg.reps[j->index], j);
            break;
        case JOB_DCGM:
            apply_dcgm(rd, &cfg.nodes[j->index], j, now);
            break;
        }
    }
    for (int i = 0; i < cfg.n_nodes; i++)
        apply_pushed(rd, &cfg.nodes[i]);
    /* A business probe that failed while the health check passed fails the round too. */
    for (int i = 0; i < cfg.n_reps; i++)
        if (out[i].business == 0 && out[i].health == 1)
            out[i].health = 0;

    int rc = record_begin(rd->db);
    if (rc == 0) {
        rc |= record_resolve_orphans(rd->db);
        for (int i = 0; i < cfg.n_reps; i++) {
            struct hd_replica *r = &cfg.reps[i];
            const struct hd_endpoint *e = &cfg.eps[r->ep];
            struct shm_replica *s = r->slot >= 0 ? &rd->shm->r->replicas[r->slot] : NULL;
            /* R-WAKE-1: a replica the data plane (or this round) found awake becomes running. */
            if (s && is(r->state, "sleeping") && (atomic_load(&s->awake) || out[i].ready)) {
                rc |= record_woken(rd->db, r, e);
                atomic_store(&s->awake, 1);
                log_info("replica %lld (%s) of endpoint %s is awake: recorded as running", (long long)r->id,
                         r->url, e->name);
            } else if (s && is(r->state, "running") && atomic_load(&s->awake)) {
                /* Recorded a round ago, so every snapshot says running by now. */
                atomic_store(&s->awake, 0);
            }
            rc |= decide(rd, r, e, &out[i], now);
        }
        if (rc == 0)
            rc = record_commit(rd->db);
        else
            record_rollback(rd->db);
    }
    if (rc == 0) {
        for (int i = 0; i < cfg.n_reps; i++)
            publish(rd, &cfg.reps[i], &out[i]);
        atomic_store(&rd->shm->r->metrics.healthd_round_ms, now_ms());   /* R-OBS-1: a round finished */
    } else {
        log_error("round %lld: the health record could not be written; the shared state is left as it was",
                  (long long)rd->seq);
    }
    probe_free(jobs, nj);
    free(jobs);
    free(out);
    arena_free(&a);
    return rc;
}
