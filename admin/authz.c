/* authz.c: the management API's rights table and escalation rules (R-ADM-2, R-SEC-5). */
#include "authz.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *const authz_limit_names[AUTHZ_NLIMITS] = {
    "qps_limit", "concurrency_limit", "daily_limit", "monthly_quota", "tpm_limit",
    "monthly_token_quota"};

enum authz_role authz_role_parse(const char *s)
{
    if (!s)
        return AUTHZ_NOBODY;
    if (strcmp(s, "operator") == 0)
        return AUTHZ_OPERATOR;
    if (strcmp(s, "admin") == 0)
        return AUTHZ_ADMIN;
    if (strcmp(s, "member") == 0)
        return AUTHZ_MEMBER;
    return AUTHZ_NOBODY;
}

/* How far a role reaches for one (resource, operation). The operator reaches
 * everything; the table says it for the other two roles. */
enum authz_scope_kind {
    SCOPE_NONE,     /* refused */
    SCOPE_SELF,     /* objects the caller owns (target.user_id == caller) */
    SCOPE_TENANT,   /* objects of the caller's tenant */
    SCOPE_ALL,      /* platform-wide objects anyone with the role may see */
};

/* [resource][operation] = {member, admin}. The rights of SPEC §20 R-ADM-2:
 * operator everything, admin its own tenant, member its own keys and usage (and
 * what it needs to use them: its tenant's routes, the model policies). */
static const struct {
    unsigned char member, admin;
} authz_table[AUTHZ_NRES][AUTHZ_NOPS] = {
    /*                 READ                         CREATE                   UPDATE                       DELETE */
    [AUTHZ_TENANT] = {{SCOPE_TENANT, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}},
    [AUTHZ_USER] = {{SCOPE_SELF, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}, {SCOPE_SELF, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}},
    [AUTHZ_ENDPOINT] = {{SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}},
    [AUTHZ_ROUTE] = {{SCOPE_TENANT, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}},
    [AUTHZ_KEY] = {{SCOPE_SELF, SCOPE_TENANT}, {SCOPE_SELF, SCOPE_TENANT}, {SCOPE_SELF, SCOPE_TENANT}, {SCOPE_SELF, SCOPE_TENANT}},
    [AUTHZ_POLICY] = {{SCOPE_ALL, SCOPE_ALL}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}},
    [AUTHZ_SETTINGS] = {{SCOPE_NONE, SCOPE_ALL}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}},
    [AUTHZ_NODE] = {{SCOPE_NONE, SCOPE_ALL}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}},
    [AUTHZ_USAGE] = {{SCOPE_SELF, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}},
    [AUTHZ_AUDIT] = {{SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}},
    [AUTHZ_ALERT] = {{SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_NONE}},
    /* R-KEY-6: which layers of its tenant an admin reaches: authz_quota_scopes */
    [AUTHZ_QUOTA] = {{SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}},
    /* R-CACHE-3: the stored answers of the admin's own tenant (stats, clear); nothing is created */
    [AUTHZ_CACHE] = {{SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_TENANT}},
    /* R-GUARD-3: the admin's own tenant's rules; the global ones it also reads (authz_rule) */
    [AUTHZ_RULE] = {{SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_TENANT}, {SCOPE_NONE, SCOPE_NONE}, {SCOPE_NONE, SCOPE_TENANT}},
};

static const char *const authz_res_names[AUTHZ_NRES] = {
    "tenants", "users", "endpoints", "routes", "keys", "model policies", "settings", "nodes",
    "usage", "the audit log", "alerts", "quotas", "the answer cache", "content rules"};
static const char *const authz_op_names[AUTHZ_NOPS] = {"read", "create", "change", "delete"};

