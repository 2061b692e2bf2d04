/* ops_cache.c: housekeeping of the answer cache (R-CACHE-3, R-CACHE-4): what
 * cache_entries holds per model (the semantic entries counted apart), clearing it by
 * model and tenant, and the semantic cache's sampled hit audit. The data plane writes
 * and evicts the rows; here they are only counted, listed and deleted. */
#include "ops_internal.h"

#include <string.h>

/* The rows one filter matches: ?1 tenant id (NULL: every tenant), ?2 public model name
 * (NULL: every model). */
#define CACHE_WHERE " WHERE (?1 IS NULL OR tenant_id = ?1) AND (?2 IS NULL OR model = ?2)"

/* expired counts the rows the data plane has not evicted yet; the time is SQLite's. */
#define CACHE_NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
#define CACHE_COUNTS \
    "COUNT(*), COALESCE(SUM(bytes), 0), COALESCE(SUM(hits), 0)," \
    " COALESCE(SUM(CASE WHEN expires_ms <= " CACHE_NOW_MS " THEN 1 ELSE 0 END), 0)," \
    " COALESCE(SUM(CASE WHEN kind = 'semantic' THEN 1 ELSE 0 END), 0)"     /* counts, on either engine */

static struct json_object *cache_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_text(o, "model", st, 0);
    ops_json_int(o, "entries", st, 1);
    ops_json_int(o, "bytes", st, 2);
    ops_json_int(o, "hits", st, 3);
    ops_json_int(o, "expired", st, 4);
    ops_json_int(o, "semantic_entries", st, 5);   /* R-CACHE-4: of entries, those with a vector */
    return o;
}

/* The filter of l: tenant (by name or id) and model. */
static int cache_filter(struct sdb *db, const struct ops_list *l, struct ops_i64 *tid,
                        const char **model, struct ops_error *err)
{
    tid->set = 0;
    *model = l ? l->model : NULL;
    if (l && ops_list_ids(db, l, tid, NULL, NULL, err) != 0)
        return -1;
    if (*model && ops_check_name("model", *model, err) != 0)
        return -1;
    return 0;
}

struct json_object *ops_cache_stats(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid;
    const char *model;
    if (cache_filter(db, l, &tid, &model, err) != 0)
        return NULL;
    struct json_object *res = ops_query_list(db, err, "models", cache_row,
                                             "SELECT model, " CACHE_COUNTS " FROM cache_entries"
                                             CACHE_WHERE " GROUP BY model ORDER BY model", "ot", tid, model);
    if (!res)
        return NULL;
    /* The totals are the models' sums. */
    int64_t sum[5] = {0, 0, 0, 0, 0};
    static const char *const names[5] = {"entries", "bytes", "hits", "expired", "semantic_entries"};
    struct json_object *models = json_object_object_get(res, "models");
    for (size_t i = 0; i < json_object_array_length(models); i++)
        for (int k = 0; k < 5; k++)
            sum[k] += json_object_get_int64(
                json_object_object_get(json_object_array_get_idx(models, i), names[k]));
    for (int k = 0; k < 5; k++)
        json_object_object_add(res, names[k], json_object_new_int64(sum[k]));
    return res;
}

struct json_object *ops_cache_clear(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid;
    const char *model;
    if (cache_filter(db, l, &tid, &model, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL, *t = NULL;
    if (tid.set && !(t = ops_tenant_get(db, tid.v, err)))
        goto out;
    if (ops_run(db, err, "DELETE FROM cache_entries" CACHE_WHERE, "ot", tid, model) != 0)
        goto out;
    /* R-ADM-5: what was cleared, and for whom; the tenant member makes it the tenant's row. */
    res = json_object_new_object();
    json_object_object_add(res, "deleted", json_object_new_int64(sdb_changes(db)));
    ops_json_str(res, "model", model);
    ops_json_str(res, "tenant", t ? json_object_get_string(json_object_object_get(t, "name")) : NULL);
    json_object_object_add(res, "tenant_id", tid.set ? json_object_new_int64(tid.v) : NULL);
    if (ops_audit(db, err, "clear", "cache", NULL, res) != 0) {
        json_object_put(res);
        res = NULL;
    }
out:
    json_object_put(t);
    return ops_finish(db, res, err);
}

/* ---- R-CACHE-4: the semantic hit audit ---------------------------------------------- */

#define HITS_DEFAULT_LIMIT 50

static struct json_object *hit_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_int(o, "ts_ms", st, 1);
    ops_json_text(o, "request_id", st, 2);
    ops_json_int(o, "tenant_id", st, 3);
    ops_json_text(o, "tenant", st, 4);
    ops_json_text(o, "model", st, 5);
    ops_json_real(o, "similarity", st, 6, 4);
    ops_json_int(o, "entry_id", st, 7);
    ops_json_text(o, "entry_key", st, 8);
    ops_json_text(o, "prompt", st, 9);
    ops_json_text(o, "matched", st, 10);
    return o;
}

struct json_object *ops_cache_hits(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid;
    const char *model;
    if (cache_filter(db, l, &tid, &model, err) != 0)
        return NULL;
    struct ops_list page = {0};
    if (l)
        page = *l;
    if (page.limit == 0)
        page.limit = HITS_DEFAULT_LIMIT;      /* newest first: an operator looks at the latest */
    return ops_query_page(db, err, "hits", hit_row, &page,
                          "SELECT h.id, h.ts_ms, h.request_id, h.tenant_id, t.name, h.model, h.similarity,"
                          " h.entry_id, h.key_hash, h.prompt, h.matched FROM semantic_hits h"
                          " LEFT JOIN tenants t ON t.id = h.tenant_id"
                          " WHERE (?1 IS NULL OR h.tenant_id = ?1) AND (?2 IS NULL OR h.model = ?2)"
                          " ORDER BY h.id DESC", "ot", tid, model);
}
