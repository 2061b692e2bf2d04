/* record.c: sluice-healthd's database side: what to probe, and the health record,
 * audit rows and alerts it writes (R-HC-2, R-HC-4, R-WAKE-1, R-HC-7). */
#include "healthd.h"

#include "log.h"
#include "secret.h"

#include <stdarg.h>
#include <string.h>

#define ACTOR "sluice-healthd"
#define ALERT_TYPE "ENDPOINT_UNHEALTHY"

/* Runs one statement; types: 'i' int64_t, 't' const char * (NULL binds NULL). */
static int run(struct sdb *db, const char *sql, const char *types, ...)
{
    struct sdb_stmt *st;
    if (sdb_prepare(db, sql, &st) != SDB_OK) {
        log_error("healthd: %s", sdb_errmsg(db));
        return -1;
    }
    va_list ap;
    va_start(ap, types);
    for (int i = 0; types[i]; i++) {
        if (types[i] == 'i') {
            sdb_bind_int64(st, i + 1, va_arg(ap, int64_t));
        } else {
            const char *s = va_arg(ap, const char *);
            if (s)
                sdb_bind_text(st, i + 1, s, -1, SDB_TRANSIENT);
            else
                sdb_bind_null(st, i + 1);
        }
    }
    va_end(ap);
    int rc = sdb_step(st);
    if (rc != SDB_DONE && rc != SDB_ROW)
        log_error("healthd: %s", sdb_errmsg(db));
    sdb_finalize(st);
    return rc == SDB_DONE || rc == SDB_ROW ? 0 : -1;
}

static int64_t count(struct sdb *db, const char *sql)
{
    struct sdb_stmt *st;
    int64_t n = -1;
    if (sdb_prepare(db, sql, &st) != SDB_OK)
        return -1;
    if (sdb_step(st) == SDB_ROW)
        n = sdb_column_int64(st, 0);
    sdb_finalize(st);
    return n;
}

static const char *text(struct arena *a, struct sdb_stmt *st, int col)
{
    const unsigned char *t = sdb_column_text(st, col);
    return t ? arena_strdup(a, (const char *)t) : NULL;
}

/* Steps sql and hands each row to row(); at most max rows. Returns the count or -1. */
static int each(struct sdb *db, const char *sql, int max, void (*row)(void *, struct arena *, struct sdb_stmt *, int),
                void *arg, struct arena *a)
{
    struct sdb_stmt *st;
    if (sdb_prepare(db, sql, &st) != SDB_OK) {
        log_error("healthd: %s", sdb_errmsg(db));
        return -1;
    }
    int rc, n = 0;
    while ((rc = sdb_step(st)) == SDB_ROW && n < max)
        row(arg, a, st, n++);
    sdb_finalize(st);
    if (rc != SDB_ROW && rc != SDB_DONE) {
        log_error("healthd: %s", sdb_errmsg(db));
        return -1;
    }
    return n;
}

static void endpoint_row(void *arg, struct arena *a, struct sdb_stmt *st, int i)
{
    struct hd_endpoint *e = &((struct hd_endpoint *)arg)[i];
    e->id = sdb_column_int64(st, 0);
    e->tenant_id = sdb_column_int64(st, 1);
    e->name = text(a, st, 2);
    e->health_path = text(a, st, 3);
    e->protocol = text(a, st, 4);
    /* R-SEC-9: stored sealed; a credential that cannot be opened is logged and not sent. */
    char *auth = secret_open_endpoint(sdb_filename(sdb_stmt_db(st)), e->id, e->name,
                                      (const char *)sdb_column_text(st, 5));
    e->upstream_auth = auth ? arena_strdup(a, auth) : NULL;
    secret_free(auth);
    e->health_check = sdb_column_int(st, 6);
    e->failure_threshold = sdb_column_int(st, 7);
    e->start_period_seconds = sdb_column_int(st, 8);
    e->business_probe_rounds = sdb_column_int(st, 9);
    e->probe_model = text(a, st, 10);
    e->anthropic_version = text(a, st, 11);
    e->slot = -1;
}

static void replica_row(void *arg, struct arena *a, struct sdb_stmt *st, int i)
{
    struct hd_replica *r = &((struct hd_replica *)arg)[i];
    r->id = sdb_column_int64(st, 0);
    r->ep = (int)sdb_column_int64(st, 1);          /* endpoint id until record_load maps it */
    char *url = (char *)text(a, st, 2);
    size_t n = url ? strlen(url) : 0;
    while (n > 0 && url[n - 1] == '/')
        url[--n] = '\0';
    r->url = url ? url : "";
    r->engine = text(a, st, 3);
    r->state = text(a, st, 4);
    r->healthy = sdb_column_int(st, 5);
    r->failures = sdb_column_int(st, 6);
    r->started_s = sdb_column_int64(st, 7);
    r->has_alert = sdb_column_int(st, 8);
    r->slot = -1;
}

