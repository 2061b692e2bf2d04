/* sluicectl.c: the command line over admin/ops.c (R-ADM-4): parse, call one
 * operation, print its result as JSON (--json) or as readable text. */
#include "cli.h"
#include "ops.h"
#include "stats.h"

#include "conf.h"
#include "db.h"
#include "log.h"
#include "secret.h"
#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define CLI_CELL_MAX 48         /* table cells longer than this are cut in text output */

enum cli_exit { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* struct cli and the helpers' contracts: cli.h */
const char *cli_opt(const struct cli *c, const char *name)
{
    for (int i = c->nopts - 1; i >= 0; i--)
        if (strcmp(c->opts[i].name, name) == 0)
            return c->opts[i].value ? c->opts[i].value : "";
    return NULL;
}

/* An optional integer option into *out; -1 with err set when it is not a number. */
int cli_num(const struct cli *c, const char *name, struct ops_i64 *out,
                   struct ops_error *err)
{
    const char *s = cli_opt(c, name);
    out->set = 0;
    if (!s)
        return 0;
    if (parse_i64(s, INT64_MIN, INT64_MAX, &out->v) != 0) {
        err->kind = OPS_ERR_INVALID;
        snprintf(err->param, sizeof err->param, "%s", name);
        snprintf(err->message, sizeof err->message, "--%s must be an integer", name);
        return -1;
    }
    out->set = 1;
    return 0;
}

/* An optional on|off option into *out as 1 or 0. */
int cli_onoff(const struct cli *c, const char *name, struct ops_i64 *out,
                     struct ops_error *err)
{
    const char *s = cli_opt(c, name);
    out->set = 0;
    if (!s)
        return 0;
    out->set = 1;
    if (strcmp(s, "on") == 0 || strcmp(s, "true") == 0 || strcmp(s, "1") == 0)
        out->v = 1;
    else if (strcmp(s, "off") == 0 || strcmp(s, "false") == 0 || strcmp(s, "0") == 0)
        out->v = 0;
    else {
        err->kind = OPS_ERR_INVALID;
        snprintf(err->param, sizeof err->param, "%s", name);
        snprintf(err->message, sizeof err->message, "--%s must be on or off", name);
        return -1;
    }
    return 0;
}

/* A positional ID (route, key). */
int cli_id(const char *s, int64_t *id, struct ops_error *err)
{
    if (parse_i64(s, 1, INT64_MAX, id) == 0)
        return 0;
    err->kind = OPS_ERR_INVALID;
    snprintf(err->param, sizeof err->param, "id");
    snprintf(err->message, sizeof err->message, "ID must be a positive integer");
    return -1;
}

/* One line from stdin, without echo on a terminal. Returns a heap string or NULL. */
char *cli_read_password(struct ops_error *err)
{
    char line[CLI_PASSWORD_MAX + 2];
    struct termios old, quiet;
    int tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &old) == 0;
    if (tty) {
        fputs("Password: ", stderr);
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
    char *got = fgets(line, sizeof line, stdin);
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
        fputc('\n', stderr);
    }
    char *res = NULL;
    size_t n = got ? strlen(line) : 0;
    if (n > 0 && line[n - 1] == '\n')
        line[--n] = '\0';
    else if (got && !feof(stdin))
        n = CLI_PASSWORD_MAX + 1;           /* longer than a line buffer: refuse */
    if (n > 0 && line[n - 1] == '\r')
        line[--n] = '\0';
    if (!got || n == 0 || n > CLI_PASSWORD_MAX) {
        err->kind = OPS_ERR_INVALID;
        snprintf(err->param, sizeof err->param, "password");
        snprintf(err->message, sizeof err->message,
                 "--password-stdin: expected one line of 1 to %d bytes on stdin", CLI_PASSWORD_MAX);
    } else {
        res = strdup(line);
        if (!res)
            abort();
    }
    explicit_bzero(line, sizeof line);
    return res;
}

void cli_free_password(char *pw)
{
    if (pw) {
        explicit_bzero(pw, strlen(pw));
        free(pw);
    }
}

/* ---- commands ------------------------------------------------------------ */


static struct json_object *cmd_init(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_init(db, c->db_path, err);
}

static struct json_object *cmd_tenant_add(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_tenant_add(db, c->pos[0], err);
}

/* tenant set NAME --weight N: its share of a contended queue (R-PRIO-2). */
static struct json_object *cmd_tenant_set(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_i64 weight;
    if (cli_num(c, "weight", &weight, err) != 0)
        return NULL;
    return ops_tenant_set(db, c->pos[0], weight, err);
}

static struct json_object *cmd_tenant_rm(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_tenant_rm(db, c->pos[0], err);
}

static struct json_object *cmd_user_add(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    char *pw = NULL;
    const char *role = cli_opt(c, "role");
    struct ops_key_limits ceiling;
    if (cli_key_limits(c, &ceiling, err) != 0)
        return NULL;
    if (cli_opt(c, "password-stdin") && !(pw = cli_read_password(err)))
        return NULL;
    struct json_object *res = ops_user_add(db, c->pos[0], cli_opt(c, "tenant"),
                                           role ? role : "member", pw, &ceiling, err);
    cli_free_password(pw);
    return res;
}

