/* metrics_record.c: a finished request's series (metrics_record.h).
 *
 * Runs at the end of every data-plane request, so it stays cheap: label texts
 * are built once in stack buffers and each series is one hashed lookup and an
 * atomic add in the shared state (lib/metrics.c). Every label value is taken
 * from the snapshot or a fixed list, never from what the client sent. */
#include "metrics_record.h"

#include "account.h"
#include "errors.h"
#include "metrics.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

/* A label text being built; bad once a value did not fit (the series is then
 * counted as dropped rather than stored under a truncated name). */
struct lbl {
    char s[SHM_MET_LABELS];
    int len, bad;
};

static void lbl_init(struct lbl *l)
{
    l->s[0] = '\0';
    l->len = l->bad = 0;
}

static void lbl_add(struct lbl *l, const char *name, const char *value)
{
    if (l->bad)
        return;
    int n = metrics_label(l->s, sizeof l->s, (size_t)l->len, name, value);
    if (n < 0)
        l->bad = 1;
    else
        l->len = n;
}

/* A copy of base with one more label. */
static void lbl_with(struct lbl *l, const struct lbl *base, const char *name, const char *value)
{
    memcpy(l->s, base->s, (size_t)base->len + 1);
    l->len = base->len;
    l->bad = base->bad;
    lbl_add(l, name, value);
}

static void add(struct shm *s, enum metric_id m, const struct lbl *l, uint64_t n)
{
    if (l->bad)
        metrics_drop(s);
    else
        metrics_add(s, m, l->s, n);
}

static void observe(struct shm *s, enum metric_id m, const struct lbl *l, int64_t us, int error, int64_t now)
{
    if (l->bad)
        metrics_drop(s);
    else
        metrics_observe(s, m, l->s, us, error, now);
}

/* The public model name when the snapshot knows it (a route or a policy for
 * it), "_unknown" for a name it does not know, "_none" when the request named
 * no model (listings, the pass-through proxy, failures before the body). */
static const char *model_label(const struct request *r)
{
    if (r->route)
        return r->route->model;
    if (r->plan.n_routes > 0)
        return r->plan.routes[0]->model;
    if (!r->model || !*r->model)
        return "_none";
    if (strcmp(r->model, "auto") == 0)
        return "auto";
    const struct snap_route *first;
    const struct snapshot *s = r->snap;
    if (snapshot_routes(s, r->caller.tenant_id, r->model, &first) > 0 ||
        snapshot_routes(s, s->default_tenant_id, r->model, &first) > 0 || snapshot_policy(s, r->model))
        return r->model;
    return "_unknown";
}

static const char *tenant_label(const struct request *r)
{
    if (r->caller.tenant_id == 0)
        return "_none";
    const struct snap_tenant *t = snapshot_tenant(r->snap, r->caller.tenant_id);
    return t ? t->name : "_unknown";
}

/* Prompt-length buckets: lt256 | 256_1k | 1k_4k (up to 4096) | gt4k. */
static const char *prompt_bucket(const struct request *r)
{
    int64_t p = r->usage.found && r->usage.prompt_tokens > 0 ? r->usage.prompt_tokens : r->prompt_estimate;
    return p < 256 ? "lt256" : p < 1024 ? "256_1k" : p <= 4096 ? "1k_4k" : "gt4k";
}

/* The attempt outcomes drive.c writes; anything else would be a new word. */
static const char *attempt_outcome(const char *next)
{
    static const char *const known[] = {"success", "retry", "failover", "failed", "client_gone", "refused"};
    for (size_t i = 0; next && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(next, known[i]) == 0)
            return known[i];
    return "other";
}

/* Tokens billed, as account.c bills them: nothing for a request that never
 * authenticated, a replay, a kind that spends no tokens, or a failure that
 * produced nothing. */
static void record_tokens(struct request *r, const struct lbl *base, int status)
{
    if (r->caller.tenant_id == 0 || r->replayed)
        return;
    int64_t prompt, completion;
    account_charged_tokens(r, status, &prompt, &completion);
    if (prompt == 0 && completion == 0)
        return;                     /* nothing billed, so nothing of it was cached either */
    int64_t cached = r->usage.found ? r->usage.cache_read_tokens : 0;
    const char *dir[] = {"prompt", "completion", "cached"};
    int64_t n[] = {prompt, completion, cached};
    for (int i = 0; i < 3; i++) {
        if (n[i] <= 0)
            continue;
        struct lbl l;
        lbl_with(&l, base, "direction", dir[i]);
        add(r->shm, MET_TOKENS, &l, (uint64_t)n[i]);
    }
}

