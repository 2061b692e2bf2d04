/* conf.c: load sluice.conf with libconfig over built-in defaults. */
#include "conf.h"

#include <libconfig.h>
#include <stdio.h>
#include <string.h>

void conf_defaults(struct conf *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->database, sizeof c->database, "sluice.db");
    snprintf(c->state_file, sizeof c->state_file, "sluice.state");
    snprintf(c->log_file, sizeof c->log_file, "-");
    snprintf(c->billing_tz, sizeof c->billing_tz, "UTC");
    c->pool_processes = 2;
    c->pool_threads = 256;
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
    c->idem_ttl_minutes = 10;
    c->idem_max_records = 100000;
    c->idem_max_bytes = 256LL << 20;
    c->cache_max_bytes = 256LL << 20;
    c->cache_max_entry_bytes = 4LL << 20;
    c->max_n = 8;
    c->tokenize_timeout_ms = 200;
    c->tokenize_margin_pct = 10;
    c->rule_match_limit = 100000;
    c->semantic_max_entries = 10000;
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

static int conf_bool(config_t *cf, const char *name, int *dst)
{
    int v;
    if (config_lookup_bool(cf, name, &v) == CONFIG_TRUE)
        *dst = v != 0;
    return 0;
}

static int conf_str(config_t *cf, const char *name, char *dst, size_t cap)
{
    const char *v;
    if (config_lookup_string(cf, name, &v) != CONFIG_TRUE)
        return 0;
    if (strlen(v) >= cap) {
        fprintf(stderr, "FATAL CONFIG FILE ERROR: %s: value of %s is too long\n",
                config_error_file(cf) ? config_error_file(cf) : "sluice.conf", name);
        return -1;
    }
    snprintf(dst, cap, "%s", v);
    return 0;
}

static int conf_int(config_t *cf, const char *path, const char *name, long long min, long long max,
                    void *dst, int is64)
{
    long long v;
    if (config_lookup_int64(cf, name, &v) != CONFIG_TRUE) {
        int iv;
        if (config_lookup_int(cf, name, &iv) != CONFIG_TRUE)
            return 0;
        v = iv;
    }
    if (v < min || v > max) {
        fprintf(stderr, "FATAL CONFIG FILE ERROR: %s: %s = %lld is outside %lld..%lld\n", path, name,
                v, min, max);
        return -1;
    }
    if (is64)
        *(int64_t *)dst = v;
    else
        *(int *)dst = (int)v;
    return 0;
}

