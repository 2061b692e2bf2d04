/* stats.h: the live pool-wide state (active requests, bans, circuits, per-model and
 * per-endpoint series) as JSON. */
#ifndef SLUICE_STATS_H
#define SLUICE_STATS_H

#include <json-c/json.h>
#include "sdb.h"

/* Reads the shared state file at state_path; names replicas from db.
 * Returns a new object, or NULL when the file cannot be mapped. */
struct json_object *stats_json(struct sdb *db, const char *state_path);

/* GET /api/v1/live: per model and per endpoint the requests, errors, their rates per
 * second, p50/p95 latency and TTFT of the last `minutes` (1..15; the histograms' live
 * ring) and per replica active / queue / KV cache / circuit now. tenant_id 0: the whole
 * pool; else that tenant's endpoints and replicas and the models only its routes route. */
struct json_object *stats_live_json(struct sdb *db, const char *state_path, int64_t tenant_id, int minutes);

#endif
