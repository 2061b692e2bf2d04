/* keystate.c: what both hot states of the keys' limits share (admit.c chooses one). */
#include "keystate.h"

#include "keylimits.h"
#include "reply.h"
#include "util.h"

int64_t keystate_want(const struct request *r)
{
    int64_t n = r->choices > 1 ? r->choices : 1;      /* <= 128, and max_tokens <= the cap: no overflow */
    return limits_estimate_tokens(r->prompt_estimate ? r->prompt_estimate : (int64_t)r->body_len / 4 + 1,
                                  r->max_tokens * n, r->conf->default_max_output * n);
}

void keystate_refuse(struct request *r, enum error_code code, int64_t limit, int64_t current, int64_t retry_ms,
                     int64_t quota_reset_s)
{
    reply_limit_refusal(r, code, NULL, limit, current, retry_ms, quota_reset_s, NULL);
}

/* R-KEY-5: a request that needs more tokens than the whole TPM bucket holds can
 * never be admitted: retrying cannot help. */
void keystate_refuse_never_fits(struct request *r, int64_t need)
{
    struct limit_info li = {0};
    li.code = ERR_TPM_EXCEEDED;
    li.limit = r->key->tpm_limit;
    li.current = need;
    li.retry_after_s = 60;
    li.reset_s = now_ms() / 1000 + 60;
    li.no_retry = 1;
    li.message = arena_printf(r->arena, "This request needs about %lld tokens, more than this API key's limit of "
                              "%lld tokens per minute: it can never be admitted. Lower max_tokens or the prompt.",
                              (long long)need, (long long)r->key->tpm_limit);
    reply_limit(r, &li);
}
