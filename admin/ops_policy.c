/* ops_policy.c: model policies (SPEC §0, R-AUTO-2..4, R-SEM-2) and per-key routing
 * policies (R-AUTO-1). */
#include "ops_internal.h"

#include <stdio.h>
#include <string.h>

#define DESCRIPTION_MAX 8192
#define MICRO_MAX 1000000000000000LL  /* 10^9 price units per 1k tokens, in millionths */

static const char *const purposes[] = {"chat", "completion", "embedding", NULL};
static const char *const strategies[] = {"balanced", "cost", "latency", "semantic", NULL};
static const char *const cache_modes[] = {"off", "exact", "semantic", NULL};   /* R-CACHE-2 */

#define POLICY_SELECT \
    "SELECT model, purpose, routing_enabled, quality_score, price_input_per_1k," \
    " price_output_per_1k, supports_tools, supports_vision, max_context, max_output," \
    " description, updated_at, shrink_max_tokens, cache, cache_ttl_s, default_greedy," \
    " clamp_max_tokens, semantic_threshold, tenants, labels" \
    " FROM model_policies"

static struct json_object *policy_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_text(o, "model", st, 0);
    ops_json_text(o, "purpose", st, 1);
    ops_json_bool(o, "routing_enabled", st, 2);
    ops_json_real(o, "quality_score", st, 3, 3);
    ops_json_real(o, "price_input_per_1k", st, 4, 6);
    ops_json_real(o, "price_output_per_1k", st, 5, 6);
    ops_json_bool(o, "supports_tools", st, 6);
    ops_json_bool(o, "supports_vision", st, 7);
    ops_json_int(o, "max_context", st, 8);
    ops_json_int(o, "max_output", st, 9);
    ops_json_text(o, "description", st, 10);
    ops_json_bool(o, "shrink_max_tokens", st, 12);        /* R-KEY-6 */
    ops_json_text(o, "cache", st, 13);                    /* R-CACHE-1..2 */
    ops_json_int(o, "cache_ttl_s", st, 14);
    ops_json_bool(o, "default_greedy", st, 15);
    ops_json_bool(o, "clamp_max_tokens", st, 16);         /* R-GUARD-1 */
    ops_json_real(o, "semantic_threshold", st, 17, 3);    /* R-CACHE-4 */
    ops_json_text(o, "tenants", st, 18);                  /* R-SEM-1 */
    ops_json_text(o, "labels", st, 19);
    ops_json_int(o, "updated_at", st, 11);
    return o;
}

static int policy_check(const struct ops_policy_opts *o, struct ops_error *err)
{
    if (o->purpose && *o->purpose && ops_check_enum("purpose", o->purpose, purposes, err) != 0)
        return -1;
    if (o->description && *o->description &&
        ops_check_text("description", o->description, DESCRIPTION_MAX, err) != 0)
        return -1;
    if (o->cache && ops_check_enum("cache", o->cache, cache_modes, err) != 0)
        return -1;
    if ((o->tenants && *o->tenants && ops_check_text("tenants", o->tenants, 4096, err) != 0) ||
        (o->labels && *o->labels && ops_check_labels("labels", o->labels, err) != 0))
        return -1;
    if (o->semantic_threshold_milli.set && o->semantic_threshold_milli.v != -1 &&
        (o->semantic_threshold_milli.v < 1 || o->semantic_threshold_milli.v > 1000))
    {
        ops_fail(err, OPS_ERR_INVALID, "semantic_threshold",
                 "semantic_threshold must be above 0 and at most 1 (none: the setting's)");
        return -1;
    }
    /* Negative numbers clear a field (set it back to "unknown"). */
    if (ops_check_range("routing_enabled", o->routing_enabled, 0, 1, err) != 0 ||
        ops_check_range("supports_tools", o->supports_tools, 0, 1, err) != 0 ||
        ops_check_range("supports_vision", o->supports_vision, 0, 1, err) != 0 ||
        ops_check_range("shrink_max_tokens", o->shrink_max_tokens, 0, 1, err) != 0 ||
        ops_check_range("default_greedy", o->default_greedy, 0, 1, err) != 0 ||
        ops_check_range("clamp_max_tokens", o->clamp_max_tokens, 0, 1, err) != 0 ||

        ops_check_range("cache_ttl_s", o->cache_ttl_s, 1, OPS_CACHE_TTL_MAX, err) != 0 ||
        ops_check_range("quality_score", o->quality_milli, -1, 100000, err) != 0 ||
        ops_check_range("price_input_per_1k", o->price_input_micro, -1, MICRO_MAX, err) != 0 ||
        ops_check_range("price_output_per_1k", o->price_output_micro, -1, MICRO_MAX, err) != 0 ||
        ops_check_range("max_context", o->max_context, -1, 100000000, err) != 0 ||
        ops_check_range("max_output", o->max_output, -1, 100000000, err) != 0)
        return -1;
    return 0;
}

