/* sluicectl_more.c: sluicectl's listings and the commands that mirror the rest of the
 * management API (R-ADM-4): show, ceilings, endpoint test, policies, quota layers, config,
 * nodes, audit, alerts, usage. Each calls one ops_* operation, as the admin CGI does. */
#include "cli.h"

#include "settings.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct json_object *more_fail(struct ops_error *err, const char *param, const char *msg)
{
    err->kind = OPS_ERR_INVALID;
    snprintf(err->param, sizeof err->param, "%s", param);
    snprintf(err->message, sizeof err->message, "%s", msg);
    return NULL;
}

/* --tenant --user --endpoint (names), --limit --offset, and the kind-specific filters. */
static int more_list(const struct cli *c, struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 limit, offset;
    memset(l, 0, sizeof *l);
    l->tenant = cli_opt(c, "tenant");
    l->user = cli_opt(c, "user");
    l->endpoint = cli_opt(c, "endpoint");
    l->model = cli_opt(c, "model");
    l->status = cli_opt(c, "status");
    l->object_type = cli_opt(c, "type");
    l->scope = cli_opt(c, "scope");
    if (cli_num(c, "limit", &limit, err) != 0 || cli_num(c, "offset", &offset, err) != 0)
        return -1;
    l->limit = limit.set ? limit.v : 0;
    l->offset = offset.set ? offset.v : 0;
    return 0;
}

#define MORE_LIST(fn, op)                                                                  \
    struct json_object *fn(struct sdb *db, const struct cli *c, struct ops_error *err)       \
    {                                                                                      \
        struct ops_list l;                                                                 \
        return more_list(c, &l, err) == 0 ? op(db, &l, err) : NULL;                        \
    }
MORE_LIST(cmd_list_tenants, ops_tenant_list)
MORE_LIST(cmd_list_users, ops_user_list)
MORE_LIST(cmd_list_endpoints, ops_endpoint_list)
MORE_LIST(cmd_list_replicas, ops_replica_list)
MORE_LIST(cmd_list_routes, ops_route_list)
MORE_LIST(cmd_list_keys, ops_key_list)
MORE_LIST(cmd_list_nodes, ops_node_list)
MORE_LIST(cmd_list_policies, ops_policy_list)
MORE_LIST(cmd_list_audit, ops_audit_list)
MORE_LIST(cmd_list_alerts, ops_alert_list)
MORE_LIST(cmd_list_quotas, ops_quota_list)
MORE_LIST(cmd_list_rules, ops_rule_list)

/* rule add NAME (--pattern REGEX | --keyword WORD) [--tenant T] --action block|flag
 * [--scope input|output] (R-GUARD-3) */
struct json_object *cmd_rule_add(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_rule_opts o = {
        .pattern = cli_opt(c, "pattern"), .keyword = cli_opt(c, "keyword"), .tenant = cli_opt(c, "tenant"),
        .action = cli_opt(c, "action"), .scope = cli_opt(c, "scope"),
    };
    return ops_rule_add(db, c->pos[0], &o, err);
}

struct json_object *cmd_rule_rm(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_rule_rm(db, c->pos[0], err);
}

MORE_LIST(cmd_list_semrules, ops_semrule_list)

/* semantic-rule add NAME --pattern REGEX [--tenant T] (--force MODEL | --forbid MODEL)
 * [--label L] (R-SEM-1) */
struct json_object *cmd_semrule_add(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_semrule_opts o = {
        .pattern = cli_opt(c, "pattern"), .tenant = cli_opt(c, "tenant"), .force = cli_opt(c, "force"),
        .forbid = cli_opt(c, "forbid"), .label = cli_opt(c, "label"),
    };
    return ops_semrule_add(db, c->pos[0], &o, err);
}

struct json_object *cmd_semrule_rm(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_semrule_rm(db, c->pos[0], err);
}

struct json_object *cmd_usage(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_list l;
    if (more_list(c, &l, err) != 0)
        return NULL;
    return ops_usage(db, &l, cli_opt(c, "group-by"), cli_opt(c, "from"), cli_opt(c, "to"), err);
}

struct json_object *cmd_usage_prune(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_i64 days;
    if (cli_num(c, "days", &days, err) != 0)
        return NULL;
    if (!days.set) {   /* R-USE-7: the retention is the setting usage_retention_days */
        struct json_object *cfg = ops_config_get(db, err);
        if (!cfg)
            return NULL;
        days.v = json_object_get_int64(json_object_object_get(cfg, "usage_retention_days"));
        json_object_put(cfg);
    }
    return ops_usage_prune(db, days.v, err);
}

