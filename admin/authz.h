/* authz.h: who may do what through the management API (R-ADM-2, R-SEC-5).
 *
 * Pure functions over plain facts: the admin CGI gathers what it knows of the
 * caller and of the object (its tenant, its owner, whether a model name is a
 * platform model, ...) and asks; nothing here reads the database. sluicectl acts
 * as the operator and does not ask. Rules that hold for everybody, the operator
 * included (a route's endpoint belongs to the route's tenant, a key stays within
 * its owner's ceiling, ...), live in the ops_*.c operations instead. */
#ifndef SLUICE_AUTHZ_H
#define SLUICE_AUTHZ_H

#include <stddef.h>
#include <stdint.h>

enum authz_role { AUTHZ_NOBODY = 0, AUTHZ_MEMBER, AUTHZ_ADMIN, AUTHZ_OPERATOR };

/* "operator" / "admin" / "member" -> role; anything else AUTHZ_NOBODY. */
enum authz_role authz_role_parse(const char *s);

/* R-KEY-1 limits in the order qps, concurrency, daily, monthly, tpm, monthly tokens;
 * 0 = unlimited. set[i] says whether v[i] was given (for changes). */
#define AUTHZ_NLIMITS 6
struct authz_limits {
    int64_t v[AUTHZ_NLIMITS];
    int set[AUTHZ_NLIMITS];
};
extern const char *const authz_limit_names[AUTHZ_NLIMITS];

/* a within b: every limit of a is at most b's (0 = unlimited is above any number).
 * Only set members of a are compared when only_set. Returns the index of the first
 * limit over, or -1 when a is within b. */
int authz_limits_over(const struct authz_limits *a, const struct authz_limits *b, int only_set);
/* Tightest of two ceilings, member by member (0 = unlimited). */
void authz_limits_min(struct authz_limits *out, const struct authz_limits *a,
                      const struct authz_limits *b);

/* The caller, whichever credential it used. ceiling: the user's key ceiling,
 * tightened by the limits of the member key it authenticated with (R-SEC-5: a
 * key cannot mint a key with more than it has). */
struct authz_actor {
    enum authz_role role;
    int64_t user_id, tenant_id;
    struct authz_limits ceiling;
};

enum authz_res {
    AUTHZ_TENANT, AUTHZ_USER, AUTHZ_ENDPOINT, AUTHZ_ROUTE, AUTHZ_KEY, AUTHZ_POLICY,
    AUTHZ_SETTINGS, AUTHZ_NODE, AUTHZ_USAGE, AUTHZ_AUDIT, AUTHZ_ALERT, AUTHZ_QUOTA, AUTHZ_CACHE,
    AUTHZ_RULE,
    AUTHZ_NRES
};
enum authz_op { AUTHZ_READ, AUTHZ_CREATE, AUTHZ_UPDATE, AUTHZ_DELETE, AUTHZ_NOPS };

/* What is known of the object: its tenant (0: none or platform-wide), its owner
 * (users: the user itself; keys: the key's user; usage: the user filtered on; 0:
 * none) and the owner's role (AUTHZ_NOBODY when there is no owner). */
struct authz_target {
    int64_t tenant_id, user_id;
    enum authz_role owner_role;
};

/* 0 allowed; -1 refused with a reason in why (403 permission_denied). */
int authz_check(const struct authz_actor *a, enum authz_res r, enum authz_op op,
                const struct authz_target *t, char *why, size_t n);

/* The filter a listing is narrowed to: tenant_id / user_id 0 = not narrowed. A
 * requested filter outside what the caller may see is refused (-1), never widened. */
struct authz_scope {
    int64_t tenant_id, user_id;
};
int authz_list(const struct authz_actor *a, enum authz_res r, const struct authz_scope *asked,
               struct authz_scope *out, char *why, size_t n);

/* R-ADM-2 on routes, for a create or change by a non-operator: no negative
 * priority, no model name that tenant default routes (R-AUTH-4), only endpoints of
 * the caller's own tenant. */
struct authz_route_change {
    int priority_set;
    int64_t priority;
    int model_is_platform;        /* the model name has a route in tenant default */
    int64_t route_tenant_id;      /* the route's tenant (new or existing) */
    int64_t endpoint_tenant_id;   /* the endpoint it points at (new or kept); 0 = unchanged */
    int64_t default_tenant_id;
};
int authz_route(const struct authz_actor *a, const struct authz_route_change *c, char *why,
                size_t n);

/* R-SEC-5 on users: creating (target.user_id 0) or changing one. new_role NULL =
 * unchanged; password / ceiling say whether those change, with the new ceiling. */
