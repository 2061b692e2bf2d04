/* fit.c: the context pre-check (R-GUARD-2). */
#include "fit.h"

#include "buf.h"
#include "estimate.h"
#include "gate.h"
#include "log.h"
#include "reply.h"
#include "util.h"

#include <stdatomic.h>
#include <string.h>

#define TOKENIZE_MAX_BYTES (4 << 20)   /* vLLM lists the token ids too: 100k tokens is ~700 KB */

/* The policy of the model being served: the public name the plan is trying
 * (for "auto", the model it chose), not the name the client sent. */
static const char *fit_model(const struct request *r)
{
    if (r->plan.n_models > 0 && r->plan.pos >= 0 && r->plan.pos < r->plan.n_models && r->plan.models[r->plan.pos])
        return r->plan.models[r->plan.pos];
    return r->model;
}

/* Refusal after route: the place route may hold goes back before the reply. */
static int fit_refuse(struct request *r, enum error_code code, const char *msg, const char *param)
{
    gate_release(r->shm, &r->hold);
    reply_error(r, code, msg, param);
    return -1;
}

static size_t fit_write(char *p, size_t size, size_t n, void *arg)
{
    return buf_append(arg, p, size * n) == 0 ? size * n : 0;   /* past the cap: the transfer fails */
}

/* R-GUARD-2: the exact count of a vLLM replica (POST /tokenize, the chat
 * template applied to the messages), or -1: not vLLM, not an OpenAI chat or
 * completions body, or the call failed or took longer than
 * guard.tokenize_timeout_ms. A fresh handle: the worker's is the attempt's,
 * and its connection must not be spent on a call that may time out. */
static int64_t fit_tokenize(struct request *r)
{
    const struct snap_replica *rep = r->replica;
    struct json_object *text = NULL;
    const char *field = r->kind == REQ_CHAT ? "messages" : r->kind == REQ_COMPLETIONS ? "prompt" : NULL;
    if (!rep || !rep->engine || strcmp(rep->engine, "vllm") != 0 || !r->ep || r->ep->protocol != PROTO_OPENAI ||
        !field || !json_object_object_get_ex(r->json, field, &text))
        return -1;
    struct json_object *q = json_object_new_object();
    json_object_object_add(q, "model", json_object_new_string(r->routed_model ? r->routed_model : r->model));
    json_object_object_add(q, field, json_object_get(text));
    const char *body = arena_strdup(r->arena, json_object_to_json_string_ext(q, JSON_C_TO_STRING_PLAIN));
    json_object_put(q);

    CURL *h = curl_easy_init();
    if (!h)
        return -1;
    struct buf out;
    buf_init(&out, TOKENIZE_MAX_BYTES);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (r->ep->upstream_auth && *r->ep->upstream_auth)
        hdr = curl_slist_append(hdr, arena_printf(r->arena, "Authorization: Bearer %s", r->ep->upstream_auth));
    curl_easy_setopt(h, CURLOPT_URL, arena_printf(r->arena, "%s/tokenize", rep->url));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)r->conf->tokenize_timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fit_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
    long status = 0;
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdr);
    int64_t count = -1;
    struct json_object *ans = rc == CURLE_OK && status == 200 ? json_tokener_parse(out.len ? out.data : "") : NULL, *c;
    if (ans && json_object_object_get_ex(ans, "count", &c) && json_object_is_type(c, json_type_int) &&
        json_object_get_int64(c) >= 0)
        count = json_object_get_int64(c);
    json_object_put(ans);
    buf_free(&out);
    if (count < 0) {
        /* one line a minute per process: a replica without /tokenize would say it on every request */
        static _Atomic int64_t logged_ms;
        int64_t now = mono_ms(), last = atomic_load(&logged_ms);
        if (now - last >= 60000 && atomic_compare_exchange_strong(&logged_ms, &last, now))
            log_warn("request %s: replica %lld (%s): /tokenize gave no count (%s, HTTP %ld); the context "
                     "pre-check keeps its estimate", r->request_id, (long long)rep->id, rep->url,
                     rc == CURLE_OK ? "answered" : curl_easy_strerror(rc), status);
    }
    return count;
}

int fit_check(struct request *r)
{
    const char *model = fit_model(r);
    const struct snap_policy *p = model ? snapshot_policy(r->snap, model) : NULL;
    if (!p)
        return 0;
    /* R-GUARD-1 for "auto": the model it routed to bounds max_tokens too
     * (guard.c could only check the client's name, which has no policy). */
    if (p->max_output > 0 && r->max_tokens > p->max_output)
        return fit_refuse(r, ERR_INVALID_VALUE,
                          arena_printf(r->arena, "max_tokens is %lld; the most model %s allows is %lld",
                                       (long long)r->max_tokens, model,
                                       (long long)p->max_output), "max_tokens");
    /* R-GUARD-2: the prompt (the calibrated estimate of what the model reads,
     * estimate.c) plus what the answer may use; without max_tokens only the
     * prompt must fit. The reservation keeps its own, byte-based estimate
     * (r->prompt_estimate): it must never be low, this one must be close. */
    if (p->max_context <= 0)
        return 0;
    int64_t prompt = estimate_request(r->json);
    /* within guard.tokenize_margin_pct of the limit either way, the replica counts exactly */
    int64_t margin = p->max_context * r->conf->tokenize_margin_pct / 100;
    int64_t need = prompt + r->max_tokens;
    if (need >= p->max_context - margin && need <= p->max_context + margin) {
        int64_t exact = fit_tokenize(r);
        r->context_counted = exact >= 0;
        if (exact >= 0)
            prompt = exact;
    }
    if (prompt + r->max_tokens > p->max_context)
        return fit_refuse(r, ERR_CONTEXT_LENGTH_EXCEEDED,
                          arena_printf(r->arena, "This model's maximum context length is %lld tokens. However, you "
                                       "requested %s%lld tokens (%lld in the messages, %lld in the completion).",
                                       (long long)p->max_context, r->context_counted ? "" : "about ",
                                       (long long)(prompt + r->max_tokens),
                                       (long long)prompt, (long long)r->max_tokens), "messages");
    return 0;
}
