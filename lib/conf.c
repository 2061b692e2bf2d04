/* conf.c: load sluice.conf with libconfig over built-in defaults. */
#include "conf.h"

#include "sdb.h"

#include "state_url.h"

#include <libconfig.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

void conf_defaults(struct conf *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->database, sizeof c->database, "sluice.db");
    snprintf(c->state_file, sizeof c->state_file, "sluice.state");
    snprintf(c->log_file, sizeof c->log_file, "-");
    snprintf(c->log_level, sizeof c->log_level, "info");
    snprintf(c->billing_tz, sizeof c->billing_tz, "UTC");
    c->pool_processes = 2;
    c->pool_threads = 32;
    c->pool_max_threads = 1024;
    c->pool_park_streams = 1;
    c->max_body_bytes = 8 << 20;
    c->max_response_bytes = 64 << 20;
    c->max_sse_event_bytes = 4 << 20;
    c->keepalive_ms = 5000;
    c->shutdown_grace_ms = 10000;
    c->config_poll_ms = 250;
    c->key_cache_ms = 30000;
    c->ban_ms = 15000;
    c->circuit_failures = 3;
    c->circuit_open_ms = 30000;
    c->half_open_trials = 2;
    c->retry_after_s = 5;
    c->usage_flush_ms = 200;
    c->usage_batch_max = 500;
    c->usage_queue_max = 100000;
    snprintf(c->health_log_file, sizeof c->health_log_file, "-");
    c->health_round_ms = 5000;
    c->health_timeout_ms = 2000;
    c->health_run_s = 60;
    c->health_lock_wait_ms = 10000;
    c->health_scrape_parallel = 10;
    c->metrics_stale_ms = 15000;
    c->temperature_stale_ms = 60000;
    c->wake_max_wait_ms = 60000;
    c->wake_no_health_wait_ms = 30000;
    c->wake_poll_ms = 250;
    c->wake_call_timeout_ms = 5000;
    c->wake_retry_after_s = 30;
    c->wake_node_retry_after_s = 60;
    c->admin_session_ttl_s = 43200;
    c->admin_max_body_bytes = 1 << 20;
    c->admin_login_max_failures = 5;
    c->admin_login_window_s = 300;
    c->admin_login_lockout_s = 60;
    c->admin_test_timeout_ms = 60000;
    c->default_max_output = 1024;
    c->max_tokens_cap = 1000000;
    c->quota_db_wait_ms = 20;
    c->db_connections = 4;
    c->db_mmap_bytes = 256LL << 20;
    c->idem_ttl_minutes = 10;
    c->idem_max_records = 100000;
    c->idem_max_bytes = 256LL << 20;
    c->cache_max_bytes = 256LL << 20;
    c->cache_max_entry_bytes = 4LL << 20;
    c->shadow_timeout_ms = 30000;
    c->shadow_max_inflight = 16;
    c->max_n = 8;
    c->tokenize_timeout_ms = 200;
    c->tokenize_margin_pct = 10;
    c->rule_match_limit = 100000;
    c->semantic_max_entries = 10000;
    c->semantic_embed_timeout_ms = 2000;
    c->semantic_max_input_bytes = 8192;
    c->idem_max_record_bytes = 8LL << 20;
    c->affinity_max_entries = 100000;
    c->affinity_abs_margin = 4;
    c->affinity_rel_margin_pct = 150;
    c->auth_fail_limit = 20;
    c->auth_fail_window_ms = 60000;
    c->metrics_tenant_labels = 1;
    c->otlp_flush_ms = 1000;
    c->otlp_batch_max = 512;
    c->otlp_queue_max = 10000;
    c->otlp_timeout_ms = 2000;
}

/* ---- the schema: every option of sluice.conf, one row each ---- */

enum opt_type { T_STR, T_PATH, T_BOOL, T_INT, T_ENUM };

/* What SIGHUP does with a new value (conf_reload). */
enum opt_when {
    RESTART,                    /* read once at start: a change waits for the next start */
    LIVE,                       /* read where it is used: the new value applies at once */
    LOG,                        /* a log's path: the responder moves its log there */
};

struct conf_opt {
    const char *name;           /* group.option as written in the file */
    enum opt_type type;
    long long min, max;         /* T_INT */
    size_t off, size;           /* the field in struct conf: a char array, an int or an int64_t */
    enum opt_when when;
    const char *const *values;  /* T_ENUM: the words it may be (NULL-terminated); the field holds the word */
};

