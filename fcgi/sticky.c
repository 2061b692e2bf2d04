/* sticky.c: the affinity lookup and update against the pool-wide table (R-AFF-1..6). */
#include "sticky.h"

#include "kv_redis.h"
#include "log.h"
#include "pathcheck.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define STICKY_TTL_MS (30LL * 60 * 1000)   /* R-AFF-4: sliding 30 min */
#define STICKY_INPUT_CAP 8192               /* R-AFF-2: length-capped input */

/* ---- across gateway hosts (issue 19) ----
 * With `state` a Redis every mapping is written there too (sluice:aff:<hash>, the
 * same lifetime), and a key this host's table does not hold is asked there before
 * it counts as a miss: a session keeps its replica on whichever host it lands. */

static int state_timeout(const struct request *r)
{
    return r->snap->state_timeout_ms > 0 ? r->snap->state_timeout_ms : 200;
}

static void kv_name(char out[80], const unsigned char h[32])
{
    static const char hex[] = "0123456789abcdef";
    memcpy(out, "sluice:aff:", 11);
    for (int i = 0; i < 32; i++) {
        out[11 + 2 * i] = hex[h[i] >> 4];
        out[12 + 2 * i] = hex[h[i] & 15];
    }
    out[75] = 0;
}

/* Redis names of keys: the present levels of a cascade, most specific first, or
 * the two of a pin. */
struct kv_keys {
    char names[AFF_LEVELS][80];
    const char *keys[AFF_LEVELS];
    int level[AFF_LEVELS];
    int n;
};

static void kv_add(struct kv_keys *k, const unsigned char hash[32], int level)
{
    kv_name(k->names[k->n], hash);
    k->keys[k->n] = k->names[k->n];
    k->level[k->n++] = level;
}

static void kv_levels(const struct aff_keys *a, struct kv_keys *k)
{
    k->n = 0;
    for (int l = 0; l < AFF_LEVELS; l++)
        if (a->present[l])
            kv_add(k, a->hash[l], l);
}

int sticky_applies(const struct request *r, const struct snap_endpoint *e)
{
    if (!e || !e->affinity)
        return 0;
    if (r->kind == REQ_CHAT || r->kind == REQ_MESSAGES)
        return 1;
    /* The pass-through to an endpoint's chat completions or Messages counts too (R-AFF). */
    if (r->kind != REQ_PROXY || !r->upstream_path)
        return 0;
    static const char *const ops[] = {"/v1/chat/completions", "/v1/messages"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        size_t n = strlen(ops[i]);
        if (strncmp(r->upstream_path, ops[i], n) == 0 && (r->upstream_path[n] == '\0' || r->upstream_path[n] == '?'))
            return 1;
    }
    return 0;
}

static struct shm_affinity *table_lock(struct request *r)
{
    struct shm_affinity *a = &r->shm->r->affinity;
    int rc = pthread_mutex_lock(&a->lock);
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&a->lock);   /* entries are plain values; a torn one just misses */
        rc = 0;
    }
    return rc == 0 ? a : NULL;
}

int sticky_lookup(struct request *r, const struct snap_endpoint *e, const int *cand, const double *load, int n,
                  struct sticky *st)
{
    memset(st, 0, sizeof *st);
    st->active = 1;
    st->outcome = STICKY_MISS;
    struct json_object *body = r->json;
    struct json_object *parsed = NULL;
    if (!body && r->body_len) {             /* the pass-through path is not parsed by guard */
        parsed = json_tokener_parse(r->body);
        body = parsed;
    }
    char scope[48];
    snprintf(scope, sizeof scope, "%lld/%lld", (long long)e->id, (long long)r->caller.tenant_id);
    const char *hdr = request_header(r, "X-Session-Id");
    if (hdr && !pathcheck_id_ok(hdr, 256))
        hdr = NULL;                         /* R-SEC-4: an unusable id is ignored, never echoed */
    aff_keys_build(&st->keys, scope, hdr, body, STICKY_INPUT_CAP);
    json_object_put(parsed);
    if (hdr)
        str_copy(r->session_id, sizeof r->session_id, hdr);

