/* semindex.c: the semantic strategy's per-snapshot state (semindex.h). */
#include "semindex.h"

#include "content_rules.h"
#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t semindex_lock = PTHREAD_MUTEX_INITIALIZER;
static struct semindex *semindex_cur; /* holds one reference while current */

uint64_t semindex_vec_key(const char *model, const char *text)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)model; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;           /* no model/text split collides */
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h ? h : 1;
}

static void semindex_free(struct semindex *ix)
{
    for (int i = 0; i < ix->n_rules; i++) {
        content_rules_code_free(ix->rules[i].code);
        free((char *)ix->rules[i].name);
        free((char *)ix->rules[i].model);
        free((char *)ix->rules[i].label);
    }
    free(ix->rules);
    for (int i = 0; i < ix->n_vecs; i++)
        free(ix->vecs[i].vec);
    free(ix->vecs);
    bm25_index_free(ix->bm25);
    free(ix->embed_model);
    free(ix);
}

static void semindex_unref(struct semindex *ix)
{
    if (--ix->refs == 0)
        semindex_free(ix);
}

/* A new index for r's snapshot; the vectors of old whose key is unchanged are
 * copied (called under the lock). */
static struct semindex *semindex_new(const struct request *r, const struct semindex *old)
{
    const struct snapshot *s = r->snap;
    struct semindex *ix = xcalloc(1, sizeof *ix);
    ix->version = s->version;
    ix->embed_model = xstrdup(s->sem_embed_model ? s->sem_embed_model : "");
    ix->rules = xcalloc((size_t)(s->n_semrules ? s->n_semrules : 1), sizeof *ix->rules);
    char err[256];
    for (int i = 0; i < s->n_semrules; i++) {
        const struct snap_semrule *sr = &s->semrules[i];
        void *code = content_rules_compile(RULE_PATTERN, sr->pattern, err, sizeof err);
        if (!code)
            continue;               /* refused at creation; a row edited by hand is skipped */
        ix->rules[ix->n_rules++] = (struct sem_rule){
            .name = xstrdup(sr->name), .tenant_id = sr->tenant_id,
            .action = sr->action == SEMRULE_FORBID ? SEM_FORBID : SEM_FORCE, .model = xstrdup(sr->model),
            .label = sr->label && *sr->label ? xstrdup(sr->label) : NULL, .code = code};
    }
    const char **texts = xcalloc((size_t)(s->n_policies ? s->n_policies : 1), sizeof *texts);
    ix->n_vecs = s->n_policies;
    ix->vecs = xcalloc((size_t)(s->n_policies ? s->n_policies : 1), sizeof *ix->vecs);
    for (int i = 0; i < s->n_policies; i++) {
        const char *d = s->policies[i].description;
        texts[i] = d;
        if (!d || !*d || !*ix->embed_model)
            continue;
        ix->vecs[i].key = semindex_vec_key(ix->embed_model, d);
        for (int j = 0; old && j < old->n_vecs; j++)
            if (old->vecs[j].vec && old->vecs[j].key == ix->vecs[i].key) {
                ix->vecs[i].vec = xcalloc(old->vecs[j].dims, sizeof(float));
                memcpy(ix->vecs[i].vec, old->vecs[j].vec, old->vecs[j].dims * sizeof(float));
                ix->vecs[i].dims = old->vecs[j].dims;
                break;
            }
    }
    ix->bm25 = bm25_index_new(texts, s->n_policies);
    free(texts);
    return ix;
}

struct semindex *semindex_acquire(const struct request *r)
{
    /* Is the request's snapshot the one requests start with now? (Versions are
     * compared for equality only: a restored database may count lower.) */
    struct snapshot *now = snapshot_acquire();
    int current = now && now->version == r->snap->version;
    snapshot_release(now);
    pthread_mutex_lock(&semindex_lock);
    if (semindex_cur && semindex_cur->version != r->snap->version && !current) {
        /* A request still on an older snapshot (it began before the change): an
         * index of its own, so the current one is not rebuilt back and forth. */
        struct semindex *own = semindex_new(r, semindex_cur);
        own->refs = 1;
        pthread_mutex_unlock(&semindex_lock);
        return own;
    }
    if (!semindex_cur || semindex_cur->version != r->snap->version) {
        struct semindex *next = semindex_new(r, semindex_cur);
        if (semindex_cur)
            semindex_unref(semindex_cur);   /* freed by its last reader */
        semindex_cur = next;
        semindex_cur->refs = 1;
    }
    struct semindex *ix = semindex_cur;
    ix->refs++;
    pthread_mutex_unlock(&semindex_lock);
    return ix;
}

void semindex_release(struct semindex *ix)
{
    if (!ix)
        return;
    pthread_mutex_lock(&semindex_lock);
    semindex_unref(ix);
    pthread_mutex_unlock(&semindex_lock);
}

int semindex_vec_get(struct semindex *ix, int policy, const float **vec, size_t *dims)
{
    *vec = NULL;
    *dims = 0;
    if (policy < 0 || policy >= ix->n_vecs || !ix->vecs[policy].key)
        return -1;                  /* no description: nothing to compare */
    pthread_mutex_lock(&semindex_lock);
    const struct semindex_vec *v = &ix->vecs[policy];
    *vec = v->vec;
    *dims = v->dims;
    pthread_mutex_unlock(&semindex_lock);
    return *vec != NULL;
}

void semindex_vec_put(struct semindex *ix, int policy, const float *vec, size_t dims)
{
    if (policy < 0 || policy >= ix->n_vecs || !ix->vecs[policy].key || dims == 0)
        return;
    pthread_mutex_lock(&semindex_lock);
    struct semindex_vec *v = &ix->vecs[policy];
    if (!v->vec) {                  /* set once, then only read: readers keep the pointer unlocked */
        v->vec = xcalloc(dims, sizeof(float));
        memcpy(v->vec, vec, dims * sizeof(float));
        v->dims = dims;
    }
    pthread_mutex_unlock(&semindex_lock);
}