#define FIELD(f) offsetof(struct conf, f), sizeof(((struct conf *)0)->f)
#define OPT_STR(n, f, w) {n, T_STR, 0, 0, FIELD(f), w, NULL}
/* A path: relative ones are read against the configuration file's folder. */
#define OPT_PATH(n, f, w) {n, T_PATH, 0, 0, FIELD(f), w, NULL}
#define OPT_BOOL(n, f, w) {n, T_BOOL, 0, 1, FIELD(f), w, NULL}
#define OPT_INT(n, lo, hi, f, w) {n, T_INT, lo, hi, FIELD(f), w, NULL}
#define OPT_ENUM(n, vals, f, w) {n, T_ENUM, 0, 0, FIELD(f), w, vals}

static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};

static const struct conf_opt conf_opts[] = {
    OPT_PATH("database", database, RESTART),
    OPT_PATH("state_file", state_file, RESTART),
    OPT_STR("state", state, RESTART),
    OPT_PATH("log_file", log_file, LOG),
    OPT_ENUM("log_level", log_levels, log_level, LIVE),
    OPT_PATH("access_log", access_log, LOG),
    OPT_PATH("trace_log", trace_log, LOG),
    OPT_STR("metrics.token", metrics_token, RESTART),
    OPT_STR("otlp.endpoint", otlp_endpoint, RESTART),
    OPT_STR("billing_tz", billing_tz, RESTART),
    OPT_STR("limits.trusted_proxies", trusted_proxies, RESTART),
    OPT_PATH("secrets.key_file", secrets_key_file, RESTART),
    OPT_PATH("health.log_file", health_log_file, LIVE),
    OPT_BOOL("metrics.tenant_labels", metrics_tenant_labels, RESTART),
    OPT_INT("pool.processes", 1, 64, pool_processes, RESTART),
    OPT_INT("pool.threads", 1, 4096, pool_threads, RESTART),
    OPT_INT("pool.max_threads", 1, 16384, pool_max_threads, RESTART),
    OPT_BOOL("pool.park_streams", pool_park_streams, RESTART),
    OPT_INT("limits.max_body_bytes", 1024, 1LL << 32, max_body_bytes, LIVE),
    OPT_INT("limits.max_response_bytes", 1024, 1LL << 34, max_response_bytes, LIVE),
    OPT_INT("limits.max_sse_event_bytes", 1024, 1LL << 30, max_sse_event_bytes, LIVE),
    OPT_INT("limits.max_tokens_cap", 1, 100000000, max_tokens_cap, LIVE),
    OPT_INT("limits.quota_db_wait_ms", 1, 10000, quota_db_wait_ms, RESTART),
    OPT_INT("stream.keepalive_ms", 1000, 600000, keepalive_ms, LIVE),
    OPT_INT("shutdown.grace_ms", 0, 3600000, shutdown_grace_ms, LIVE),
    OPT_INT("config.poll_ms", 10, 2000, config_poll_ms, RESTART),
    OPT_INT("auth.key_cache_ms", 0, 30000, key_cache_ms, RESTART),
    OPT_INT("passive.ban_ms", 0, 3600000, ban_ms, LIVE),
    OPT_INT("passive.circuit_failures", 1, 1000, circuit_failures, LIVE),
    OPT_INT("passive.circuit_open_ms", 0, 3600000, circuit_open_ms, LIVE),
    OPT_INT("passive.half_open_trials", 1, 1000, half_open_trials, LIVE),
    OPT_INT("errors.retry_after_s", 1, 3600, retry_after_s, LIVE),
    OPT_INT("usage.flush_ms", 10, 1000, usage_flush_ms, RESTART),
    OPT_INT("usage.batch_max", 1, 100000, usage_batch_max, RESTART),
    OPT_INT("usage.queue_max", 100, 10000000, usage_queue_max, RESTART),
    OPT_INT("health.round_ms", 100, 3600000, health_round_ms, LIVE),
    OPT_INT("health.timeout_ms", 50, 600000, health_timeout_ms, LIVE),
    OPT_INT("health.run_seconds", 1, 86400, health_run_s, LIVE),
    OPT_INT("health.lock_wait_ms", 0, 600000, health_lock_wait_ms, LIVE),
    OPT_INT("health.scrape_parallel", 1, 1000, health_scrape_parallel, LIVE),
    OPT_INT("health.metrics_stale_ms", 100, 3600000, metrics_stale_ms, LIVE),
    OPT_INT("health.temperature_stale_ms", 100, 86400000, temperature_stale_ms, LIVE),
    OPT_INT("wake.max_wait_ms", 100, 600000, wake_max_wait_ms, LIVE),
    OPT_INT("wake.no_health_wait_ms", 100, 600000, wake_no_health_wait_ms, LIVE),
    OPT_INT("wake.poll_ms", 10, 10000, wake_poll_ms, LIVE),
    OPT_INT("wake.call_timeout_ms", 50, 600000, wake_call_timeout_ms, LIVE),
    OPT_INT("wake.retry_after_s", 1, 3600, wake_retry_after_s, LIVE),
    OPT_INT("wake.node_retry_after_s", 1, 3600, wake_node_retry_after_s, LIVE),
    OPT_INT("admin.session_ttl_s", 1, 2592000, admin_session_ttl_s, LIVE),
    OPT_INT("admin.max_body_bytes", 1024, 1LL << 30, admin_max_body_bytes, LIVE),
    OPT_INT("admin.login_max_failures", 1, 1000000, admin_login_max_failures, LIVE),
    OPT_INT("admin.login_window_s", 1, 86400, admin_login_window_s, LIVE),
    OPT_INT("admin.login_lockout_s", 1, 86400, admin_login_lockout_s, LIVE),
    OPT_INT("admin.endpoint_test_timeout_ms", 100, 600000, admin_test_timeout_ms, LIVE),
    OPT_INT("keys.default_max_output", 1, 10000000, default_max_output, LIVE),
    OPT_INT("keys.db_connections", 1, 64, db_connections, RESTART),
    OPT_INT("keys.db_mmap_bytes", 0, 1LL << 40, db_mmap_bytes, RESTART),
    OPT_INT("idempotency.ttl_minutes", 1, 1440, idem_ttl_minutes, RESTART),
    OPT_INT("idempotency.max_records", 1, 100000000, idem_max_records, RESTART),
    OPT_INT("idempotency.max_bytes", 0, 1LL << 40, idem_max_bytes, RESTART),
    OPT_INT("idempotency.max_record_bytes", 0, 1LL << 32, idem_max_record_bytes, RESTART),
    OPT_INT("cache.max_bytes", 0, 1LL << 40, cache_max_bytes, LIVE),
    OPT_INT("cache.max_entry_bytes", 0, 1LL << 32, cache_max_entry_bytes, LIVE),
    OPT_INT("cache.semantic_max_entries", 1, 100000000, semantic_max_entries, RESTART),
    OPT_INT("cache.semantic_embed_timeout_ms", 50, 60000, semantic_embed_timeout_ms, LIVE),
    OPT_INT("cache.semantic_max_input_bytes", 1, 1LL << 30, semantic_max_input_bytes, LIVE),
    OPT_INT("shadow.timeout_ms", 100, 3600000, shadow_timeout_ms, LIVE),
    OPT_INT("shadow.max_inflight", 0, 100000, shadow_max_inflight, LIVE),
    OPT_INT("limits.max_n", 1, 128, max_n, LIVE),
    OPT_INT("guard.tokenize_timeout_ms", 10, 60000, tokenize_timeout_ms, LIVE),
    OPT_INT("guard.tokenize_margin_pct", 0, 100, tokenize_margin_pct, LIVE),
    OPT_INT("guard.rule_match_limit", 1000, 100000000, rule_match_limit, RESTART),
    OPT_INT("auth.fail_limit", 1, 1000000, auth_fail_limit, LIVE),
    OPT_INT("affinity.max_entries", 64, 100000, affinity_max_entries, RESTART),
    OPT_INT("affinity.abs_margin", 0, 1000000, affinity_abs_margin, LIVE),
    OPT_INT("affinity.rel_margin_pct", 100, 100000, affinity_rel_margin_pct, LIVE),
    OPT_INT("auth.fail_window_ms", 1000, 3600000, auth_fail_window_ms, LIVE),
    OPT_INT("otlp.flush_ms", 10, 600000, otlp_flush_ms, RESTART),
    OPT_INT("otlp.batch_max", 1, 100000, otlp_batch_max, RESTART),
    OPT_INT("otlp.queue_max", 1, 10000000, otlp_queue_max, RESTART),
    OPT_INT("otlp.timeout_ms", 50, 600000, otlp_timeout_ms, RESTART),
};
#define CONF_NOPTS (sizeof conf_opts / sizeof conf_opts[0])