static struct json_object *cmd_user_set(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    char *pw = NULL;
    if (cli_opt(c, "password-stdin") && !(pw = cli_read_password(err)))
        return NULL;
    struct json_object *res = ops_user_set(db, c->pos[0], cli_opt(c, "role"), pw, err);
    cli_free_password(pw);
    return res;
}

static struct json_object *cmd_user_rm(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_user_rm(db, c->pos[0], err);
}

static int cli_endpoint_opts(const struct cli *c, struct ops_endpoint_opts *o,
                             struct ops_error *err)
{
    o->algorithm = cli_opt(c, "algorithm");
    o->protocol = cli_opt(c, "protocol");
    o->health_path = cli_opt(c, "health-path");
    if (cli_onoff(c, "affinity", &o->affinity, err) != 0 ||
        cli_onoff(c, "stream-guard", &o->stream_guard, err) != 0 ||
        cli_num(c, "connect-timeout-ms", &o->connect_timeout_ms, err) != 0 ||
        cli_num(c, "first-byte-timeout-ms", &o->first_byte_timeout_ms, err) != 0 ||
        cli_num(c, "idle-timeout-ms", &o->idle_timeout_ms, err) != 0 ||
        cli_num(c, "max-concurrency", &o->max_concurrency, err) != 0 ||
        cli_num(c, "queue-max", &o->queue_max, err) != 0 ||
        cli_num(c, "queue-timeout-ms", &o->queue_timeout_ms, err) != 0)
        return -1;
    return 0;
}

static struct json_object *cmd_endpoint_add(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_endpoint_opts o;
    char *secret;
    if (cli_endpoint_opts(c, &o, err) != 0 || cli_endpoint_secret(c, &o, &secret, err) != 0)
        return NULL;
    struct json_object *res = ops_endpoint_add(db, c->pos[0], cli_opt(c, "tenant"), &o, err);
    cli_free_password(secret);
    return res;
}

static struct json_object *cmd_endpoint_set(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_endpoint_opts o;
    char *secret;
    if (cli_endpoint_opts(c, &o, err) != 0 || cli_endpoint_secret(c, &o, &secret, err) != 0)
        return NULL;
    struct json_object *res = ops_endpoint_set(db, c->pos[0], &o, err);
    cli_free_password(secret);
    return res;
}

static struct json_object *cmd_endpoint_rotate(struct sdb *db, const struct cli *c,
                                               struct ops_error *err)
{
    return ops_endpoint_rotate_key(db, c->pos[0], err);
}

static struct json_object *cmd_endpoint_rm(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_endpoint_rm(db, c->pos[0], err);
}

static int cli_replica_opts(const struct cli *c, struct ops_replica_opts *o, struct ops_error *err)
{
    o->engine = cli_opt(c, "engine");
    o->state = cli_opt(c, "state");
    o->node = cli_opt(c, "node");
    /* R-SEC-9: --approve (replica set): the operator approves the URL for its credential. */
    o->approved.set = cli_opt(c, "approve") != NULL;
    o->approved.v = 1;
    if (cli_num(c, "weight", &o->weight, err) != 0 ||
        cli_num(c, "max-concurrency", &o->max_concurrency, err) != 0)
        return -1;
    return 0;
}

static struct json_object *cmd_replica_add(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_replica_opts o;
    if (cli_replica_opts(c, &o, err) != 0)
        return NULL;
    return ops_replica_add(db, c->pos[0], c->pos[1], &o, err);
}

static struct json_object *cmd_replica_set(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_replica_opts o;
    if (cli_replica_opts(c, &o, err) != 0)
        return NULL;
    return ops_replica_set(db, c->pos[0], c->pos[1], &o, err);
}

static struct json_object *cmd_replica_rm(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_replica_rm(db, c->pos[0], c->pos[1], err);
}

/* R-CACHE-2: --cache off|exact|semantic|inherit, --cache-ttl-s N|inherit (inherit: the
 * model policy's, NULL in the database). */
static int cli_route_cache(const struct cli *c, struct ops_route_opts *o, struct ops_error *err)
{
    const char *mode = cli_opt(c, "cache"), *ttl = cli_opt(c, "cache-ttl-s");
    o->cache = mode && strcmp(mode, "inherit") == 0 ? "" : mode;
    if (o->cache && !*o->cache && (!mode || strcmp(mode, "inherit") != 0)) {
        err->kind = OPS_ERR_INVALID;
        snprintf(err->param, sizeof err->param, "cache");
        snprintf(err->message, sizeof err->message, "--cache must be off, exact, semantic or inherit");
        return -1;
    }
    o->cache_ttl_s.set = 0;
    if (ttl && strcmp(ttl, "inherit") == 0) {
        o->cache_ttl_s.set = 1;
        o->cache_ttl_s.v = -1;
        return 0;
    }
    if (cli_num(c, "cache-ttl-s", &o->cache_ttl_s, err) != 0)
        return -1;
    if (o->cache_ttl_s.set && o->cache_ttl_s.v < 1) {
        err->kind = OPS_ERR_INVALID;
        snprintf(err->param, sizeof err->param, "cache_ttl_s");
        snprintf(err->message, sizeof err->message, "--cache-ttl-s must be 1 to %d seconds, or inherit",
                 OPS_CACHE_TTL_MAX);
        return -1;
    }
    return 0;
}