    struct shm_affinity *a = table_lock(r);
    if (!a)
        return -1;
    int64_t now = now_ms();
    for (int l = 0; l < AFF_LEVELS && !st->replica_id; l++) {
        if (!st->keys.present[l])
            continue;
        int64_t id = aff_table_lookup(a->entries, r->conf->affinity_max_entries, st->keys.hash[l], now, STICKY_TTL_MS);
        if (id) {
            st->replica_id = id;
            st->level = l;
        }
    }
    pthread_mutex_unlock(&a->lock);
    if (!st->replica_id && kv_on()) {
        struct kv_keys k;
        int64_t ids[AFF_LEVELS];
        kv_levels(&st->keys, &k);
        kv_get(k.keys, k.n, ids, state_timeout(r));
        for (int i = 0; i < k.n && !st->replica_id; i++)
            if (ids[i] > 0) {
                st->replica_id = ids[i];
                st->level = k.level[i];
            }
    }
    if (!st->replica_id)
        return -1;
    int pos = -1;
    double l_min = -1;
    for (int i = 0; i < n; i++) {
        if (r->snap->replicas[cand[i]].id == st->replica_id)
            pos = i;
        if (l_min < 0 || load[i] < l_min)
            l_min = load[i];
    }
    if (pos < 0) {
        st->outcome = STICKY_STALE;       /* gone, unhealthy, banned or excluded */
        return -1;
    }
    /* R-AFF-3: leave only when both margins hold. */
    if (aff_overloaded(load[pos], l_min, r->conf->affinity_abs_margin,
                       r->conf->affinity_rel_margin_pct / 100.0)) {
        st->outcome = STICKY_OVERLOAD;
        return -1;
    }
    st->outcome = STICKY_HIT;
    return pos;
}

void sticky_commit(struct request *r, const struct snap_endpoint *e, int replica_index, struct sticky *st)
{
    if (!st->active)
        return;
    static const char *outcome_names[] = {"hit", "miss", "overload", "stale"};
    int64_t rid = r->snap->replicas[replica_index].id;
    if (!r->session_id[0]) {
        /* A token the client can send back next turn to land at level 1 (R-AFF-5). */
        char tok[33];
        random_token(tok, 32);
        snprintf(r->session_id, sizeof r->session_id, "sess_%s", tok);
        char scope[48];
        snprintf(scope, sizeof scope, "%lld/%lld", (long long)e->id, (long long)r->caller.tenant_id);
        struct aff_keys hk;
        aff_keys_build(&hk, scope, r->session_id, NULL, STICKY_INPUT_CAP);
        memcpy(st->keys.hash[AFF_HEADER], hk.hash[AFF_HEADER], 32);
        st->keys.present[AFF_HEADER] = 1;
    }
    struct shm_affinity *a = table_lock(r);
    if (a) {
        int64_t now = now_ms();
        for (int l = 0; l < AFF_LEVELS; l++)
            if (st->keys.present[l])
                aff_table_store(a->entries, r->conf->affinity_max_entries, st->keys.hash[l], rid, now, STICKY_TTL_MS);
        pthread_mutex_unlock(&a->lock);
    }
    if (kv_on()) {
        struct kv_keys k;
        int64_t ids[AFF_LEVELS];
        kv_levels(&st->keys, &k);
        for (int i = 0; i < k.n; i++)
            ids[i] = rid;
        kv_put(k.keys, ids, k.n, STICKY_TTL_MS, state_timeout(r));
    }
    int lvl = st->outcome == STICKY_MISS ? 0 : st->level;
    atomic_fetch_add(&r->shm->r->affinity.outcomes[st->outcome][lvl], 1);
    if (st->outcome == STICKY_MISS)
        snprintf(r->affinity_header, sizeof r->affinity_header, "miss");
    else
        snprintf(r->affinity_header, sizeof r->affinity_header, "%s:%s", outcome_names[st->outcome],
                 aff_level_names[st->level]);
}