/* ---- reading a parsed file against the schema ---- */

#define CONF_MAX_ERRORS 20

struct conf_reader {
    struct conf *c;
    const char *path;           /* the file, for messages */
    char dir[512];              /* its folder ("" = the working directory: no file) */
    int errors;
};

static void conf_error(struct conf_reader *rd, const config_setting_t *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void conf_error(struct conf_reader *rd, const config_setting_t *s, const char *fmt, ...)
{
    if (++rd->errors > CONF_MAX_ERRORS)
        return;
    const char *file = s ? config_setting_source_file(s) : NULL;
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FATAL CONFIG FILE ERROR: %s:%d: %s\n", file ? file : rd->path,
            s ? (int)config_setting_source_line(s) : 0, msg);
}

static const struct conf_opt *conf_find(const char *name)
{
    for (size_t i = 0; i < CONF_NOPTS; i++)
        if (strcmp(conf_opts[i].name, name) == 0)
            return &conf_opts[i];
    return NULL;
}

/* Is name a group some option lives in ("pool" for pool.threads)? */
static int conf_is_group(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < CONF_NOPTS; i++)
        if (strncmp(conf_opts[i].name, name, n) == 0 && conf_opts[i].name[n] == '.')
            return 1;
    return 0;
}

/* Edit distance of two short names, capped: how a misspelling is recognised. */
static int conf_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