static int cli_route_opts(const struct cli *c, struct ops_route_opts *o, struct ops_error *err)
{
    o->target_model = cli_opt(c, "target-model");
    o->status = cli_opt(c, "status");
    o->endpoint = cli_opt(c, "endpoint");
    /* R-SHD-1: --mirror ENDPOINT (none: no mirror), --mirror-percent 0..100 */
    o->mirror = cli_opt(c, "mirror");
    if (o->mirror && strcmp(o->mirror, "none") == 0)
        o->mirror = "";
    if (cli_num(c, "mirror-percent", &o->mirror_percent, err) != 0)
        return -1;
    if (cli_num(c, "priority", &o->priority, err) != 0 ||
        cli_num(c, "weight", &o->weight, err) != 0 || cli_route_cache(c, o, err) != 0)
        return -1;
    return 0;
}

static struct json_object *cmd_route_add(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_route_opts o;
    if (cli_route_opts(c, &o, err) != 0)
        return NULL;
    return ops_route_add(db, c->pos[0], c->pos[1], cli_opt(c, "tenant"), &o, err);
}

static struct json_object *cmd_route_set(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_route_opts o;
    int64_t id;
    if (cli_id(c->pos[0], &id, err) != 0 || cli_route_opts(c, &o, err) != 0)
        return NULL;
    return ops_route_set(db, id, &o, err);
}

static struct json_object *cmd_route_rm(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    int64_t id;
    if (cli_id(c->pos[0], &id, err) != 0)
        return NULL;
    return ops_route_rm(db, id, err);
}

int cli_key_limits(const struct cli *c, struct ops_key_limits *l, struct ops_error *err)
{
    /* The short names (--qps, --daily, ...) and the column-like long ones. */
    struct { const char *a, *b; struct ops_i64 *v; } f[] = {
        {"qps-limit", "qps", &l->qps_limit},
        {"concurrency-limit", "concurrency", &l->concurrency_limit},
        {"daily-limit", "daily", &l->daily_limit},
        {"monthly-quota", "monthly", &l->monthly_quota},
        {"tpm-limit", "tpm", &l->tpm_limit},
        {"monthly-token-quota", "monthly-tokens", &l->monthly_token_quota},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        struct ops_i64 other = {0, 0};
        if (cli_num(c, f[i].a, f[i].v, err) != 0 || cli_num(c, f[i].b, &other, err) != 0)
            return -1;
        if (other.set)
            *f[i].v = other;
    }
    return 0;
}

/* R-PRIO-2: --priority N and --max-priority N|none (none: no higher than --priority). */
static int cli_key_priority(const struct cli *c, struct ops_key_priority *p, struct ops_error *err)
{
    const char *max = cli_opt(c, "max-priority");
    p->max_priority.set = 0;
    if (cli_num(c, "priority", &p->priority, err) != 0)
        return -1;
    if (max && strcmp(max, "none") == 0) {
        p->max_priority.set = 1;
        p->max_priority.v = -1;
        return 0;
    }
    if (cli_num(c, "max-priority", &p->max_priority, err) != 0)
        return -1;
    if (p->max_priority.set && p->max_priority.v < 0) {
        err->kind = OPS_ERR_INVALID;
        snprintf(err->param, sizeof err->param, "max_priority");
        snprintf(err->message, sizeof err->message, "--max-priority must be 0 to 9, or none");
        return -1;
    }
    return 0;
}

static struct json_object *cmd_key_add(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_key_limits l;
    struct ops_key_priority p;
    if (cli_key_limits(c, &l, err) != 0 || cli_key_priority(c, &p, err) != 0)
        return NULL;
    return ops_key_add(db, cli_opt(c, "user"), cli_opt(c, "name"), &l, &p, err);
}

