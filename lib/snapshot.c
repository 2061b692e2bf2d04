/* snapshot.c: load, publish and look up configuration snapshots (R-CFG-1). */
#include "snapshot.h"

#include "db.h"
#include "log.h"
#include "secret.h"
#include "settings.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t current_lock = PTHREAD_MUTEX_INITIALIZER;
static struct snapshot *current;   /* holds one reference of its own */

int64_t snapshot_db_version(struct sdb *db)
{
    struct sdb_stmt *st;
    int64_t v = -1;
    if (sdb_prepare(db, "SELECT v FROM config_version WHERE id = 1", &st) != SDB_OK)
        return -1;
    if (sdb_step(st) == SDB_ROW)
        v = sdb_column_int64(st, 0);
    sdb_finalize(st);
    return v;
}

static const char *col_str(struct arena *a, struct sdb_stmt *st, int i)
{
    const unsigned char *t = sdb_column_text(st, i);
    return t ? arena_strdup(a, (const char *)t) : NULL;
}

/* Runs a query and calls row() for each row; counts rows into *n. */
static int each_row(struct sdb *db, const char *sql, void (*row)(struct snapshot *, struct sdb_stmt *, int),
                    struct snapshot *s, int *n)
{
    struct sdb_stmt *st;
    if (sdb_prepare(db, sql, &st) != SDB_OK) {
        log_error("snapshot: %s", sdb_errmsg(db));
        return -1;
    }
    int rc, i = 0;
    while ((rc = sdb_step(st)) == SDB_ROW) {
        if (row)
            row(s, st, i);
        i++;
    }
    sdb_finalize(st);
    if (rc != SDB_DONE) {
        log_error("snapshot: %s", sdb_errmsg(db));
        return -1;
    }
    *n = i;
    return 0;
}

static int64_t count(struct sdb *db, const char *table_sql)
{
    struct sdb_stmt *st;
    int64_t n = -1;
    if (sdb_prepare(db, table_sql, &st) != SDB_OK)
        return -1;
    if (sdb_step(st) == SDB_ROW)
        n = sdb_column_int64(st, 0);
    sdb_finalize(st);
    return n;
}

static int endpoint_index(const struct snapshot *s, int64_t id)
{
    int lo = 0, hi = s->n_endpoints - 1;   /* endpoints are ordered by id */
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (s->endpoints[mid].id == id)
            return mid;
        if (s->endpoints[mid].id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static void tenant_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    s->tenants[i].id = sdb_column_int64(st, 0);
    s->tenants[i].name = col_str(&s->mem, st, 1);
    s->tenants[i].weight = sdb_column_int(st, 2) > 0 ? sdb_column_int(st, 2) : 1;
    if (strcmp(s->tenants[i].name, "default") == 0)
        s->default_tenant_id = s->tenants[i].id;
}

static enum lb_algorithm parse_algorithm(const char *a)
{
    if (!a)
        return LB_ROUND_ROBIN;
    if (strcmp(a, "random") == 0)
        return LB_RANDOM;
    if (strcmp(a, "least_connections") == 0)
        return LB_LEAST_CONNECTIONS;
    if (strcmp(a, "engine_aware") == 0)
        return LB_ENGINE_AWARE;
    return LB_ROUND_ROBIN;
}

static void endpoint_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    struct snap_endpoint *e = &s->endpoints[i];
    e->id = sdb_column_int64(st, 0);
    e->tenant_id = sdb_column_int64(st, 1);
    e->name = col_str(&s->mem, st, 2);
    e->algorithm = parse_algorithm((const char *)sdb_column_text(st, 3));
    const char *proto = (const char *)sdb_column_text(st, 4);
    e->protocol = proto && strcmp(proto, "anthropic") == 0 ? PROTO_ANTHROPIC : PROTO_OPENAI;
    e->affinity = sdb_column_int(st, 5);
    e->connect_timeout_ms = sdb_column_int(st, 6);
    e->first_byte_timeout_ms = sdb_column_int(st, 7);
    e->idle_timeout_ms = sdb_column_int(st, 8);
    e->stream_guard = sdb_column_int(st, 9);
    /* R-SEC-9: stored sealed; the snapshot keeps the opened value (process memory). One
     * that cannot be opened is logged (secret.c) and counts as no credential. */
    char *auth = secret_open_endpoint(sdb_filename(sdb_stmt_db(st)), e->id, e->name,
                                      (const char *)sdb_column_text(st, 10));
    e->upstream_auth = auth ? arena_strdup(&s->mem, auth) : NULL;
    secret_free(auth);
    e->first_replica = 0;
    e->n_replicas = 0;
    e->slot = -1;
    e->health_path = col_str(&s->mem, st, 11);
    e->health_check = sdb_column_int(st, 12);
    e->start_period_seconds = sdb_column_int(st, 13);
    const char *wake = col_str(&s->mem, st, 14);
    e->wake_url = wake && *wake ? wake : NULL;
    e->anthropic_version = col_str(&s->mem, st, 15);
    if (!e->anthropic_version || !*e->anthropic_version)
        e->anthropic_version = "2023-06-01";
    e->default_max_tokens = sdb_column_int64(st, 16);
    if (e->default_max_tokens <= 0)
        e->default_max_tokens = 4096;
    e->max_concurrency = sdb_column_int(st, 17);
    e->queue_max = sdb_column_int(st, 18);
    e->queue_timeout_ms = sdb_column_int(st, 19);
    e->capped = e->max_concurrency > 0;
}

