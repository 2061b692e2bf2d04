/* stats.c: `sluicectl stats`: what the responder pool shares right now (R-LB-1, R-HC-5, R-HC-2, R-LB-2),
 * and the per-model and per-endpoint views of the /metrics series behind it and GET /api/v1/live. */
#include "stats.h"

#include "gate.h"
#include "metrics.h"
#include "shm.h"
#include "util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *circuit_name(int c)
{
    return c == CIRCUIT_OPEN ? "open" : c == CIRCUIT_HALF_OPEN ? "half_open" : "closed";
}

static void stats_add_views(struct json_object *out, struct sdb *db, struct shm *shm);

/* The semantic layers' counts, by the layer label of each stored series. */
struct layer_counts {
    uint64_t v[4];
};

static void layer_count(void *arg, const char *labels, uint64_t value)
{
    static const char *const names[] = {"layer=\"rule\"", "layer=\"bm25\"", "layer=\"hybrid\"",
                                        "layer=\"fallback\""};
    struct layer_counts *lc = arg;
    for (int i = 0; i < 4; i++)
        if (strcmp(labels, names[i]) == 0)
            lc->v[i] += value;
}

struct json_object *stats_json(struct sdb *db, const char *state_path)
{
    struct shm shm;
    if (shm_attach(&shm, state_path) != 0)
        return NULL;
    struct json_object *out = json_object_new_object();
    struct json_object *procs = json_object_new_array();
    for (int i = 0; i < SHM_MAX_PROCS; i++) {
        int pid = atomic_load(&shm.r->procs[i].pid);
        if (!pid)
            continue;
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "row", json_object_new_int(i));
        json_object_object_add(p, "pid", json_object_new_int(pid));
        json_object_object_add(p, "alive", json_object_new_boolean(kill(pid, 0) == 0));
        json_object_array_add(procs, p);
    }
    json_object_object_add(out, "processes", procs);
    struct json_object *reps = json_object_new_array();
    struct sdb_stmt *st = NULL;
    sdb_prepare(db, "SELECT r.id, e.name, r.url FROM replicas r JOIN endpoints e ON e.id = r.endpoint_id"
                           " ORDER BY r.id", &st);
    int64_t now = now_ms();
    while (st && sdb_step(st) == SDB_ROW) {
        int64_t id = sdb_column_int64(st, 0);
        int slot = shm_replica_slot(&shm, id);
        struct json_object *r = json_object_new_object();
        json_object_object_add(r, "replica_id", json_object_new_int64(id));
        json_object_object_add(r, "endpoint", json_object_new_string((const char *)sdb_column_text(st, 1)));
        json_object_object_add(r, "url", json_object_new_string((const char *)sdb_column_text(st, 2)));
        if (slot >= 0) {
            const struct shm_replica *s = &shm.r->replicas[slot];
            int64_t ban = atomic_load(&s->ban_until_ms) - now;
            json_object_object_add(r, "active", json_object_new_int(shm_active_sum(&shm, slot)));
            json_object_object_add(r, "circuit", json_object_new_string(circuit_name(atomic_load(&s->circuit))));
            json_object_object_add(r, "failures", json_object_new_int(atomic_load(&s->failures)));
            json_object_object_add(r, "ban_remaining_ms", json_object_new_int64(ban > 0 ? ban : 0));
            /* R-HC-2 sluice-healthd's word, R-WAKE-1 wakes, R-LB-2 engine metrics. */
            static const char *const removed[] = {"unknown", "removed", "in_service", "recovered_by_request"};
            int rm = atomic_load(&s->removed);
            json_object_object_add(r, "health", json_object_new_string(rm >= 0 && rm <= 3 ? removed[rm] : "?"));
            json_object_object_add(r, "awake", json_object_new_boolean(atomic_load(&s->awake) != 0));
            int64_t at = atomic_load(&s->metrics_ms);
            if (at > 0) {
                json_object_object_add(r, "waiting", json_object_new_int(atomic_load(&s->waiting)));
                json_object_object_add(r, "running", json_object_new_int(atomic_load(&s->running)));
                json_object_object_add(r, "kv_cache_permille", json_object_new_int(atomic_load(&s->kv_permille)));
                json_object_object_add(r, "metrics_age_ms", json_object_new_int64(now - at));
            }
        }
        json_object_array_add(reps, r);
    }
    sdb_finalize(st);
    json_object_object_add(out, "replicas", reps);
    /* R-AFF-6: sluice_session_affinity_total{outcome,level} until /metrics exists. */
    static const char *outcomes[] = {"hit", "miss", "overload", "stale"};
    static const char *levels[] = {"header", "prompt_cache_key", "user", "l2", "l1"};
    struct json_object *aff = json_object_new_array();
    for (int o = 0; o < SHM_AFF_OUTCOMES; o++)
        for (int l = 0; l < SHM_AFF_LEVELS; l++) {
            uint64_t v = atomic_load(&shm.r->affinity.outcomes[o][l]);
            if (!v || (o == 1 && l > 0))
                continue;
            struct json_object *row = json_object_new_object();
            json_object_object_add(row, "outcome", json_object_new_string(outcomes[o]));
            json_object_object_add(row, "level", json_object_new_string(o == 1 ? "none" : levels[l]));
            json_object_object_add(row, "count", json_object_new_int64((int64_t)v));
            json_object_array_add(aff, row);
        }
    json_object_object_add(out, "session_affinity", aff);
    /* R-AUTO-6: sluice_auto_routing_total{outcome,strategy}. */
    static const char *auto_outcomes[] = {"routed", "degraded", "failed", "no_candidates"};
    static const char *strategies[] = {"balanced", "cost", "latency", "semantic"};
    struct json_object *au = json_object_new_array();
    for (int o = 0; o < SHM_AUTO_OUTCOMES; o++)
        for (int sg = 0; sg < SHM_AUTO_STRATEGIES; sg++) {
            uint64_t v = atomic_load(&shm.r->routing.auto_outcomes[o][sg]);
            if (!v)
                continue;
            struct json_object *row = json_object_new_object();
            json_object_object_add(row, "outcome", json_object_new_string(auto_outcomes[o]));
            json_object_object_add(row, "strategy", json_object_new_string(strategies[sg]));
            json_object_object_add(row, "count", json_object_new_int64((int64_t)v));
            json_object_array_add(au, row);
        }
    json_object_object_add(out, "auto_routing", au);
    /* R-SEM: sluice_semantic_routing_total{layer}, every layer (0 until counted). */
    struct json_object *sem = json_object_new_array();
    static const char *const layers[] = {"rule", "bm25", "hybrid", "fallback"};
    struct layer_counts lc = {{0}};
    metrics_each_counter(&shm, MET_SEMANTIC_ROUTING, layer_count, &lc);
    for (int i = 0; i < 4; i++) {
        struct json_object *row = json_object_new_object();
        json_object_object_add(row, "layer", json_object_new_string(layers[i]));
        json_object_object_add(row, "count", json_object_new_int64((int64_t)lc.v[i]));
        json_object_array_add(sem, row);
    }
    json_object_object_add(out, "semantic_routing", sem);
    stats_add_views(out, db, &shm);
    return out;
}

