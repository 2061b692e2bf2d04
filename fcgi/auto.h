/* auto.h: model "auto" in the route stage (SPEC §6): up to three candidate
 * models for the plan, and the outcome counters at the end. */
#ifndef SLUICE_AUTO_H
#define SLUICE_AUTO_H

#include "autoroute.h"
#include "request.h"

/* The candidates of one "auto" request; arena memory of the request. The
 * route stage copies them into the request's plan, which the driver walks. */
struct auto_plan {
    const char *models[AUTO_MAX_TRIES];
    int n;
    enum auto_strategy strategy;
    int purpose_fallback;         /* X-Routing-Purpose-Fallback: unlabeled */
};

/* R-AUTO-1: per-key policy > global settings > off. 1 when on (strategy set). */
int auto_enabled_for(const struct request *r, enum auto_strategy *strategy);

/* For a request whose model is "auto": the candidate models, best first.
 * Returns 0 with *out set; or -1 after replying (404 when off, 503 without
 * candidates). */
int auto_plan_request(struct request *r, struct auto_plan **out);

/* Outcome counters (R-AUTO-6) and the latency EWMA (R-AUTO-4), at the end. */
void auto_finish(struct request *r);

#endif