/* R-SEM-1: every name of a comma-separated allow-list (spaces around a name are
 * not part of it, as lib/snapshot.c reads it) is a tenant. */
static int policy_tenants_exist(struct sdb *db, const char *list, struct ops_error *err)
{
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n > 0 && *p == ' ')
            p++, n--;
        while (n > 0 && p[n - 1] == ' ')
            n--;
        char name[OPS_NAME_MAX + 1];
        int64_t id;
        if (n == 0 || n > OPS_NAME_MAX) {
            ops_fail(err, OPS_ERR_INVALID, "tenants", "tenants is a comma-separated list of tenant names");
            return -1;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        if (ops_tenant_id(db, name, &id, err) != 0) {
            snprintf(err->param, sizeof err->param, "tenants");
            return -1;
        }
        if (!end)
            return 0;
        p = end + 1;
    }
}

struct json_object *ops_policy_get(struct sdb *db, const char *model, struct ops_error *err)
{
    if (ops_check_name("model", model, err) != 0)
        return NULL;
    struct json_object *res = ops_query_one(db, err, policy_row, "model policy",
                                            POLICY_SELECT " WHERE model = ?1", "t", model);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "model", "no policy for model %s", model);
    return res;
}

struct json_object *ops_policy_set(struct sdb *db, const char *model, const struct ops_policy_opts *o,
                                   struct ops_error *err)
{
    if (ops_check_name("model", model, err) != 0 || policy_check(o, err) != 0 ||
        ops_begin(db, err) != 0)
        return NULL;
    struct json_object *before = ops_policy_get(db, model, err), *res = NULL;
    if (!before && err->kind != OPS_ERR_NOT_FOUND)
        goto out;
    ops_error_clear(err);
    if (o->tenants && *o->tenants && policy_tenants_exist(db, o->tenants, err) != 0)
        goto out;
    /* ?N < 0 clears a number; '' clears a text; NULL keeps. */
    if (ops_run(db, err, "INSERT INTO model_policies (model) VALUES (?1)"
                " ON CONFLICT (model) DO NOTHING", "t", model) != 0 ||
        ops_run(db, err,
                "UPDATE model_policies SET"
                " purpose = CASE WHEN ?2 IS NULL THEN purpose WHEN ?2 = '' THEN NULL ELSE ?2 END,"
                " routing_enabled = COALESCE(?3, routing_enabled),"
                " quality_score = CASE WHEN ?4 IS NULL THEN quality_score WHEN ?4 < 0 THEN NULL"
                "   ELSE ?4 / 1000.0 END,"
                " price_input_per_1k = CASE WHEN ?5 IS NULL THEN price_input_per_1k"
                "   WHEN ?5 < 0 THEN NULL ELSE ?5 / 1000000.0 END,"
                " price_output_per_1k = CASE WHEN ?6 IS NULL THEN price_output_per_1k"
                "   WHEN ?6 < 0 THEN NULL ELSE ?6 / 1000000.0 END,"
                " supports_tools = COALESCE(?7, supports_tools),"
                " supports_vision = COALESCE(?8, supports_vision),"
                " max_context = CASE WHEN ?9 IS NULL THEN max_context WHEN ?9 < 0 THEN NULL ELSE ?9 END,"
                " max_output = CASE WHEN ?10 IS NULL THEN max_output WHEN ?10 < 0 THEN NULL"
                "   ELSE ?10 END,"
                " description = CASE WHEN ?11 IS NULL THEN description WHEN ?11 = '' THEN NULL"
                "   ELSE ?11 END,"
                " shrink_max_tokens = COALESCE(?12, shrink_max_tokens),"
                " cache = COALESCE(?13, cache), cache_ttl_s = COALESCE(?14, cache_ttl_s),"
                " default_greedy = COALESCE(?15, default_greedy),"
                " clamp_max_tokens = COALESCE(?16, clamp_max_tokens),"
                " semantic_threshold = CASE WHEN ?17 IS NULL THEN semantic_threshold WHEN ?17 < 0 THEN NULL"
                "   ELSE ?17 / 1000.0 END,"
                " tenants = CASE WHEN ?18 IS NULL THEN tenants WHEN ?18 = '' THEN NULL ELSE ?18 END,"
                " labels = CASE WHEN ?19 IS NULL THEN labels WHEN ?19 = '' THEN NULL ELSE ?19 END,"
                " updated_at = CAST(strftime('%s','now') AS INTEGER) WHERE model = ?1",
                "ttoooooooototoooott", model, o->purpose, o->routing_enabled,
                o->quality_milli, o->price_input_micro, o->price_output_micro, o->supports_tools,
                o->supports_vision, o->max_context, o->max_output, o->description,
                o->shrink_max_tokens, o->cache, o->cache_ttl_s, o->default_greedy,
                o->clamp_max_tokens, o->semantic_threshold_milli, o->tenants, o->labels) != 0)
        goto out;
    res = ops_audited(db, err, before ? "update" : "create", "model_policy", before,
                         ops_policy_get(db, model, err));
out:
    json_object_put(before);
    return ops_finish(db, res, err);
}

