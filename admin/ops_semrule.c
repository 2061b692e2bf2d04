/* ops_semrule.c: semantic routing rules (R-SEM-1): added, listed and removed; the
 * responder compiles them once per snapshot (fcgi/semindex.c) and matches them
 * against the last user message of a request routed by the `semantic` strategy. A
 * pattern is checked here as content rules are (it compiles, it matches in bounded
 * time on crafted texts), so a bad one never reaches the data plane. */
#include "ops_internal.h"

#include "content_rules.h"

#include <string.h>

#define SEMRULE_MAX_PER_TENANT 256

#define SEMRULE_PATTERN_MAX 4096
#define SEMRULE_MODEL_MAX 256
#define SEMRULE_LABEL_MAX 64
#define SEMRULE_CHECK_MATCH_LIMIT 100000   /* guard.rule_match_limit's default */

#define SEMRULE_SELECT \
    "SELECT r.id, r.name, t.name, r.tenant_id, r.pattern, r.action, r.model, r.label, r.created_at" \
    " FROM semantic_rules r LEFT JOIN tenants t ON t.id = r.tenant_id"

static struct json_object *semrule_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "name", st, 1);
    ops_json_text(o, "tenant", st, 2);            /* null: every tenant */
    ops_json_int(o, "tenant_id", st, 3);
    ops_json_text(o, "pattern", st, 4);
    ops_json_text(o, "action", st, 5);
    ops_json_text(o, "model", st, 6);
    ops_json_text(o, "label", st, 7);
    ops_json_int(o, "created_at", st, 8);
    return o;
}

int ops_check_labels(const char *param, const char *list, struct ops_error *err)
{
    size_t run = 0;
    int items = 0;
    for (const char *p = list;; p++) {
        if (*p == ',' || *p == '\0') {
            if (run == 0 || run > SEMRULE_LABEL_MAX) {
                ops_fail(err, OPS_ERR_INVALID, param,
                         "%s is a comma-separated list of words (letters, digits, '.', '_', '-'; 1 to %d bytes each)",
                         param, SEMRULE_LABEL_MAX);
                return -1;
            }
            items++;
            run = 0;
            if (!*p)
                break;
            continue;
        }
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-')) {
            ops_fail(err, OPS_ERR_INVALID, param, "%s: '%c' is not allowed (letters, digits, '.', '_', '-')",
                     param, c);
            return -1;
        }
        run++;
    }
    return items > 0 ? 0 : -1;
}

static struct json_object *semrule_get(struct sdb *db, const char *name, struct ops_error *err)
{
    struct json_object *res =
        ops_query_one(db, err, semrule_row, "semantic rule", SEMRULE_SELECT " WHERE r.name = ?1", "t", name);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "name", "no semantic rule named %s", name);
    return res;
}

struct json_object *ops_semrule_get_id(struct sdb *db, int64_t id, struct ops_error *err)
{
    struct json_object *res =
        ops_query_one(db, err, semrule_row, "semantic rule", SEMRULE_SELECT " WHERE r.id = ?1", "i", id);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "semantic rule not found: %lld", (long long)id);
    return res;
}

/* A pattern; exactly one of force / forbid, a model name; a label word. */
static int semrule_check(const struct ops_semrule_opts *o, struct ops_error *err)
{
    if (!o->pattern || !*o->pattern) {
        ops_fail(err, OPS_ERR_INVALID, "pattern", "--pattern REGEX is required");
        return -1;
    }
    if (ops_check_text("pattern", o->pattern, SEMRULE_PATTERN_MAX, err) != 0)
        return -1;
    if ((o->force != NULL) == (o->forbid != NULL)) {
        ops_fail(err, OPS_ERR_INVALID, "force", "give exactly one of --force MODEL and --forbid MODEL");
        return -1;
    }
    const char *model = o->force ? o->force : o->forbid;
    if (!*model || ops_check_text(o->force ? "force" : "forbid", model, SEMRULE_MODEL_MAX, err) != 0) {
        if (!err->kind)
            ops_fail(err, OPS_ERR_INVALID, o->force ? "force" : "forbid", "the model must not be empty");
        return -1;
    }
    if (o->label && (strchr(o->label, ',') || ops_check_labels("label", o->label, err) != 0)) {
        if (!err->kind)
            ops_fail(err, OPS_ERR_INVALID, "label", "label is one word");
        return -1;
    }
    char why[300];
    if (content_rules_check(RULE_PATTERN, o->pattern, SEMRULE_CHECK_MATCH_LIMIT, why, sizeof why) != 0) {
        ops_fail(err, OPS_ERR_INVALID, "pattern", "pattern refused: %s", why);
        return -1;
    }
    return 0;
}