static void node_row(void *arg, struct arena *a, struct sdb_stmt *st, int i)
{
    struct hd_node *nd = &((struct hd_node *)arg)[i];
    nd->id = sdb_column_int64(st, 0);
    nd->name = text(a, st, 1);
    const char *url = text(a, st, 2);
    nd->metrics_url = url && *url ? url : NULL;
    nd->has_pushed = sdb_column_type(st, 3) != SDB_NULL && sdb_column_type(st, 4) != SDB_NULL;
    nd->pushed_deci = (int)(sdb_column_double(st, 3) * 10 + (sdb_column_double(st, 3) >= 0 ? 0.5 : -0.5));
    nd->pushed_at_s = sdb_column_int64(st, 4);
    nd->slot = -1;
}

int record_load(struct sdb *db, struct arena *a, struct hd_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    if (run(db, "BEGIN", "") != 0)
        return -1;
    int rc = -1;
    int64_t ne = count(db, "SELECT count(*) FROM endpoints");
    int64_t nr = count(db, "SELECT count(*) FROM replicas");
    int64_t nn = count(db, "SELECT count(*) FROM nodes");
    if (ne < 0 || nr < 0 || nn < 0)
        goto out;
    cfg->eps = arena_alloc(a, sizeof *cfg->eps * (size_t)(ne + 1));
    cfg->reps = arena_alloc(a, sizeof *cfg->reps * (size_t)(nr + 1));
    cfg->nodes = arena_alloc(a, sizeof *cfg->nodes * (size_t)(nn + 1));
    cfg->n_eps = each(db,
                      "SELECT e.id, e.tenant_id, e.name, e.health_path, e.protocol, e.upstream_auth,"
                      " e.health_check, e.failure_threshold, e.start_period_seconds, e.business_probe_rounds,"
                      " (SELECT COALESCE(NULLIF(r.target_model, ''), r.model) FROM routes r"
                      "   WHERE r.endpoint_id = e.id AND r.status = 'active' ORDER BY r.priority, r.id LIMIT 1),"
                      " e.anthropic_version FROM endpoints e ORDER BY e.id", (int)ne, endpoint_row, cfg->eps, a);
    /* R-SEC-9: admin/ops_endpoint.c never stores an operator's credential beside a URL no
     * operator approved; a replica written so behind its back is left out (never probed
     * with the credential). */
    cfg->n_reps = each(db,
                       "SELECT r.id, r.endpoint_id, r.url, r.engine, r.state, r.healthy,"
                       " r.consecutive_failures, MAX(r.started_at, r.created_at),"
                       " EXISTS (SELECT 1 FROM alerts a WHERE a.type = '" ALERT_TYPE "'"
                       "   AND a.replica_id = r.id AND a.status = 'ACTIVE')"
                       " FROM replicas r JOIN endpoints e ON e.id = r.endpoint_id"
                       " WHERE NOT (r.approved = 0 AND e.upstream_auth IS NOT NULL"
                       "   AND e.upstream_auth_by IS NOT 'tenant')"
                       " ORDER BY r.endpoint_id, r.id", (int)nr, replica_row, cfg->reps, a);
    cfg->n_nodes = each(db, "SELECT id, name, metrics_url, gpu_temperature, temperature_at FROM nodes ORDER BY id",
                        (int)nn, node_row, cfg->nodes, a);
    if (cfg->n_eps < 0 || cfg->n_reps < 0 || cfg->n_nodes < 0)
        goto out;
    /* Endpoint ids to indexes (both lists are ordered by endpoint id). */
    int e = 0, kept = 0;
    for (int i = 0; i < cfg->n_reps; i++) {
        int64_t eid = cfg->reps[i].ep;
        while (e < cfg->n_eps && cfg->eps[e].id < eid)
            e++;
        if (e == cfg->n_eps || cfg->eps[e].id != eid)
            continue;               /* endpoint deleted in between: skip */
        cfg->reps[kept] = cfg->reps[i];
        cfg->reps[kept++].ep = e;
    }
    cfg->n_reps = kept;
    rc = 0;
out:
    run(db, "COMMIT", "");
    return rc;
}