struct authz_user_change {
    const char *new_role;
    int password;
    int ceiling;
    struct authz_limits new_ceiling;
};
int authz_user(const struct authz_actor *a, const struct authz_target *t,
               const struct authz_user_change *c, char *why, size_t n);

/* R-SEC-5, R-SEC-10: a user's key ceiling is never above the ceiling of whoever created
 * or changed it. The ceiling a user has after a change by a caller whose own ceiling is
 * bound (NULL: the operator, bounded by nothing): cur is the user's ceiling now (all 0
 * for a new user), given the members the change sets (given->set[i]; NULL: none, as for
 * a role change). Given members must be within bound; every other member keeps cur's
 * value tightened to bound's, so a new user inherits its creator's limits and no change
 * leaves a user above the one who made it. Returns the index of the first given member
 * above bound (out untouched), else -1 with all of out set. */
int authz_ceiling_after(const struct authz_limits *cur, const struct authz_limits *given,
                        const struct authz_limits *bound, struct authz_limits *out);

/* R-ANT-4, R-SEC-9: who set an endpoint's upstream credential. */
enum authz_cred { AUTHZ_CRED_NONE = 0, AUTHZ_CRED_TENANT, AUTHZ_CRED_OPERATOR };

/* R-SEC-9 on a URL the credential goes to (a replica's, the wake URL), registered by
 * actor on an endpoint whose credential cred set: the operator's credential goes only to
 * URLs an operator registered or approved, or at the origin of a replica an operator
 * approved (known_origin). Returns 1 (the URL is approved), 0 (registered by a tenant
 * admin: fine while no operator credential is set; the operator cannot set one while it is
 * there) or -1 refused with the reason in why (403). */
int authz_upstream_url(enum authz_role actor, enum authz_cred cred, int known_origin, char *why,
                       size_t n);

/* R-KEY-6: the four kinds of quota layer, in the order of authz_quota_scope_names. */
enum authz_quota_scope { AUTHZ_QSCOPE_TENANT, AUTHZ_QSCOPE_USER, AUTHZ_QSCOPE_ENDPOINT, AUTHZ_QSCOPE_MODEL,
                         AUTHZ_NQSCOPES };
extern const char *const authz_quota_scope_names[AUTHZ_NQSCOPES];   /* "tenant", "user", ... */
/* "tenant" ... "model" -> the scope; -1 for anything else. */
int authz_quota_scope_parse(const char *s);
/* The layers a role may see and set, a bit (1u << scope) each: the operator every one; a
 * tenant admin those of its own tenant's users and endpoints (a tenant's own layer and the
 * models' are the operator's: they bound the tenant admin itself); members none. */
unsigned authz_quota_scopes(enum authz_role role);

/* R-KEY-6, R-SEC-5 on one quota layer: t is what the layer limits (its tenant; for a user
 * layer the user and its role). The rights of AUTHZ_QUOTA and the scopes above, and nobody
 * but the operator raises its own user's layer: loosens is 1 when the change raises or
 * clears a limit of it (a delete, a limit made higher or 0). 0 allowed; -1 refused. */
int authz_quota(const struct authz_actor *a, enum authz_op op, enum authz_quota_scope scope,
                const struct authz_target *t, int loosens, char *why, size_t n);

/* R-GUARD-3 on one content rule of tenant rule_tenant_id (0: a global rule, every
 * tenant's): the operator does anything; a tenant admin reads its own tenant's rules
 * and the global ones, creates and deletes its own tenant's (the global ones bound
 * it, so they are read-only to it); members nothing. 0 allowed; -1 refused. */
int authz_rule(const struct authz_actor *a, enum authz_op op, int64_t rule_tenant_id, char *why, size_t n);

/* R-PRIO-2, R-SEC-5 on a key's priority (0 the highest): a non-operator does not raise its
 * own key's priority or the most it may ask (max_priority) above what it has: old values
 * (a new key: 5, and max_priority its priority), given ones (-1 unchanged; want_max -2
 * clears it, back to the key's priority). 0 allowed; -1 refused. */
#define AUTHZ_PRIORITY_DEFAULT 5
int authz_key_priority(const struct authz_actor *a, const struct authz_target *t, int old_prio,
                       int old_max, int want_prio, int want_max, char *why, size_t n);

/* R-SEC-5 on key limits: a non-operator's new or changed key stays within the
 * caller's ceiling, and limits of the caller's own keys may only go down. old NULL
 * for a new key (then unset limits mean unlimited and are checked as 0). */
int authz_key_limits(const struct authz_actor *a, const struct authz_target *t,
                     const struct authz_limits *old, const struct authz_limits *want,
                     char *why, size_t n);

#endif