struct json_object *ops_semrule_add(struct sdb *db, const char *name, const struct ops_semrule_opts *o,
                                    struct ops_error *err)
{
    if (ops_check_name("name", name, err) != 0 || semrule_check(o, err) != 0)
        return NULL;
    if (o->tenant && o->tenant_id.set) {
        ops_fail(err, OPS_ERR_INVALID, "tenant", "give tenant or tenant_id, not both");
        return NULL;
    }
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    int64_t id, tid = 0;
    int rc = ops_query_i64(db, err, &id, "SELECT id FROM semantic_rules WHERE name = ?1", "t", name);
    if (rc == 1)
        ops_fail(err, OPS_ERR_CONFLICT, "name", "a semantic rule named %s exists", name);
    if (rc != 0 || (o->tenant && ops_tenant_id(db, o->tenant, &tid, err) != 0))
        goto out;
    if (o->tenant_id.set) {
        tid = o->tenant_id.v;
        rc = ops_query_i64(db, err, &tid, "SELECT id FROM tenants WHERE id = ?1", "i", tid);
        if (rc == 0)
            ops_fail(err, OPS_ERR_NOT_FOUND, "tenant_id", "tenant not found: %lld", (long long)o->tenant_id.v);
        if (rc != 1)
            goto out;
    }
    struct ops_i64 tenant = {.set = o->tenant != NULL || o->tenant_id.set, .v = tid};
    /* Every responder compiles all rules at each configuration change (semindex.c), with
     * semantic requests waiting: a bounded number per tenant (and of global ones). */
    int64_t have = 0;
    if (ops_query_i64(db, err, &have, "SELECT COUNT(*) FROM semantic_rules WHERE tenant_id IS ?1", "o",
                      tenant) < 0)
        goto out;
    if (have >= SEMRULE_MAX_PER_TENANT) {
        ops_fail(err, OPS_ERR_INVALID, "name", "at most %d semantic rules per tenant (and %d global ones)",
                 SEMRULE_MAX_PER_TENANT, SEMRULE_MAX_PER_TENANT);
        goto out;
    }
    if (ops_run(db, err,
                "INSERT INTO semantic_rules (name, tenant_id, pattern, action, model, label)"
                " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                "totttt", name, tenant, o->pattern, o->force ? "force" : "forbid", o->force ? o->force : o->forbid,
                o->label && *o->label ? o->label : NULL) != 0)
        goto out;
    res = ops_audited(db, err, "create", "semantic_rule", NULL, semrule_get(db, name, err));
out:
    return ops_finish(db, res, err);
}

static struct json_object *semrule_delete(struct sdb *db, struct json_object *res, struct ops_error *err)
{
    res = ops_deleted(db, err, "semantic_rules", "semantic_rule", res);
    if (res)
        json_object_object_add(res, "deleted", json_object_new_boolean(1));
    return ops_finish(db, res, err);
}

struct json_object *ops_semrule_rm(struct sdb *db, const char *name, struct ops_error *err)
{
    if (ops_check_name("name", name, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    return semrule_delete(db, semrule_get(db, name, err), err);
}

struct json_object *ops_semrule_rm_id(struct sdb *db, int64_t id, struct ops_error *err)
{
    if (ops_begin(db, err) != 0)
        return NULL;
    return semrule_delete(db, ops_semrule_get_id(db, id, err), err);
}

struct json_object *ops_semrule_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid;
    if (ops_list_ids(db, l, &tid, NULL, NULL, err) != 0)
        return NULL;
    return ops_query_page(db, err, "rules", semrule_row, l,
                          SEMRULE_SELECT " WHERE (?1 IS NULL OR r.tenant_id = ?1 OR r.tenant_id IS NULL)"
                          " ORDER BY r.tenant_id IS NOT NULL, t.name, r.name",
                          "o", tid);
}
