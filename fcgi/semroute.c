/* semroute.c: the rule, similarity and fallback layers of the semantic
 * strategy (R-SEM-1..3), pure (semroute.h). */
#include "semroute.h"

#include "buf.h"
#include "content_rules.h"
#include "semantic.h"

#include <json-c/json.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEM_MAX_CANDS 64

const char *semroute_layer_name(enum sem_layer l)
{
    static const char *const names[SEM_LAYERS] = {"rule", "bm25", "hybrid", "fallback"};
    return l >= 0 && l < SEM_LAYERS ? names[l] : "fallback";
}

/* A content's text parts: a string, or the "text" of each part of type "text"
 * (OpenAI's and Anthropic's shapes; "input_text" of the Responses API). */
static int text_of(struct json_object *c, struct buf *out)
{
    if (json_object_is_type(c, json_type_string))
        return buf_append(out, json_object_get_string(c), (size_t)json_object_get_string_len(c));
    if (!json_object_is_type(c, json_type_array))
        return -1;
    size_t start = out->len;
    for (size_t i = 0; i < json_object_array_length(c); i++) {
        struct json_object *part = json_object_array_get_idx(c, i), *type, *text;
        if (!json_object_is_type(part, json_type_object) || !json_object_object_get_ex(part, "type", &type) ||
            !json_object_is_type(type, json_type_string) ||
            (strcmp(json_object_get_string(type), "text") != 0 &&
             strcmp(json_object_get_string(type), "input_text") != 0) ||
            !json_object_object_get_ex(part, "text", &text) || !json_object_is_type(text, json_type_string))
            continue;
        if ((out->len > start && buf_puts(out, "\n") != 0) ||
            buf_append(out, json_object_get_string(text), (size_t)json_object_get_string_len(text)) != 0)
            return -1;
    }
    return out->len > start ? 0 : -1;
}

/* The content of the last item of role user in an array of messages. */
static struct json_object *last_user(struct json_object *msgs)
{
    for (size_t i = json_object_array_length(msgs); i-- > 0;) {
        struct json_object *m = json_object_array_get_idx(msgs, i), *role, *content;
        if (json_object_is_type(m, json_type_object) && json_object_object_get_ex(m, "role", &role) &&
            json_object_is_type(role, json_type_string) && strcmp(json_object_get_string(role), "user") == 0)
            return json_object_object_get_ex(m, "content", &content) ? content : NULL;
    }
    return NULL;
}

int semroute_last_user(struct json_object *body, struct buf *out)
{
    struct json_object *v, *found = NULL;
    if (!body || !json_object_is_type(body, json_type_object))
        return -1;
    if (json_object_object_get_ex(body, "messages", &v)) {
        found = json_object_is_type(v, json_type_array) ? last_user(v) : NULL;
    } else if (json_object_object_get_ex(body, "prompt", &v)) {
        found = json_object_is_type(v, json_type_array) && json_object_array_length(v) > 0
                    ? json_object_array_get_idx(v, json_object_array_length(v) - 1) : v;
        if (found && !json_object_is_type(found, json_type_string))
            found = NULL;           /* token arrays are no text */
    } else if (json_object_object_get_ex(body, "input", &v)) {
        found = json_object_is_type(v, json_type_array) ? last_user(v) : v;
    }
    return found ? text_of(found, out) : -1;
}

double semroute_hybrid(double bm25, double cosine, double w_bm25, double w_embedding)
{
    double sum = w_bm25 + w_embedding;
    if (sum <= 0)
        return bm25;
    if (cosine < 0)
        cosine = 0;       /* opposite means unrelated here, not less than unrelated */
    return (w_bm25 * bm25 + w_embedding * cosine) / sum;
}

static int has(const char *const *list, int n, const char *word)
{
    for (int i = 0; word && i < n; i++)
        if (strcmp(list[i], word) == 0)
            return 1;
    return 0;
}

/* R-SEM-1: the allow-list and every required label. */
static int admitted(const struct sem_cand *c, const struct sem_input *in, const char *const *extra, int n_extra)
{
    if (c->n_tenants > 0 && !has(c->tenants, c->n_tenants, in->tenant))
        return 0;
    for (int i = 0; i < in->n_require; i++)
        if (!has(c->labels, c->n_labels, in->require_labels[i]))
            return 0;
    for (int i = 0; i < n_extra; i++)
        if (!has(c->labels, c->n_labels, extra[i]))
            return 0;
    return 1;
}

struct ranked {
    int index;
    double score;
    const char *model;
};

static int ranked_cmp(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->score > y->score)
        return -1;
    if (x->score < y->score)
        return 1;
    return strcmp(x->model, y->model);     /* ties: deterministic */
}

