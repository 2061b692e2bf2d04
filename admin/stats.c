/* stats.c: `sluicectl stats`: what the responder pool shares right now (R-LB-1, R-HC-5, R-HC-2, R-LB-2). */
#include "stats.h"

#include "shm.h"
#include "util.h"

#include <signal.h>

static const char *circuit_name(int c)
{
    return c == CIRCUIT_OPEN ? "open" : c == CIRCUIT_HALF_OPEN ? "half_open" : "closed";
}

struct json_object *stats_json(sqlite3 *db, const char *state_path)
{
    struct shm shm;
    if (shm_attach(&shm, state_path) != 0)
        return NULL;
    struct json_object *out = json_object_new_object();
    struct json_object *procs = json_object_new_array();
    for (int i = 0; i < SHM_MAX_PROCS; i++) {
        int pid = atomic_load(&shm.r->procs[i].pid);
        if (!pid)
            continue;
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "row", json_object_new_int(i));
        json_object_object_add(p, "pid", json_object_new_int(pid));
        json_object_object_add(p, "alive", json_object_new_boolean(kill(pid, 0) == 0));
        json_object_array_add(procs, p);
    }
    json_object_object_add(out, "processes", procs);
    struct json_object *reps = json_object_new_array();
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db, "SELECT r.id, e.name, r.url FROM replicas r JOIN endpoints e ON e.id = r.endpoint_id"
                           " ORDER BY r.id", -1, &st, NULL);
    int64_t now = now_ms();
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        int slot = shm_replica_slot(&shm, id);
        struct json_object *r = json_object_new_object();
        json_object_object_add(r, "replica_id", json_object_new_int64(id));
        json_object_object_add(r, "endpoint", json_object_new_string((const char *)sqlite3_column_text(st, 1)));
        json_object_object_add(r, "url", json_object_new_string((const char *)sqlite3_column_text(st, 2)));
        if (slot >= 0) {
            const struct shm_replica *s = &shm.r->replicas[slot];
            int64_t ban = atomic_load(&s->ban_until_ms) - now;
            json_object_object_add(r, "active", json_object_new_int(shm_active_sum(&shm, slot)));
            json_object_object_add(r, "circuit", json_object_new_string(circuit_name(atomic_load(&s->circuit))));
            json_object_object_add(r, "failures", json_object_new_int(atomic_load(&s->failures)));
            json_object_object_add(r, "ban_remaining_ms", json_object_new_int64(ban > 0 ? ban : 0));
            /* R-HC-2 sluice-healthd's word, R-WAKE-1 wakes, R-LB-2 engine metrics. */
            static const char *const removed[] = {"unknown", "removed", "in_service", "recovered_by_request"};
            int rm = atomic_load(&s->removed);
            json_object_object_add(r, "health", json_object_new_string(rm >= 0 && rm <= 3 ? removed[rm] : "?"));
            json_object_object_add(r, "awake", json_object_new_boolean(atomic_load(&s->awake) != 0));
            int64_t at = atomic_load(&s->metrics_ms);
            if (at > 0) {
                json_object_object_add(r, "waiting", json_object_new_int(atomic_load(&s->waiting)));
                json_object_object_add(r, "running", json_object_new_int(atomic_load(&s->running)));
                json_object_object_add(r, "kv_cache_permille", json_object_new_int(atomic_load(&s->kv_permille)));
                json_object_object_add(r, "metrics_age_ms", json_object_new_int64(now - at));
            }
        }
        json_object_array_add(reps, r);
    }
    sqlite3_finalize(st);
    json_object_object_add(out, "replicas", reps);
    /* R-AFF-6: sluice_session_affinity_total{outcome,level} until /metrics exists. */
    static const char *outcomes[] = {"hit", "miss", "overload", "stale"};
    static const char *levels[] = {"header", "prompt_cache_key", "user", "l2", "l1"};
    struct json_object *aff = json_object_new_array();
    for (int o = 0; o < SHM_AFF_OUTCOMES; o++)
        for (int l = 0; l < SHM_AFF_LEVELS; l++) {
            uint64_t v = atomic_load(&shm.r->affinity.outcomes[o][l]);
            if (!v || (o == 1 && l > 0))
                continue;
            struct json_object *row = json_object_new_object();
            json_object_object_add(row, "outcome", json_object_new_string(outcomes[o]));
            json_object_object_add(row, "level", json_object_new_string(o == 1 ? "none" : levels[l]));
            json_object_object_add(row, "count", json_object_new_int64((int64_t)v));
            json_object_array_add(aff, row);
        }
    json_object_object_add(out, "session_affinity", aff);
    /* R-AUTO-6: sluice_auto_routing_total{outcome,strategy}. */
    static const char *auto_outcomes[] = {"routed", "degraded", "failed", "no_candidates"};
    static const char *strategies[] = {"balanced", "cost", "latency", "semantic"};
    struct json_object *au = json_object_new_array();
    for (int o = 0; o < SHM_AUTO_OUTCOMES; o++)
        for (int sg = 0; sg < SHM_AUTO_STRATEGIES; sg++) {
            uint64_t v = atomic_load(&shm.r->routing.auto_outcomes[o][sg]);
            if (!v)
                continue;
            struct json_object *row = json_object_new_object();
            json_object_object_add(row, "outcome", json_object_new_string(auto_outcomes[o]));
            json_object_object_add(row, "strategy", json_object_new_string(strategies[sg]));
            json_object_object_add(row, "count", json_object_new_int64((int64_t)v));
            json_object_array_add(au, row);
        }
    json_object_object_add(out, "auto_routing", au);
    return out;
}
