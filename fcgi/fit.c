/* fit.c: the context pre-check (R-GUARD-2). */
#include "fit.h"

#include "estimate.h"
#include "gate.h"
#include "reply.h"

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
    if (prompt + r->max_tokens > p->max_context)
        return fit_refuse(r, ERR_CONTEXT_LENGTH_EXCEEDED,
                          arena_printf(r->arena, "This model's maximum context length is %lld tokens. However, you "
                                       "requested about %lld tokens (%lld in the messages, %lld in the completion).",
                                       (long long)p->max_context, (long long)(prompt + r->max_tokens),
                                       (long long)prompt, (long long)r->max_tokens), "messages");
    return 0;
}