static int node_index(const struct snapshot *s, int64_t id)
{
    int lo = 0, hi = s->n_nodes - 1;   /* nodes are ordered by id */
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (s->nodes[mid].id == id)
            return mid;
        if (s->nodes[mid].id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static void node_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    struct snap_node *n = &s->nodes[i];
    n->id = sdb_column_int64(st, 0);
    n->name = col_str(&s->mem, st, 1);
    const char *status = (const char *)sdb_column_text(st, 2);
    n->status = status && strcmp(status, "offline") == 0    ? NODE_OFFLINE
                : status && strcmp(status, "borrowed") == 0 ? NODE_BORROWED
                                                            : NODE_ONLINE;
    n->slot = -1;
}

static void replica_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    struct snap_replica *r = &s->replicas[i];
    r->id = sdb_column_int64(st, 0);
    r->endpoint = endpoint_index(s, sdb_column_int64(st, 1));
    char *url = (char *)col_str(&s->mem, st, 2);
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        url[--n] = '\0';
    r->url = url;
    r->engine = col_str(&s->mem, st, 3);
    r->weight = sdb_column_int(st, 4);
    r->max_concurrency = sdb_column_int(st, 5);
    const char *state = (const char *)sdb_column_text(st, 6);
    r->state = !state || strcmp(state, "running") == 0 ? REPLICA_RUNNING
               : strcmp(state, "sleeping") == 0       ? REPLICA_SLEEPING
                                                      : REPLICA_DISABLED;
    r->healthy = sdb_column_int(st, 7);
    r->slot = -1;
    r->node = sdb_column_type(st, 8) == SDB_NULL ? -1 : node_index(s, sdb_column_int64(st, 8));
}

static enum cache_mode parse_cache_mode(const char *m)
{
    if (m && strcmp(m, "exact") == 0)
        return CACHE_EXACT;
    if (m && strcmp(m, "semantic") == 0)
        return CACHE_SEMANTIC;
    return CACHE_OFF;
}

static void route_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    struct snap_route *r = &s->routes[i];
    r->id = sdb_column_int64(st, 0);
    r->tenant_id = sdb_column_int64(st, 1);
    r->model = col_str(&s->mem, st, 2);
    r->endpoint = endpoint_index(s, sdb_column_int64(st, 3));
    r->priority = sdb_column_int(st, 4);
    r->weight = sdb_column_int(st, 5);
    const char *t = col_str(&s->mem, st, 6);
    r->target_model = t && *t ? t : NULL;
    r->created_at = sdb_column_int64(st, 7);
    r->cache = sdb_column_type(st, 8) == SDB_NULL ? CACHE_INHERIT
               : parse_cache_mode((const char *)sdb_column_text(st, 8));
    r->cache_ttl_s = sdb_column_int(st, 9);
    r->mirror = sdb_column_type(st, 10) == SDB_NULL ? -1 : endpoint_index(s, sdb_column_int64(st, 10));
    r->mirror_percent = sdb_column_int(st, 11);
}

static enum role parse_role(const char *r)
{
    if (!r)
        return ROLE_NONE;
    if (strcmp(r, "operator") == 0)
        return ROLE_OPERATOR;
    if (strcmp(r, "admin") == 0)
        return ROLE_ADMIN;
    return ROLE_MEMBER;
}

/* A comma-separated list (spaces around an item are not part of it, empty items
 * are dropped; a tenant name may hold spaces) into the snapshot's arena; *n items. */
