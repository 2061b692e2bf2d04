/* autoroute.h: model "auto" (SPEC §6) as a pure function: candidates filtered by
 * purpose and capabilities, ordered by the strategy, deduplicated by endpoint,
 * at most three. */
#ifndef SLUICE_AUTOROUTE_H
#define SLUICE_AUTOROUTE_H

#include "errors.h"

#include <stdint.h>

enum auto_purpose { PURPOSE_UNSET, PURPOSE_CHAT, PURPOSE_COMPLETION, PURPOSE_EMBEDDING };
enum auto_strategy { AUTO_BALANCED, AUTO_COST, AUTO_LATENCY, AUTO_SEMANTIC };

#define AUTO_MAX_TRIES 3

struct auto_cand {
    const char *model;
    int64_t endpoint_id;          /* the endpoint its best route serves from */
    enum auto_purpose purpose;
    int routing_enabled;
    int available;                /* has an active route with a healthy replica */
    int supports_tools, supports_vision;
    int64_t max_context, max_output;   /* 0 = unknown */
    double quality;               /* 0..100, < 0 unknown */
    double price_in, price_out;   /* per 1k tokens, < 0 unknown */
    double ttft_ms;               /* observed EWMA, < 0 unknown */
};

struct auto_request {
    enum auto_purpose purpose;
    int has_tools, has_images;
    int64_t prompt_tokens, max_tokens;   /* estimates; max_tokens 0 = not given */
};

struct auto_weights {
    double quality, price, latency;      /* balanced strategy */
};

struct auto_result {
    int order[AUTO_MAX_TRIES];    /* indexes into the candidates, best first */
    int n;
    int purpose_fallback;         /* only unlabelled models matched (X-Routing-Purpose-Fallback) */
    enum error_code error;        /* ERR_NONE, ERR_NO_AUTO_CANDIDATES, ERR_NO_AUTO_CANDIDATES_FOR_PURPOSE */
};

enum auto_strategy auto_strategy_parse(const char *s, enum auto_strategy dflt);
const char *auto_strategy_name(enum auto_strategy s);
enum auto_purpose auto_purpose_parse(const char *s);

/* R-AUTO-2/3: the indexes (into idx, room for n) of the candidates that may serve,
 * purpose and capabilities checked; returns their count, with out's error and
 * purpose_fallback set (out->n = 0). The semantic strategy orders these itself. */
int auto_eligible(const struct auto_cand *c, int n, const struct auto_request *rq, int *idx,
                  struct auto_result *out);

void auto_choose(const struct auto_cand *c, int n, const struct auto_request *rq, enum auto_strategy s,
                 const struct auto_weights *w, struct auto_result *out);

/* R-AUTO-4: the latency EWMA update (alpha in 0..1). */
double auto_ewma(double old, double sample, double alpha);

#endif
