/* embed.c: the semantic cache's embedding call (R-CACHE-4, embed.h).
 *
 * A side request shares the caller's arena, snapshot and caller, so route.c
 * plans it exactly as a request for the embedding model (route_plan_quiet,
 * route_next_replica) and the serving view hears how each attempt went. The
 * transfer runs on the worker's second easy handle: the first one belongs to
 * the caller's attempt that follows, and a reused handle keeps the embedding
 * upstream's connection alive between requests. */
#include "embed.h"

#include "gate.h"
#include "log.h"
#include "route.h"
#include "semantic.h"
#include "serving.h"
#include "upstream.h"
#include "usage_writer.h"
#include "util.h"

#include <json-c/json.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define EMBED_MAX_BYTES (16u << 20)     /* a 16k-dim vector in JSON text is ~300 KB */
#define EMBED_MAX_DIMS 16384
#define EMBED_MAX_TRIES 4               /* attempts of one embedding, failovers included */

/* The side request: what route.c and serving.c read of a request. */
static struct request *side_new(struct request *r, const char *model)
{
    struct request *s = arena_alloc(r->arena, sizeof *s);   /* zeroed */
    s->w = r->w;
    s->arena = r->arena;
    s->conf = r->conf;
    s->shm = r->shm;
    s->snap = r->snap;
    s->start_ms = now_ms();
    s->start_mono = mono_ms();
    s->method = "POST";
    s->uri = s->path = "/v1/embeddings";
    s->kind = REQ_EMBEDDINGS;
    s->ingress = INGRESS_OPENAI;
    str_copy(s->request_id, sizeof s->request_id, r->request_id);
    s->caller = r->caller;
    s->priority = r->priority;
    s->model = model;
    s->wait_ep = -1;
    s->wait_only_rep = -1;
    s->plan.pinned = -1;
    s->obs.start_us = mono_us();
    return s;
}

static size_t embed_write(char *p, size_t size, size_t n, void *arg)
{
    return buf_append(arg, p, size * n) == 0 ? size * n : 0;   /* past the cap: the transfer fails */
}

/* One attempt on s's replica, given at most left_ms (> 0): the HTTP status, or
 * 0 when none came (*err says why). */
static long embed_post(struct request *s, const char *body, int64_t left_ms, struct buf *out, CURLcode *err)
{
    CURL *h = s->w->side;
    if (!h) {
        if (!(h = s->w->side = curl_easy_init()))
            abort();                /* as every allocation failure */
    }
    curl_easy_reset(h);             /* keeps the connections */
    upstream_safe_defaults(h);
    const struct snap_endpoint *e = s->ep;
    int64_t cap = left_ms;
    int64_t total = (int64_t)e->connect_timeout_ms + e->first_byte_timeout_ms;
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Expect:");
    hdr = curl_slist_append(hdr, arena_printf(s->arena, "X-Request-Id: %s", s->request_id));
    if (e->upstream_auth && *e->upstream_auth)
        hdr = curl_slist_append(hdr, arena_printf(s->arena, "Authorization: Bearer %s", e->upstream_auth));
    curl_easy_setopt(h, CURLOPT_URL, arena_printf(s->arena, "%s/v1/embeddings", s->replica->url));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(e->connect_timeout_ms < cap ? e->connect_timeout_ms : cap));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(total > 0 && total < cap ? total : cap));
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, embed_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    long status = 0;
    shm_active_add(s->shm, s->replica->slot, 1);    /* the balancer sees the load */
    *err = curl_easy_perform(h);
    shm_active_add(s->shm, s->replica->slot, -1);
    if (*err == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdr);
    return status;
}

/* data[0].embedding as a unit vector, 0, or -1 when the answer holds none;
 * either way usage.prompt_tokens when it says (else -1): a 200 is metered. */
static int embed_parse(struct request *s, const struct buf *b, struct embedding *out, int64_t *tokens)
{
    struct json_object *o = b->len ? json_tokener_parse(b->data) : NULL, *data, *first, *vec, *usage, *pt;
    int rc = -1;
    *tokens = -1;
    if (o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, "usage", &usage) &&
        json_object_object_get_ex(usage, "prompt_tokens", &pt) && json_object_is_type(pt, json_type_int) &&
        json_object_get_int64(pt) >= 0)
        *tokens = json_object_get_int64(pt);
    if (!o || !json_object_object_get_ex(o, "data", &data) || !json_object_is_type(data, json_type_array) ||
        !(first = json_object_array_get_idx(data, 0)) || !json_object_object_get_ex(first, "embedding", &vec) ||
        !json_object_is_type(vec, json_type_array))
        goto out;
    size_t n = json_object_array_length(vec);
    if (n == 0 || n > EMBED_MAX_DIMS)
        goto out;
    float *v = arena_alloc(s->arena, n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        struct json_object *x = json_object_array_get_idx(vec, i);
        if (!json_object_is_type(x, json_type_double) && !json_object_is_type(x, json_type_int))
            goto out;
        double d = json_object_get_double(x);
        if (!isfinite(d))
            goto out;
        v[i] = (float)d;
    }
    if (!semantic_normalize(v, n))
        goto out;
    out->vec = v;
    out->dims = n;
    rc = 0;
out:
    json_object_put(o);
    return rc;
}