struct json_object *ops_policy_rm(struct sdb *db, const char *model, struct ops_error *err)
{
    if (ops_check_name("model", model, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = ops_policy_get(db, model, err);
    if (res && (ops_run(db, err, "DELETE FROM model_policies WHERE model = ?1", "t", model) != 0 ||
                ops_audit(db, err, "delete", "model_policy", res, NULL) != 0)) {
        json_object_put(res);
        res = NULL;
    }
    if (res)
        json_object_object_add(res, "deleted", json_object_new_boolean(1));
    return ops_finish(db, res, err);
}

struct json_object *ops_policy_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    return ops_query_page(db, err, "policies", policy_row, l, POLICY_SELECT " ORDER BY model", "");
}

/* ---- per-key routing policy (R-AUTO-1) ------------------------------------------------ */

static struct json_object *key_policy_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_int(o, "key_id", st, 0);
    ops_json_int(o, "tenant_id", st, 1);
    json_object_object_add(o, "auto_routing_enabled", sdb_column_type(st, 2) == SDB_NULL
                               ? NULL : json_object_new_boolean(sdb_column_int(st, 2) != 0));
    ops_json_text(o, "auto_routing_strategy", st, 3);
    return o;
}

struct json_object *ops_key_policy_get(struct sdb *db, int64_t key_id, struct ops_error *err)
{
    struct json_object *res = ops_query_one(
        db, err, key_policy_row, "key",
        "SELECT k.id, k.tenant_id, p.auto_routing_enabled, p.auto_routing_strategy"
        " FROM api_keys k LEFT JOIN key_routing_policies p ON p.key_id = k.id WHERE k.id = ?1",
        "i", key_id);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "key not found: %lld", (long long)key_id);
    return res;
}

struct json_object *ops_key_policy_set(struct sdb *db, int64_t key_id, struct ops_i64 enabled,
                                       const char *strategy, struct ops_error *err)
{
    if (enabled.set && enabled.v > 1) {
        ops_fail(err, OPS_ERR_INVALID, "auto_routing_enabled", "auto_routing_enabled must be a boolean");
        return NULL;
    }
    if (strategy && *strategy &&
        ops_check_enum("auto_routing_strategy", strategy, strategies, err) != 0)
        return NULL;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *before = ops_key_policy_get(db, key_id, err), *res = NULL;
    if (!before)
        goto out;
    if (ops_run(db, err, "INSERT INTO key_routing_policies (key_id) VALUES (?1)"
                " ON CONFLICT (key_id) DO NOTHING", "i", key_id) != 0 ||
        ops_run(db, err, "UPDATE key_routing_policies SET"
                " auto_routing_enabled = CASE WHEN ?1 IS NULL THEN auto_routing_enabled"
                "   WHEN ?1 < 0 THEN NULL ELSE ?1 END,"
                " auto_routing_strategy = CASE WHEN ?2 IS NULL THEN auto_routing_strategy"
                "   WHEN ?2 = '' THEN NULL ELSE ?2 END,"
                " updated_at = CAST(strftime('%s','now') AS INTEGER) WHERE key_id = ?3",
                "oti", enabled, strategy, key_id) != 0)
        goto out;
    res = ops_key_policy_get(db, key_id, err);
    if (res && ops_audit(db, err, "set_routing_policy", "key", before, res) != 0) {
        json_object_put(res);
        res = NULL;
    }
out:
    json_object_put(before);
    return ops_finish(db, res, err);
}