static struct json_object *cmd_key_set(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    struct ops_key_limits l;
    struct ops_key_priority prio;
    int64_t id;
    if (cli_id(c->pos[0], &id, err) != 0 || cli_key_limits(c, &l, err) != 0 ||
        cli_key_priority(c, &prio, err) != 0)
        return NULL;
    /* R-SEM-1: `key set ID --require-labels a,b` ("" clears). */
    const char *rl = cli_opt(c, "require-labels");
    if (rl) {
        struct json_object *p = ops_key_labels_set(db, id, rl, err);
        if (!p)
            return NULL;
        int more = l.qps_limit.set || l.concurrency_limit.set || l.daily_limit.set || l.monthly_quota.set ||
                   l.tpm_limit.set || l.monthly_token_quota.set || cli_opt(c, "name") || prio.priority.set ||
                   prio.max_priority.set || cli_opt(c, "auto") || cli_opt(c, "strategy");
        if (!more)
            return p;
        json_object_put(p);
    }
    /* R-AUTO-1: `key set ID --auto on|off --strategy S` is the key's routing policy. */
    const char *a = cli_opt(c, "auto"), *s = cli_opt(c, "strategy");
    if (a || s) {
        struct ops_i64 on = {0, 0};
        if (a && strcmp(a, "inherit") == 0) {
            on.set = 1;
            on.v = -1;
        } else if (cli_onoff(c, "auto", &on, err) != 0) {
            return NULL;
        }
        struct json_object *p = ops_key_policy_set(db, id, on, s && strcmp(s, "inherit") == 0 ? "" : s, err);
        if (!p)
            return NULL;
        int limits = l.qps_limit.set || l.concurrency_limit.set || l.daily_limit.set || l.monthly_quota.set ||
                     l.tpm_limit.set || l.monthly_token_quota.set || cli_opt(c, "name") ||
                     prio.priority.set || prio.max_priority.set;
        if (!limits)
            return p;
        json_object_put(p);
    }
    return ops_key_set(db, id, cli_opt(c, "name"), &l, &prio, err);
}

static struct json_object *cmd_key_revoke(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    int64_t id;
    if (cli_id(c->pos[0], &id, err) != 0)
        return NULL;
    return ops_key_revoke(db, id, err);
}

static struct json_object *cmd_settings_set(struct sdb *db, const struct cli *c,
                                            struct ops_error *err)
{
    return ops_settings_set(db, c->pos[0], c->pos[1], err);
}

static struct json_object *cmd_settings_get(struct sdb *db, const struct cli *c,
                                            struct ops_error *err)
{
    return ops_settings_get(db, c->pos[0], err);
}

static struct json_object *cmd_settings_rm(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    return ops_settings_rm(db, c->pos[0], err);
}

static struct json_object *cmd_settings_list(struct sdb *db, const struct cli *c,
                                             struct ops_error *err)
{
    (void)c;
    return ops_settings_list(db, err);
}

/* The pool's shared state: --state, else sluice.state beside the database. */
const char *cli_state_path(const struct cli *c, char *path, size_t n)
{
    const char *state = cli_opt(c, "state");
    if (state)
        return state;
    if (c->state_file)
        return c->state_file;
    const char *slash = strrchr(c->db_path, '/');
    int dir = slash ? (int)(slash - c->db_path) : 1;
    snprintf(path, n, "%.*s/sluice.state", dir, slash ? c->db_path : ".");
    return path;
}

static struct json_object *cmd_stats(struct sdb *db, const struct cli *c, struct ops_error *err)
{
    char path[1024];
    struct json_object *res = stats_json(db, cli_state_path(c, path, sizeof path));
    if (!res) {
        err->kind = OPS_ERR_NOT_FOUND;
        snprintf(err->param, sizeof err->param, "state");
        snprintf(err->message, sizeof err->message, "cannot map the shared state file");
    }
    return res;
}

#define ENDPOINT_OPTS "algorithm= protocol= affinity= stream-guard= health-path=" \
    " connect-timeout-ms= first-byte-timeout-ms= idle-timeout-ms= upstream-auth-stdin" \
    " clear-upstream-auth wake-url= health-check= failure-threshold= start-period-seconds=" \
    " business-probe-rounds= anthropic-version= default-max-tokens= max-concurrency= queue-max=" \
    " queue-timeout-ms="
#define KEY_LIMIT_OPTS "qps-limit= concurrency-limit= daily-limit= monthly-quota=" \
    " tpm-limit= monthly-token-quota= qps= concurrency= daily= monthly= tpm= monthly-tokens="

/* The command table; the usage text is printed from it.
 *   group, verb  the words naming the command (verb NULL: one word)
 *   args         positional arguments, space-separated; exactly these many are required
 *   opts         accepted options, space-separated: "name=" takes a value, "name" is a flag
 *   required     options that must be given, space-separated
 *   creates      1: open the database with create (init); others need it to exist
 *   run          the operation */
