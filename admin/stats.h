/* stats.h: the live pool-wide state (active requests, bans, circuits) as JSON. */
#ifndef SLUICE_STATS_H
#define SLUICE_STATS_H

#include <json-c/json.h>
#include <sqlite3.h>

/* Reads the shared state file at state_path; names replicas from db.
 * Returns a new object, or NULL when the file cannot be mapped. */
struct json_object *stats_json(sqlite3 *db, const char *state_path);

#endif