/* Appends candidate i unless its endpoint is already in the order. */
static void take(const struct sem_cand *c, struct sem_result *out, int i)
{
    if (out->n >= AUTO_MAX_TRIES)
        return;
    for (int j = 0; j < out->n; j++)
        if (out->order[j] == i || c[out->order[j]].endpoint_id == c[i].endpoint_id)
            return;
    out->order[out->n++] = i;
}

void semroute_decide(const struct sem_cand *c, int n, const struct sem_input *in, struct sem_result *out)
{
    memset(out, 0, sizeof *out);
    out->layer = SEM_LAYER_FALLBACK;
    if (n > SEM_MAX_CANDS)
        n = SEM_MAX_CANDS;
    /* R-SEM-1: which rules match the text (of the caller's tenant or every tenant). */
    int n_labels = 0, n_rules = in->n_rules > 0 ? in->n_rules : 0;
    char *matched = calloc((size_t)n_rules + 1, 1);
    const char **labels = calloc((size_t)n_rules + 1, sizeof *labels);
    if (!matched || !labels)
        abort();
    for (int k = 0; k < n_rules; k++) {
        const struct sem_rule *r = &in->rules[k];
        if ((r->tenant_id != 0 && r->tenant_id != in->tenant_id) || !r->code || !in->text)
            continue;
        int limited = 0;
        int m = content_rules_match(r->code, in->text, in->len, in->match_limit, &limited);
        /* A text that makes a pattern hit its limit cannot choose a model by it,
         * but cannot escape a forbid either. */
        if (m && limited && r->action == SEM_FORCE)
            m = 0;
        matched[k] = (char)m;
        if (m && r->label && *r->label)
            labels[n_labels++] = r->label;
    }
    int alive[SEM_MAX_CANDS];
    for (int i = 0; i < n; i++) {
        alive[i] = admitted(&c[i], in, labels, n_labels);
        for (int k = 0; alive[i] && k < n_rules; k++)      /* forbid beats force */
            if (matched[k] && in->rules[k].action == SEM_FORBID && strcmp(in->rules[k].model, c[i].model) == 0)
                alive[i] = 0;
    }
    /* R-SEM-2: every live candidate's score, best first. */
    struct ranked list[SEM_MAX_CANDS];
    int m = 0, hybrid = in->qvec != NULL && in->dims > 0;
    struct bm25_query *q = NULL;
    if (in->bm25 && in->text) {
        q = malloc(sizeof *q);
        if (!q)
            abort();
        bm25_query_init(q, in->text, in->len);
    }
    for (int i = 0; i < n; i++) {
        if (!alive[i])
            continue;
        double b = q && c[i].doc >= 0 ? bm25_score(in->bm25, q, c[i].doc) : 0;
        double s = b;
        if (hybrid) {
            double cos = c[i].vec && c[i].dims == in->dims ? semantic_cosine(in->qvec, c[i].vec, in->dims) : 0;
            s = semroute_hybrid(b, cos, in->w_bm25, in->w_embedding);
        }
        list[m++] = (struct ranked){i, s, c[i].model};
    }
    free(q);
    free(labels);
    if (m == 0) {
        free(matched);
        return;                     /* out->n = 0: nothing left to route to */
    }
    qsort(list, (size_t)m, sizeof *list, ranked_cmp);
    out->score = list[0].score;
    /* R-SEM-1: the first matching force rule whose model is still a candidate. */
    for (int k = 0; k < n_rules && out->layer != SEM_LAYER_RULE; k++) {
        if (!matched[k] || in->rules[k].action != SEM_FORCE)
            continue;
        for (int j = 0; j < m; j++)
            if (strcmp(list[j].model, in->rules[k].model) == 0) {
                take(c, out, list[j].index);
                out->layer = SEM_LAYER_RULE;
                out->rule = in->rules[k].name;
                break;
            }
    }
    if (out->layer == SEM_LAYER_RULE) {
        snprintf(out->reason, sizeof out->reason, "rule:%.80s", out->rule);
        /* A header value: a name written around sluicectl cannot break the head. */
        for (char *p = out->reason; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
    } else if (out->score >= in->threshold && out->score > 0) {
        out->layer = hybrid ? SEM_LAYER_HYBRID : SEM_LAYER_BM25;
        snprintf(out->reason, sizeof out->reason, "%s:%.3f", hybrid ? "hybrid" : "bm25", out->score);
    } else {
        /* R-SEM-3: the default model first, when it is a candidate. */
        out->layer = SEM_LAYER_FALLBACK;
        snprintf(out->reason, sizeof out->reason, "fallback");
        for (int j = 0; in->default_model && *in->default_model && j < m; j++)
            if (strcmp(list[j].model, in->default_model) == 0)
                take(c, out, list[j].index);
    }
    for (int j = 0; j < m; j++)
        take(c, out, list[j].index);
    free(matched);
}