static const struct cli_cmd {
    const char *group, *verb, *args, *opts, *required;
    int creates;
    cli_run_fn run;
} cli_cmds[] = {
    {"init", NULL, "", "", "", 1, cmd_init},
    {"tenant", "add", "NAME", "", "", 0, cmd_tenant_add},
    {"tenant", "set", "NAME", "weight=", "", 0, cmd_tenant_set},
    {"tenant", "rm", "NAME", "", "", 0, cmd_tenant_rm},
    {"user", "add", "NAME", "tenant= role= password-stdin " KEY_LIMIT_OPTS, "tenant", 0, cmd_user_add},
    {"user", "set", "NAME", "role= password-stdin", "", 0, cmd_user_set},
    {"user", "rm", "NAME", "", "", 0, cmd_user_rm},
    {"endpoint", "add", "NAME", "tenant= " ENDPOINT_OPTS, "tenant", 0, cmd_endpoint_add},
    {"endpoint", "set", "NAME", ENDPOINT_OPTS, "", 0, cmd_endpoint_set},
    {"endpoint", "rotate-key", "NAME", "", "", 0, cmd_endpoint_rotate},
    {"endpoint", "rm", "NAME", "", "", 0, cmd_endpoint_rm},
    {"replica", "add", "ENDPOINT URL", "engine= weight= max-concurrency= state= node=", "", 0,
     cmd_replica_add},
    {"replica", "set", "ENDPOINT URL", "engine= state= weight= max-concurrency= node= approve", "", 0,
     cmd_replica_set},
    {"replica", "rm", "ENDPOINT URL", "", "", 0, cmd_replica_rm},
    {"route", "add", "MODEL ENDPOINT", "tenant= priority= weight= target-model= status= cache= cache-ttl-s= mirror= mirror-percent=",
     "", 0, cmd_route_add},
    {"route", "set", "ID", "priority= weight= target-model= status= endpoint= cache= cache-ttl-s= mirror= mirror-percent=", "", 0,
     cmd_route_set},
    {"route", "rm", "ID", "", "", 0, cmd_route_rm},
    {"key", "add", "", "user= name= priority= max-priority= " KEY_LIMIT_OPTS, "user", 0, cmd_key_add},
    {"key", "set", "ID", "name= auto= strategy= priority= max-priority= require-labels= " KEY_LIMIT_OPTS, "", 0, cmd_key_set},
    {"key", "revoke", "ID", "", "", 0, cmd_key_revoke},
    {"list", "tenants", "", CLI_LIST_OPTS, "", 0, cmd_list_tenants},
    {"list", "users", "", CLI_LIST_OPTS, "", 0, cmd_list_users},
    {"list", "endpoints", "", CLI_LIST_OPTS, "", 0, cmd_list_endpoints},
    {"list", "replicas", "", CLI_LIST_OPTS, "", 0, cmd_list_replicas},
    {"list", "routes", "", CLI_LIST_OPTS " model=", "", 0, cmd_list_routes},
    {"list", "keys", "", CLI_LIST_OPTS, "", 0, cmd_list_keys},
    {"list", "nodes", "", CLI_LIST_OPTS, "", 0, cmd_list_nodes},
    {"list", "policies", "", CLI_LIST_OPTS, "", 0, cmd_list_policies},
    {"list", "audit", "", CLI_LIST_OPTS " type=", "", 0, cmd_list_audit},
    {"list", "alerts", "", CLI_LIST_OPTS " status=", "", 0, cmd_list_alerts},
    {"list", "quotas", "", CLI_LIST_OPTS " model= scope=", "", 0, cmd_list_quotas},
    {"show", NULL, "KIND ID", "", "", 0, cmd_show},
    {"user", "ceiling", "NAME", KEY_LIMIT_OPTS, "", 0, cmd_user_ceiling},
    {"endpoint", "test", "NAME", "timeout-ms=", "", 0, cmd_endpoint_test},
    {"key", "policy", "ID", "auto-routing= strategy=", "", 0, cmd_key_policy},
    {"policy", "set", "MODEL", "purpose= routing= quality= price-input= price-output= price-in= price-out= tools="
     " vision= max-context= max-output= description= shrink-max-tokens= cache= cache-ttl-s= default-greedy= clamp-max-tokens= semantic-threshold="
     " tenants= labels=",
     "", 0, cmd_policy_set},
    {"policy", "rm", "MODEL", "", "", 0, cmd_policy_rm},
    {"quota", "set", "", QUOTA_TARGET_OPTS " concurrency= rpm= daily-tokens= monthly-tokens= queue-max=", "", 0,
     cmd_quota_set},
    {"quota", "rm", "", QUOTA_TARGET_OPTS, "", 0, cmd_quota_rm},
    {"list", "rules", "", CLI_LIST_OPTS, "", 0, cmd_list_rules},
    {"rule", "add", "NAME", "pattern= keyword= tenant= action= scope=", "", 0, cmd_rule_add},
    {"rule", "rm", "NAME", "", "", 0, cmd_rule_rm},
    {"list", "semantic-rules", "", CLI_LIST_OPTS, "", 0, cmd_list_semrules},
    {"semantic-rule", "add", "NAME", "pattern= tenant= force= forbid= label=", "pattern", 0, cmd_semrule_add},
    {"semantic-rule", "rm", "NAME", "", "", 0, cmd_semrule_rm},
    {"cache", "clear", "", "model= tenant=", "", 0, cmd_cache_clear},
    {"cache", "stats", "", "model= tenant=", "", 0, cmd_cache_stats},
    {"cache", "hits", "", "model= tenant= limit= offset=", "", 0, cmd_cache_hits},
    {"config", "get", "", "", "", 0, cmd_config_get},
    {"config", "set", "NAME VALUE", "", "", 0, cmd_config_set},
    {"node", "add", "NAME", "status= metrics-url=", "", 0, cmd_node_add},
    {"node", "set", "NAME", "status= metrics-url=", "", 0, cmd_node_set},
    {"node", "rm", "NAME", "", "", 0, cmd_node_rm},
    {"node", "temperature", "NAME DEGREES", "state=", "", 0, cmd_node_temperature},
    {"alert", "resolve", "ID", "", "", 0, cmd_alert_resolve},
    {"usage", "prune", "", "days=", "", 0, cmd_usage_prune},
    {"usage", NULL, "", CLI_LIST_OPTS " group-by= from= to=", "", 0, cmd_usage},
    {"settings", "set", "KEY VALUE", "", "", 0, cmd_settings_set},
    {"settings", "get", "KEY", "", "", 0, cmd_settings_get},
    {"settings", "rm", "KEY", "", "", 0, cmd_settings_rm},
    {"settings", "list", "", "", "", 0, cmd_settings_list},
    {"stats", NULL, "", "state=", "", 0, cmd_stats},
};
#define CLI_NCMDS (sizeof cli_cmds / sizeof cli_cmds[0])

