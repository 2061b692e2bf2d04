/* ops_config.c: the run-time settings as typed JSON, GET/PUT /api/v1/system/inference-config
 * (SPEC §0 settings, R-AUTO-1, R-LB-6, R-API-5, R-RT-5). The schema is lib/settings.c;
 * values live as text in table settings. */
#include "ops_internal.h"

#include "settings.h"

#include <stdio.h>
#include <string.h>

/* A stored text as the setting's JSON value; the default when none is stored or it no
 * longer parses. NUMBER: an integer when whole (85), else a double written as stored (85.5). */
static struct json_object *config_value(const struct settings_def *d, const char *text)
{
    struct settings_value v;
    char canon[32];
    settings_read(d, text, &v);
    switch (d->type) {
    case SETTINGS_BOOL:
        return json_object_new_boolean((json_bool)v.i);
    case SETTINGS_INT:
        return json_object_new_int64(v.i);
    case SETTINGS_NUMBER:
        settings_format(d, &v, canon, sizeof canon);
        if (!strchr(canon, '.'))
            return json_object_new_int64((int64_t)v.num);
        return json_object_new_double_s(v.num, canon);
    case SETTINGS_ENUM:
    case SETTINGS_TEXT:
        break;
    }
    return json_object_new_string(v.text ? v.text : "");
}

/* A JSON value as the canonical text to store; -1 with err set when it does not fit the
 * schema (lib/settings.c). out holds at least 4097 bytes. */
static int config_text(const struct settings_def *d, struct json_object *j, char *out, size_t n,
                       struct ops_error *err)
{
    char raw[64], msg[512];
    const char *text = raw;
    switch (d->type) {
    case SETTINGS_BOOL:
        if (!json_object_is_type(j, json_type_boolean))
            goto wrong_type;
        snprintf(raw, sizeof raw, "%s", json_object_get_boolean(j) ? "true" : "false");
        break;
    case SETTINGS_NUMBER:   /* a double or, below, an integer */
        if (json_object_is_type(j, json_type_double)) {
            /* 17 digits give the double back exactly; the schema rounds to its decimals. */
            snprintf(raw, sizeof raw, "%.17g", json_object_get_double(j));
            break;
        }
        /* fall through */
    case SETTINGS_INT:
        if (!json_object_is_type(j, json_type_int))
            goto wrong_type;
        snprintf(raw, sizeof raw, "%lld", (long long)json_object_get_int64(j));
        break;
    case SETTINGS_ENUM:
    case SETTINGS_TEXT:
        if (!json_object_is_type(j, json_type_string))
            goto wrong_type;
        text = json_object_get_string(j);
        if (d->type == SETTINGS_TEXT && *text &&
            ops_check_text(d->name, text, (size_t)d->max, err) != 0)
            return -1;
        if (strlen(text) >= n) {
            ops_fail(err, OPS_ERR_INVALID, d->name, "%s is too long", d->name);
            return -1;
        }
        break;
    }
    struct settings_value v;
    if (settings_parse(d, text, &v, msg, sizeof msg) != 0) {
        ops_fail(err, OPS_ERR_INVALID, d->name, "%s", msg);
        return -1;
    }
    settings_format(d, &v, out, n);
    return 0;
wrong_type:
    ops_fail(err, OPS_ERR_INVALID, d->name, "%s has the wrong type", d->name);
    return -1;
}

void ops_setting(struct sdb *db, const char *name, struct settings_value *v, char *text, size_t n)
{
    struct sdb_stmt *st = NULL;
    const char *stored = NULL;
    if (sdb_prepare(db, "SELECT value FROM settings WHERE key = ?1", &st) == SDB_OK) {
        sdb_bind_text(st, 1, name, -1, SDB_STATIC);
        if (sdb_step(st) == SDB_ROW)
            stored = (const char *)sdb_column_text(st, 0);
    }
    settings_read(settings_find(name), stored, v);
    snprintf(text, n, "%s", v->text ? v->text : "");
    v->text = text;             /* the column's text ends with the statement */
    sdb_finalize(st);
}

