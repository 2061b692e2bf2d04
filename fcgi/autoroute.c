/* autoroute.c: candidates, filters and strategies of model "auto" (R-AUTO-2..4). */
#include "autoroute.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum auto_strategy auto_strategy_parse(const char *s, enum auto_strategy dflt)
{
    if (!s)
        return dflt;
    if (strcmp(s, "cost") == 0)
        return AUTO_COST;
    if (strcmp(s, "latency") == 0)
        return AUTO_LATENCY;
    if (strcmp(s, "semantic") == 0)
        return AUTO_SEMANTIC;
    if (strcmp(s, "balanced") == 0)
        return AUTO_BALANCED;
    return dflt;
}

const char *auto_strategy_name(enum auto_strategy s)
{
    static const char *names[] = {"balanced", "cost", "latency", "semantic"};
    return names[s];
}

enum auto_purpose auto_purpose_parse(const char *s)
{
    if (!s)
        return PURPOSE_UNSET;
    if (strcmp(s, "chat") == 0)
        return PURPOSE_CHAT;
    if (strcmp(s, "completion") == 0)
        return PURPOSE_COMPLETION;
    if (strcmp(s, "embedding") == 0)
        return PURPOSE_EMBEDDING;
    return PURPOSE_UNSET;
}

double auto_ewma(double old, double sample, double alpha)
{
    return old < 0 ? sample : alpha * sample + (1 - alpha) * old;
}

/* R-AUTO-3: hard capability filters. */
static int capable(const struct auto_cand *c, const struct auto_request *rq)
{
    if (rq->has_tools && !c->supports_tools)
        return 0;
    if (rq->has_images && !c->supports_vision)
        return 0;
    if (c->max_context > 0 && rq->prompt_tokens + rq->max_tokens > c->max_context)
        return 0;
    return 1;
}

static double request_cost(const struct auto_cand *c, const struct auto_request *rq)
{
    if (c->price_in < 0 || c->price_out < 0)
        return INFINITY;
    int64_t out = rq->max_tokens > 0 ? rq->max_tokens : c->max_output > 0 ? c->max_output : 256;
    return (double)rq->prompt_tokens / 1000.0 * c->price_in + (double)out / 1000.0 * c->price_out;
}

struct scored {
    int index;
    double key;           /* lower is better */
    const char *model;
};

static int scored_cmp(const void *a, const void *b)
{
    const struct scored *x = a, *y = b;
    if (x->key < y->key)
        return -1;
    if (x->key > y->key)
        return 1;
    return strcmp(x->model, y->model);      /* stable and deterministic */
}

int auto_eligible(const struct auto_cand *c, int n, const struct auto_request *rq, int *idx,
                  struct auto_result *out)
{
    memset(out, 0, sizeof *out);
    out->error = ERR_NONE;
    int live = 0, labelled = 0, unlabelled = 0, m = 0;
    for (int i = 0; i < n; i++) {
        if (!c[i].available || !c[i].routing_enabled)
            continue;
        live++;
        if (c[i].purpose == rq->purpose)
            labelled++;
        else if (c[i].purpose == PURPOSE_UNSET)
            unlabelled++;
    }
    if (live == 0) {
        out->error = ERR_NO_AUTO_CANDIDATES;
        return 0;
    }
    /* R-AUTO-2: labelled matches first; unlabelled only when none; never another purpose. */
    enum auto_purpose want = labelled ? rq->purpose : PURPOSE_UNSET;
    if (!labelled && !unlabelled) {
        out->error = ERR_NO_AUTO_CANDIDATES_FOR_PURPOSE;
        return 0;
    }
    out->purpose_fallback = !labelled;
    for (int i = 0; i < n; i++)
        if (c[i].available && c[i].routing_enabled && c[i].purpose == want && capable(&c[i], rq))
            idx[m++] = i;
    if (m == 0)
        out->error = ERR_NO_AUTO_CANDIDATES;
    return m;
}

void auto_choose(const struct auto_cand *c, int n, const struct auto_request *rq, enum auto_strategy s,
                 const struct auto_weights *w, struct auto_result *out)
{
    struct scored *list = calloc((size_t)(n > 0 ? n : 1), sizeof *list);
    int *idx = calloc((size_t)(n > 0 ? n : 1), sizeof *idx);
    if (!list || !idx)
        abort();
    int m = auto_eligible(c, n, rq, idx, out);
    if (m == 0)
        goto done;
    double max_cost = 0, max_ttft = 0;
    for (int k = 0; k < m; k++) {
        int i = idx[k];
        double cost = request_cost(&c[i], rq);
        if (isfinite(cost) && cost > max_cost)
            max_cost = cost;
        if (c[i].ttft_ms > max_ttft)
            max_ttft = c[i].ttft_ms;
        list[k].index = i;
        list[k].model = c[i].model;
    }
    for (int k = 0; k < m; k++) {
        const struct auto_cand *x = &c[list[k].index];
        double cost = request_cost(x, rq);
        switch (s) {
        case AUTO_COST:
            list[k].key = cost;                                   /* unknown price last */
            break;
        case AUTO_LATENCY:
            list[k].key = x->ttft_ms >= 0 ? x->ttft_ms : INFINITY; /* unknown latency last */
            break;
        case AUTO_BALANCED:
        case AUTO_SEMANTIC:
        default: {
            /* Each signal in 0..1 (1 best); unknown counts as the middle. */
            double q = x->quality >= 0 ? x->quality / 100.0 : 0.5;
            double p = isfinite(cost) ? (max_cost > 0 ? 1.0 - cost / max_cost : 1.0) : 0.5;
            double l = x->ttft_ms >= 0 ? (max_ttft > 0 ? 1.0 - x->ttft_ms / max_ttft : 1.0) : 0.5;
            list[k].key = -(w->quality * q + w->price * p + w->latency * l);
        }
        }
    }
    qsort(list, (size_t)m, sizeof *list, scored_cmp);
    /* R-AUTO-4: deduplicate by endpoint, at most three tries. */
    for (int k = 0; k < m && out->n < AUTO_MAX_TRIES; k++) {
        int dup = 0;
        for (int j = 0; j < out->n; j++)
            dup |= c[out->order[j]].endpoint_id == c[list[k].index].endpoint_id;
        if (!dup)
            out->order[out->n++] = list[k].index;
    }
done:
    free(idx);
    free(list);
}