static const char **split_list(struct arena *a, const char *text, int *n)
{
    *n = 0;
    if (!text || !*text)
        return NULL;
    int cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == ',';
    const char **out = arena_alloc(a, sizeof *out * (size_t)cap);
    char *copy = arena_strdup(a, text);
    for (char *t = copy; t;) {
        char *end = strchr(t, ',');
        if (end)
            *end = '\0';
        while (*t == ' ')
            t++;
        size_t len = strlen(t);
        while (len > 0 && t[len - 1] == ' ')
            t[--len] = '\0';
        if (len > 0)
            out[(*n)++] = t;
        t = end ? end + 1 : NULL;
    }
    return out;
}

static void key_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    struct snap_key *k = &s->keys[i];
    const char *hash = (const char *)sdb_column_text(st, 0);
    snprintf(k->hash, sizeof k->hash, "%s", hash ? hash : "");
    k->id = sdb_column_int64(st, 1);
    k->user_id = sdb_column_int64(st, 2);
    k->tenant_id = sdb_column_int64(st, 3);
    k->endpoint = sdb_column_type(st, 4) == SDB_NULL
                      ? -1 : endpoint_index(s, sdb_column_int64(st, 4));
    k->role = parse_role((const char *)sdb_column_text(st, 5));
    k->user_name = col_str(&s->mem, st, 6);
    k->qps_limit = sdb_column_int64(st, 7);
    k->concurrency_limit = sdb_column_int64(st, 8);
    k->daily_limit = sdb_column_int64(st, 9);
    k->monthly_quota = sdb_column_int64(st, 10);
    k->tpm_limit = sdb_column_int64(st, 11);
    k->monthly_token_quota = sdb_column_int64(st, 12);
    k->has_limits = k->qps_limit > 0 || k->concurrency_limit > 0 || k->daily_limit > 0 ||
                    k->monthly_quota > 0 || k->tpm_limit > 0 || k->monthly_token_quota > 0;
    k->slot = -1;
    k->auto_enabled = sdb_column_type(st, 13) == SDB_NULL ? -1 : sdb_column_int(st, 13) != 0;
    const char *strategy = col_str(&s->mem, st, 14);
    k->auto_strategy = strategy && *strategy ? strategy : NULL;
    k->priority = sdb_column_int(st, 15);
    /* R-PRIO-2: without a maximum a key may only ask for less than its own tier. */
    k->max_priority = sdb_column_type(st, 16) == SDB_NULL ? k->priority : sdb_column_int(st, 16);
    k->require_labels = split_list(&s->mem, (const char *)sdb_column_text(st, 17), &k->n_require_labels);
}

/* A user's key ceiling as the limits of its login sessions (R-SEC-5). */
static void session_limits_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    struct snap_key *k = &s->session_limits[i];
    memset(k, 0, sizeof *k);
    k->user_id = sdb_column_int64(st, 0);
    k->id = SNAP_SESSION_KEY_BASE + k->user_id;
    k->tenant_id = sdb_column_int64(st, 1);
    k->endpoint = -1;
    k->role = parse_role((const char *)sdb_column_text(st, 2));
    k->user_name = col_str(&s->mem, st, 3);
    k->qps_limit = sdb_column_int64(st, 4);
    k->concurrency_limit = sdb_column_int64(st, 5);
    k->daily_limit = sdb_column_int64(st, 6);
    k->monthly_quota = sdb_column_int64(st, 7);
    k->tpm_limit = sdb_column_int64(st, 8);
    k->monthly_token_quota = sdb_column_int64(st, 9);
    k->has_limits = 1;
    k->slot = -1;
    k->auto_enabled = -1;
    k->priority = k->max_priority = 5;
}