/* ---- per-model and per-endpoint views of the /metrics series (issue 12) --------------
 * Both `sluicectl stats` (everything since the state file was created: the cumulative
 * counters and histogram buckets) and GET /api/v1/live (the last minutes: the histograms'
 * per-minute ring) fold the series into one row per model or endpoint. */

enum view_fold {
    FOLD_REQUESTS,      /* counter sluice_requests_total: requests, errors = status >= 400 */
    FOLD_FAILED,        /* counter sluice_upstream_attempts_total: errors = outcome "failed" */
    FOLD_LATENCY,       /* histogram: latency buckets */
    FOLD_LATENCY_COUNT, /* histogram: latency buckets, requests = its count */
    FOLD_TTFT,          /* histogram: TTFT buckets */
};

struct view_row {
    char name[SHM_MET_LABELS];
    int64_t id;                          /* endpoints: the endpoint id */
    uint64_t requests, errors;
    uint64_t lat[MET_BUCKETS + 1], ttft[MET_BUCKETS + 1];
};

/* fixed: the names are given up front (endpoints from the database, a tenant's models);
 * a series of any other name is not this caller's and is skipped. */
struct view_rows {
    struct view_row *v;
    int n, cap, fixed;
};

struct view_fold_ctx {
    struct view_rows *rows;
    const char *label;                   /* "model" or "endpoint" */
    enum view_fold fold;
};

/* The value of label `name` in a series' label text (as metrics_label wrote it),
 * unescaped into out; -1 when the series has no such label. */
static int label_get(const char *labels, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    for (const char *p = labels; *p;) {
        int want = strncmp(p, name, n) == 0 && p[n] == '=';
        const char *q = strchr(p, '"');
        if (!q)
            return -1;
        size_t o = 0;
        for (q++; *q && *q != '"'; q++) {
            char ch = *q;
            if (ch == '\\' && q[1]) {
                q++;
                ch = *q == 'n' ? '\n' : *q;
            }
            if (o + 1 < cap)
                out[o++] = ch;
        }
        out[o] = '\0';
        if (want)
            return 0;
        if (!*q)
            return -1;
        p = q + 1;
        if (*p == ',')
            p++;
    }
    return -1;
}