/* The option (or group) an unknown name most likely meant, or NULL. */
static const char *conf_suggest(const char *name, int group, char *out, size_t cap)
{
    int best_d = 3;             /* at most two edits away */
    out[0] = '\0';
    for (size_t i = 0; i < CONF_NOPTS; i++) {
        char cand[160];
        const char *dot = strchr(conf_opts[i].name, '.');
        if (group && !dot)
            continue;
        snprintf(cand, sizeof cand, "%.*s", group ? (int)(dot - conf_opts[i].name) : 159, conf_opts[i].name);
        int d = conf_distance(name, cand);
        if (d < best_d) {
            best_d = d;
            snprintf(out, cap, "%s", cand);
        }
    }
    return out[0] ? out : NULL;
}

static const char *conf_type_name(int t)
{
    switch (t) {
    case CONFIG_TYPE_GROUP: return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a number with a fraction";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "true or false";
    case CONFIG_TYPE_ARRAY: return "an array";
    case CONFIG_TYPE_LIST: return "a list";
    default: return "something else";
    }
}

/* A relative path is read against the configuration file's folder, so an
 * installed sluice.conf means the same from any working directory. */
static int conf_path_value(struct conf_reader *rd, const config_setting_t *s, const char *v, char *dst,
                           size_t cap)
{
    int n;
    /* database = "postgresql://…" names a server, not a file */
    if (!*v || strcmp(v, "-") == 0 || v[0] == '/' || !rd->dir[0] || sdb_is_url(v))
        n = snprintf(dst, cap, "%s", v);
    else
        n = snprintf(dst, cap, "%s/%s", rd->dir, v);
    if (n < 0 || (size_t)n >= cap) {
        conf_error(rd, s, "%s is too long (at most %zu bytes)", s ? config_setting_name(s) : v, cap - 1);
        return -1;
    }
    return 0;
}