/* ---- parsing --------------------------------------------------------------- */

static int words_count(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p != ' ' && (p == s || p[-1] == ' '))
            n++;
    return n;
}

/* Whether the space-separated list holds name (with "=" when it takes a value). */
static int words_has(const char *list, const char *name, int *takes_value)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t w = strcspn(p, " ");
        int val = w > 0 && p[w - 1] == '=';
        if (w - (size_t)val == n && strncmp(p, name, n) == 0) {
            if (takes_value)
                *takes_value = val;
            return 1;
        }
        p += w;
        while (*p == ' ')
            p++;
    }
    return 0;
}

static void cli_usage(FILE *f)
{
    fputs("usage: sluicectl [--db PATH] [--key-file PATH] [--json] COMMAND [ARGS] [OPTIONS]\n"
          "       (--db defaults to $SLUICE_DB, else to the database of sluice.conf: $SLUICE_CONF,\n"
          "       else " SLUICE_DEFAULT_CONF ", whose key file and state\n"
          "       file then apply too; --key-file, the key sealing upstream credentials, to\n"
          "       sluice.key beside the database; all three may also follow the command)\n"
          "commands:\n", f);
    for (size_t i = 0; i < CLI_NCMDS; i++) {
        const struct cli_cmd *k = &cli_cmds[i];
        fprintf(f, "  %s%s%s%s%s", k->group, k->verb ? " " : "", k->verb ? k->verb : "",
                *k->args ? " " : "", k->args);
        for (const char *p = k->opts; *p;) {
            size_t w = strcspn(p, " ");
            int val = w > 0 && p[w - 1] == '=';
            char name[CLI_NAME_MAX];
            snprintf(name, sizeof name, "%.*s", (int)(w - (size_t)val), p);
            int req = words_has(k->required, name, NULL);
            fprintf(f, " %s--%s%s%s", req ? "" : "[", name, val ? " VALUE" : "", req ? "" : "]");
            p += w;
            while (*p == ' ')
                p++;
        }
        fputc('\n', f);
    }
}

/* R-DEP-2: with no --db and no SLUICE_DB, the database is sluice.conf's (so sluicectl works
 * on what the installed responders use): the file $SLUICE_CONF names, else the installed
 * SLUICE_DEFAULT_CONF. Its secrets.key_file and state_file apply too, unless --key-file or
 * --state say otherwise. 0, or -1 with the reason in why. */
static int cli_conf_database(struct cli *c, char *why, size_t whylen)
{
    static struct conf conf;            /* c points into it until the process ends */
    const char *path = getenv("SLUICE_CONF");
    if (!path || !*path) {
        path = SLUICE_DEFAULT_CONF;
        if (access(path, F_OK) != 0) {
            snprintf(why, whylen, "no database: give --db PATH, set SLUICE_DB or SLUICE_CONF, "
                     "or install %s", path);
            return -1;
        }
    }
    conf_defaults(&conf);
    if (conf_load(&conf, path) != 0) {
        snprintf(why, whylen, "no database: %.400s cannot be used (see above)", path);
        return -1;
    }
    c->db_path = conf.database;
    c->state_file = conf.state_file;
    if (!c->key_file && conf.secrets_key_file[0])
        c->key_file = conf.secrets_key_file;
    return 0;
}