static struct view_row *rows_get(struct view_rows *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->v[i].name, name) == 0)
            return &r->v[i];
    if (r->fixed)
        return NULL;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->v = realloc(r->v, (size_t)r->cap * sizeof *r->v);
        if (!r->v)
            abort();
    }
    struct view_row *row = &r->v[r->n++];
    memset(row, 0, sizeof *row);
    snprintf(row->name, sizeof row->name, "%s", name);
    return row;
}

static int row_cmp(const void *a, const void *b)
{
    return strcmp(((const struct view_row *)a)->name, ((const struct view_row *)b)->name);
}

static void fold_counter(void *arg, const char *labels, uint64_t value)
{
    struct view_fold_ctx *f = arg;
    char name[SHM_MET_LABELS], v[32];
    struct view_row *row;
    if (label_get(labels, f->label, name, sizeof name) != 0 || !(row = rows_get(f->rows, name)))
        return;
    if (f->fold == FOLD_REQUESTS) {
        row->requests += value;
        if (label_get(labels, "status", v, sizeof v) == 0 && atoi(v) >= 400)
            row->errors += value;
    } else if (label_get(labels, "outcome", v, sizeof v) == 0 && strcmp(v, "failed") == 0) {
        row->errors += value;
    }
}

static void fold_hist(void *arg, const char *labels, const struct metric_hist_read *h)
{
    struct view_fold_ctx *f = arg;
    char name[SHM_MET_LABELS];
    struct view_row *row;
    if (label_get(labels, f->label, name, sizeof name) != 0 || !(row = rows_get(f->rows, name)))
        return;
    uint64_t *into = f->fold == FOLD_TTFT ? row->ttft : row->lat;
    for (int b = 0; b <= MET_BUCKETS; b++)
        into[b] += h->buckets[b];
    if (f->fold == FOLD_LATENCY_COUNT)
        row->requests += h->count;
}

static void fold(const struct shm *shm, struct view_rows *rows, const char *label, enum metric_id m,
                 enum view_fold how)
{
    struct view_fold_ctx f = {rows, label, how};
    if (metric_get(m)->type == COUNTER)
        metrics_each_counter(shm, m, fold_counter, &f);
    else
        metrics_each_hist(shm, m, fold_hist, &f);
}

/* Milliseconds with one decimal, or null when there was no observation. */
static struct json_object *json_ms(const uint64_t buckets[MET_BUCKETS + 1], double q)
{
    int64_t us = metrics_quantile_us(buckets, q);
    char num[32];
    if (us < 0)
        return NULL;
    snprintf(num, sizeof num, "%.1f", (double)us / 1000.0);
    return json_object_new_double_s((double)us / 1000.0, num);
}

/* A number with `decimals` decimals, shown as written. */
static struct json_object *json_fixed(double v, int decimals)
{
    char num[48];
    snprintf(num, sizeof num, "%.*f", decimals, v);
    return json_object_new_double_s(strtod(num, NULL), num);
}

/* One row as {label, requests, errors, [request_rate, error_rate,] p50/p95 latency and TTFT};
 * window_s > 0 adds the rates per second. */
static struct json_object *row_json(const struct view_row *r, const char *label, double window_s)
{
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, label, json_object_new_string(r->name));
    json_object_object_add(o, "requests", json_object_new_int64((int64_t)r->requests));
    json_object_object_add(o, "errors", json_object_new_int64((int64_t)r->errors));
    if (window_s > 0) {
        json_object_object_add(o, "request_rate", json_fixed((double)r->requests / window_s, 6));
        json_object_object_add(o, "error_rate", json_fixed((double)r->errors / window_s, 6));
    }
    json_object_object_add(o, "latency_p50_ms", json_ms(r->lat, 0.5));
    json_object_object_add(o, "latency_p95_ms", json_ms(r->lat, 0.95));
    json_object_object_add(o, "ttft_p50_ms", json_ms(r->ttft, 0.5));
    json_object_object_add(o, "ttft_p95_ms", json_ms(r->ttft, 0.95));
    return o;
}

/* Endpoints from the database (tenant_id 0: all), as fixed rows. */
static void endpoint_rows(struct sdb *db, int64_t tenant_id, struct view_rows *rows)
{
    struct sdb_stmt *st = NULL;
    sdb_prepare(db, "SELECT id, name FROM endpoints WHERE ?1 = 0 OR tenant_id = ?1 ORDER BY name", &st);
    sdb_bind_int64(st, 1, tenant_id);
    while (st && sdb_step(st) == SDB_ROW) {
        struct view_row *row = rows_get(rows, (const char *)sdb_column_text(st, 1));
        row->id = sdb_column_int64(st, 0);
    }
    sdb_finalize(st);
    rows->fixed = 1;
}