static int deny(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int deny(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return -1;
}

static enum authz_scope_kind authz_reach(const struct authz_actor *a, enum authz_res r,
                                         enum authz_op op)
{
    if (a->role == AUTHZ_OPERATOR)
        return SCOPE_ALL;
    if ((int)r < 0 || r >= AUTHZ_NRES || (int)op < 0 || op >= AUTHZ_NOPS)
        return SCOPE_NONE;
    if (a->role == AUTHZ_ADMIN)
        return (enum authz_scope_kind)authz_table[r][op].admin;
    if (a->role == AUTHZ_MEMBER)
        return (enum authz_scope_kind)authz_table[r][op].member;
    return SCOPE_NONE;
}

int authz_check(const struct authz_actor *a, enum authz_res r, enum authz_op op,
                const struct authz_target *t, char *why, size_t n)
{
    enum authz_scope_kind s = authz_reach(a, r, op);
    const char *rn = (int)r >= 0 && r < AUTHZ_NRES ? authz_res_names[r] : "this";
    const char *on = (int)op >= 0 && op < AUTHZ_NOPS ? authz_op_names[op] : "use";
    switch (s) {
    case SCOPE_ALL:
        break;
    case SCOPE_TENANT:
        if (t->tenant_id != a->tenant_id)
            return deny(why, n, "you may not %s %s of another tenant", on, rn);
        break;
    case SCOPE_SELF:
        if (t->user_id != a->user_id)
            return deny(why, n, "you may only %s your own %s", on, rn);
        break;
    case SCOPE_NONE:
        return deny(why, n, "your role may not %s %s", on, rn);
    }
    /* R-SEC-5: nobody but the operator touches an operator's user or keys. */
    if (a->role != AUTHZ_OPERATOR && op != AUTHZ_READ && t->owner_role > a->role)
        return deny(why, n, "you may not %s %s of a user with a higher role", on, rn);
    return 0;
}

int authz_list(const struct authz_actor *a, enum authz_res r, const struct authz_scope *asked,
               struct authz_scope *out, char *why, size_t n)
{
    *out = *asked;
    switch (authz_reach(a, r, AUTHZ_READ)) {
    case SCOPE_ALL:
        return 0;
    case SCOPE_TENANT:
        if (asked->tenant_id && asked->tenant_id != a->tenant_id)
            return deny(why, n, "you may not read %s of another tenant", authz_res_names[r]);
        out->tenant_id = a->tenant_id;
        return 0;
    case SCOPE_SELF:
        if ((asked->user_id && asked->user_id != a->user_id) ||
            (asked->tenant_id && asked->tenant_id != a->tenant_id))
            return deny(why, n, "you may only read your own %s", authz_res_names[r]);
        out->tenant_id = a->tenant_id;
        out->user_id = a->user_id;
        return 0;
    case SCOPE_NONE:
        break;
    }
    return deny(why, n, "your role may not read %s", (int)r >= 0 && r < AUTHZ_NRES
                ? authz_res_names[r] : "this");
}

int authz_rule(const struct authz_actor *a, enum authz_op op, int64_t rule_tenant_id, char *why, size_t n)
{
    if (a->role == AUTHZ_OPERATOR)
        return 0;
    if (authz_reach(a, AUTHZ_RULE, op) == SCOPE_NONE)
        return deny(why, n, "your role may not %s content rules", (int)op >= 0 && op < AUTHZ_NOPS
                    ? authz_op_names[op] : "use");
    if (rule_tenant_id == 0)
        return op == AUTHZ_READ ? 0 : deny(why, n, "global content rules (every tenant's) are the operator's");
    const struct authz_target t = {.tenant_id = rule_tenant_id};
    return authz_check(a, AUTHZ_RULE, op, &t, why, n);
}

int authz_route(const struct authz_actor *a, const struct authz_route_change *c, char *why,
                size_t n)
{
    if (a->role == AUTHZ_OPERATOR)
        return 0;
    if (c->priority_set && c->priority < 0)
        return deny(why, n, "negative priorities are for the operator");
    if (c->route_tenant_id != a->tenant_id)
        return deny(why, n, "you may not manage routes of another tenant");
    if (c->endpoint_tenant_id && c->endpoint_tenant_id != a->tenant_id)
        return deny(why, n, "a route may only point at your own tenant's endpoints");
    if (c->model_is_platform && c->route_tenant_id != c->default_tenant_id)
        return deny(why, n, "the model name is a platform model (tenant default)");
    return 0;
}

int authz_user(const struct authz_actor *a, const struct authz_target *t,
               const struct authz_user_change *c, char *why, size_t n)
{
    if (a->role == AUTHZ_OPERATOR)
        return 0;
    int creating = t->user_id == 0, self = !creating && t->user_id == a->user_id;
    if (authz_check(a, AUTHZ_USER, creating ? AUTHZ_CREATE : AUTHZ_UPDATE, t, why, n) != 0)
        return -1;
    enum authz_role want = c->new_role ? authz_role_parse(c->new_role) : AUTHZ_NOBODY;
    /* R-SEC-5: a non-operator never changes its own role, never grants more than it has. */
    if (c->new_role && !creating && self)
        return deny(why, n, "you may not change your own role");
    if (c->new_role && want > a->role)
        return deny(why, n, "you may not give a role above your own (%s)", c->new_role);
    if (a->role == AUTHZ_MEMBER && (c->new_role || c->ceiling))
        return deny(why, n, "members may only change their own password");
    if (c->ceiling) {
        if (self)
            return deny(why, n, "you may not raise your own key ceiling");
        int over = authz_limits_over(&c->new_ceiling, &a->ceiling, 1);
        if (over >= 0)
            return deny(why, n, "%s above your own ceiling", authz_limit_names[over]);
    }
    return 0;
}

int authz_limits_over(const struct authz_limits *a, const struct authz_limits *b, int only_set)
{
    for (int i = 0; i < AUTHZ_NLIMITS; i++) {
        if (only_set && !a->set[i])
            continue;
        if (b->v[i] == 0)
            continue;                       /* no ceiling */
        if (a->v[i] == 0 || a->v[i] > b->v[i])
            return i;                       /* unlimited, or above */
    }
    return -1;
}

void authz_limits_min(struct authz_limits *out, const struct authz_limits *a,
                      const struct authz_limits *b)
{
    for (int i = 0; i < AUTHZ_NLIMITS; i++) {
        int64_t x = a->v[i], y = b->v[i];
        out->v[i] = x == 0 ? y : y == 0 ? x : x < y ? x : y;
        out->set[i] = 1;
    }
}

int authz_ceiling_after(const struct authz_limits *cur, const struct authz_limits *given,
                        const struct authz_limits *bound, struct authz_limits *out)
{
    if (given && bound) {
        int over = authz_limits_over(given, bound, 1);
        if (over >= 0)
            return over;
    }
    struct authz_limits want;
    for (int i = 0; i < AUTHZ_NLIMITS; i++) {
        want.v[i] = given && given->set[i] ? given->v[i] : cur->v[i];
        want.set[i] = 1;
    }
    if (bound)
        authz_limits_min(out, &want, bound);    /* given members are within it already */
    else
        *out = want;
    return -1;
}

int authz_upstream_url(enum authz_role actor, enum authz_cred cred, int known_origin, char *why,
                       size_t n)
{
    if (actor == AUTHZ_OPERATOR || known_origin)
        return 1;
    if (cred == AUTHZ_CRED_OPERATOR)
        return deny(why, n, "the endpoint's upstream credential was set by the operator: a URL at a"
                    " new origin needs the operator (or replace or clear the credential first)");
    return 0;
}

int authz_key_limits(const struct authz_actor *a, const struct authz_target *t,
                     const struct authz_limits *old, const struct authz_limits *want,
                     char *why, size_t n)
{
    if (a->role == AUTHZ_OPERATOR)
        return 0;
    /* A new key's unset limits are unlimited: compare every member. */
    int over = authz_limits_over(want, &a->ceiling, old != NULL);
    if (over >= 0)
        return deny(why, n, "%s above your own limits (a key cannot have more than its maker)",
                    authz_limit_names[over]);
    if (old && t->user_id == a->user_id) {
        /* R-SEC-5: nobody raises its own quotas; lowering is fine. */
        for (int i = 0; i < AUTHZ_NLIMITS; i++) {
            if (!want->set[i] || want->v[i] == old->v[i])
                continue;
            if (old->v[i] != 0 && (want->v[i] == 0 || want->v[i] > old->v[i]))
                return deny(why, n, "you may not raise %s of your own key",
                            authz_limit_names[i]);
        }
    }
    return 0;
}

/* ---- quota layers and priorities (R-KEY-6, R-PRIO-2) -------------------------------- */

const char *const authz_quota_scope_names[AUTHZ_NQSCOPES] = {"tenant", "user", "endpoint", "model"};

int authz_quota_scope_parse(const char *s)
{
    for (int i = 0; s && i < AUTHZ_NQSCOPES; i++)
        if (strcmp(s, authz_quota_scope_names[i]) == 0)
            return i;
    return -1;
}

unsigned authz_quota_scopes(enum authz_role role)
{
    if (role == AUTHZ_OPERATOR)
        return (1u << AUTHZ_NQSCOPES) - 1;
    if (role == AUTHZ_ADMIN)
        return 1u << AUTHZ_QSCOPE_USER | 1u << AUTHZ_QSCOPE_ENDPOINT;
    return 0;
}

int authz_quota(const struct authz_actor *a, enum authz_op op, enum authz_quota_scope scope,
                const struct authz_target *t, int loosens, char *why, size_t n)
{
    if (a->role == AUTHZ_OPERATOR)
        return 0;
    if ((int)scope < 0 || scope >= AUTHZ_NQSCOPES)
        return deny(why, n, "unknown quota scope");
    if (a->role == AUTHZ_ADMIN && !(authz_quota_scopes(a->role) & 1u << scope))
        return deny(why, n, "%s quotas are the operator's", authz_quota_scope_names[scope]);
    if (authz_check(a, AUTHZ_QUOTA, op, t, why, n) != 0)
        return -1;
    /* R-SEC-5: nobody raises its own quotas; lowering is fine. */
    if (scope == AUTHZ_QSCOPE_USER && t->user_id == a->user_id && loosens && op != AUTHZ_READ)
        return deny(why, n, "you may not raise or remove the quotas of your own user");
    return 0;
}

int authz_key_priority(const struct authz_actor *a, const struct authz_target *t, int old_prio,
                       int old_max, int want_prio, int want_max, char *why, size_t n)
{
    if (a->role == AUTHZ_OPERATOR)
        return 0;
    int prio = want_prio >= 0 ? want_prio : old_prio;
    int max = want_max >= 0 ? want_max : want_max == -2 ? prio : old_max;
    /* 0 is the highest: a lower number is more. What may be asked is the higher of the two. */
    int had = old_max < old_prio ? old_max : old_prio, gets = max < prio ? max : prio;
    if (t->user_id == a->user_id) {
        if (prio < old_prio)
            return deny(why, n, "you may not raise the priority of your own key");
        if (gets < had)
            return deny(why, n, "you may not raise the max_priority of your own key");
    }
    /* Priority is served before the tenants' fair shares (R-PRIO-2): a tier better than the
     * default outranks every other tenant on a shared endpoint, so only the operator gives one
     * (what a key already has stays; lowering is always allowed). */
    int floor = had < AUTHZ_PRIORITY_DEFAULT ? had : AUTHZ_PRIORITY_DEFAULT;
    if (gets < floor)
        return deny(why, n, "only the operator gives a key a priority or max_priority better (lower) than 5");
    return 0;
}
