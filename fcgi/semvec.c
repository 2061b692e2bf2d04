/* semvec.c: embeddings for the semantic strategy before route (semvec.h). */
#include "semvec.h"

#include "auto.h"
#include "embed.h"
#include "log.h"
#include "semindex.h"
#include "semroute.h"
#include "util.h"

#include <stdatomic.h>
#include <string.h>

/* After a failed embedding the next SEMVEC_BACKOFF_MS of requests (of this
 * process) go by BM25 without trying: a backend that hangs would otherwise cost
 * every request cache.semantic_embed_timeout_ms. */
#define SEMVEC_BACKOFF_MS 5000
static _Atomic int64_t failed_ms;

/* R-SEM-2: a failing embedding backend degrades to BM25; said once a minute. */
static void semvec_degraded(const struct request *r, const char *model)
{
    static _Atomic int64_t warned_ms;
    int64_t now = mono_ms(), last = atomic_load(&warned_ms);
    if (now - last >= 60000 && atomic_compare_exchange_strong(&warned_ms, &last, now))
        log_warn("request %s: semantic routing could not embed with model %s; scored by BM25 only "
                 "(logged once a minute)", r->request_id, model);
}

void semvec_prepare(struct request *r)
{
    enum auto_strategy strategy;
    const struct snapshot *s = r->snap;
    if (!r->model || strcmp(r->model, "auto") != 0 || !r->json || !s->sem_embed_model || !*s->sem_embed_model ||
        !auto_enabled_for(r, &strategy) || strategy != AUTO_SEMANTIC)
        return;
    int64_t last = atomic_load(&failed_ms);
    if (last && mono_ms() - last < SEMVEC_BACKOFF_MS)
        return;
    /* A turn longer than cache.semantic_max_input_bytes is not embedded (as for the
     * semantic cache: embedders refuse or cut long inputs): BM25 alone. */
    struct buf text;
    buf_init(&text, (size_t)r->conf->semantic_max_input_bytes);
    if (semroute_last_user(r->json, &text) != 0) {
        buf_free(&text);
        return;                     /* no text, or too long */
    }
    struct semindex *ix = semindex_acquire(r);
    r->semindex = ix;
    struct embedding q;
    int ok = *ix->embed_model && embed_text(r, ix->embed_model, text.data, text.len, &q, EMBED_CALLER) == 0;
    buf_free(&text);
    /* The descriptions of the models the caller's tenant routes, each once per
     * description (and embedding model): a later request finds them cached. They are
     * the gateway's cost, metered without a tenant, user or key, never this caller's. */
    for (int i = 0; ok && i < s->n_policies; i++) {
        const float *v;
        size_t dims;
        const struct snap_route *first;
        if (semindex_vec_get(ix, i, &v, &dims) != 0 ||
            snapshot_routes(s, r->caller.tenant_id, s->policies[i].model, &first) == 0)
            continue;
        const char *d = s->policies[i].description;
        struct embedding e;
        ok = embed_text(r, ix->embed_model, d, strlen(d), &e, EMBED_GATEWAY) == 0;  /* no caller's */
        if (ok)
            semindex_vec_put(ix, i, e.vec, e.dims);
    }
    if (ok) {
        r->sem_qvec = q.vec;
        r->sem_qdims = q.dims;
    } else if (*ix->embed_model) {
        atomic_store(&failed_ms, mono_ms());
        semvec_degraded(r, ix->embed_model);
    }
}

void semvec_end(struct request *r)
{
    semindex_release(r->semindex);
    r->semindex = NULL;
}