/* The key of a response id in the table: scope "resp/<tenant>" for the owner,
 * "resp/any" to know that the id exists for some tenant. */
static void pin_key(unsigned char out[32], int64_t tenant, const char *id)
{
    char scope[48];
    struct aff_keys k;
    if (tenant)
        snprintf(scope, sizeof scope, "resp/%lld", (long long)tenant);
    else
        snprintf(scope, sizeof scope, "resp/any");
    aff_keys_build(&k, scope, id, NULL, STICKY_INPUT_CAP);
    memcpy(out, k.hash[AFF_HEADER], 32);
}

enum pin_result sticky_pin_lookup(struct request *r, const char *id, int64_t *replica_id)
{
    unsigned char mine[32], any[32];
    pin_key(mine, r->caller.tenant_id, id);
    pin_key(any, 0, id);
    *replica_id = 0;
    struct shm_affinity *a = table_lock(r);
    if (!a)
        return PIN_UNKNOWN;
    int64_t now = now_ms();
    /* Both entries are read (and so refreshed) together: the owner's tenant
     * under "resp/any", the replica under "resp/<tenant>". */
    int64_t owner = aff_table_lookup(a->entries, r->conf->affinity_max_entries, any, now, STICKY_TTL_MS);
    int64_t rid = aff_table_lookup(a->entries, r->conf->affinity_max_entries, mine, now, STICKY_TTL_MS);
    pthread_mutex_unlock(&a->lock);
    if (!owner && kv_on()) {            /* an id another host's replica made */
        struct kv_keys k = {.n = 0};
        int64_t ids[2];
        kv_add(&k, any, 0);
        kv_add(&k, mine, 0);
        kv_get(k.keys, 2, ids, state_timeout(r));
        owner = ids[0];
        rid = owner == r->caller.tenant_id ? ids[1] : 0;
        if (owner && (a = table_lock(r))) {
            aff_table_store(a->entries, r->conf->affinity_max_entries, any, owner, now, STICKY_TTL_MS);
            if (rid)
                aff_table_store(a->entries, r->conf->affinity_max_entries, mine, rid, now, STICKY_TTL_MS);
            pthread_mutex_unlock(&a->lock);
        }
    }
    /* Another tenant's id is not found, exactly as an unknown one would be to
     * that tenant, but it must not reach the replica that holds it either. */
    if (owner && owner != r->caller.tenant_id)
        return PIN_OTHER_TENANT;
    *replica_id = rid;
    return rid ? PIN_FOUND : PIN_UNKNOWN;
}

void sticky_pin_store(struct request *r, const char *id, int64_t replica_id)
{
    unsigned char mine[32], any[32];
    pin_key(mine, r->caller.tenant_id, id);
    pin_key(any, 0, id);
    struct shm_affinity *a = table_lock(r);
    if (!a)
        return;
    int64_t now = now_ms();
    int64_t owner = aff_table_lookup(a->entries, r->conf->affinity_max_entries, any, now, STICKY_TTL_MS);
    /* An id is its first creator's: a second tenant reporting the same id (two
     * upstreams that number alike) neither takes it over nor reaches it. */
    int mine_now = !owner || owner == r->caller.tenant_id;
    if (mine_now) {
        aff_table_store(a->entries, r->conf->affinity_max_entries, any, r->caller.tenant_id, now, STICKY_TTL_MS);
        aff_table_store(a->entries, r->conf->affinity_max_entries, mine, replica_id, now, STICKY_TTL_MS);
    }
    pthread_mutex_unlock(&a->lock);
    if (mine_now && kv_on()) {
        struct kv_keys k = {.n = 0};
        int64_t ids[2] = {r->caller.tenant_id, replica_id};
        kv_add(&k, any, 0);
        kv_add(&k, mine, 0);
        kv_put(k.keys, ids, 2, STICKY_TTL_MS, state_timeout(r));
    }
}