/* Fills c from argv; returns the command, or NULL with the reason in why (usage error). */
static const struct cli_cmd *cli_parse(int argc, char **argv, struct cli *c, char *why,
                                       size_t whylen)
{
    const char *rest[64];
    int nrest = 0, dashdash = -1;
    for (int i = 1; i < argc; i++) {
        if (dashdash < 0 && strcmp(argv[i], "--") == 0) {
            dashdash = nrest;
        } else if (dashdash < 0 && strcmp(argv[i], "--json") == 0) {
            c->json = 1;
        } else if (dashdash < 0 && strcmp(argv[i], "--db") == 0) {
            if (++i >= argc) {
                snprintf(why, whylen, "--db needs a path");
                return NULL;
            }
            c->db_path = argv[i];
        } else if (dashdash < 0 && strncmp(argv[i], "--db=", 5) == 0) {
            c->db_path = argv[i] + 5;
        } else if (dashdash < 0 && strcmp(argv[i], "--key-file") == 0) {
            if (++i >= argc) {
                snprintf(why, whylen, "--key-file needs a path");
                return NULL;
            }
            c->key_file = argv[i];
        } else if (dashdash < 0 && strncmp(argv[i], "--key-file=", 11) == 0) {
            c->key_file = argv[i] + 11;
        } else if (nrest < (int)(sizeof rest / sizeof rest[0])) {
            rest[nrest++] = argv[i];
        } else {
            snprintf(why, whylen, "too many arguments");
            return NULL;
        }
    }
    if (nrest == 0 || (dashdash >= 0 && dashdash < 1)) {
        snprintf(why, whylen, "no command given");
        return NULL;
    }
    const struct cli_cmd *k = NULL;
    int used = 0;
    for (size_t i = 0; i < CLI_NCMDS && !k; i++) {
        if (strcmp(cli_cmds[i].group, rest[0]) != 0)
            continue;
        if (!cli_cmds[i].verb) {
            k = &cli_cmds[i], used = 1;
        } else if (nrest > 1 && (dashdash < 0 || dashdash > 1) &&
                   strcmp(cli_cmds[i].verb, rest[1]) == 0) {
            k = &cli_cmds[i], used = 2;
        }
    }
    if (!k) {
        snprintf(why, whylen, "unknown command: %.64s%s%.64s", rest[0], nrest > 1 ? " " : "",
                 nrest > 1 ? rest[1] : "");
        return NULL;
    }
    c->words[0] = k->group;
    c->words[1] = k->verb;
    for (int i = used; i < nrest; i++) {
        const char *a = rest[i];
        int takes = 0;
        if ((dashdash < 0 || i < dashdash) && strncmp(a, "--", 2) == 0) {
            const char *eq = strchr(a + 2, '=');
            size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            if (c->nopts >= CLI_MAX_OPTS) {
                snprintf(why, whylen, "too many options");
                return NULL;
            }
            char *name = c->opts[c->nopts].name;
            snprintf(name, CLI_NAME_MAX, "%.*s", (int)n, a + 2);
            if (n == 0 || n >= CLI_NAME_MAX || !words_has(k->opts, name, &takes)) {
                snprintf(why, whylen, "unknown option for %s%s%s: %.64s", k->group,
                         k->verb ? " " : "", k->verb ? k->verb : "", a);
                return NULL;
            }
            c->opts[c->nopts].value = NULL;
            if (takes) {
                if (eq)
                    c->opts[c->nopts].value = eq + 1;
                else if (i + 1 < nrest && (dashdash < 0 || i + 1 < dashdash))
                    c->opts[c->nopts].value = rest[++i];
                else {
                    snprintf(why, whylen, "--%s needs a value", name);
                    return NULL;
                }
            } else if (eq) {
                snprintf(why, whylen, "--%s takes no value", name);
                return NULL;
            }
            c->nopts++;
        } else if (c->npos < CLI_MAX_POS) {
            c->pos[c->npos++] = a;
        } else {
            snprintf(why, whylen, "too many arguments");
            return NULL;
        }
    }
    if (c->npos != words_count(k->args)) {
        snprintf(why, whylen, "%s%s%s expects %s", k->group, k->verb ? " " : "",
                 k->verb ? k->verb : "", *k->args ? k->args : "no arguments");
        return NULL;
    }
    for (const char *p = k->required; *p;) {
        size_t w = strcspn(p, " ");
        char name[CLI_NAME_MAX];
        snprintf(name, sizeof name, "%.*s", (int)w, p);
        if (!cli_opt(c, name)) {
            snprintf(why, whylen, "%s%s%s needs --%s", k->group, k->verb ? " " : "",
                     k->verb ? k->verb : "", name);
            return NULL;
        }
        p += w;
        while (*p == ' ')
            p++;
    }
    if (!c->db_path)
        c->db_path = getenv("SLUICE_DB");
    if ((!c->db_path || !*c->db_path) && cli_conf_database(c, why, whylen) != 0)
        return NULL;
    return k;
}

/* ---- output ---------------------------------------------------------------- */

