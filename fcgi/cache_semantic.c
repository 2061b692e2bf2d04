/* cache_semantic.c: the semantic answer cache's lookup, store part and audit
 * sample (R-CACHE-4, cache_semantic.h).
 *
 * Candidates are the newest SEM_CANDIDATES unexpired entries of the request's
 * scope, of its tenant and of the embedding model in use (another model's
 * vectors mean nothing here); semantic_best picks among them. The cost is one
 * embedding call (metered, embed.c) per semantic-cacheable request that the
 * exact key missed, and one indexed read. */
#include "cache_semantic.h"

#include "dbpool.h"
#include "embed.h"
#include "log.h"
#include "semantic.h"
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEM_CANDIDATES 1000         /* the newest of a scope that are compared */
#define SEM_PROMPT_MAX 1000         /* bytes of a prompt kept for the audit */
#define SEM_BATCH 64                /* candidates decoded and compared at a time */

static const char SQL_CANDIDATES[] =
    "SELECT id, key_hash, dims, vector, prompt FROM semantic_entries"
    " WHERE scope_hash = ?1 AND tenant_id = ?2 AND embed_model = ?3 AND expires_ms > ?4"
    " ORDER BY created_ms DESC LIMIT ?5";

/* What the semantic lookup learnt; request arena. */
struct cache_sem {
    char scope[65];
    const char *embed_model;
    struct embedding emb;
    char prompt[SEM_PROMPT_MAX + 1];
    char exact_key[65];           /* the request's own key, while cache_key holds the match's */
    /* the match */
    int matched;
    int64_t entry_id;
    double similarity;
    char matched_prompt[SEM_PROMPT_MAX + 1];
};

int cache_semantic_enabled(const struct request *r)
{
    return r->snap->semantic_embed_model && *r->snap->semantic_embed_model;
}

/* At most max bytes of s into out, never ending inside a UTF-8 sequence. */
static void cut_text(char *out, const char *s, size_t len, size_t max)
{
    size_t n = len < max ? len : max;
    if (n < len)
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    memcpy(out, s, n);
    out[n] = '\0';
}

static void warn_db(const struct request *r, struct sdb *db)
{
    static _Atomic int64_t warned_ms;
    int64_t now = mono_ms(), last = atomic_load(&warned_ms);
    if (now - last >= 60000 && atomic_compare_exchange_strong(&warned_ms, &last, now))
        log_warn("request %s: semantic cache entries unreadable (%s); serving as misses (logged once a minute)",
                 r->request_id, sdb_errmsg(db));
}

static float le_float(const unsigned char *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* One batch of candidates, decoded; heap, reused batch after batch. */
struct sem_batch {
    size_t n, dims;
    float *vecs;                              /* SEM_BATCH x dims */
    struct semantic_cand cand[SEM_BATCH];
    int64_t id[SEM_BATCH];
    char key[SEM_BATCH][65];
    char prompt[SEM_BATCH][SEM_PROMPT_MAX + 1];
};

/* The batch's best at or above the threshold, when better than the best so far
 * (which came from newer rows: a tie keeps it). */
static void batch_best(struct cache_sem *s, struct sem_batch *b, double threshold, char matched[65])
{
    double sim = 0;
    long k = semantic_best(s->emb.vec, s->emb.dims, b->cand, b->n, threshold, &sim);
    if (k >= 0 && (!s->matched || sim > s->similarity)) {
        s->matched = 1;
        s->entry_id = b->id[k];
        s->similarity = sim;
        memcpy(s->matched_prompt, b->prompt[k], sizeof s->matched_prompt);
        memcpy(matched, b->key[k], 65);
    }
    b->n = 0;
}

/* The scope's newest SEM_CANDIDATES, compared a batch at a time (so a large
 * dimension never holds them all in memory), the best against the threshold.
 * 1 (s->matched, matched set) or 0. */
static int best_of_scope(struct request *r, struct cache_sem *s, double threshold, char matched[65])
{
    struct sem_batch *b = xcalloc(1, sizeof *b);
    b->dims = s->emb.dims;
    b->vecs = xcalloc(SEM_BATCH * b->dims, sizeof *b->vecs);
    struct dbconn *c = dbpool_get();
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_SEM_CANDIDATES, SQL_CANDIDATES);
    if (!st) {
        warn_db(r, c->db);
        goto out;
    }
    sdb_bind_text(st, 1, s->scope, -1, SDB_STATIC);
    sdb_bind_int64(st, 2, r->caller.tenant_id);
    sdb_bind_text(st, 3, s->embed_model, -1, SDB_STATIC);
    sdb_bind_int64(st, 4, now_ms());
    sdb_bind_int(st, 5, SEM_CANDIDATES);
    int rc;
    while ((rc = sdb_step(st)) == SDB_ROW) {
        int64_t dims = sdb_column_int64(st, 2);
        const unsigned char *blob = sdb_column_blob(st, 3);
        const char *key = (const char *)sdb_column_text(st, 1), *prompt = (const char *)sdb_column_text(st, 4);
        if (dims != (int64_t)b->dims || !blob || sdb_column_bytes(st, 3) != dims * 4 || !key ||
            strlen(key) != 64)
            continue;               /* another dimension never compares; a damaged row is skipped */
        float *v = b->vecs + b->n * b->dims;
        for (size_t i = 0; i < b->dims; i++)
            v[i] = le_float(blob + 4 * i);
        b->cand[b->n].vec = v;
        b->cand[b->n].dims = b->dims;
        b->id[b->n] = sdb_column_int64(st, 0);
        memcpy(b->key[b->n], key, 65);
        prompt = prompt ? prompt : "";
        cut_text(b->prompt[b->n], prompt, strlen(prompt), SEM_PROMPT_MAX);
        if (++b->n == SEM_BATCH)
            batch_best(s, b, threshold, matched);
    }
    if (rc != SDB_DONE)
        warn_db(r, c->db);          /* what was read still counts */
    batch_best(s, b, threshold, matched);
    sdb_reset(st);
out:
    dbpool_put(c);
    free(b->vecs);
    free(b);
    return s->matched;
}