const struct snap_key *snapshot_session_limits(const struct snapshot *s, int64_t user_id)
{
    int lo = 0, hi = s->n_session_limits - 1;   /* ordered by user id */
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (s->session_limits[mid].user_id == user_id)
            return &s->session_limits[mid];
        if (s->session_limits[mid].user_id < user_id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

static double col_real_or(struct sdb_stmt *st, int i, double unknown)
{
    return sdb_column_type(st, i) == SDB_NULL ? unknown : sdb_column_double(st, i);
}

static void policy_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    struct snap_policy *p = &s->policies[i];
    p->model = col_str(&s->mem, st, 0);
    p->purpose = col_str(&s->mem, st, 1);
    p->routing_enabled = sdb_column_int(st, 2);
    p->quality = col_real_or(st, 3, -1);
    p->price_in = col_real_or(st, 4, -1);
    p->price_out = col_real_or(st, 5, -1);
    p->supports_tools = sdb_column_int(st, 6);
    p->supports_vision = sdb_column_int(st, 7);
    p->max_context = sdb_column_int64(st, 8);
    p->max_output = sdb_column_int64(st, 9);
    p->shrink_max_tokens = sdb_column_int(st, 10);
    p->cache = parse_cache_mode((const char *)sdb_column_text(st, 11));
    p->cache_ttl_s = sdb_column_int(st, 12);
    p->default_greedy = sdb_column_int(st, 13);
    p->clamp_max_tokens = sdb_column_int(st, 14);
    p->semantic_threshold = col_real_or(st, 15, -1);
    p->description = col_str(&s->mem, st, 16);
    p->tenants = split_list(&s->mem, (const char *)sdb_column_text(st, 17), &p->n_tenants);
    p->labels = split_list(&s->mem, (const char *)sdb_column_text(st, 18), &p->n_labels);
}

static void semrule_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    struct snap_semrule *r = &s->semrules[i];
    const char *action = (const char *)sdb_column_text(st, 4);
    r->id = sdb_column_int64(st, 0);
    r->name = col_str(&s->mem, st, 1);
    r->tenant_id = sdb_column_int64(st, 2);     /* NULL reads as 0: every tenant */
    r->pattern = col_str(&s->mem, st, 3);
    r->action = action && strcmp(action, "forbid") == 0 ? SEMRULE_FORBID : SEMRULE_FORCE;
    r->model = col_str(&s->mem, st, 5);
    r->label = col_str(&s->mem, st, 6);
}

static void rule_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    struct snap_rule *r = &s->rules[i];
    const char *kind = (const char *)sdb_column_text(st, 3), *action = (const char *)sdb_column_text(st, 5),
               *scope = (const char *)sdb_column_text(st, 6);
    r->id = sdb_column_int64(st, 0);
    r->name = col_str(&s->mem, st, 1);
    r->tenant_id = sdb_column_int64(st, 2);     /* NULL reads as 0: every tenant */
    r->kind = kind && strcmp(kind, "keyword") == 0 ? RULE_KEYWORD : RULE_PATTERN;
    r->pattern = col_str(&s->mem, st, 4);
    r->action = action && strcmp(action, "flag") == 0 ? RULE_FLAG : RULE_BLOCK;
    r->scope = scope && strcmp(scope, "output") == 0 ? RULE_OUTPUT : RULE_INPUT;
}

static void quota_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    struct snap_quota *q = &s->quotas[i];
    q->id = sdb_column_int64(st, 0);
    const char *scope = (const char *)sdb_column_text(st, 1);
    q->scope = !scope ? QSCOPE_MODEL
               : strcmp(scope, "tenant") == 0   ? QSCOPE_TENANT
               : strcmp(scope, "user") == 0     ? QSCOPE_USER
               : strcmp(scope, "endpoint") == 0 ? QSCOPE_ENDPOINT
                                                : QSCOPE_MODEL;
    q->target_id = sdb_column_int64(st, 2);
    q->model = col_str(&s->mem, st, 3);
    if (!q->model)
        q->model = "";
    q->concurrency = sdb_column_int64(st, 4);
    q->rpm = sdb_column_int64(st, 5);
    q->daily_tokens = sdb_column_int64(st, 6);
    q->monthly_tokens = sdb_column_int64(st, 7);
    q->queue_max = sdb_column_type(st, 8) == SDB_NULL ? -1 : sdb_column_int(st, 8);
    q->slot = -1;
}

static int quota_cmp_key(enum quota_scope scope, int64_t id, const char *model, const struct snap_quota *q)
{
    if (scope != q->scope)
        return scope < q->scope ? -1 : 1;
    if (id != q->target_id)
        return id < q->target_id ? -1 : 1;
    return strcmp(model ? model : "", q->model);
}

static int quota_cmp(const void *a, const void *b)
{
    const struct snap_quota *x = a;
    return quota_cmp_key(x->scope, x->target_id, x->model, b);
}