/* One option's value into its field, checked against its row. */
static void conf_set(struct conf_reader *rd, const struct conf_opt *o, const config_setting_t *s)
{
    char *dst = (char *)rd->c + o->off;
    int t = config_setting_type(s);
    switch (o->type) {
    case T_STR:
    case T_PATH: {
        if (t != CONFIG_TYPE_STRING) {
            conf_error(rd, s, "%s must be a string (in double quotes), not %s", o->name, conf_type_name(t));
            return;
        }
        const char *v = config_setting_get_string(s);
        char tmp[1024];
        if (o->type == T_PATH) {
            if (conf_path_value(rd, s, v, tmp, sizeof tmp) != 0)
                return;
            v = tmp;
        }
        if (strlen(v) >= o->size) {
            conf_error(rd, s, "%s is too long (at most %zu bytes)", o->name, o->size - 1);
            return;
        }
        memcpy(dst, v, strlen(v) + 1);
        return;
    }
    case T_ENUM: {
        const char *v = t == CONFIG_TYPE_STRING ? config_setting_get_string(s) : NULL;
        for (int i = 0; v && o->values[i]; i++)
            if (strcmp(v, o->values[i]) == 0 && strlen(v) < o->size) {
                memcpy(dst, v, strlen(v) + 1);
                return;
            }
        char words[200] = "";
        for (int i = 0; o->values[i]; i++)
            snprintf(words + strlen(words), sizeof words - strlen(words), "%s\"%s\"", i ? ", " : "", o->values[i]);
        conf_error(rd, s, "%s must be one of %s", o->name, words);
        return;
    }
    case T_BOOL:
        if (t != CONFIG_TYPE_BOOL) {
            conf_error(rd, s, "%s must be true or false, not %s", o->name, conf_type_name(t));
            return;
        }
        *(int *)dst = config_setting_get_bool(s) != 0;
        return;
    case T_INT: {
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64) {
            conf_error(rd, s, "%s must be an integer, not %s", o->name, conf_type_name(t));
            return;
        }
        long long v = config_setting_get_int64(s);
        if (v < o->min || v > o->max) {
            conf_error(rd, s, "%s = %lld is outside %lld..%lld", o->name, v, o->min, o->max);
            return;
        }
        if (o->size == sizeof(int64_t))
            *(int64_t *)(void *)dst = v;
        else
            *(int *)(void *)dst = (int)v;
        return;
    }
    }
}

/* Every setting of group g (the file's root or one of its groups): known ones
 * are applied, anything else is named with its line. */
static void conf_walk(struct conf_reader *rd, const config_setting_t *g, const char *prefix)
{
    int n = config_setting_length(g);
    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        const char *leaf = config_setting_name(s);
        char name[160];
        snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", leaf ? leaf : "?");
        const struct conf_opt *o = conf_find(name);
        if (o) {
            conf_set(rd, o, s);
            continue;
        }
        if (config_setting_is_group(s) && !*prefix && conf_is_group(name)) {
            conf_walk(rd, s, name);
            continue;
        }
        char buf[160];
        int group = config_setting_is_group(s);
        const char *hint = conf_suggest(name, group, buf, sizeof buf);
        conf_error(rd, s, "unknown %s %s%s%s%s", group ? "group" : "option", name,
                   hint ? " (did you mean " : "", hint ? hint : "", hint ? "?)" : "");
    }
}

/* Reads the text of a file (text NULL) or the text itself and applies it.
 * Nothing of a file with an error is kept. */
static int conf_read(struct conf *c, const char *path, const char *text)
{
    config_t cf;
    config_init(&cf);
    int rc = -1;
    struct conf_reader rd = {.path = path};
    if (!text) {
        /* The file's folder, absolute: a path read against it means the same from
         * any working directory. */
        char folder[4096], real[PATH_MAX];
        const char *slash = strrchr(path, '/');
        snprintf(folder, sizeof folder, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1,
                 slash ? path : ".");
        if (!realpath(folder, real) || strlen(real) >= sizeof rd.dir) {
            fprintf(stderr, "FATAL CONFIG FILE ERROR: %s: its folder cannot be resolved (or its name is longer "
                            "than %zu bytes)\n", path, sizeof rd.dir - 1);
            goto out;
        }
        snprintf(rd.dir, sizeof rd.dir, "%s", strcmp(real, "/") == 0 ? "" : real);
        if (rd.dir[0])
            config_set_include_dir(&cf, rd.dir);
    }
    if ((text ? config_read_string(&cf, text) : config_read_file(&cf, path)) != CONFIG_TRUE) {
        fprintf(stderr, "FATAL CONFIG FILE ERROR: %s:%d: %s\n",
                config_error_file(&cf) ? config_error_file(&cf) : path, config_error_line(&cf),
                config_error_text(&cf));
        goto out;
    }
    struct conf work = *c;
    rd.c = &work;
    conf_walk(&rd, config_root_setting(&cf), "");
    if (work.state[0]) {
        /* Refused here, with the file's name, rather than at the first request. */
        struct state_url u;
        char why[160];
        if (state_url_parse(work.state, &u, why, sizeof why) != 0)
            conf_error(&rd, config_lookup(&cf, "state"), "%s", why);
    }
    /* A default path too (the database, the state file) lies beside the file, so
     * every program given the same file finds the same ones. */
    for (size_t i = 0; !text && rd.errors == 0 && i < CONF_NOPTS; i++) {
        char *v = (char *)&work + conf_opts[i].off, tmp[1024];
        if (conf_opts[i].type != T_PATH || !*v || *v == '/' || strcmp(v, "-") == 0)
            continue;
        if (conf_path_value(&rd, NULL, v, tmp, sizeof tmp) == 0 && strlen(tmp) < conf_opts[i].size)
            memcpy(v, tmp, strlen(tmp) + 1);
        else
            conf_error(&rd, NULL, "%s: the default %s beside the file is too long", conf_opts[i].name, v);
    }
    if (rd.errors > CONF_MAX_ERRORS)
        fprintf(stderr, "FATAL CONFIG FILE ERROR: %s: %d more errors\n", path, rd.errors - CONF_MAX_ERRORS);
    if (rd.errors == 0) {
        *c = work;
        rc = 0;
    }
out:
    config_destroy(&cf);
    return rc;
}

