/* ops_config.c: the run-time settings with a schema, GET/PUT /api/v1/system/inference-config
 * (SPEC §0 settings, R-AUTO-1, R-LB-6, R-API-5, R-RT-5). Values live as text in settings. */
#include "ops_internal.h"

#include "util.h"

#include <stdio.h>
#include <string.h>

enum config_kind { CONFIG_BOOL, CONFIG_ENUM, CONFIG_INT, CONFIG_TEXT };

/* One known setting: its name, kind, allowed values (ENUM) or range (INT), and the
 * default used while no row is stored. The data plane reads the same names. */
static const struct config_def {
    const char *name;
    enum config_kind kind;
    const char *const *values;
    int64_t min, max;
    const char *def;
} config_defs[] = {
    {"auto_routing_enabled", CONFIG_BOOL, NULL, 0, 1, "false"},
    {"auto_routing_strategy", CONFIG_ENUM,
     (const char *const[]){"balanced", "cost", "latency", "semantic", NULL}, 0, 0, "balanced"},
    {"auto_routing_weight_quality", CONFIG_INT, NULL, 0, 100, "50"},
    {"auto_routing_weight_price", CONFIG_INT, NULL, 0, 100, "30"},
    {"auto_routing_weight_latency", CONFIG_INT, NULL, 0, 100, "20"},
    {"gpu_temperature_threshold", CONFIG_INT, NULL, 0, 150, "85"},
    {"internal_fields", CONFIG_TEXT, NULL, 0, 4096, ""},
    {"response_model", CONFIG_ENUM, (const char *const[]){"client", "upstream", NULL}, 0, 0,
     "client"},
    {"usage_retention_days", CONFIG_INT, NULL, 1, 36500, "90"},
};
#define CONFIG_NDEFS (sizeof config_defs / sizeof config_defs[0])

static const struct config_def *config_find(const char *name)
{
    for (size_t i = 0; i < CONFIG_NDEFS; i++)
        if (strcmp(config_defs[i].name, name) == 0)
            return &config_defs[i];
    return NULL;
}

/* A stored text as the setting's JSON value; the default when it no longer parses. */
static struct json_object *config_value(const struct config_def *d, const char *text)
{
    int64_t v;
    if (!text)
        text = d->def;
    switch (d->kind) {
    case CONFIG_BOOL:
        return json_object_new_boolean(strcmp(text, "true") == 0 || strcmp(text, "1") == 0 ||
                                       strcmp(text, "on") == 0);
    case CONFIG_INT:
        if (parse_i64(text, d->min, d->max, &v) != 0 && parse_i64(d->def, d->min, d->max, &v) != 0)
            v = d->min;
        return json_object_new_int64(v);
    case CONFIG_ENUM:
    case CONFIG_TEXT:
        break;
    }
    return json_object_new_string(text);
}

/* A JSON value as the text to store; -1 with err set when it does not fit the schema. */
static int config_text(const struct config_def *d, struct json_object *v, char *out, size_t n,
                       struct ops_error *err)
{
    switch (d->kind) {
    case CONFIG_BOOL:
        if (!json_object_is_type(v, json_type_boolean))
            break;
        snprintf(out, n, "%s", json_object_get_boolean(v) ? "true" : "false");
        return 0;
    case CONFIG_INT:
        if (!json_object_is_type(v, json_type_int))
            break;
        int64_t i = json_object_get_int64(v);
        if (i < d->min || i > d->max) {
            ops_fail(err, OPS_ERR_INVALID, d->name, "%s must be between %lld and %lld", d->name,
                     (long long)d->min, (long long)d->max);
            return -1;
        }
        snprintf(out, n, "%lld", (long long)i);
        return 0;
    case CONFIG_ENUM:
        if (!json_object_is_type(v, json_type_string))
            break;
        if (ops_check_enum(d->name, json_object_get_string(v), d->values, err) != 0)
            return -1;
        snprintf(out, n, "%s", json_object_get_string(v));
        return 0;
    case CONFIG_TEXT:
        if (!json_object_is_type(v, json_type_string))
            break;
        const char *s = json_object_get_string(v);
        if (*s && ops_check_text(d->name, s, (size_t)d->max, err) != 0)
            return -1;
        if (strlen(s) >= n) {
            ops_fail(err, OPS_ERR_INVALID, d->name, "%s is too long", d->name);
            return -1;
        }
        snprintf(out, n, "%s", s);
        return 0;
    }
    ops_fail(err, OPS_ERR_INVALID, d->name, "%s has the wrong type", d->name);
    return -1;
}

struct json_object *ops_config_get(sqlite3 *db, struct ops_error *err)
{
    struct json_object *res = json_object_new_object();
    for (size_t i = 0; i < CONFIG_NDEFS; i++) {
        const struct config_def *d = &config_defs[i];
        sqlite3_stmt *st = ops_prepare(db, err, "SELECT value FROM settings WHERE key = ?1", "t",
                                       d->name);
        if (!st) {
            json_object_put(res);
            return NULL;
        }
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
            ops_fail_db(err, db);
            sqlite3_finalize(st);
            json_object_put(res);
            return NULL;
        }
        json_object_object_add(res, d->name, config_value(
            d, rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL));
        sqlite3_finalize(st);
    }
    return res;
}

/* One {"setting","value"} for the audit record; NULL when there is none. */
static struct json_object *config_audit_obj(const char *name, struct json_object *value)
{
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "setting", json_object_new_string(name));
    json_object_object_add(o, "value", json_object_get(value));
    return o;
}

struct json_object *ops_config_set(sqlite3 *db, struct json_object *changes, struct ops_error *err)
{
    char text[4097];
    if (!changes || !json_object_is_type(changes, json_type_object)) {
        ops_fail(err, OPS_ERR_INVALID, NULL, "the settings must be a JSON object");
        return NULL;
    }
    /* Validate everything before writing anything. */
    json_object_object_foreach(changes, name, value) {
        const struct config_def *d = config_find(name);
        if (!d) {
            ops_fail(err, OPS_ERR_INVALID, NULL, "unknown setting (known: auto_routing_enabled,"
                     " auto_routing_strategy, auto_routing_weight_*, gpu_temperature_threshold,"
                     " internal_fields, response_model, usage_retention_days)");
            return NULL;
        }
        if (value && config_text(d, value, text, sizeof text, err) != 0)
            return NULL;
    }
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *before = ops_config_get(db, err), *res = NULL;
    if (!before)
        goto out;
    json_object_object_foreach(changes, name2, value2) {
        const struct config_def *d = config_find(name2);
        int rc = value2 ? (config_text(d, value2, text, sizeof text, err) == 0 ? ops_run(
                               db, err, "INSERT INTO settings (key, value) VALUES (?1, ?2)"
                               " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                               "tt", d->name, text) : -1)
                        : ops_run(db, err, "DELETE FROM settings WHERE key = ?1", "t", d->name);
        struct json_object *b = config_audit_obj(d->name, json_object_object_get(before, d->name));
        struct json_object *nv = value2 ? config_value(d, text) : config_value(d, NULL);
        struct json_object *a = config_audit_obj(d->name, nv);
        if (rc == 0)
            rc = ops_audit(db, err, "update", "setting", b, a);
        json_object_put(nv);
        json_object_put(b);
        json_object_put(a);
        if (rc != 0)
            goto out;
    }
    res = ops_config_get(db, err);
out:
    json_object_put(before);
    return ops_finish(db, res, err);
}