const struct snap_quota *snapshot_quota(const struct snapshot *s, enum quota_scope scope, int64_t id,
                                        const char *model)
{
    int lo = 0, hi = s->n_quotas - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = quota_cmp_key(scope, id, model, &s->quotas[mid]);
        if (c == 0)
            return &s->quotas[mid];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

static int policy_cmp(const void *a, const void *b)
{
    return strcmp(((const struct snap_policy *)a)->model, ((const struct snap_policy *)b)->model);
}

const struct snap_policy *snapshot_policy(const struct snapshot *s, const char *model)
{
    struct snap_policy probe = {.model = model};
    return bsearch(&probe, s->policies, (size_t)s->n_policies, sizeof *s->policies, policy_cmp);
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(((const struct snap_key *)a)->hash, ((const struct snap_key *)b)->hash);
}

/* One setting's value into the snapshot; types, ranges and defaults are lib/settings.c's. */
static void setting_apply(struct snapshot *s, const struct settings_def *d,
                          const struct settings_value *v)
{
    const char *k = d->name;
    if (strcmp(k, "internal_fields") == 0) {
        /* Comma-separated body field names stripped before forwarding (R-API-5). */
        char *copy = arena_strdup(&s->mem, v->text), *save = NULL;
        int cap = 1;
        for (const char *p = v->text; *p; p++)
            cap += *p == ',' || *p == ' ';   /* strtok_r splits on both */
        s->internal_fields = arena_alloc(&s->mem, sizeof(char *) * (size_t)cap);
        s->n_internal_fields = 0;
        for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
            s->internal_fields[s->n_internal_fields++] = t;
    } else if (strcmp(k, "cors_allowed_origins") == 0) {
        s->cors_origins = arena_strdup(&s->mem, v->text);    /* R-API-7, read by fcgi/cors.c */
    } else if (strcmp(k, "auto_routing_enabled") == 0) {
        s->auto_enabled = (int)v->i;
    } else if (strcmp(k, "auto_routing_strategy") == 0) {
        s->auto_strategy = v->text;   /* a word of the table: lives as long as the program */
    } else if (strcmp(k, "auto_routing_weight_quality") == 0) {
        s->auto_w_quality = (int)v->i;
    } else if (strcmp(k, "auto_routing_weight_price") == 0) {
        s->auto_w_price = (int)v->i;
    } else if (strcmp(k, "auto_routing_weight_latency") == 0) {
        s->auto_w_latency = (int)v->i;
    } else if (strcmp(k, "response_model") == 0) {
        s->rewrite_response_model = strcmp(v->text, "upstream") != 0;
    } else if (strcmp(k, "builtin_injection_rules") == 0) {
        s->builtin_injection_rules = (int)v->i;
    } else if (strcmp(k, "semantic_cache_embedding_model") == 0) {
        s->semantic_embed_model = arena_strdup(&s->mem, v->text);
    } else if (strcmp(k, "semantic_cache_threshold") == 0) {
        s->semantic_threshold = v->num;
    } else if (strcmp(k, "semantic_cache_audit_percent") == 0) {
        s->semantic_audit_percent = (int)v->i;
    } else if (strcmp(k, "semantic_default_model") == 0) {
        s->sem_default_model = arena_strdup(&s->mem, v->text);
    } else if (strcmp(k, "semantic_embedding_model") == 0) {
        s->sem_embed_model = arena_strdup(&s->mem, v->text);
    } else if (strcmp(k, "semantic_threshold") == 0) {
        s->sem_threshold = v->num;
    } else if (strcmp(k, "semantic_weight_bm25") == 0) {
        s->sem_w_bm25 = v->num;
    } else if (strcmp(k, "semantic_weight_embedding") == 0) {
        s->sem_w_embedding = v->num;
    } else if (strcmp(k, "state_fail_policy") == 0) {
        s->state_fail_closed = strcmp(v->text, "fail_closed") == 0;
    } else if (strcmp(k, "state_lease_seconds") == 0) {
        s->state_lease_ms = (int)v->i * 1000;
    } else if (strcmp(k, "state_timeout_ms") == 0) {
        s->state_timeout_ms = (int)v->i;
    } else if (strcmp(k, "gpu_temperature_threshold") == 0) {
        /* R-LB-6: degrees Celsius with one decimal, kept in tenths. */
        s->gpu_temp_threshold_deci = (int)(v->num * 10 + (v->num < 0 ? -0.5 : 0.5));
    }
}

/* A stored setting read through the schema: unknown keys are ignored, and a text that no
 * longer parses keeps the default (logged once per process, naming the key). */
static void setting_row(struct snapshot *s, struct sdb_stmt *st, int i)
{
    const struct settings_def *d = settings_find((const char *)sdb_column_text(st, 0));
    const char *text = (const char *)sdb_column_text(st, 1);
    struct settings_value v;   /* may point into text: applied (copied) before the next step */
    if (!d || !text)
        return;
    settings_read_warn(d, text, &v);
    setting_apply(s, d, &v);
}

/* R-PRIO-1: the caps the queue hands out places under, in the shared state so
 * a releasing process can grant a waiter of another process without its snapshot. */
static void snapshot_publish_caps(const struct snapshot *s, struct shm *shm)
{
    for (int i = 0; i < s->n_replicas; i++)
        if (s->replicas[i].slot >= 0)
            atomic_store(&shm->r->replicas[s->replicas[i].slot].cap, s->replicas[i].max_concurrency);
    for (int i = 0; i < s->n_endpoints; i++) {
        const struct snap_endpoint *e = &s->endpoints[i];
        if (e->slot < 0)
            continue;
        struct shm_endpoint *se = &shm->r->endpoints[e->slot];
        int n = 0;
        for (int k = 0; k < e->n_replicas && n < SHM_EP_REPLICAS; k++) {
            const struct snap_replica *r = &s->replicas[e->first_replica + k];
            if (r->slot >= 0 && r->state == REPLICA_RUNNING)
                atomic_store(&se->rep_slots[n++], r->slot);
        }
        atomic_store(&se->n_reps, n);
        atomic_store(&se->cap, e->max_concurrency);
    }
}

struct snapshot *snapshot_load(struct sdb *db, struct shm *shm)
{
    struct snapshot *s = xcalloc(1, sizeof *s);
    arena_init(&s->mem);
    for (size_t k = 0; k < settings_count; k++) {   /* the defaults; stored rows override */
        struct settings_value v;
        settings_default(&settings_defs[k], &v);
        setting_apply(s, &settings_defs[k], &v);
    }
    int n;
    if (db_begin_read(db) != 0) {
        log_error("snapshot: cannot begin a read: %s", sdb_errmsg(db));
        goto fail;
    }
    s->version = snapshot_db_version(db);
    int64_t nt = count(db, "SELECT count(*) FROM tenants");
    int64_t ne = count(db, "SELECT count(*) FROM endpoints");
    int64_t nr = count(db, "SELECT count(*) FROM replicas");
    int64_t nro = count(db, "SELECT count(*) FROM routes WHERE status = 'active'");
    int64_t nn = count(db, "SELECT count(*) FROM nodes");
    int64_t np = count(db, "SELECT count(*) FROM model_policies");
    int64_t nsl = count(db, "SELECT count(*) FROM key_ceilings");
    int64_t nq = count(db, "SELECT count(*) FROM quotas");
    int64_t nru = count(db, "SELECT count(*) FROM content_rules");
    int64_t nsr = count(db, "SELECT count(*) FROM semantic_rules");
    int64_t nk = count(db, "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL") +
                 count(db, "SELECT count(*) FROM endpoints WHERE key_hash IS NOT NULL");
    if (s->version < 0 || nt < 0 || ne < 0 || nr < 0 || nro < 0 || nk < 0 || nn < 0 || np < 0 || nsl < 0 || nq < 0 || nru < 0 || nsr < 0) {
        log_error("snapshot: cannot count the configuration: %s", sdb_errmsg(db));
        goto fail_read;
    }
    s->tenants = arena_alloc(&s->mem, sizeof *s->tenants * (size_t)(nt + 1));
    s->endpoints = arena_alloc(&s->mem, sizeof *s->endpoints * (size_t)(ne + 1));
    s->replicas = arena_alloc(&s->mem, sizeof *s->replicas * (size_t)(nr + 1));
    s->routes = arena_alloc(&s->mem, sizeof *s->routes * (size_t)(nro + 1));
    s->keys = arena_alloc(&s->mem, sizeof *s->keys * (size_t)(nk + 1));
    s->nodes = arena_alloc(&s->mem, sizeof *s->nodes * (size_t)(nn + 1));
    s->policies = arena_alloc(&s->mem, sizeof *s->policies * (size_t)(np + 1));
    s->session_limits = arena_alloc(&s->mem, sizeof *s->session_limits * (size_t)(nsl + 1));
    s->quotas = arena_alloc(&s->mem, sizeof *s->quotas * (size_t)(nq + 1));
    s->rules = arena_alloc(&s->mem, sizeof *s->rules * (size_t)(nru + 1));
    s->semrules = arena_alloc(&s->mem, sizeof *s->semrules * (size_t)(nsr + 1));
    if (each_row(db, "SELECT id, name, weight FROM tenants ORDER BY id", tenant_row, s, &s->n_tenants) ||
        each_row(db,
                 "SELECT id, tenant_id, name, algorithm, protocol, affinity, connect_timeout_ms,"
                 " first_byte_timeout_ms, idle_timeout_ms, stream_guard, upstream_auth,"
                 " health_path, health_check, start_period_seconds,"
                 /* R-ANT-4: an operator's credential never goes to a URL a tenant admin set */
                 " CASE WHEN wake_url_approved = 0 AND upstream_auth IS NOT NULL"
                 "   AND upstream_auth_by IS NOT 'tenant' THEN NULL ELSE wake_url END,"
                 " anthropic_version, default_max_tokens, max_concurrency, queue_max, queue_timeout_ms"
                 " FROM endpoints ORDER BY id", endpoint_row, s, &s->n_endpoints) ||
        each_row(db, "SELECT id, name, status FROM nodes ORDER BY id", node_row, s, &s->n_nodes) ||
        each_row(db,
                 "SELECT r.id, r.endpoint_id, r.url, r.engine, r.weight, r.max_concurrency, r.state, r.healthy,"
                 " r.node_id FROM replicas r JOIN endpoints e ON e.id = r.endpoint_id"
                 " WHERE NOT (r.approved = 0 AND e.upstream_auth IS NOT NULL AND e.upstream_auth_by IS NOT 'tenant')"
                 " ORDER BY r.endpoint_id, r.id", replica_row, s, &s->n_replicas) ||
        each_row(db,
                 "SELECT id, tenant_id, model, endpoint_id, priority, weight, target_model, created_at, cache, cache_ttl_s,"
                 " mirror_endpoint_id, mirror_percent FROM routes WHERE status = 'active' ORDER BY tenant_id, model, priority, id",
                 route_row, s, &s->n_routes) ||
        each_row(db,
                 "SELECT k.key_hash, k.id, k.user_id, k.tenant_id, NULL, u.role, u.name,"
                 " k.qps_limit, k.concurrency_limit, k.daily_limit, k.monthly_quota, k.tpm_limit,"
                 " k.monthly_token_quota, p.auto_routing_enabled, p.auto_routing_strategy, k.priority, k.max_priority,"
                 " k.require_labels FROM api_keys k JOIN users u ON u.id = k.user_id"
                 " LEFT JOIN key_routing_policies p ON p.key_id = k.id WHERE k.revoked_at IS NULL"
                 " UNION ALL SELECT key_hash, 0, 0, tenant_id, id, NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, 5, 5, NULL"
                 " FROM endpoints WHERE key_hash IS NOT NULL", key_row, s, &s->n_keys) ||
        each_row(db,
                 "SELECT model, purpose, routing_enabled, quality_score, price_input_per_1k,"
                 " price_output_per_1k, supports_tools, supports_vision, max_context, max_output, shrink_max_tokens,"
                 " cache, cache_ttl_s, default_greedy, clamp_max_tokens, semantic_threshold,"
                 " description, tenants, labels FROM model_policies ORDER BY model", policy_row, s, &s->n_policies) ||
        each_row(db,
                 "SELECT c.user_id, u.tenant_id, u.role, u.name, c.qps_limit, c.concurrency_limit,"
                 " c.daily_limit, c.monthly_quota, c.tpm_limit, c.monthly_token_quota"
                 " FROM key_ceilings c JOIN users u ON u.id = c.user_id"
                 " WHERE c.qps_limit + c.concurrency_limit + c.daily_limit + c.monthly_quota + c.tpm_limit"
                 " + c.monthly_token_quota > 0 ORDER BY c.user_id", session_limits_row, s, &s->n_session_limits) ||
        each_row(db,
                 "SELECT id, scope, COALESCE(tenant_id, user_id, endpoint_id, 0), model, concurrency, rpm,"
                 " daily_tokens, monthly_tokens, queue_max FROM quotas", quota_row, s, &s->n_quotas) ||
        each_row(db, "SELECT id, name, tenant_id, kind, pattern, action, scope FROM content_rules ORDER BY id",
                 rule_row, s, &s->n_rules) ||
        each_row(db, "SELECT id, name, tenant_id, pattern, action, model, label FROM semantic_rules ORDER BY id",
                 semrule_row, s, &s->n_semrules) ||
        each_row(db, "SELECT key, value FROM settings", setting_row, s, &n))
        goto fail_read;
    db_end_read(db);
    /* Every replica's endpoint range; replicas are grouped by endpoint id. */
    for (int i = 0; i < s->n_replicas; i++) {
        struct snap_replica *r = &s->replicas[i];
        if (r->endpoint < 0)
            continue;
        struct snap_endpoint *e = &s->endpoints[r->endpoint];
        if (e->n_replicas == 0)
            e->first_replica = i;
        e->n_replicas++;
        if (r->max_concurrency > 0)
            e->capped = 1;
        if (shm)
            r->slot = shm_replica_slot(shm, r->id);
    }
    for (int i = 0; shm && i < s->n_endpoints; i++)
        s->endpoints[i].slot = shm_endpoint_slot(shm, s->endpoints[i].id);
    if (shm)
        snapshot_publish_caps(s, shm);
    for (int i = 0; shm && i < s->n_nodes; i++)
        s->nodes[i].slot = shm_node_slot(shm, s->nodes[i].id);
    qsort(s->keys, (size_t)s->n_keys, sizeof *s->keys, key_cmp);
    /* ORDER BY uses SQLite's collation; bsearch needs strcmp order. */
    qsort(s->policies, (size_t)s->n_policies, sizeof *s->policies, policy_cmp);
    qsort(s->quotas, (size_t)s->n_quotas, sizeof *s->quotas, quota_cmp);
    for (int i = 0; shm && i < s->n_quotas; i++) {
        struct snap_quota *q = &s->quotas[i];
        q->slot = shm_quota_slot(shm, q->id);
        if (q->slot >= 0) {
            atomic_store(&shm->r->quotas[q->slot].cap, (int32_t)(q->concurrency > INT32_MAX ? INT32_MAX : q->concurrency));
            atomic_store(&shm->r->quotas[q->slot].queue_max, q->queue_max);
        }
    }
    for (int i = 0; shm && i < s->n_keys; i++)
        if (s->keys[i].has_limits)
            s->keys[i].slot = shm_key_slot(shm, s->keys[i].id);
    for (int i = 0; shm && i < s->n_session_limits; i++)
        s->session_limits[i].slot = shm_key_slot(shm, s->session_limits[i].id);
    atomic_store(&s->refs, 1);
    return s;
fail_read:
    db_end_read(db);
fail:
    snapshot_free(s);
    return NULL;
}

void snapshot_free(struct snapshot *s)
{
    if (!s)
        return;
    arena_free(&s->mem);
    free(s);
}

void snapshot_publish(struct snapshot *s)
{
    pthread_mutex_lock(&current_lock);
    struct snapshot *old = current;
    current = s;
    pthread_mutex_unlock(&current_lock);
    if (old)
        snapshot_release(old);
}

struct snapshot *snapshot_acquire(void)
{
    pthread_mutex_lock(&current_lock);
    struct snapshot *s = current;
    if (s)
        atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&current_lock);
    return s;
}