int cache_semantic_match(struct request *r, const struct snap_policy *policy, const struct cache_key_in *in,
                         char matched[65])
{
    struct buf text;
    struct json_object *turn = NULL;
    struct cache_sem *s = NULL;
    /* A turn longer than cache.semantic_max_input_bytes does not fit: it is
     * exact only, never cut (a cut turn would match every long turn that
     * begins as it does). */
    buf_init(&text, (size_t)r->conf->semantic_max_input_bytes);
    int rc = -1;
    if (cache_key_last_user(r->json, &text, &turn) != 0)
        goto out;                   /* R-CACHE-4: nothing to compare (or too long): exact only */
    s = arena_alloc(r->arena, sizeof *s);   /* zeroed */
    if (cache_key_scope_hash(in, turn, s->scope) != 0)
        goto out;
    s->embed_model = r->snap->semantic_embed_model;
    if (embed_text(r, s->embed_model, text.data, text.len, &s->emb, EMBED_CALLER) != 0)
        goto out;                   /* logged there: a plain miss */
    cut_text(s->prompt, text.data, text.len, SEM_PROMPT_MAX);
    memcpy(s->exact_key, r->cache_key, sizeof s->exact_key);
    r->cache_sem = s;
    double threshold = policy && policy->semantic_threshold >= 0 ? policy->semantic_threshold
                                                                  : r->snap->semantic_threshold;
    rc = best_of_scope(r, s, threshold, matched);
out:
    buf_free(&text);
    return rc;
}

void cache_semantic_unmatch(struct request *r)
{
    struct cache_sem *s = r->cache_sem;
    if (!s)
        return;
    s->matched = 0;
    memcpy(r->cache_key, s->exact_key, sizeof s->exact_key);
}

struct semantic_part *cache_semantic_part(const struct request *r, size_t *bytes)
{
    const struct cache_sem *s = r->cache_sem;
    *bytes = 0;
    if (!s || s->matched || !s->emb.vec)
        return NULL;
    size_t need = sizeof(struct semantic_part) + s->emb.dims * sizeof(float);
    if (!cache_store_hold(need, r->conf->cache_max_entry_bytes))
        return NULL;
    struct semantic_part *p = xcalloc(1, need);
    str_copy(p->scope_hash, sizeof p->scope_hash, s->scope);
    str_copy(p->embed_model, sizeof p->embed_model, s->embed_model);
    /* The prompt is kept only for the audit: with none asked for now, none
     * (an audit row matching this entry then shows '' as its matched turn). */
    if (r->snap->semantic_audit_percent > 0)
        str_copy(p->prompt, sizeof p->prompt, s->prompt);
    p->dims = s->emb.dims;
    memcpy(p->vec, s->emb.vec, s->emb.dims * sizeof(float));
    *bytes = need;
    return p;
}

/* FNV-1a of the request id: the same request is always in or out of the sample. */
static uint32_t id_hash(const char *id)
{
    uint32_t h = 2166136261u;
    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 16777619u;
    return h;
}

struct semantic_audit *cache_semantic_audit_take(const struct request *r)
{
    const struct cache_sem *s = r->cache_sem;
    int pct = r->snap->semantic_audit_percent;
    if (!s || !s->matched || !r->cache_hit || pct <= 0 || (pct < 100 && id_hash(r->request_id) % 100 >= (uint32_t)pct))
        return NULL;
    struct semantic_audit *a = xcalloc(1, sizeof *a);
    a->ts_ms = r->admitted_ms ? r->admitted_ms : r->start_ms;
    a->tenant_id = r->caller.tenant_id;
    a->entry_id = s->entry_id;
    a->similarity = s->similarity;
    str_copy(a->request_id, sizeof a->request_id, r->request_id);
    str_copy(a->key_hash, sizeof a->key_hash, r->cache_key);
    str_copy(a->model, sizeof a->model, r->model ? r->model : "");
    str_copy(a->prompt, sizeof a->prompt, s->prompt);
    str_copy(a->matched, sizeof a->matched, s->matched_prompt);
    return a;
}
