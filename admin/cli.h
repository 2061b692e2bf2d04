/* cli.h: the parsed sluicectl command line and its option helpers, shared by
 * admin/sluicectl.c (parser, table, output) and admin/sluicectl_more.c (commands). */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include "ops.h"

#include <json-c/json.h>
#include "sdb.h"
#include <stdint.h>

#define CLI_MAX_POS 4
#define CLI_MAX_OPTS 24
#define CLI_NAME_MAX 64         /* longest option name */
#define CLI_PASSWORD_MAX 1024

/* One parsed command line. Strings point into argv. */
struct cli {
    const char *db_path;
    const char *key_file;               /* --key-file; NULL: sluice.key beside the database (R-SEC-9) */
    const char *state_file;             /* sluice.conf's state_file when the database came from it */
    int json;
    const char *words[2];               /* the command's words */
    const char *pos[CLI_MAX_POS];       /* positional arguments after them */
    int npos;
    struct {
        char name[CLI_NAME_MAX];        /* without "--" */
        const char *value;              /* NULL for a flag */
    } opts[CLI_MAX_OPTS];
    int nopts;
};

typedef struct json_object *(*cli_run_fn)(struct sdb *db, const struct cli *c, struct ops_error *err);

/* The option's value ("" for a flag), or NULL when not given. */
const char *cli_opt(const struct cli *c, const char *name);
/* Optional integer / on|off options; -1 with err set when malformed. */
int cli_num(const struct cli *c, const char *name, struct ops_i64 *out, struct ops_error *err);
int cli_onoff(const struct cli *c, const char *name, struct ops_i64 *out, struct ops_error *err);
/* A positive ID argument. */
int cli_id(const char *s, int64_t *id, struct ops_error *err);
/* One line from stdin (no echo on a terminal); a heap string, or NULL with err set. */
char *cli_read_password(struct ops_error *err);
void cli_free_password(char *pw);
int cli_key_limits(const struct cli *c, struct ops_key_limits *l, struct ops_error *err);

/* ---- admin/sluicectl_more.c: listings and the commands of the management API ---- */
#define CLI_LIST_OPTS "tenant= user= endpoint= limit= offset="
struct json_object *cmd_list_tenants(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_users(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_endpoints(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_replicas(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_routes(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_keys(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_nodes(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_policies(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_audit(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_alerts(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_quotas(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_semrules(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_semrule_add(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_semrule_rm(struct sdb *db, const struct cli *c, struct ops_error *err);
/* quota set|rm: exactly one of the targets (R-KEY-6). */
#define QUOTA_TARGET_OPTS "tenant= user= endpoint= model="
struct json_object *cmd_quota_set(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_quota_rm(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_list_rules(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_rule_add(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_rule_rm(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_usage(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_usage_prune(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_show(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_user_ceiling(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_endpoint_test(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_key_policy(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_policy_set(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_policy_rm(struct sdb *db, const struct cli *c, struct ops_error *err);
/* cache clear|stats [--model M] [--tenant T] (R-CACHE-3) */
struct json_object *cmd_cache_clear(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_cache_stats(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_cache_hits(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_config_get(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_config_set(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_node_add(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_node_set(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_node_rm(struct sdb *db, const struct cli *c, struct ops_error *err);
const char *cli_state_path(const struct cli *c, char *path, size_t n);
struct json_object *cmd_node_temperature(struct sdb *db, const struct cli *c, struct ops_error *err);
struct json_object *cmd_alert_resolve(struct sdb *db, const struct cli *c, struct ops_error *err);
/* Reads --upstream-auth-stdin into o (heap; free with cli_free_password). -1 on error. */
int cli_endpoint_secret(const struct cli *c, struct ops_endpoint_opts *o, char **secret,
                        struct ops_error *err);

#endif