static void record_attempts(struct request *r)
{
    for (int i = 0; i < r->obs.n_attempts && i < OBS_MAX_ATTEMPTS; i++) {
        const struct obs_attempt *a = &r->obs.attempts[i];
        if (!a->ep)
            continue;
        struct lbl l;
        lbl_init(&l);
        lbl_add(&l, "endpoint", a->ep->name);
        lbl_add(&l, "outcome", attempt_outcome(a->next));
        add(r->shm, MET_UPSTREAM_ATTEMPTS, &l, 1);
    }
}

void metrics_record(struct request *r)
{
    struct shm *s = r->shm;
    if (!s || !s->r || !r->snap)
        return;
    int64_t now = now_ms();
    int64_t dur_us = mono_us() - r->obs.start_us;
    int status = account_status(r);
    int error = status >= 500;              /* the live view's error rate: the service's failures */
    char status_text[12];
    snprintf(status_text, sizeof status_text, "%d", status);

    /* model and tenant: the prefix of the requests and tokens series */
    const char *model = model_label(r);
    struct lbl base, l;
    lbl_init(&base);
    lbl_add(&base, "model", model);
    if (r->conf->metrics_tenant_labels)
        lbl_add(&base, "tenant", tenant_label(r));

    lbl_with(&l, &base, "status", status_text);
    lbl_add(&l, "code", r->error_code ? r->error_code : "");
    add(s, MET_REQUESTS, &l, 1);

    lbl_init(&l);
    lbl_add(&l, "route", (r->route_pattern ? r->route_pattern : "_unknown"));
    lbl_add(&l, "status", status_text);
    add(s, MET_ROUTE_REQUESTS, &l, 1);

    if (status == 429) {
        /* An upstream's own 429 passed through carries no sluice error code. */
        lbl_init(&l);
        lbl_add(&l, "code", r->error_code ? r->error_code : "upstream");
        add(s, MET_RATE_LIMITED, &l, 1);
    }

    lbl_init(&l);
    lbl_add(&l, "model", model);
    lbl_add(&l, "prompt_bucket", prompt_bucket(r));
    observe(s, MET_REQUEST_DURATION, &l, dur_us, error, now);
    if (r->obs.ttft_us > 0)
        observe(s, MET_TTFT, &l, r->obs.ttft_us, error, now);

    int n = r->obs.n_attempts < OBS_MAX_ATTEMPTS ? r->obs.n_attempts : OBS_MAX_ATTEMPTS;
    const struct snap_endpoint *ep = n > 0 ? r->obs.attempts[n - 1].ep : NULL;
    if (ep) {
        lbl_init(&l);
        lbl_add(&l, "endpoint", ep->name);
        observe(s, MET_ENDPOINT_DURATION, &l, dur_us, error, now);
        if (r->obs.ttft_us > 0)
            observe(s, MET_ENDPOINT_TTFT, &l, r->obs.ttft_us, error, now);
    }
    if (r->queue_outcome && r->ep) {
        /* R-PRIO-1: the endpoint it queued on (the last attempt's, or the one it waited for). */
        lbl_init(&l);
        lbl_add(&l, "endpoint", r->ep->name);
        observe(s, MET_QUEUE_WAIT, &l, r->queue_ms * 1000, 0, now);
        lbl_add(&l, "outcome", r->queue_outcome);
        add(s, MET_QUEUE_REQUESTS, &l, 1);
    }
    record_attempts(r);
    record_tokens(r, &base, status);
    /* R-CACHE-3: the cache's hit rate, over the requests it could serve; R-CACHE-4:
     * a semantic-mode request the exact key missed counts as semantic. */
    if (r->obs.cache)
        metrics_add(s, strcmp(r->obs.cache, "miss") != 0 ? MET_CACHE_HITS : MET_CACHE_MISSES,
                    r->obs.cache_kind && strcmp(r->obs.cache_kind, "semantic") == 0 ? "kind=\"semantic\""
                                                                                   : "kind=\"exact\"", 1);
}