/* show KIND ID: one object by id, as GET /api/v1/<kind>/{id}. */
struct json_object *cmd_show(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    static const struct {
        const char *kind;
        struct json_object *(*get)(struct sdb *, int64_t, struct ops_error *);
    } kinds[] = {
        {"tenant", ops_tenant_get}, {"user", ops_user_get}, {"endpoint", ops_endpoint_get},
        {"replica", ops_replica_get}, {"route", ops_route_get}, {"key", ops_key_get},
        {"node", ops_node_get}, {"alert", ops_alert_get}, {"key-policy", ops_key_policy_get},
    };
    if (strcmp(c->pos[0], "policy") == 0)
        return ops_policy_get(db, c->pos[1], err);
    int64_t id;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(c->pos[0], kinds[i].kind) == 0)
            return cli_id(c->pos[1], &id, err) == 0 ? kinds[i].get(db, id, err) : NULL;
    return more_fail(err, "kind", "show: KIND is tenant, user, endpoint, replica, route, key,"
                     " key-policy, node, alert or policy");
}

/* user ceiling NAME --qps N ...: the most any key of the user may allow (R-SEC-5). */
struct json_object *cmd_user_ceiling(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_key_limits l;
    if (cli_key_limits(c, &l, err) != 0)
        return NULL;
    return ops_user_set_ceiling(db, c->pos[0], &l, err);
}

struct json_object *cmd_endpoint_test(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_i64 t;
    if (cli_num(c, "timeout-ms", &t, err) != 0)
        return NULL;
    return ops_endpoint_test(db, c->pos[0], t.set ? t.v : 0, err);
}

/* The upstream credential comes from stdin, never argv (visible to every user in ps). */
int cli_endpoint_secret(const struct cli *c, struct ops_endpoint_opts *o, char **secret,
                        struct ops_error *err)
{
    *secret = NULL;
    o->upstream_auth = NULL;
    if (cli_opt(c, "upstream-auth-stdin")) {
        if (!(*secret = cli_read_password(err)))
            return -1;
        o->upstream_auth = *secret;
    } else if (cli_opt(c, "clear-upstream-auth")) {
        o->upstream_auth = "";
    }
    o->wake_url = cli_opt(c, "wake-url");
    o->anthropic_version = cli_opt(c, "anthropic-version");
    if (cli_onoff(c, "health-check", &o->health_check, err) != 0 ||
        cli_num(c, "default-max-tokens", &o->default_max_tokens, err) != 0 ||
        cli_num(c, "failure-threshold", &o->failure_threshold, err) != 0 ||
        cli_num(c, "start-period-seconds", &o->start_period_seconds, err) != 0 ||
        cli_num(c, "business-probe-rounds", &o->business_probe_rounds, err) != 0) {
        cli_free_password(*secret);
        *secret = NULL;
        return -1;
    }
    return 0;
}

/* key policy ID [--auto-routing on|off|inherit] [--strategy NAME|inherit]; no option: show. */
struct json_object *cmd_key_policy(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    int64_t id;
    struct ops_i64 on = {0, 0};
    const char *a = cli_opt(c, "auto-routing"), *s = cli_opt(c, "strategy");
    if (cli_id(c->pos[0], &id, err) != 0)
        return NULL;
    if (!a && !s)
        return ops_key_policy_get(db, id, err);
    if (a && strcmp(a, "inherit") == 0) {
        on.set = 1;
        on.v = -1;
    } else if (cli_onoff(c, "auto-routing", &on, err) != 0) {
        return NULL;
    }
    if (s && strcmp(s, "inherit") == 0)
        s = "";
    return ops_key_policy_set(db, id, on, s, err);
}

/* A decimal number with at most `decimals` places, scaled by 10^decimals ("1.5", 3 ->
 * 1500); "none" clears (-1). */
static int more_scaled(const struct cli *c, const char *name, int decimals, struct ops_i64 *out,
                       struct ops_error *err)
{
    const char *s = cli_opt(c, name);
    out->set = 0;
    if (!s)
        return 0;
    out->set = 1;
    if (strcmp(s, "none") == 0) {
        out->v = -1;
        return 0;
    }
    char whole[32] = "", frac[8] = "000000";
    const char *dot = strchr(s, '.');
    size_t wl = dot ? (size_t)(dot - s) : strlen(s);
    size_t fl = dot ? strlen(dot + 1) : 0;
    int64_t w = 0, f = 0;
    if (wl == 0 || wl >= sizeof whole || fl > (size_t)decimals) {
        more_fail(err, name, "expected a number (up to 3 decimals for quality, 6 for prices), or none");
        return -1;
    }
    memcpy(whole, s, wl);
    if (dot)
        memcpy(frac, dot + 1, fl);
    int64_t scale = 1;
    for (int i = 0; i < decimals; i++)
        scale *= 10;
    frac[decimals] = '\0';
    if (parse_i64(whole, 0, 1000000000LL, &w) != 0 || parse_i64(frac, 0, scale - 1, &f) != 0 ||
        (dot && fl == 0)) {
        more_fail(err, name, "expected a number (up to 3 decimals for quality, 6 for prices), or none");
        return -1;
    }
    out->v = w * scale + f;
    return 0;
}