/* The model names a tenant's own traffic is all there is of: those only its routes
 * route. The model histograms carry no tenant label, so a name another tenant routes
 * too (or a platform model every tenant may call) would show that tenant's traffic. */
static void tenant_model_rows(struct sdb *db, int64_t tenant_id, struct view_rows *rows)
{
    struct sdb_stmt *st = NULL;
    sdb_prepare(db, "SELECT DISTINCT model FROM routes WHERE tenant_id = ?1 AND model NOT IN"
                           " (SELECT model FROM routes WHERE tenant_id <> ?1) ORDER BY model", &st);
    sdb_bind_int64(st, 1, tenant_id);
    while (st && sdb_step(st) == SDB_ROW)
        rows_get(rows, (const char *)sdb_column_text(st, 0));
    sdb_finalize(st);
    rows->fixed = 1;
}

/* Models seen in any of the model series, for the whole pool. */
static void pool_model_rows(const struct shm *shm, struct view_rows *rows)
{
    fold(shm, rows, "model", MET_REQUESTS, FOLD_REQUESTS);
    fold(shm, rows, "model", MET_REQUEST_DURATION, FOLD_LATENCY);
    fold(shm, rows, "model", MET_TTFT, FOLD_TTFT);
    if (rows->n > 1)                /* qsort(NULL, 0) is undefined: no series yet */
        qsort(rows->v, (size_t)rows->n, sizeof *rows->v, row_cmp);
}

/* An endpoint's replicas now: requests in flight (every live responder) and the engine
 * queue (sluice-healthd's scrape; null when no replica has been scraped). */
static void endpoint_load(struct sdb *db, struct shm *shm, int64_t endpoint_id, struct json_object *o)
{
    int active = 0, waiting = 0, scraped = 0;
    struct sdb_stmt *st = NULL;
    sdb_prepare(db, "SELECT id FROM replicas WHERE endpoint_id = ?1", &st);
    sdb_bind_int64(st, 1, endpoint_id);
    while (st && sdb_step(st) == SDB_ROW) {
        int slot = shm_replica_slot(shm, sdb_column_int64(st, 0));
        if (slot < 0)
            continue;
        active += shm_active_sum(shm, slot);
        if (atomic_load(&shm->r->replicas[slot].metrics_ms) > 0) {
            waiting += atomic_load(&shm->r->replicas[slot].waiting);
            scraped = 1;
        }
    }
    sdb_finalize(st);
    json_object_object_add(o, "active", json_object_new_int(active));
    json_object_object_add(o, "queue", scraped ? json_object_new_int(waiting) : NULL);
    /* R-PRIO-1: requests waiting in sluice's own queue for a place on it */
    int ep_slot = shm_endpoint_slot(shm, endpoint_id);
    json_object_object_add(o, "waiting", json_object_new_int(gate_queue_length(shm, ep_slot)));
}

static struct json_object *rows_json(const struct view_rows *rows, const char *label, double window_s,
                                     struct sdb *db, struct shm *shm)
{
    struct json_object *arr = json_object_new_array();
    for (int i = 0; i < rows->n; i++) {
        struct json_object *o = row_json(&rows->v[i], label, window_s);
        if (db)
            endpoint_load(db, shm, rows->v[i].id, o);
        json_object_array_add(arr, o);
    }
    return arr;
}

/* `sluicectl stats`: models and endpoints since the state file was created. Errors of a
 * model: its requests answered with status >= 400; of an endpoint: its upstream attempts
 * with outcome "failed" (the last attempt of a request that got no answer there). */
static void stats_add_views(struct json_object *out, struct sdb *db, struct shm *shm)
{
    struct view_rows models = {0}, eps = {0};
    pool_model_rows(shm, &models);
    endpoint_rows(db, 0, &eps);
    fold(shm, &eps, "endpoint", MET_ENDPOINT_DURATION, FOLD_LATENCY_COUNT);
    fold(shm, &eps, "endpoint", MET_ENDPOINT_TTFT, FOLD_TTFT);
    fold(shm, &eps, "endpoint", MET_UPSTREAM_ATTEMPTS, FOLD_FAILED);
    json_object_object_add(out, "models", rows_json(&models, "model", 0, NULL, NULL));
    json_object_object_add(out, "endpoints", rows_json(&eps, "endpoint", 0, db, shm));
    free(models.v);
    free(eps.v);
}

