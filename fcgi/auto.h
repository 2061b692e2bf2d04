/* auto.h: model "auto" in the route and forward stages (SPEC §6): the plan of up
 * to three candidate models and the walk along it when one fails. */
#ifndef SLUICE_AUTO_H
#define SLUICE_AUTO_H

#include "autoroute.h"
#include "request.h"

/* The candidates of one "auto" request; arena memory of the request. */
struct auto_plan {
    const char *models[AUTO_MAX_TRIES];
    int n, pos;                   /* pos: the candidate being tried (its degradation level) */
    enum auto_strategy strategy;
    int purpose_fallback;         /* X-Routing-Purpose-Fallback: unlabeled */
};

/* R-AUTO-1: per-key policy > global settings > off. 1 when on (strategy set). */
int auto_enabled_for(const struct request *r, enum auto_strategy *strategy);

/* For a request whose model is "auto": plans the candidates and points r->model
 * at the first. Returns 0; or -1 after replying (404 when off, 503 without
 * candidates). */
int auto_plan_request(struct request *r);

/* R-AUTO-5: the next candidate (body model rewritten by the forward stage), 0;
 * or -1 when the plan is exhausted. */
int auto_next(struct request *r);

/* Outcome counters (R-AUTO-6) and the latency EWMA (R-AUTO-4), at the end. */
void auto_finish(struct request *r);

#endif