/* policy set MODEL [--purpose chat|completion|embedding|none] [--routing on|off] ... */
struct json_object *cmd_policy_set(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_policy_opts o;
    memset(&o, 0, sizeof o);
    o.purpose = cli_opt(c, "purpose");
    if (o.purpose && strcmp(o.purpose, "none") == 0)
        o.purpose = "";
    o.description = cli_opt(c, "description");
    if (cli_onoff(c, "routing", &o.routing_enabled, err) != 0 ||
        cli_onoff(c, "tools", &o.supports_tools, err) != 0 ||
        cli_onoff(c, "vision", &o.supports_vision, err) != 0 ||
        more_scaled(c, "quality", 3, &o.quality_milli, err) != 0 ||
        more_scaled(c, "price-input", 6, &o.price_input_micro, err) != 0 ||
        more_scaled(c, "price-output", 6, &o.price_output_micro, err) != 0 ||
        (!o.price_input_micro.set && more_scaled(c, "price-in", 6, &o.price_input_micro, err) != 0) ||
        (!o.price_output_micro.set && more_scaled(c, "price-out", 6, &o.price_output_micro, err) != 0) ||
        cli_onoff(c, "shrink-max-tokens", &o.shrink_max_tokens, err) != 0 ||
        cli_num(c, "max-context", &o.max_context, err) != 0 ||
        cli_num(c, "max-output", &o.max_output, err) != 0 ||
        cli_num(c, "cache-ttl-s", &o.cache_ttl_s, err) != 0 ||              /* R-CACHE-2 */
        cli_onoff(c, "default-greedy", &o.default_greedy, err) != 0 ||      /* R-CACHE-1 */
        cli_onoff(c, "clamp-max-tokens", &o.clamp_max_tokens, err) != 0 ||  /* R-GUARD-1 */
        more_scaled(c, "semantic-threshold", 3, &o.semantic_threshold_milli, err) != 0)   /* R-CACHE-4 */
        return NULL;
    o.cache = cli_opt(c, "cache");
    o.tenants = cli_opt(c, "tenants");      /* R-SEM-1: "" clears */
    o.labels = cli_opt(c, "labels");
    return ops_policy_set(db, c->pos[0], &o, err);
}

struct json_object *cmd_policy_rm(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_policy_rm(db, c->pos[0], err);
}

/* ---- quota layers (R-KEY-6) ------------------------------------------------------- */

/* The one target of quota set|rm: its scope and name. NULL with err set unless exactly one. */
static const char *more_quota_target(const struct cli *c, const char **name, struct ops_error *err)
{
    const char *scope = NULL;
    *name = NULL;
    for (int i = 0; i < AUTHZ_NQSCOPES; i++) {
        const char *v = cli_opt(c, authz_quota_scope_names[i]);
        if (!v)
            continue;
        if (scope) {
            more_fail(err, authz_quota_scope_names[i],
                      "give exactly one of --tenant, --user, --endpoint, --model");
            return NULL;
        }
        scope = authz_quota_scope_names[i];
        *name = v;
    }
    if (!scope)
        more_fail(err, "scope", "name the layer: --tenant T, --user U, --endpoint E or --model M");
    return scope;
}

/* quota set (--tenant T | --user U | --endpoint E | --model M) [--concurrency N] [--rpm N]
 * [--daily-tokens N] [--monthly-tokens N] [--queue-max N|none]: only the flags given change. */