struct json_object *ops_config_get(struct sdb *db, struct ops_error *err)
{
    struct json_object *res = json_object_new_object();
    for (size_t i = 0; i < settings_count; i++) {
        const struct settings_def *d = &settings_defs[i];
        struct sdb_stmt *st = ops_prepare(db, err, "SELECT value FROM settings WHERE key = ?1", "t",
                                       d->name);
        if (!st) {
            json_object_put(res);
            return NULL;
        }
        int rc = sdb_step(st);
        if (rc != SDB_ROW && rc != SDB_DONE) {
            ops_fail_db(err, db);
            sdb_finalize(st);
            json_object_put(res);
            return NULL;
        }
        json_object_object_add(res, d->name, config_value(
            d, rc == SDB_ROW ? (const char *)sdb_column_text(st, 0) : NULL));
        sdb_finalize(st);
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

struct json_object *ops_config_set(struct sdb *db, struct json_object *changes, struct ops_error *err)
{
    char text[4097];
    if (!changes || !json_object_is_type(changes, json_type_object)) {
        ops_fail(err, OPS_ERR_INVALID, NULL, "the settings must be a JSON object");
        return NULL;
    }
    /* Validate everything before writing anything. */
    json_object_object_foreach(changes, name, value) {
        const struct settings_def *d = settings_find(name);
        if (!d) {
            char names[1024];
            settings_names(names, sizeof names);
            ops_fail(err, OPS_ERR_INVALID, NULL, "unknown setting (known: %s)", names);
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
        const struct settings_def *d = settings_find(name2);
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

/* Issue 16: the schema for the page's forms, so a new row of lib/settings.c shows up there
 * without page changes. min/max/decimals are null where the type has none (TEXT: max is
 * its longest value in bytes). */
struct json_object *ops_settings_schema(struct sdb *db, struct ops_error *err)
{
    static const char *const type_names[] = {
        [SETTINGS_BOOL] = "bool", [SETTINGS_ENUM] = "enum", [SETTINGS_INT] = "int",
        [SETTINGS_NUMBER] = "number", [SETTINGS_TEXT] = "text"};
    struct json_object *values = ops_config_get(db, err);
    if (!values)
        return NULL;
    struct json_object *rows = json_object_new_array();
    for (size_t i = 0; i < settings_count; i++) {
        const struct settings_def *d = &settings_defs[i];
        struct json_object *o = json_object_new_object(), *v = NULL;
        ops_json_str(o, "name", d->name);
        ops_json_str(o, "type", type_names[d->type]);
        if (d->type == SETTINGS_ENUM) {
            struct json_object *words = json_object_new_array();
            for (size_t j = 0; d->values[j]; j++)
                json_object_array_add(words, json_object_new_string(d->values[j]));
            json_object_object_add(o, "values", words);
        }
        int ranged = d->type == SETTINGS_INT || d->type == SETTINGS_NUMBER;
        json_object_object_add(o, "min", ranged ? json_object_new_int64(d->min) : NULL);
        json_object_object_add(o, "max", ranged || d->type == SETTINGS_TEXT ? json_object_new_int64(d->max)
                                                                           : NULL);
        json_object_object_add(o, "decimals", d->type == SETTINGS_NUMBER ? json_object_new_int(d->decimals)
                                                                        : NULL);
        json_object_object_add(o, "default", config_value(d, d->def));
        ops_json_str(o, "meaning", d->meaning);
        json_object_object_get_ex(values, d->name, &v);
        json_object_object_add(o, "value", v ? json_object_get(v) : config_value(d, NULL));
        json_object_array_add(rows, o);
    }
    json_object_put(values);
    struct json_object *res = json_object_new_object();
    json_object_object_add(res, "settings", rows);
    json_object_object_add(res, "total", json_object_new_int64((int64_t)settings_count));
    return res;
}