/* A scalar as text: null "-", booleans yes/no. */
static void text_value(struct json_object *v, char *out, size_t n)
{
    switch (json_object_get_type(v)) {
    case json_type_null:
        snprintf(out, n, "-");
        break;
    case json_type_boolean:
        snprintf(out, n, "%s", json_object_get_boolean(v) ? "yes" : "no");
        break;
    case json_type_string:
        snprintf(out, n, "%s", json_object_get_string(v));
        break;
    case json_type_int:
        snprintf(out, n, "%lld", (long long)json_object_get_int64(v));
        break;
    default:
        snprintf(out, n, "%s", json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
        break;
    }
}

/* An array of objects as a table with the first object's keys as columns. */
static void print_table(FILE *f, struct json_object *arr)
{
    size_t rows = json_object_array_length(arr);
    if (rows == 0 || !json_object_is_type(json_object_array_get_idx(arr, 0), json_type_object)) {
        fputs(rows == 0 ? "(none)\n" : json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN),
              f);
        return;
    }
    struct json_object *first = json_object_array_get_idx(arr, 0);
    int ncols = json_object_object_length(first);
    const char **cols = calloc((size_t)ncols, sizeof *cols);
    int *width = calloc((size_t)ncols, sizeof *width);
    if (!cols || !width)
        abort();
    int i = 0;
    json_object_object_foreach(first, key, val) {
        (void)val;
        cols[i] = key;
        width[i++] = (int)strlen(key);
    }
    char cell[CLI_CELL_MAX + 1];
    for (size_t r = 0; r < rows; r++)
        for (i = 0; i < ncols; i++) {
            text_value(json_object_object_get(json_object_array_get_idx(arr, r), cols[i]), cell,
                       sizeof cell);
            if ((int)strlen(cell) > width[i])
                width[i] = (int)strlen(cell);
        }
    for (i = 0; i < ncols; i++)
        if (i + 1 < ncols)
            fprintf(f, "%-*s  ", width[i], cols[i]);
        else
            fprintf(f, "%s\n", cols[i]);
    for (size_t r = 0; r < rows; r++)
        for (i = 0; i < ncols; i++) {
            text_value(json_object_object_get(json_object_array_get_idx(arr, r), cols[i]), cell,
                       sizeof cell);
            if (i + 1 < ncols)
                fprintf(f, "%-*s  ", width[i], cell);
            else
                fprintf(f, "%s\n", cell);
        }
    free(cols);
    free(width);
}

/* A result as text: scalars as "key: value", arrays as tables, objects on one line. */
static void print_text(FILE *f, struct json_object *res)
{
    int keyw = 0, nkeys = json_object_object_length(res);
    json_object_object_foreach(res, k0, v0) {
        (void)v0;
        if ((int)strlen(k0) > keyw)
            keyw = (int)strlen(k0);
    }
    char cell[4096];
    json_object_object_foreach(res, key, val) {
        if (json_object_is_type(val, json_type_array)) {
            if (nkeys > 1)
                fprintf(f, "%s:\n", key);
            print_table(f, val);
        } else if (json_object_is_type(val, json_type_object)) {
            fprintf(f, "%-*s ", keyw + 1, key);
            json_object_object_foreach(val, k2, v2) {
                text_value(v2, cell, sizeof cell);
                fprintf(f, " %s=%s", k2, cell);
            }
            fputc('\n', f);
        } else {
            text_value(val, cell, sizeof cell);
            fprintf(f, "%s:%*s %s\n", key, keyw - (int)strlen(key), "", cell);
        }
    }
}

static void print_json(FILE *f, struct json_object *o)
{
    fprintf(f, "%s\n", json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
}

static int fail(const struct cli *c, const struct ops_error *err, int code)
{
    fprintf(stderr, "sluicectl: %s\n", err->message[0] ? err->message : "internal error");
    if (code == EXIT_USAGE)
        fputs("run `sluicectl help` for the list of commands\n", stderr);
    if (c->json) {
        struct json_object *e = ops_error_json(err);
        print_json(stdout, e);
        json_object_put(e);
    }
    return code;
}

int main(int argc, char **argv)
{
    struct cli c;
    struct ops_error err;
    memset(&c, 0, sizeof c);
    ops_error_clear(&err);
    log_open(NULL, "sluicectl");
    ops_set_actor("sluicectl");     /* R-ADM-5: the audit's "who" for every change below */
    if (argc == 2 && (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
                      strcmp(argv[1], "-h") == 0)) {
        cli_usage(stdout);
        return EXIT_OK;
    }
    const struct cli_cmd *k = cli_parse(argc, argv, &c, err.message, sizeof err.message);
    if (!k) {
        err.kind = OPS_ERR_INVALID;
        return fail(&c, &err, EXIT_USAGE);
    }

    secret_use_key_file(c.key_file);   /* R-SEC-9 */
    struct sdb *db = NULL;
    struct json_object *res = NULL;
    if (!k->creates && !sdb_is_url(c.db_path) && access(c.db_path, F_OK) != 0) {
        err.kind = OPS_ERR_NOT_FOUND;
        snprintf(err.message, sizeof err.message,
                 "database %s does not exist (create it with: sluicectl --db PATH init)",
                 c.db_path);
    } else if (!(db = db_open(c.db_path, k->creates))) {
        err.kind = OPS_ERR_INTERNAL;
        snprintf(err.message, sizeof err.message,
                 "cannot open database %s (the reason is logged above)", c.db_path);
    } else {
        res = k->run(db, &c, &err);
    }
    db_close(db);
    if (!res) {
        if (err.kind == OPS_ERR_NONE)
            err.kind = OPS_ERR_INTERNAL;
        return fail(&c, &err, EXIT_FAIL);
    }
    if (c.json) {
        print_json(stdout, res);
    } else {
        print_text(stdout, res);
        if (json_object_object_get_ex(res, "key", NULL) &&
            json_object_is_type(json_object_object_get(res, "key"), json_type_string))
            fputs("sluicectl: the key is shown only this once; store it now\n", stderr);
    }
    json_object_put(res);
    return EXIT_OK;
}