/* The live view of one row: the last minutes of the request and TTFT histograms whose
 * label text holds label="name": requests, errors (the ring's: answers with status >= 500,
 * as fcgi/metrics_record.c marks them) and latency buckets. */
static void live_row(const struct shm *shm, struct view_row *row, const char *label, enum metric_id lat,
                     enum metric_id ttft, int minutes, int64_t now)
{
    char match[SHM_MET_LABELS + 16];
    struct metric_window w;
    if (metrics_label(match, sizeof match, 0, label, row->name) < 0)
        return;
    metrics_window(shm, lat, match, minutes, now, &w);
    row->requests = w.count;
    row->errors = w.errors;
    memcpy(row->lat, w.buckets, sizeof row->lat);
    metrics_window(shm, ttft, match, minutes, now, &w);
    memcpy(row->ttft, w.buckets, sizeof row->ttft);
}

static struct json_object *live_replicas(struct sdb *db, struct shm *shm, int64_t tenant_id)
{
    struct json_object *reps = json_object_new_array();
    struct sdb_stmt *st = NULL;
    sdb_prepare(db, "SELECT r.id, e.name, r.url FROM replicas r JOIN endpoints e ON e.id = r.endpoint_id"
                           " WHERE ?1 = 0 OR e.tenant_id = ?1 ORDER BY e.name, r.id", &st);
    sdb_bind_int64(st, 1, tenant_id);
    while (st && sdb_step(st) == SDB_ROW) {
        int64_t id = sdb_column_int64(st, 0);
        int slot = shm_replica_slot(shm, id);
        struct json_object *r = json_object_new_object();
        json_object_object_add(r, "replica_id", json_object_new_int64(id));
        json_object_object_add(r, "endpoint", json_object_new_string((const char *)sdb_column_text(st, 1)));
        json_object_object_add(r, "url", json_object_new_string((const char *)sdb_column_text(st, 2)));
        const struct shm_replica *s = slot >= 0 ? &shm->r->replicas[slot] : NULL;
        int scraped = s && atomic_load(&s->metrics_ms) > 0;
        json_object_object_add(r, "active", json_object_new_int(s ? shm_active_sum(shm, slot) : 0));
        json_object_object_add(r, "queue", scraped ? json_object_new_int(atomic_load(&s->waiting)) : NULL);
        json_object_object_add(r, "kv_cache_ratio", scraped ? json_fixed(atomic_load(&s->kv_permille) / 1000.0, 3) : NULL);
        json_object_object_add(r, "circuit", json_object_new_string(circuit_name(s ? atomic_load(&s->circuit) : 0)));
        json_object_array_add(reps, r);
    }
    sdb_finalize(st);
    return reps;
}

struct json_object *stats_live_json(struct sdb *db, const char *state_path, int64_t tenant_id, int minutes)
{
    struct shm shm;
    if (shm_attach(&shm, state_path) != 0)
        return NULL;
    if (minutes < 1 || minutes > SHM_MET_MINUTES - 1)
        minutes = SHM_MET_MINUTES - 1;
    int64_t now = now_ms();
    /* metrics_window sums `minutes` whole minutes and the current one so far. */
    double window_s = minutes * 60.0 + (double)(now % 60000) / 1000.0;
    struct view_rows models = {0}, eps = {0};
    if (tenant_id)
        tenant_model_rows(db, tenant_id, &models);
    else
        pool_model_rows(&shm, &models);
    for (int i = 0; i < models.n; i++)
        live_row(&shm, &models.v[i], "model", MET_REQUEST_DURATION, MET_TTFT, minutes, now);
    endpoint_rows(db, tenant_id, &eps);
    for (int i = 0; i < eps.n; i++)
        live_row(&shm, &eps.v[i], "endpoint", MET_ENDPOINT_DURATION, MET_ENDPOINT_TTFT, minutes, now);
    struct json_object *out = json_object_new_object();
    json_object_object_add(out, "scope", json_object_new_string(tenant_id ? "tenant" : "pool"));
    json_object_object_add(out, "minutes", json_object_new_int(minutes));
    json_object_object_add(out, "window_seconds", json_fixed(window_s, 1));
    json_object_object_add(out, "now_ms", json_object_new_int64(now));
    json_object_object_add(out, "models", rows_json(&models, "model", window_s, NULL, NULL));
    json_object_object_add(out, "endpoints", rows_json(&eps, "endpoint", window_s, db, &shm));
    json_object_object_add(out, "replicas", live_replicas(db, &shm, tenant_id));
    free(models.v);
    free(eps.v);
    return out;
}