struct json_object *cmd_quota_set(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_quota_opts o;
    const char *name, *scope = more_quota_target(c, &name, err);
    if (!scope)
        return NULL;
    const struct { const char *flag, *field; struct ops_i64 *v; } f[] = {
        {"concurrency", "concurrency", &o.concurrency}, {"rpm", "rpm", &o.rpm},
        {"daily-tokens", "daily_tokens", &o.daily_tokens}, {"monthly-tokens", "monthly_tokens", &o.monthly_tokens},
        {"queue-max", "queue_max", &o.queue_max},
    };
    memset(&o, 0, sizeof o);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const char *v = cli_opt(c, f[i].flag);
        if (!v)
            continue;
        /* R-KEY-6: each scope takes its own limits; the message names the flags it takes. */
        if (!ops_quota_takes(scope, f[i].field)) {
            char takes[96] = "";
            for (size_t j = 0; j < sizeof f / sizeof f[0]; j++)
                if (ops_quota_takes(scope, f[j].field))
                    snprintf(takes + strlen(takes), sizeof takes - strlen(takes), "%s--%s", takes[0] ? ", " : "",
                             f[j].flag);
            err->kind = OPS_ERR_INVALID;
            snprintf(err->param, sizeof err->param, "%s", f[i].field);
            snprintf(err->message, sizeof err->message, "--%s does not apply to a %s quota (it takes %s)",
                     f[i].flag, scope, takes);
            return NULL;
        }
        if (strcmp(f[i].flag, "queue-max") == 0 && strcmp(v, "none") == 0) {
            o.queue_max.set = 1;        /* back to the endpoint's queue_max */
            o.queue_max.v = -1;
        } else if (cli_num(c, f[i].flag, f[i].v, err) != 0) {
            return NULL;
        } else if (f[i].v->v < 0) {
            err->kind = OPS_ERR_INVALID;
            snprintf(err->param, sizeof err->param, "%s", f[i].field);
            snprintf(err->message, sizeof err->message, "--%s must be 0 (no limit) or more", f[i].flag);
            return NULL;
        }
    }
    return ops_quota_set(db, scope, name, &o, err);
}

struct json_object *cmd_quota_rm(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    const char *name, *scope = more_quota_target(c, &name, err);
    return scope ? ops_quota_rm(db, scope, name, err) : NULL;
}

/* ---- the answer cache (R-CACHE-3) ------------------------------------------------------ */

struct json_object *cmd_cache_clear(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_list l;
    return more_list(c, &l, err) == 0 ? ops_cache_clear(db, &l, err) : NULL;
}

struct json_object *cmd_cache_stats(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_list l;
    return more_list(c, &l, err) == 0 ? ops_cache_stats(db, &l, err) : NULL;
}

/* cache hits [--model M] [--tenant T] [--limit N] (R-CACHE-4) */
struct json_object *cmd_cache_hits(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_list l;
    return more_list(c, &l, err) == 0 ? ops_cache_hits(db, &l, err) : NULL;
}

struct json_object *cmd_config_get(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    (void)c;
    return ops_config_get(db, err);
}

/* config set NAME VALUE: VALUE is read as JSON when it is (true, 85, 85.5, null), else as
 * text; a decimal only for a number setting (gpu_temperature_threshold). */
struct json_object *cmd_config_set(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    const struct settings_def *d = settings_find(c->pos[0]);
    struct json_object *v = json_tokener_parse(c->pos[1]);
    if (!v && strcmp(c->pos[1], "null") != 0)
        v = json_object_new_string(c->pos[1]);
    if (v && json_object_is_type(v, json_type_double) && (!d || d->type != SETTINGS_NUMBER)) {
        json_object_put(v);
        return more_fail(err, c->pos[0], "expected an integer, a boolean, a word or null");
    }
    struct json_object *changes = json_object_new_object();
    json_object_object_add(changes, c->pos[0], v);
    struct json_object *res = ops_config_set(db, changes, err);
    json_object_put(changes);
    return res;
}

struct json_object *cmd_node_add(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_node_add(db, c->pos[0], cli_opt(c, "status"), cli_opt(c, "metrics-url"), err);
}

struct json_object *cmd_node_set(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_node_set(db, c->pos[0], cli_opt(c, "status"), cli_opt(c, "metrics-url"), err);
}

struct json_object *cmd_node_rm(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_node_rm(db, c->pos[0], err);
}

/* node temperature NAME DEGREES (tenths kept). */
struct json_object *cmd_node_temperature(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    char *end = NULL;
    double t = strtod(c->pos[1], &end);
    if (!end || *end || end == c->pos[1] || !(t >= -50 && t <= 200))
        return more_fail(err, "degrees", "DEGREES must be a number from -50 to 200");
    char path[1024];
    return ops_node_temperature(db, c->pos[0], (int64_t)llround(t * 10), cli_state_path(c, path, sizeof path), err);
}

struct json_object *cmd_alert_resolve(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    int64_t id;
    return cli_id(c->pos[0], &id, err) == 0 ? ops_alert_resolve(db, id, err) : NULL;
}
