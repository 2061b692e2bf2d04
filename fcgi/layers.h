/* layers.h: the tenant and user quota layers at admission (R-KEY-6), ANDed
 * with the key's limits: tenant concurrency -> tenant monthly tokens -> user
 * requests per minute -> user daily tokens. (The endpoint and model layers are
 * the route stage's.) */
#ifndef SLUICE_LAYERS_H
#define SLUICE_LAYERS_H

#include "request.h"

/* Called by admit after the key's limits passed. 0: admitted (what the layers
 * took is in r, released by layers_finish); -1: refused with a 429 naming the
 * layer, and every layer's take already given back (the caller gives back the
 * key's). A token layer that would refuse shrinks max_tokens instead when the
 * model's policy allows and a useful answer still fits (r->shrunk_max_tokens,
 * the body sent upstream carries it). */
int layers_admit(struct request *r);

/* At the end of every request: releases the tenant's concurrency place and
 * settles the token reservations to what the usage record charges. */
void layers_finish(struct request *r);

#endif