/* The embedding's usage event: the caller's tenant, user and key (none: the gateway's
 * own, for an embedding no caller asked for), the embedding model and the endpoint that
 * answered, its prompt tokens as the
 * upstream counted them (else estimated from the text: ~4 bytes a token). */
static void embed_account(const struct request *r, const struct request *s, int64_t tokens, size_t text_len,
                          enum embed_payer payer)
{
    struct usage_record *u = xcalloc(1, sizeof *u);
    u->ts_ms = s->start_ms;
    str_copy(u->request_id, sizeof u->request_id, r->request_id);
    if (payer == EMBED_CALLER) {
        u->tenant_id = r->caller.tenant_id;
        u->user_id = r->caller.user_id;
        u->key_id = r->caller.key_id;
    }
    u->endpoint_id = s->ep->id;
    u->replica_id = s->replica->id;
    u->route_id = s->route ? s->route->id : 0;
    str_copy(u->model, sizeof u->model, s->model);
    str_copy(u->routed_model, sizeof u->routed_model, s->routed_model ? s->routed_model : s->model);
    str_copy(u->path, sizeof u->path, s->path);
    u->usage_estimated = tokens < 0;
    u->prompt_tokens = tokens >= 0 ? tokens : (int64_t)(text_len + 3) / 4;
    u->latency_ms = mono_ms() - s->start_mono;
    u->status = 200;
    u->retries = s->retries;
    usage_writer_enqueue(u);
}

static void warn_once(const struct request *r, const char *model, const char *why)
{
    static _Atomic int64_t warned_ms;
    int64_t now = mono_ms(), last = atomic_load(&warned_ms);
    if (now - last >= 60000 && atomic_compare_exchange_strong(&warned_ms, &last, now))
        log_warn("request %s: the semantic cache could not embed with model %s (%s); served as a plain miss "
                 "(logged once a minute)", r->request_id, model, why);
}

int embed_text(struct request *r, const char *model, const char *text, size_t len, struct embedding *out,
               enum embed_payer payer)
{
    struct request *s = side_new(r, model);
    const char *why = "no route of it can take a request now";
    if (route_plan_quiet(s) != 0) {
        warn_once(r, model, why);
        return -1;
    }
    /* One deadline for the whole embedding, failovers included: each attempt
     * gets what is left of it. */
    int64_t deadline = s->start_mono + s->conf->semantic_embed_timeout_ms;
    struct buf resp;
    buf_init(&resp, EMBED_MAX_BYTES);
    int rc = -1;
    for (int tries = 0; tries < EMBED_MAX_TRIES && s->replica; tries++) {
        const struct snap_replica *rep = s->replica;
        int64_t tokens = -1, left = deadline - mono_ms();
        CURLcode err = CURLE_OK;
        long status = 0;
        int posted = 0, cut = 0;
        if (left <= 0) {
            why = "cache.semantic_embed_timeout_ms passed";
        } else if (s->ep->protocol != PROTO_OPENAI) {
            why = "its endpoint does not speak the OpenAI protocol";
        } else {
            posted = 1;
            /* the model, then the text, as OpenAI clients send them */
            struct json_object *q = json_object_new_object();
            json_object_object_add(q, "model", json_object_new_string(s->routed_model ? s->routed_model : model));
            json_object_object_add(q, "input", json_object_new_string_len(text, (int)len));
            const char *body = arena_strdup(s->arena, json_object_to_json_string_ext(q, JSON_C_TO_STRING_PLAIN));
            json_object_put(q);
            buf_reset(&resp);
            status = embed_post(s, body, left, &resp, &err);
            /* the deadline, not the endpoint's own timeouts, ended it: no fault of the replica */
            cut = err == CURLE_OPERATION_TIMEDOUT && mono_ms() >= deadline;
            if (status == 200 && embed_parse(s, &resp, out, &tokens) == 0)
                rc = 0;
            else
                why = cut ? "cache.semantic_embed_timeout_ms passed"
                      : err != CURLE_OK ? curl_easy_strerror(err)
                      : status == 200 ? "the answer holds no embedding"
                                      : arena_printf(s->arena, "HTTP %ld", status);
        }
        gate_release(s->shm, &s->hold);
        /* An answer, even a refusal (400, 404), says the replica serves (as drive.c's
         * attempts report it); no answer, a 5xx or a 429 is a failure of it. A
         * half-open trial it took is settled either way. */
        int replica_failed = rc != 0 && (status == 0 || status >= 500 || status == 429);
        if (posted && !cut)
            serving_report(s, rep, !replica_failed, why);
        else
            serving_unused(s, rep);     /* nothing was asked of it, or not for its own time */
        /* Any 200 was paid for upstream: metered, an embedding in it or not. */
        if (status == 200)
            embed_account(r, s, tokens, len, payer);
        /* Past the deadline, or an answer (a 200, a refusal: the input is too
         * long for the embedder, the model is unknown) that another replica of
         * the same model would give again: final. No answer, a 5xx or a 429
         * is the replica's: the next one is tried. */
        if (rc == 0 || left <= 0 || cut || (posted && !replica_failed))
            break;
        s->retries++;
        if (route_next_replica(s) != 0 || !s->replica)
            break;                  /* a full replica is not waited for: the caller's request is */
    }
    gate_release(s->shm, &s->hold);
    buf_free(&resp);
    if (rc != 0)
        warn_once(r, model, why);
    return rc;
}