void snapshot_release(struct snapshot *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        snapshot_free(s);
}

const struct snap_key *snapshot_find_key(const struct snapshot *s, const char hash[65])
{
    struct snap_key probe;
    memcpy(probe.hash, hash, 65);
    return bsearch(&probe, s->keys, (size_t)s->n_keys, sizeof *s->keys, key_cmp);
}

int snapshot_routes(const struct snapshot *s, int64_t tenant_id, const char *model,
                    const struct snap_route **first)
{
    /* Lower bound of (tenant_id, model) in the sorted route array. */
    int lo = 0, hi = s->n_routes;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        const struct snap_route *r = &s->routes[mid];
        int c = r->tenant_id < tenant_id ? -1 : r->tenant_id > tenant_id ? 1 : strcmp(r->model, model);
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int n = 0;
    while (lo + n < s->n_routes && s->routes[lo + n].tenant_id == tenant_id &&
           strcmp(s->routes[lo + n].model, model) == 0)
        n++;
    *first = n ? &s->routes[lo] : NULL;
    return n;
}

const struct snap_endpoint *snapshot_endpoint_by_name(const struct snapshot *s, const char *name)
{
    for (int i = 0; i < s->n_endpoints; i++)
        if (strcmp(s->endpoints[i].name, name) == 0)
            return &s->endpoints[i];
    return NULL;
}

const struct snap_tenant *snapshot_tenant(const struct snapshot *s, int64_t id)
{
    int lo = 0, hi = s->n_tenants - 1;   /* loaded ORDER BY id; asked per capped candidate and per metric */
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (s->tenants[mid].id == id)
            return &s->tenants[mid];
        if (s->tenants[mid].id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

const struct snap_tenant *snapshot_tenant_by_name(const struct snapshot *s, const char *name)
{
    for (int i = 0; i < s->n_tenants; i++)
        if (strcmp(s->tenants[i].name, name) == 0)
            return &s->tenants[i];
    return NULL;
}
