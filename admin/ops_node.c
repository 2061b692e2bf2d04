/* ops_node.c: GPU hosts replicas run on, and pushed temperatures (SPEC §0, R-HC-7, R-LB-6). */
#include "ops_internal.h"

#include "shm.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const node_statuses[] = {"online", "offline", "borrowed", NULL};

#define NODE_SELECT \
    "SELECT n.id, n.name, n.status, n.metrics_url, n.gpu_temperature, n.temperature_at," \
    " (SELECT COUNT(*) FROM replicas r WHERE r.node_id = n.id), n.created_at FROM nodes n"

static struct json_object *node_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "name", st, 1);
    ops_json_text(o, "status", st, 2);
    ops_json_text(o, "metrics_url", st, 3);
    ops_json_real(o, "gpu_temperature", st, 4, 1);
    ops_json_int(o, "temperature_at", st, 5);
    ops_json_int(o, "replicas", st, 6);
    ops_json_int(o, "created_at", st, 7);
    return o;
}

struct json_object *ops_node_get(struct sdb *db, int64_t id, struct ops_error *err)
{
    struct json_object *res = ops_query_one(db, err, node_row, "node", NODE_SELECT " WHERE n.id = ?1",
                                            "i", id);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "node not found: %lld", (long long)id);
    return res;
}

static int node_id(struct sdb *db, const char *name, int64_t *id, struct ops_error *err)
{
    if (ops_check_name("name", name, err) != 0)
        return -1;
    int rc = ops_query_i64(db, err, id, "SELECT id FROM nodes WHERE name = ?1", "t", name);
    if (rc == 0)
        ops_fail(err, OPS_ERR_NOT_FOUND, "name", "node not found: %s", name);
    return rc == 1 ? 0 : -1;
}

/* The metrics URL is fetched by sluice-healthd: the replica URL rules apply (R-SEC-3),
 * except that a path to the exporter's /metrics is expected. */
static int node_check(const char *status, const char *metrics_url, struct ops_error *err)
{
    if (status && ops_check_enum("status", status, node_statuses, err) != 0)
        return -1;
    if (metrics_url && *metrics_url && ops_check_replica_url(metrics_url, err) != 0) {
        snprintf(err->param, sizeof err->param, "metrics_url");
        return -1;
    }
    return 0;
}

struct json_object *ops_node_add(struct sdb *db, const char *name, const char *status,
                                 const char *metrics_url, struct ops_error *err)
{
    int64_t id;
    if (ops_check_name("name", name, err) != 0 || node_check(status, metrics_url, err) != 0 ||
        ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    int rc = ops_query_i64(db, err, &id, "SELECT id FROM nodes WHERE name = ?1", "t", name);
    if (rc == 1)
        ops_fail(err, OPS_ERR_CONFLICT, "name", "node already exists: %s", name);
    if (rc != 0)
        goto out;
    if (ops_run(db, err, "INSERT INTO nodes (name, status, metrics_url)"
                " VALUES (?1, COALESCE(?2, 'online'), NULLIF(?3, ''))", "ttt",
                name, status, metrics_url) != 0)
        goto out;
    res = ops_audited(db, err, "create", "node", NULL,
                       ops_node_get(db, (int64_t)sdb_last_insert_rowid(db), err));
out:
    return ops_finish(db, res, err);
}

struct json_object *ops_node_set(struct sdb *db, const char *name, const char *status,
                                 const char *metrics_url, struct ops_error *err)
{
    int64_t id;
    if (node_check(status, metrics_url, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL, *before = NULL;
    if (node_id(db, name, &id, err) != 0 || !(before = ops_node_get(db, id, err)))
        goto out;
    if (ops_run(db, err, "UPDATE nodes SET status = COALESCE(?1, status),"
                " metrics_url = CASE WHEN ?2 IS NULL THEN metrics_url WHEN ?2 = '' THEN NULL"
                " ELSE ?2 END WHERE id = ?3", "tti", status, metrics_url, id) != 0)
        goto out;
    res = ops_audited(db, err, "update", "node", before, ops_node_get(db, id, err));
out:
    json_object_put(before);
    return ops_finish(db, res, err);
}

struct json_object *ops_node_rm(struct sdb *db, const char *name, struct ops_error *err)
{
    int64_t id;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (node_id(db, name, &id, err) != 0 || !(res = ops_node_get(db, id, err)))
        goto out;
    /* Replicas on it keep running, without a node (ON DELETE SET NULL). */
    if (ops_run(db, err, "DELETE FROM nodes WHERE id = ?1", "i", id) != 0 ||
        ops_audit(db, err, "delete", "node", res, NULL) != 0) {
        json_object_put(res);
        res = NULL;
        goto out;
    }
    json_object_object_add(res, "deleted", json_object_new_boolean(1));
out:
    return ops_finish(db, res, err);
}

struct json_object *ops_node_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    return ops_query_page(db, err, "nodes", node_row, l, NODE_SELECT " ORDER BY n.id", "");
}

/* The reading into the pool's shared state, where the serving view reads it
 * (R-LB-6 within R-CFG-1's 2 s, not at healthd's next round). A state file
 * that does not exist yet is left alone: no responder runs to read it. */
static void node_temperature_to_state(int64_t id, int64_t deci_celsius, const char *state_path)
{
    struct shm shm;
    if (!state_path || access(state_path, R_OK | W_OK) != 0 || shm_attach(&shm, state_path) != 0)
        return;
    int slot = shm_node_slot(&shm, id);
    if (slot >= 0) {
        atomic_store(&shm.r->nodes[slot].temp_decicelsius, (int32_t)deci_celsius);
        atomic_store(&shm.r->nodes[slot].temp_ms, now_ms());
    }
    /* The mapping ends with this short-lived process (sluicectl, one CGI request). */
}

/* A reading is telemetry, not a configuration change: it is not audited (an
 * exporter pushing every few seconds would bury the real changes), and the
 * nodes_upd trigger ignores these columns so responders do not reload for it. */
struct json_object *ops_node_temperature(struct sdb *db, const char *name, int64_t deci_celsius,
                                         const char *state_path, struct ops_error *err)
{
    int64_t id;
    if (deci_celsius < -500 || deci_celsius > 2000) {
        ops_fail(err, OPS_ERR_INVALID, "gpu_temperature", "gpu_temperature must be -50 to 200");
        return NULL;
    }
    if (node_id(db, name, &id, err) != 0 ||
        ops_run(db, err, "UPDATE nodes SET gpu_temperature = ?1 / 10.0,"
                " temperature_at = CAST(strftime('%s','now') AS INTEGER) WHERE id = ?2", "ii",
                deci_celsius, id) != 0)
        return NULL;
    /* A node with a DCGM exporter is read from it (healthd ignores pushes for it too). */
    int64_t scraped = 0;
    if (ops_query_i64(db, err, &scraped, "SELECT COUNT(*) FROM nodes WHERE id = ?1 AND metrics_url IS NOT NULL"
                      " AND metrics_url != ''", "i", id) == 1 && !scraped)
        node_temperature_to_state(id, deci_celsius, state_path);
    ops_error_clear(err);
    return ops_node_get(db, id, err);
}