/* Copies the options of a parsed file over c; path names the file in messages. */
static int conf_apply(struct conf *c, config_t *cf, const char *path)
{
    if (conf_str(cf, "database", c->database, sizeof c->database) ||
        conf_str(cf, "state_file", c->state_file, sizeof c->state_file) ||
        conf_str(cf, "log_file", c->log_file, sizeof c->log_file) ||
        conf_str(cf, "access_log", c->access_log, sizeof c->access_log) ||
        conf_str(cf, "trace_log", c->trace_log, sizeof c->trace_log) ||
        conf_str(cf, "metrics.token", c->metrics_token, sizeof c->metrics_token) ||
        conf_bool(cf, "metrics.tenant_labels", &c->metrics_tenant_labels) ||
        conf_str(cf, "otlp.endpoint", c->otlp_endpoint, sizeof c->otlp_endpoint) ||
        conf_str(cf, "billing_tz", c->billing_tz, sizeof c->billing_tz) ||
        conf_str(cf, "limits.trusted_proxies", c->trusted_proxies, sizeof c->trusted_proxies) ||
        conf_str(cf, "secrets.key_file", c->secrets_key_file, sizeof c->secrets_key_file) ||
        conf_str(cf, "health.log_file", c->health_log_file, sizeof c->health_log_file))
        return -1;
    struct { const char *name; long long min, max; void *dst; int is64; } ints[] = {
        {"pool.processes", 1, 64, &c->pool_processes, 0},
        {"pool.threads", 1, 4096, &c->pool_threads, 0},
        {"limits.max_body_bytes", 1024, 1LL << 32, &c->max_body_bytes, 1},
        {"limits.max_response_bytes", 1024, 1LL << 34, &c->max_response_bytes, 1},
        {"limits.max_sse_event_bytes", 1024, 1LL << 30, &c->max_sse_event_bytes, 1},
        {"limits.max_tokens_cap", 1, 100000000, &c->max_tokens_cap, 1},
        {"limits.quota_db_wait_ms", 1, 10000, &c->quota_db_wait_ms, 0},
        {"stream.keepalive_ms", 1000, 600000, &c->keepalive_ms, 0},
        {"shutdown.grace_ms", 0, 3600000, &c->shutdown_grace_ms, 0},
        {"config.poll_ms", 10, 2000, &c->config_poll_ms, 0},
        {"auth.key_cache_ms", 0, 30000, &c->key_cache_ms, 0},
        {"passive.ban_ms", 0, 3600000, &c->ban_ms, 0},
        {"passive.circuit_failures", 1, 1000, &c->circuit_failures, 0},
        {"passive.circuit_open_ms", 0, 3600000, &c->circuit_open_ms, 0},
        {"passive.half_open_trials", 1, 1000, &c->half_open_trials, 0},
        {"errors.retry_after_s", 1, 3600, &c->retry_after_s, 0},
        {"usage.flush_ms", 10, 1000, &c->usage_flush_ms, 0},
        {"usage.batch_max", 1, 100000, &c->usage_batch_max, 0},
        {"usage.queue_max", 100, 10000000, &c->usage_queue_max, 0},
        {"health.round_ms", 100, 3600000, &c->health_round_ms, 0},
        {"health.timeout_ms", 50, 600000, &c->health_timeout_ms, 0},
        {"health.run_seconds", 1, 86400, &c->health_run_s, 0},
        {"health.lock_wait_ms", 0, 600000, &c->health_lock_wait_ms, 0},
        {"health.scrape_parallel", 1, 1000, &c->health_scrape_parallel, 0},
        {"health.metrics_stale_ms", 100, 3600000, &c->metrics_stale_ms, 0},
        {"health.temperature_stale_ms", 100, 86400000, &c->temperature_stale_ms, 0},
        {"wake.max_wait_ms", 100, 600000, &c->wake_max_wait_ms, 0},
        {"wake.no_health_wait_ms", 100, 600000, &c->wake_no_health_wait_ms, 0},
        {"wake.poll_ms", 10, 10000, &c->wake_poll_ms, 0},
        {"wake.call_timeout_ms", 50, 600000, &c->wake_call_timeout_ms, 0},
        {"wake.retry_after_s", 1, 3600, &c->wake_retry_after_s, 0},
        {"wake.node_retry_after_s", 1, 3600, &c->wake_node_retry_after_s, 0},
        {"admin.session_ttl_s", 1, 2592000, &c->admin_session_ttl_s, 0},
        {"admin.max_body_bytes", 1024, 1LL << 30, &c->admin_max_body_bytes, 1},
        {"admin.login_max_failures", 1, 1000000, &c->admin_login_max_failures, 0},
        {"admin.login_window_s", 1, 86400, &c->admin_login_window_s, 0},
        {"admin.login_lockout_s", 1, 86400, &c->admin_login_lockout_s, 0},
        {"admin.endpoint_test_timeout_ms", 100, 600000, &c->admin_test_timeout_ms, 0},
        {"keys.default_max_output", 1, 10000000, &c->default_max_output, 1},
        {"keys.db_connections", 1, 64, &c->db_connections, 0},
        {"idempotency.ttl_minutes", 1, 1440, &c->idem_ttl_minutes, 0},
        {"idempotency.max_records", 1, 100000000, &c->idem_max_records, 0},
        {"idempotency.max_bytes", 0, 1LL << 40, &c->idem_max_bytes, 1},
        {"idempotency.max_record_bytes", 0, 1LL << 32, &c->idem_max_record_bytes, 1},
        {"cache.max_bytes", 0, 1LL << 40, &c->cache_max_bytes, 1},
        {"cache.max_entry_bytes", 0, 1LL << 32, &c->cache_max_entry_bytes, 1},
        {"cache.semantic_max_entries", 1, 100000000, &c->semantic_max_entries, 1},
        {"limits.max_n", 1, 128, &c->max_n, 1},
        {"guard.tokenize_timeout_ms", 10, 60000, &c->tokenize_timeout_ms, 1},
        {"guard.tokenize_margin_pct", 0, 100, &c->tokenize_margin_pct, 1},
        {"guard.rule_match_limit", 1000, 100000000, &c->rule_match_limit, 1},
        {"auth.fail_limit", 1, 1000000, &c->auth_fail_limit, 0},
        {"affinity.max_entries", 64, 100000, &c->affinity_max_entries, 0},
        {"affinity.abs_margin", 0, 1000000, &c->affinity_abs_margin, 0},
        {"affinity.rel_margin_pct", 100, 100000, &c->affinity_rel_margin_pct, 0},
        {"auth.fail_window_ms", 1000, 3600000, &c->auth_fail_window_ms, 0},
        {"otlp.flush_ms", 10, 600000, &c->otlp_flush_ms, 0},
        {"otlp.batch_max", 1, 100000, &c->otlp_batch_max, 0},
        {"otlp.queue_max", 1, 10000000, &c->otlp_queue_max, 0},
        {"otlp.timeout_ms", 50, 600000, &c->otlp_timeout_ms, 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (conf_int(cf, path, ints[i].name, ints[i].min, ints[i].max, ints[i].dst, ints[i].is64))
            return -1;
    return 0;
}

/* Reads the text of a file (read_file) or the text itself (read_string) and applies it. */
static int conf_read(struct conf *c, const char *path, const char *text)
{
    config_t cf;
    config_init(&cf);
    int rc = -1;
    if ((text ? config_read_string(&cf, text) : config_read_file(&cf, path)) != CONFIG_TRUE) {
        fprintf(stderr, "FATAL CONFIG FILE ERROR: %s:%d: %s\n",
                config_error_file(&cf) ? config_error_file(&cf) : path, config_error_line(&cf),
                config_error_text(&cf));
        goto out;
    }
    rc = conf_apply(c, &cf, path);
out:
    config_destroy(&cf);
    return rc;
}

int conf_load(struct conf *c, const char *path) { return conf_read(c, path, NULL); }

int conf_load_string(struct conf *c, const char *text, const char *name)
{
    return conf_read(c, name ? name : "<string>", text ? text : "");
}
