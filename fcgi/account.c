/* account.c: turn a finished request into a usage record (DESIGN.md stage 7),
 * with the answer to cache when it is one (R-CACHE-3). */
#include "account.h"

#include "arena.h"
#include "cache.h"
#include "cache_semantic.h"
#include "errors.h"
#include "usage_writer.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

int64_t account_billable_tokens(const struct request *r, int64_t *prompt, int64_t *completion)
{
    *prompt = r->usage.prompt_tokens;
    *completion = r->usage.completion_tokens;
    if (r->usage.found && r->usage_partial) {
        /* A stream that ended before its final usage (a client that left, an
         * upstream that broke after message_start): at least what was relayed. */
        if (*prompt == 0)
            *prompt = r->prompt_estimate;
        if (*completion < r->content_chunks)
            *completion = r->content_chunks;
        return *prompt + *completion;
    }
    if (r->usage.found)
        return *prompt + *completion;
    /* R-SSE-3: a client that left is charged what was produced; R-USE-1: an
     * upstream that sent no usage (an old server, a stream it cut) is charged
     * what was relayed. Both are marked usage_estimated. */
    if ((r->client_gone && r->data_sent) || (r->data_sent && r->content_chunks > 0)) {
        *prompt = r->prompt_estimate;
        *completion = r->content_chunks;
        return *prompt + *completion;
    }
    int ok = r->status >= 200 && r->status < 300 && !r->error_code;
    return ok ? -1 : 0;
}

int account_status(const struct request *r)
{
    if (r->client_gone)
        return 499;
    if (r->error_code && strcmp(r->error_code, errors_get(ERR_SHUTTING_DOWN)->code) == 0)
        return 503;
    return r->status;
}

void account_charged_tokens(const struct request *r, int status, int64_t *prompt, int64_t *completion)
{
    account_billable_tokens(r, prompt, completion);
    if (!req_kind_spends_tokens(r->kind) ||
        (status >= 400 && !r->client_gone && !r->data_sent && !r->output_blocked) ||
        *prompt < 0 || *completion < 0)
        *prompt = *completion = 0;
}

void account_record(struct request *r)
{
    /* Requests that never authenticated belong to nobody and are not billed. */
    if (r->caller.tenant_id == 0)
        return;
    /* A models listing has no usage event (its call was written at admission). */
    if (r->kind == REQ_MODELS)
        return;
    struct usage_record *u = xcalloc(1, sizeof *u);
    if (r->quota_shared && r->key && r->quota_month_tokens != r->month_tokens_reserved) {
        /* R-KEY-5: the settlement of what admission reserved (admit.c wrote the call). */
        u->quota_key_id = r->key->id;
        str_copy(u->quota_day, sizeof u->quota_day, r->quota_day);
        str_copy(u->quota_month, sizeof u->quota_month, r->month_period);
        u->quota_tokens = r->quota_month_tokens - r->month_tokens_reserved;
    }
    u->ts_ms = r->admitted_ms ? r->admitted_ms : r->start_ms;
    str_copy(u->request_id, sizeof u->request_id, r->request_id);
    /* R-USE-5: the tenant the request ran for (the caller's, or the one an
     * operator acted for); a failure before routing keeps the caller's context. */
    u->tenant_id = r->caller.tenant_id;
    u->user_id = r->caller.user_id;
    u->key_id = r->caller.key_id;
    u->endpoint_id = r->ep ? r->ep->id : 0;
    u->replica_id = r->replica ? r->replica->id : 0;
    u->route_id = r->route ? r->route->id : 0;
    str_copy(u->model, sizeof u->model, r->model ? r->model : "");
    str_copy(u->routed_model, sizeof u->routed_model, r->routed_model ? r->routed_model : "");
    str_copy(u->path, sizeof u->path, r->path ? r->path : "");
    account_billable_tokens(r, &u->prompt_tokens, &u->completion_tokens);
    if (r->usage.found) {
        u->cache_read_tokens = r->usage.cache_read_tokens;
        u->cache_creation_tokens = r->usage.cache_creation_tokens;
        u->reasoning_tokens = r->usage.reasoning_tokens;
    }
    /* R-ANT-7, R-API-8: a token count or a stored-response call spends a call,
     * never tokens (a count's input_tokens is an answer, not a use). */
    if (!req_kind_spends_tokens(r->kind))
        u->prompt_tokens = u->completion_tokens = u->cache_read_tokens = u->cache_creation_tokens =
            u->reasoning_tokens = 0;
    u->latency_ms = mono_ms() - r->start_mono;
    u->ttft_ms = r->ttft_ms;
    u->status = account_status(r);   /* R-DEP-6: a stream the shutdown ended is a 503 */
    u->retries = r->retries;
    u->queue_ms = r->queue_ms;
    u->stream = r->stream;
    str_copy(u->error_code, sizeof u->error_code, r->error_code ? r->error_code : "");
    str_copy(u->finish_reason, sizeof u->finish_reason, r->finish_reason);
    const char *rule = r->obs.content_block ? r->obs.content_block : r->obs.content_flag;
    str_copy(u->content_rule, sizeof u->content_rule, rule ? rule : "");
    if (u->status >= 400) {
        /* R-USE-4: failures carry tokens only when the upstream produced some
         * (a client that left, a stream ended by the shutdown, an answer an
         * output rule refused, R-GUARD-3). */
        if (!r->client_gone && !r->data_sent && !r->output_blocked)
            u->prompt_tokens = u->completion_tokens = u->cache_read_tokens = u->cache_creation_tokens =
                u->reasoning_tokens = 0;
    }
    u->usage_estimated = (!r->usage.found || r->usage_partial) && (u->prompt_tokens || u->completion_tokens);
    /* R-CACHE-2/3: a hit is a cached event with the stored tokens; a complete
     * answer of a cacheable miss is stored with its event. */
    u->cached = r->cache_hit;
    /* Issue 16: the outcomes the response headers reported, for the Requests view. */
    if (r->affinity_header[0])
        str_copy(u->affinity, sizeof u->affinity, strncmp(r->affinity_header, "hit", 3) == 0 ? "hit" : "miss");
    if (r->obs.cache)
        str_copy(u->cache_outcome, sizeof u->cache_outcome, strncmp(r->obs.cache, "hit", 3) == 0 ? "hit" : "miss");
    if (r->cache_hit) {
        str_copy(u->cache_hit_key, sizeof u->cache_hit_key, r->cache_key);
        u->sem_audit = cache_semantic_audit_take(r);    /* R-CACHE-4: a sampled semantic hit */
    } else
        u->cache = cache_entry_take(r);
    if (r->month_tokens_delta && r->key) {
        u->settle_key_id = r->key->id;
        str_copy(u->settle_period, sizeof u->settle_period, r->month_period);
        u->settle_tokens = r->month_tokens_delta;
    }
    usage_writer_enqueue(u);
}
