/* ops_rule.c: content rules (R-GUARD-3): added, listed and removed; the responder
 * reads them with the snapshot (scope input: the request's text, fcgi/screen.c
 * screen_input; output: the answer's, screen_output_body / _event). A pattern is
 * compiled and tried against crafted texts here, so one that does not compile or
 * backtracks without bound never reaches the data plane. */
#include "ops_internal.h"

#include "content_rules.h"

#include <string.h>

#define RULE_PATTERN_MAX 4096
#define RULE_CHECK_MATCH_LIMIT 100000   /* guard.rule_match_limit's default: what the responder allows */

static const char *const rule_actions[] = {"block", "flag", NULL};
static const char *const rule_scopes[] = {"input", "output", NULL};

#define RULE_SELECT \
    "SELECT r.id, r.name, t.name, r.tenant_id, r.kind, r.pattern, r.action, r.scope, r.created_at" \
    " FROM content_rules r LEFT JOIN tenants t ON t.id = r.tenant_id"

static struct json_object *rule_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "name", st, 1);
    ops_json_text(o, "tenant", st, 2);            /* null: every tenant */
    ops_json_int(o, "tenant_id", st, 3);
    ops_json_text(o, "kind", st, 4);
    ops_json_text(o, "pattern", st, 5);
    ops_json_text(o, "action", st, 6);
    ops_json_text(o, "scope", st, 7);
    ops_json_int(o, "created_at", st, 8);
    return o;
}

static struct json_object *rule_get(struct sdb *db, const char *name, struct ops_error *err)
{
    struct json_object *res = ops_query_one(db, err, rule_row, "rule", RULE_SELECT " WHERE r.name = ?1", "t", name);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "name", "no content rule named %s", name);
    return res;
}

struct json_object *ops_rule_get_id(struct sdb *db, int64_t id, struct ops_error *err)
{
    struct json_object *res = ops_query_one(db, err, rule_row, "rule", RULE_SELECT " WHERE r.id = ?1", "i", id);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "content rule not found: %lld", (long long)id);
    return res;
}

/* Exactly one of pattern / keyword; it compiles and matches in bounded time. */
static int rule_check(const struct ops_rule_opts *o, struct ops_error *err)
{
    if ((o->pattern != NULL) == (o->keyword != NULL)) {
        ops_fail(err, OPS_ERR_INVALID, "pattern", "give exactly one of --pattern REGEX and --keyword WORD");
        return -1;
    }
    const char *text = o->pattern ? o->pattern : o->keyword;
    const char *param = o->pattern ? "pattern" : "keyword";
    if (ops_check_text(param, text, RULE_PATTERN_MAX, err) != 0 || !*text) {
        if (!err->kind)
            ops_fail(err, OPS_ERR_INVALID, param, "%s must not be empty", param);
        return -1;
    }
    if (!o->action) {
        ops_fail(err, OPS_ERR_INVALID, "action", "--action block|flag is required");
        return -1;
    }
    if (ops_check_enum("action", o->action, rule_actions, err) != 0 ||
        (o->scope && ops_check_enum("scope", o->scope, rule_scopes, err) != 0))
        return -1;
    char why[300];
    if (content_rules_check(o->pattern ? RULE_PATTERN : RULE_KEYWORD, text, RULE_CHECK_MATCH_LIMIT, why,
                            sizeof why) != 0) {
        ops_fail(err, OPS_ERR_INVALID, param, "%s refused: %s", param, why);
        return -1;
    }
    return 0;
}

struct json_object *ops_rule_add(struct sdb *db, const char *name, const struct ops_rule_opts *o, struct ops_error *err)
{
    if (ops_check_name("name", name, err) != 0 || rule_check(o, err) != 0)
        return NULL;
    int64_t tid = 0;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    int64_t id;
    int rc = ops_query_i64(db, err, &id, "SELECT id FROM content_rules WHERE name = ?1", "t", name);
    if (rc == 1)
        ops_fail(err, OPS_ERR_CONFLICT, "name", "a content rule named %s exists", name);
    if (rc != 0 || (o->tenant && ops_tenant_id(db, o->tenant, &tid, err) != 0))
        goto out;
    if (o->tenant && o->tenant_id.set) {
        ops_fail(err, OPS_ERR_INVALID, "tenant", "give tenant or tenant_id, not both");
        goto out;
    }
    if (o->tenant_id.set) {
        tid = o->tenant_id.v;
        rc = ops_query_i64(db, err, &tid, "SELECT id FROM tenants WHERE id = ?1", "i", tid);
        if (rc == 0)
            ops_fail(err, OPS_ERR_NOT_FOUND, "tenant_id", "tenant not found: %lld", (long long)o->tenant_id.v);
        if (rc != 1)
            goto out;
    }
    struct ops_i64 tenant = {.set = o->tenant != NULL || o->tenant_id.set, .v = tid};
    if (ops_run(db, err,
                "INSERT INTO content_rules (name, tenant_id, kind, pattern, action, scope)"
                " VALUES (?1, ?2, ?3, ?4, ?5, COALESCE(?6, 'input'))",
                "totttt", name, tenant, o->pattern ? "pattern" : "keyword", o->pattern ? o->pattern : o->keyword,
                o->action, o->scope) != 0)
        goto out;
    res = ops_audited(db, err, "create", "content_rule", NULL, rule_get(db, name, err));
out:
    return ops_finish(db, res, err);
}

/* Deletes the rule res (in the caller's transaction) and audits it; res or NULL. */
static struct json_object *rule_delete(struct sdb *db, struct json_object *res, struct ops_error *err)
{
    return ops_finish(db, ops_deleted(db, err, "content_rules", "content_rule", res), err);
}

struct json_object *ops_rule_rm(struct sdb *db, const char *name, struct ops_error *err)
{
    if (ops_check_name("name", name, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    return rule_delete(db, rule_get(db, name, err), err);
}

struct json_object *ops_rule_rm_id(struct sdb *db, int64_t id, struct ops_error *err)
{
    if (ops_begin(db, err) != 0)
        return NULL;
    return rule_delete(db, ops_rule_get_id(db, id, err), err);
}

struct json_object *ops_rule_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid;
    if (ops_list_ids(db, l, &tid, NULL, NULL, err) != 0)
        return NULL;
    /* a tenant's view: its own rules and the global ones */
    return ops_query_page(db, err, "rules", rule_row, l,
                          RULE_SELECT " WHERE (?1 IS NULL OR r.tenant_id = ?1 OR r.tenant_id IS NULL)"
                          " ORDER BY r.tenant_id IS NOT NULL, t.name, r.name",
                          "o", tid);
}