int conf_load(struct conf *c, const char *path) { return conf_read(c, path, NULL); }

int conf_load_string(struct conf *c, const char *text, const char *name)
{
    return conf_read(c, name ? name : "<string>", text ? text : "");
}

/* ---- SIGHUP ---- */

static void conf_value_text(const struct conf_opt *o, const struct conf *c, char *out, size_t cap)
{
    const char *p = (const char *)c + o->off;
    struct state_url u;
    char safe[300];
    if (o->off == offsetof(struct conf, state) && *p && state_url_parse(p, &u, NULL, 0) == 0) {
        /* The SIGHUP line is logged: never with the password of the Redis URL. */
        state_url_describe(&u, safe, sizeof safe);
        snprintf(out, cap, "\"%s\"", safe);
    } else if (o->type == T_STR || o->type == T_PATH || o->type == T_ENUM)
        snprintf(out, cap, "\"%s\"", p);
    else if (o->type == T_BOOL)
        snprintf(out, cap, "%s", *(const int *)(const void *)p ? "true" : "false");
    else if (o->size == sizeof(int64_t))
        snprintf(out, cap, "%lld", (long long)*(const int64_t *)(const void *)p);
    else
        snprintf(out, cap, "%d", *(const int *)(const void *)p);
}

int conf_reload(struct conf *live, struct conf *file, const char *path, conf_changed_fn changed, void *arg)
{
    struct conf next;
    conf_defaults(&next);
    if (conf_load(&next, path) != 0)
        return -1;
    for (size_t i = 0; i < CONF_NOPTS; i++) {
        const struct conf_opt *o = &conf_opts[i];
        char *was = (char *)file + o->off, *now = (char *)&next + o->off;
        int text = o->type == T_STR || o->type == T_PATH || o->type == T_ENUM;
        if (text ? strcmp(was, now) == 0 : memcmp(was, now, o->size) == 0)
            continue;
        char a[600], b[600];
        conf_value_text(o, file, a, sizeof a);
        conf_value_text(o, &next, b, sizeof b);
        int applied = o->when == LIVE;
        if (o->when == LOG)
            applied = changed(arg, o->name, a, b, CONF_CHANGE_LOG, now) == 0;
        if (applied) {
            char *dst = (char *)live + o->off;
            /* Other threads read the numbers as they run: one aligned store each,
             * never a half-written value. A live text is read by main only. */
            if (text)
                memcpy(dst, now, strlen(now) + 1);
            else if (o->size == sizeof(int64_t))
                __atomic_store_n((int64_t *)(void *)dst, *(int64_t *)(void *)now, __ATOMIC_RELAXED);
            else
                __atomic_store_n((int *)(void *)dst, *(int *)(void *)now, __ATOMIC_RELAXED);
        }
        changed(arg, o->name, a, b, applied ? CONF_CHANGE_APPLIED : CONF_CHANGE_RESTART, now);
    }
    *file = next;
    return 0;
}