int record_begin(struct sdb *db) { return run(db, "BEGIN IMMEDIATE", ""); }

int record_commit(struct sdb *db)
{
    if (run(db, "COMMIT", "") == 0)
        return 0;
    run(db, "ROLLBACK", "");
    return -1;
}

void record_rollback(struct sdb *db) { run(db, "ROLLBACK", ""); }

int record_failures(struct sdb *db, int64_t replica_id, int failures)
{
    /* Not a configuration change: 003_health.sql's trigger ignores this column. */
    return run(db, "UPDATE replicas SET consecutive_failures = ?1 WHERE id = ?2", "ii", (int64_t)failures,
               replica_id);
}

static int audit(struct sdb *db, const struct hd_replica *r, const struct hd_endpoint *e, const char *action,
                 int healthy_before, int healthy_after, int failures, const char *why)
{
    return run(db,
               "INSERT INTO audit_log (actor, tenant_id, action, object_type, object_id, before, after)"
               " VALUES ('" ACTOR "', ?1, ?2, 'replica', ?3,"
               " json_object('id', ?3, 'endpoint', ?4, 'url', ?5, 'healthy', json(?6), 'state', ?9),"
               " json_object('id', ?3, 'endpoint', ?4, 'url', ?5, 'healthy', json(?7),"
               "   'consecutive_failures', ?8, 'reason', ?10, 'state', ?11))",
               "itittttittt", e->tenant_id, action, r->id, e->name, r->url,
               healthy_before ? "true" : "false", healthy_after ? "true" : "false", (int64_t)failures,
               r->state, why, strcmp(action, "wake") == 0 ? "running" : r->state);
}

int record_removed(struct sdb *db, const struct hd_replica *r, const struct hd_endpoint *e, int failures,
                   const char *reason)
{
    char msg[512];
    snprintf(msg, sizeof msg, "replica %s of endpoint %s failed %d health checks in a row (%s)", r->url,
             e->name, failures, reason);
    if (run(db, "UPDATE replicas SET healthy = 0, consecutive_failures = ?1 WHERE id = ?2", "ii",
            (int64_t)failures, r->id) != 0 ||
        audit(db, r, e, "remove", 1, 0, failures, reason) != 0)
        return -1;
    /* R-HC-2: deduplicated by (type, replica) through the partial unique index. */
    return run(db,
               "INSERT INTO alerts (type, severity, tenant_id, endpoint_id, replica_id, message)"
               " VALUES ('" ALERT_TYPE "', 'ERROR', ?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
               "iiit", e->tenant_id, e->id, r->id, msg);
}

int record_resolve_alert(struct sdb *db, int64_t replica_id)
{
    return run(db,
               "UPDATE alerts SET status = 'RECOVERED', resolved_at = CAST(strftime('%s','now') AS INTEGER)"
               " WHERE type = '" ALERT_TYPE "' AND replica_id = ?1 AND status = 'ACTIVE'",
               "i", replica_id);
}

int record_recovered(struct sdb *db, const struct hd_replica *r, const struct hd_endpoint *e, const char *how)
{
    if (run(db, "UPDATE replicas SET healthy = 1, consecutive_failures = 0 WHERE id = ?1", "i", r->id) != 0 ||
        record_resolve_alert(db, r->id) != 0)
        return -1;
    return audit(db, r, e, "recover", 0, 1, 0, how);
}

int record_resolve_orphans(struct sdb *db)
{
    return run(db,
               "UPDATE alerts SET status = 'RECOVERED', resolved_at = CAST(strftime('%s','now') AS INTEGER)"
               " WHERE type = '" ALERT_TYPE "' AND status = 'ACTIVE' AND replica_id IS NOT NULL"
               " AND replica_id NOT IN (SELECT id FROM replicas)", "");
}

int record_woken(struct sdb *db, const struct hd_replica *r, const struct hd_endpoint *e)
{
    /* The state change also restarts the start grace (003_health.sql trigger). */
    if (run(db, "UPDATE replicas SET state = 'running' WHERE id = ?1 AND state = 'sleeping'", "i", r->id) != 0)
        return -1;
    return audit(db, r, e, "wake", r->healthy, r->healthy, r->failures, "woken on demand");
}

int record_temperature(struct sdb *db, int64_t node_id, int deci_celsius, int64_t at_s)
{
    return run(db, "UPDATE nodes SET gpu_temperature = ?1 / 10.0, temperature_at = ?2 WHERE id = ?3", "iii",
               (int64_t)deci_celsius, at_s, node_id);
}
