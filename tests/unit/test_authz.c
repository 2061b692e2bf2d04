/* test_authz.c: the management API's rights table and escalation rules (admin/authz.h,
 * R-ADM-2, R-SEC-5), table-driven: each role, each resource and operation, own object vs
 * another's. */
#include "check.h"

#include "authz.h"

/* Tenants 1 (default) and 2; users: 10 operator (t1), 20 admin (t2), 21 member (t2),
 * 22 another member (t2), 30 admin of tenant 3. */
#define T_DEF 1
#define T_A 2
#define T_B 3

static const struct authz_actor OP = {AUTHZ_OPERATOR, 10, T_DEF, {{0}, {0}}};
static const struct authz_actor ADM = {AUTHZ_ADMIN, 20, T_A, {{0}, {0}}};
static const struct authz_actor MEM = {AUTHZ_MEMBER, 21, T_A, {{0}, {0}}};

#define A 1 /* allowed */
#define D 0 /* denied  */

/* R-ADM-2: operator everything, admin its tenant, member its own keys and usage. */
static const struct {
    const char *what;
    const struct authz_actor *who;
    enum authz_res r;
    enum authz_op op;
    struct authz_target t;
    int allowed;
} check_cases[] = {
    /* tenants */
    {"op reads any tenant", &OP, AUTHZ_TENANT, AUTHZ_READ, {T_B, 0, 0}, A},
    {"op creates tenants", &OP, AUTHZ_TENANT, AUTHZ_CREATE, {0, 0, 0}, A},
    {"admin reads own tenant", &ADM, AUTHZ_TENANT, AUTHZ_READ, {T_A, 0, 0}, A},
    {"admin reads other tenant", &ADM, AUTHZ_TENANT, AUTHZ_READ, {T_B, 0, 0}, D},
    {"admin creates tenant", &ADM, AUTHZ_TENANT, AUTHZ_CREATE, {0, 0, 0}, D},
    {"admin deletes own tenant", &ADM, AUTHZ_TENANT, AUTHZ_DELETE, {T_A, 0, 0}, D},
    {"member reads own tenant", &MEM, AUTHZ_TENANT, AUTHZ_READ, {T_A, 0, 0}, A},
    /* users */
    {"admin reads user of own tenant", &ADM, AUTHZ_USER, AUTHZ_READ, {T_A, 22, AUTHZ_MEMBER}, A},
    {"admin reads user of other tenant", &ADM, AUTHZ_USER, AUTHZ_READ, {T_B, 30, AUTHZ_ADMIN}, D},
    {"admin changes member of own tenant", &ADM, AUTHZ_USER, AUTHZ_UPDATE, {T_A, 22, AUTHZ_MEMBER}, A},
    {"admin changes an operator (R-SEC-5)", &ADM, AUTHZ_USER, AUTHZ_UPDATE, {T_A, 10, AUTHZ_OPERATOR}, D},
    {"admin deletes member", &ADM, AUTHZ_USER, AUTHZ_DELETE, {T_A, 22, AUTHZ_MEMBER}, A},
    {"member reads self", &MEM, AUTHZ_USER, AUTHZ_READ, {T_A, 21, AUTHZ_MEMBER}, A},
    {"member reads another member", &MEM, AUTHZ_USER, AUTHZ_READ, {T_A, 22, AUTHZ_MEMBER}, D},
    {"member updates self", &MEM, AUTHZ_USER, AUTHZ_UPDATE, {T_A, 21, AUTHZ_MEMBER}, A},
    {"member creates users", &MEM, AUTHZ_USER, AUTHZ_CREATE, {T_A, 0, 0}, D},
    {"member deletes self", &MEM, AUTHZ_USER, AUTHZ_DELETE, {T_A, 21, AUTHZ_MEMBER}, D},
    /* endpoints */
    {"admin reads own endpoint", &ADM, AUTHZ_ENDPOINT, AUTHZ_READ, {T_A, 0, 0}, A},
    {"admin reads foreign endpoint by id (R-SEC-5)", &ADM, AUTHZ_ENDPOINT, AUTHZ_READ, {T_B, 0, 0}, D},
    {"admin changes foreign endpoint", &ADM, AUTHZ_ENDPOINT, AUTHZ_UPDATE, {T_DEF, 0, 0}, D},
    {"member reads endpoint", &MEM, AUTHZ_ENDPOINT, AUTHZ_READ, {T_A, 0, 0}, D},
    {"op deletes any endpoint", &OP, AUTHZ_ENDPOINT, AUTHZ_DELETE, {T_B, 0, 0}, A},
    /* routes */
    {"member reads own tenant routes", &MEM, AUTHZ_ROUTE, AUTHZ_READ, {T_A, 0, 0}, A},
    {"member creates route", &MEM, AUTHZ_ROUTE, AUTHZ_CREATE, {T_A, 0, 0}, D},
    {"admin creates route in own tenant", &ADM, AUTHZ_ROUTE, AUTHZ_CREATE, {T_A, 0, 0}, A},
    {"admin creates route in default", &ADM, AUTHZ_ROUTE, AUTHZ_CREATE, {T_DEF, 0, 0}, D},
    /* keys */
    {"member creates own key", &MEM, AUTHZ_KEY, AUTHZ_CREATE, {T_A, 21, AUTHZ_MEMBER}, A},
    {"member creates key for another", &MEM, AUTHZ_KEY, AUTHZ_CREATE, {T_A, 22, AUTHZ_MEMBER}, D},
    {"member revokes own key", &MEM, AUTHZ_KEY, AUTHZ_DELETE, {T_A, 21, AUTHZ_MEMBER}, A},
    {"member reads another's key", &MEM, AUTHZ_KEY, AUTHZ_READ, {T_A, 22, AUTHZ_MEMBER}, D},
    {"admin creates key for member", &ADM, AUTHZ_KEY, AUTHZ_CREATE, {T_A, 22, AUTHZ_MEMBER}, A},
    {"admin creates key for operator (R-SEC-5)", &ADM, AUTHZ_KEY, AUTHZ_CREATE, {T_A, 10, AUTHZ_OPERATOR}, D},
    {"admin reads key of other tenant", &ADM, AUTHZ_KEY, AUTHZ_READ, {T_B, 30, AUTHZ_ADMIN}, D},
    /* platform-wide */
    {"member reads policies", &MEM, AUTHZ_POLICY, AUTHZ_READ, {0, 0, 0}, A},
    {"admin writes policies", &ADM, AUTHZ_POLICY, AUTHZ_UPDATE, {0, 0, 0}, D},
    {"op writes policies", &OP, AUTHZ_POLICY, AUTHZ_UPDATE, {0, 0, 0}, A},
    {"admin reads settings", &ADM, AUTHZ_SETTINGS, AUTHZ_READ, {0, 0, 0}, A},
    {"admin writes settings", &ADM, AUTHZ_SETTINGS, AUTHZ_UPDATE, {0, 0, 0}, D},
    {"member reads settings", &MEM, AUTHZ_SETTINGS, AUTHZ_READ, {0, 0, 0}, D},
    {"admin reads nodes", &ADM, AUTHZ_NODE, AUTHZ_READ, {0, 0, 0}, A},
    {"admin creates nodes", &ADM, AUTHZ_NODE, AUTHZ_CREATE, {0, 0, 0}, D},
    /* usage, audit, alerts */
    {"member reads own usage", &MEM, AUTHZ_USAGE, AUTHZ_READ, {T_A, 21, 0}, A},
    {"member reads another's usage", &MEM, AUTHZ_USAGE, AUTHZ_READ, {T_A, 22, 0}, D},
    {"admin reads tenant usage", &ADM, AUTHZ_USAGE, AUTHZ_READ, {T_A, 0, 0}, A},
    {"member reads audit", &MEM, AUTHZ_AUDIT, AUTHZ_READ, {T_A, 0, 0}, D},
    {"admin reads own audit", &ADM, AUTHZ_AUDIT, AUTHZ_READ, {T_A, 0, 0}, A},
    {"admin resolves foreign alert", &ADM, AUTHZ_ALERT, AUTHZ_UPDATE, {T_B, 0, 0}, D},
};

static void test_check(void)
{
    char why[256];
    for (size_t i = 0; i < sizeof check_cases / sizeof check_cases[0]; i++) {
        why[0] = '\0';
        int rc = authz_check(check_cases[i].who, check_cases[i].r, check_cases[i].op,
                             &check_cases[i].t, why, sizeof why);
        CHECK((rc == 0) == check_cases[i].allowed, "%s: got %s (%s)", check_cases[i].what,
              rc == 0 ? "allowed" : "denied", why);
        if (rc != 0)
            CHECK(why[0] != '\0', "%s: a refusal says why", check_cases[i].what);
    }
}

/* Listings are narrowed, never widened. */
static void test_list(void)
{
    char why[256];
    struct authz_scope got, none = {0, 0}, other_t = {T_B, 0}, other_u = {0, 22};
    CHECK(authz_list(&OP, AUTHZ_KEY, &none, &got, why, sizeof why) == 0 && got.tenant_id == 0 &&
          got.user_id == 0, "operator lists everything");
    CHECK(authz_list(&ADM, AUTHZ_KEY, &none, &got, why, sizeof why) == 0 && got.tenant_id == T_A &&
          got.user_id == 0, "admin narrowed to its tenant");
    CHECK(authz_list(&ADM, AUTHZ_KEY, &other_t, &got, why, sizeof why) != 0,
          "admin asking for another tenant is refused");
    CHECK(authz_list(&MEM, AUTHZ_KEY, &none, &got, why, sizeof why) == 0 && got.tenant_id == T_A &&
          got.user_id == 21, "member narrowed to itself");
    CHECK(authz_list(&MEM, AUTHZ_USAGE, &other_u, &got, why, sizeof why) != 0,
          "member asking for another user's usage is refused (R-USE-6)");
    CHECK(authz_list(&MEM, AUTHZ_AUDIT, &none, &got, why, sizeof why) != 0, "member has no audit");
    CHECK(authz_list(&MEM, AUTHZ_ROUTE, &none, &got, why, sizeof why) == 0 && got.tenant_id == T_A &&
          got.user_id == 0, "member sees its tenant's routes");
}

/* R-ADM-2: negative priority, `default` names and foreign endpoints. */
static const struct {
    const char *what;
    const struct authz_actor *who;
    struct authz_route_change c;
    int allowed;
} route_cases[] = {
    {"admin, plain route", &ADM, {1, 0, 0, T_A, T_A, T_DEF}, A},
    {"admin, no priority given", &ADM, {0, 0, 0, T_A, 0, T_DEF}, A},
    {"admin, negative priority", &ADM, {1, -1, 0, T_A, T_A, T_DEF}, D},
    {"operator, negative priority", &OP, {1, -5, 0, T_A, T_A, T_DEF}, A},
    {"admin, name of a default route", &ADM, {1, 0, 1, T_A, T_A, T_DEF}, D},
    {"admin, foreign endpoint", &ADM, {1, 0, 0, T_A, T_B, T_DEF}, D},
    {"admin, platform endpoint", &ADM, {1, 0, 0, T_A, T_DEF, T_DEF}, D},
    {"admin, route of another tenant", &ADM, {1, 0, 0, T_B, T_B, T_DEF}, D},
    {"member, anything", &MEM, {1, 0, 0, T_A, T_A, T_DEF}, A}, /* the table refuses members */
};

static void test_route(void)
{
    char why[256];
    for (size_t i = 0; i < sizeof route_cases / sizeof route_cases[0]; i++) {
        int rc = authz_route(route_cases[i].who, &route_cases[i].c, why, sizeof why);
        CHECK((rc == 0) == route_cases[i].allowed, "%s: got %s", route_cases[i].what,
              rc == 0 ? "allowed" : "denied");
    }
}

static struct authz_limits lim(int64_t qps, int64_t daily, int set_mask)
{
    struct authz_limits l = {{qps, 0, daily, 0, 0, 0}, {0}};
    for (int i = 0; i < AUTHZ_NLIMITS; i++)
        l.set[i] = (set_mask >> i) & 1;
    return l;
}

/* R-SEC-5: a key never has more than its maker; nobody raises its own. */
static void test_key_limits(void)
{
    char why[256];
    struct authz_actor adm10 = ADM;         /* admin with a ceiling of 10 qps, 1000 a day */
    adm10.ceiling = lim(10, 1000, 0x3f);
    struct authz_target member = {T_A, 22, AUTHZ_MEMBER}, self = {T_A, 20, AUTHZ_ADMIN};
    struct authz_limits k5 = lim(5, 100, 0x3f), k20 = lim(20, 100, 0x3f), k0 = lim(0, 100, 0x3f);
    CHECK(authz_key_limits(&adm10, &member, NULL, &k5, why, sizeof why) == 0, "within ceiling");
    CHECK(authz_key_limits(&adm10, &member, NULL, &k20, why, sizeof why) != 0, "above ceiling");
    CHECK(authz_key_limits(&adm10, &member, NULL, &k0, why, sizeof why) != 0,
          "unlimited is above any ceiling");
    CHECK(authz_key_limits(&OP, &member, NULL, &k0, why, sizeof why) == 0, "operator unbounded");
    struct authz_actor adm = ADM;           /* no ceiling */
    struct authz_limits old = lim(5, 0, 0x3f), up = lim(6, 0, 0x1), down = lim(4, 0, 0x1),
                        unl = lim(0, 0, 0x1), other = lim(0, 50, 0x4);
    CHECK(authz_key_limits(&adm, &self, &old, &up, why, sizeof why) != 0, "raise own key");
    CHECK(authz_key_limits(&adm, &self, &old, &unl, why, sizeof why) != 0, "own key to unlimited");
    CHECK(authz_key_limits(&adm, &self, &old, &down, why, sizeof why) == 0, "lower own key");
    CHECK(authz_key_limits(&adm, &self, &old, &other, why, sizeof why) == 0,
          "setting a limit that was unlimited lowers it");
    CHECK(authz_key_limits(&adm, &member, &old, &up, why, sizeof why) == 0,
          "an admin may raise a member's key within its own (no) ceiling");
    struct authz_limits a = lim(5, 0, 0x3f), b = lim(3, 7, 0x3f), m;
    authz_limits_min(&m, &a, &b);
    CHECK(m.v[0] == 3 && m.v[2] == 7, "min: tightest of each, 0 unlimited (%lld %lld)",
          (long long)m.v[0], (long long)m.v[2]);
}

/* R-SEC-5 on users: own role, roles above one's own, ceilings, operators. */
static void test_user(void)
{
    char why[256];
    struct authz_target self_m = {T_A, 21, AUTHZ_MEMBER}, self_a = {T_A, 20, AUTHZ_ADMIN},
                        other_m = {T_A, 22, AUTHZ_MEMBER}, new_a = {T_A, 0, AUTHZ_NOBODY},
                        new_b = {T_B, 0, AUTHZ_NOBODY};
    struct authz_user_change role_admin = {"admin", 0, 0, {{0}, {0}}},
                             role_member = {"member", 0, 0, {{0}, {0}}},
                             role_op = {"operator", 0, 0, {{0}, {0}}},
                             pw = {NULL, 1, 0, {{0}, {0}}},
                             ceil = {NULL, 0, 1, lim(5, 0, 0x3f)};
    CHECK(authz_user(&MEM, &self_m, &role_admin, why, sizeof why) != 0, "member raises own role");
    CHECK(authz_user(&MEM, &self_m, &role_member, why, sizeof why) != 0, "member sets own role");
    CHECK(authz_user(&MEM, &self_m, &pw, why, sizeof why) == 0, "member changes own password");
    CHECK(authz_user(&MEM, &other_m, &pw, why, sizeof why) != 0, "member changes another");
    CHECK(authz_user(&MEM, &self_m, &ceil, why, sizeof why) != 0, "member sets own ceiling");
    CHECK(authz_user(&ADM, &self_a, &role_member, why, sizeof why) != 0, "admin changes own role");
    CHECK(authz_user(&ADM, &self_a, &ceil, why, sizeof why) != 0, "admin raises own ceiling");
    CHECK(authz_user(&ADM, &other_m, &role_admin, why, sizeof why) == 0, "admin promotes member");
    CHECK(authz_user(&ADM, &other_m, &role_op, why, sizeof why) != 0, "admin makes an operator");
    CHECK(authz_user(&ADM, &new_a, &role_member, why, sizeof why) == 0, "admin adds member");
    CHECK(authz_user(&ADM, &new_b, &role_member, why, sizeof why) != 0, "admin adds to other tenant");
    CHECK(authz_user(&ADM, &other_m, &ceil, why, sizeof why) == 0, "admin sets member ceiling");
    struct authz_actor adm3 = ADM;
    adm3.ceiling = lim(3, 0, 0x3f);
    CHECK(authz_user(&adm3, &other_m, &ceil, why, sizeof why) != 0,
          "admin gives a ceiling above its own");
    CHECK(authz_user(&OP, &self_a, &role_op, why, sizeof why) == 0, "operator decides everything");
    CHECK(authz_role_parse("operator") == AUTHZ_OPERATOR && authz_role_parse("x") == AUTHZ_NOBODY &&
          authz_role_parse(NULL) == AUTHZ_NOBODY, "role names");
}

/* Six limits with their set mask. */
static struct authz_limits lim6(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f,
                                int set_mask)
{
    struct authz_limits l = {{a, b, c, d, e, f}, {0}};
    for (int i = 0; i < AUTHZ_NLIMITS; i++)
        l.set[i] = (set_mask >> i) & 1;
    return l;
}

/* R-SEC-5, R-SEC-10: a user's ceiling after a change is never above the changer's. */
static void test_ceiling_after(void)
{
    const struct authz_limits bound = lim6(10, 4, 1000, 20000, 50000, 900000, 0x3f),
                              none = lim6(0, 0, 0, 0, 0, 0, 0x3f);
    static const struct {
        const char *what;
        struct authz_limits cur, given;
        int has_given, bounded;
        int over;                       /* index refused, or -1 */
        int64_t want[AUTHZ_NLIMITS];
    } rows[] = {
        {"new user, nothing given: the creator's ceiling", {{0}, {0}}, {{0}, {0}}, 0, 1, -1,
         {10, 4, 1000, 20000, 50000, 900000}},
        {"new user, empty key_ceiling: the same", {{0}, {0}}, {{0}, {0}}, 1, 1, -1,
         {10, 4, 1000, 20000, 50000, 900000}},
        {"new user, some given: the rest inherited", {{0}, {0}}, {{5, 0, 100}, {1, 0, 1}}, 1, 1, -1,
         {5, 4, 100, 20000, 50000, 900000}},
        {"given above the bound", {{0}, {0}}, {{11}, {1}}, 1, 1, 0, {0}},
        {"given unlimited (0) is above any bound", {{0}, {0}}, {{0, 0, 0, 0, 0}, {0, 0, 0, 0, 1}}, 1, 1, 4,
         {0}},
        {"edit of one member tightens the others", {{0}, {0}}, {{3}, {1}}, 1, 1, -1,
         {3, 4, 1000, 20000, 50000, 900000}},
        {"members already tighter stay", {{1, 2, 3, 4, 5, 6}, {0}}, {{0}, {0}}, 0, 1, -1,
         {1, 2, 3, 4, 5, 6}},
        {"role change (nothing given) brings an unlimited user under", {{0, 9, 0, 0, 0, 0}, {0}},
         {{0}, {0}}, 0, 1, -1, {10, 4, 1000, 20000, 50000, 900000}},
        {"the operator: given replace, others kept", {{1, 2, 3, 4, 5, 6}, {0}}, {{0, 7}, {1, 1}}, 1, 0,
         -1, {0, 7, 3, 4, 5, 6}},
        {"the operator: a new user without a ceiling has none", {{0}, {0}}, {{0}, {0}}, 0, 0, -1,
         {0, 0, 0, 0, 0, 0}},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        struct authz_limits out = none;
        int over = authz_ceiling_after(&rows[r].cur, rows[r].has_given ? &rows[r].given : NULL,
                                       rows[r].bounded ? &bound : NULL, &out);
        CHECK(over == rows[r].over, "%s: over %d, want %d", rows[r].what, over, rows[r].over);
        for (int i = 0; over < 0 && i < AUTHZ_NLIMITS; i++)
            CHECK(out.v[i] == rows[r].want[i] && out.set[i], "%s: %s = %lld, want %lld", rows[r].what,
                  authz_limit_names[i], (long long)out.v[i], (long long)rows[r].want[i]);
    }
    /* An unbounded member of the bound lets the given value through unchanged. */
    struct authz_limits b0 = lim6(10, 0, 0, 0, 0, 0, 0x3f), g = lim6(0, 99, 0, 0, 0, 0, 0x2), out;
    CHECK(authz_ceiling_after(&none, &g, &b0, &out) == -1 && out.v[0] == 10 && out.v[1] == 99 &&
          out.v[2] == 0, "0 in the bound is no bound");
}

/* R-ANT-4, R-SEC-9: where an endpoint's credential may go. */
static void test_upstream_url(void)
{
    char why[256];
    static const struct {
        const char *what;
        enum authz_role actor;
        enum authz_cred cred;
        int known_origin, want;
    } rows[] = {
        {"operator registers anything: approved", AUTHZ_OPERATOR, AUTHZ_CRED_OPERATOR, 0, 1},
        {"operator, no credential: approved", AUTHZ_OPERATOR, AUTHZ_CRED_NONE, 0, 1},
        {"admin, operator's credential, new origin: refused", AUTHZ_ADMIN, AUTHZ_CRED_OPERATOR, 0, -1},
        {"admin, operator's credential, approved origin: approved", AUTHZ_ADMIN, AUTHZ_CRED_OPERATOR, 1, 1},
        {"admin, its tenant's credential: registered, not approved", AUTHZ_ADMIN, AUTHZ_CRED_TENANT, 0, 0},
        {"admin, no credential: registered, not approved", AUTHZ_ADMIN, AUTHZ_CRED_NONE, 0, 0},
        {"admin, no credential, approved origin: approved", AUTHZ_ADMIN, AUTHZ_CRED_NONE, 1, 1},
        {"member (never gets this far), operator's credential: refused", AUTHZ_MEMBER,
         AUTHZ_CRED_OPERATOR, 0, -1},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        why[0] = '\0';
        int got = authz_upstream_url(rows[r].actor, rows[r].cred, rows[r].known_origin, why, sizeof why);
        CHECK(got == rows[r].want, "%s: got %d, want %d", rows[r].what, got, rows[r].want);
        CHECK((got < 0) == (why[0] != '\0'), "%s: a reason exactly when refused", rows[r].what);
    }
}

/* R-KEY-6, R-SEC-5: quota layers — the operator all; an admin its tenant's user and endpoint
 * layers (never tenant or model layers, never raising its own user's); members none. */
static void test_quota(void)
{
    char why[256];
    static const struct {
        const char *what;
        const struct authz_actor *who;
        enum authz_op op;
        enum authz_quota_scope scope;
        struct authz_target t;
        int loosens, allowed;
    } rows[] = {
        {"op sets a tenant layer", &OP, AUTHZ_CREATE, AUTHZ_QSCOPE_TENANT, {T_B, 0, 0}, 0, A},
        {"op sets a model layer", &OP, AUTHZ_UPDATE, AUTHZ_QSCOPE_MODEL, {0, 0, 0}, 1, A},
        {"op raises its own user's layer", &OP, AUTHZ_UPDATE, AUTHZ_QSCOPE_USER, {T_DEF, 10, AUTHZ_OPERATOR}, 1, A},
        {"admin sets own tenant's user layer", &ADM, AUTHZ_CREATE, AUTHZ_QSCOPE_USER, {T_A, 22, AUTHZ_MEMBER}, 0, A},
        {"admin raises own tenant's member layer", &ADM, AUTHZ_UPDATE, AUTHZ_QSCOPE_USER, {T_A, 22, AUTHZ_MEMBER}, 1, A},
        {"admin deletes own tenant's endpoint layer", &ADM, AUTHZ_DELETE, AUTHZ_QSCOPE_ENDPOINT, {T_A, 0, 0}, 1, A},
        {"admin reads own tenant's endpoint layer", &ADM, AUTHZ_READ, AUTHZ_QSCOPE_ENDPOINT, {T_A, 0, 0}, 0, A},
        {"admin sets other tenant's user layer", &ADM, AUTHZ_CREATE, AUTHZ_QSCOPE_USER, {T_B, 30, AUTHZ_ADMIN}, 0, D},
        {"admin reads other tenant's endpoint layer", &ADM, AUTHZ_READ, AUTHZ_QSCOPE_ENDPOINT, {T_B, 0, 0}, 0, D},
        {"admin sets own tenant's layer", &ADM, AUTHZ_CREATE, AUTHZ_QSCOPE_TENANT, {T_A, 0, 0}, 0, D},
        {"admin reads own tenant's layer", &ADM, AUTHZ_READ, AUTHZ_QSCOPE_TENANT, {T_A, 0, 0}, 0, D},
        {"admin sets a model layer", &ADM, AUTHZ_CREATE, AUTHZ_QSCOPE_MODEL, {0, 0, 0}, 0, D},
        {"admin lowers its own user's layer", &ADM, AUTHZ_UPDATE, AUTHZ_QSCOPE_USER, {T_A, 20, AUTHZ_ADMIN}, 0, A},
        {"admin raises its own user's layer", &ADM, AUTHZ_UPDATE, AUTHZ_QSCOPE_USER, {T_A, 20, AUTHZ_ADMIN}, 1, D},
        {"admin deletes its own user's layer", &ADM, AUTHZ_DELETE, AUTHZ_QSCOPE_USER, {T_A, 20, AUTHZ_ADMIN}, 1, D},
        {"admin sets an operator's layer", &ADM, AUTHZ_CREATE, AUTHZ_QSCOPE_USER, {T_A, 11, AUTHZ_OPERATOR}, 0, D},
        {"member reads its own user's layer", &MEM, AUTHZ_READ, AUTHZ_QSCOPE_USER, {T_A, 21, AUTHZ_MEMBER}, 0, D},
        {"member sets an endpoint layer", &MEM, AUTHZ_CREATE, AUTHZ_QSCOPE_ENDPOINT, {T_A, 0, 0}, 0, D},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        why[0] = '\0';
        int got = authz_quota(rows[r].who, rows[r].op, rows[r].scope, &rows[r].t, rows[r].loosens, why, sizeof why) == 0;
        CHECK(got == rows[r].allowed, "%s: got %s (%s)", rows[r].what, got ? "allowed" : "denied", why);
    }
    CHECK(authz_quota_scopes(AUTHZ_MEMBER) == 0, "members see no layer");
    CHECK(authz_quota_scope_parse("endpoint") == AUTHZ_QSCOPE_ENDPOINT && authz_quota_scope_parse("x") < 0,
          "scope names");
}

/* R-PRIO-2, R-SEC-5: nobody but the operator raises its own key's priority (0 the highest),
 * and only the operator gives a tier better than the default 5. */
static void test_key_priority(void)
{
    char why[256];
    const struct authz_target own = {T_A, 21, AUTHZ_MEMBER}, other = {T_A, 22, AUTHZ_MEMBER};
    static const struct {
        const char *what;
        int old, old_max, want, want_max, own, allowed;
    } rows[] = {
        {"lower own priority", 5, 5, 7, -1, 1, A},
        {"raise own priority", 5, 5, 2, -1, 1, D},
        {"raise own max_priority", 5, 5, -1, 3, 1, D},
        {"lower own max_priority below priority", 5, 3, -1, 4, 1, A},
        {"clear own max_priority", 5, 3, -1, -2, 1, A},
        {"keep priority, clear max_priority: the same", 5, 5, -1, -2, 1, A},
        {"admin gives another's key a better tier than 5", 5, 5, 0, 0, 0, D},
        {"admin gives another's key max_priority 4", 5, 5, -1, 4, 0, D},
        {"admin lowers another's key", 5, 5, 7, 7, 0, A},
        {"admin keeps the 2 the operator gave", 2, 2, -1, -1, 0, A},
        {"admin moves an operator-given 2 to 3", 2, 2, 3, -1, 0, A},
        {"admin moves an operator-given 2 to 1", 2, 2, 1, -1, 0, D},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const struct authz_actor *who = rows[r].own ? &MEM : &ADM;
        int got = authz_key_priority(who, rows[r].own ? &own : &other, rows[r].old, rows[r].old_max, rows[r].want,
                                     rows[r].want_max, why, sizeof why) == 0;
        CHECK(got == rows[r].allowed, "%s: got %s", rows[r].what, got ? "allowed" : "denied");
    }
    CHECK(authz_key_priority(&OP, &(struct authz_target){T_DEF, 10, AUTHZ_OPERATOR}, 5, 5, 0, 0, why, sizeof why) == 0,
          "the operator sets what it likes");
}

/* R-GUARD-3: content rules: the admin reads its own tenant's and the global ones,
 * creates and deletes its own only; members nothing; the operator everything. */
static void test_rule(void)
{
    static const struct {
        const char *what;
        const struct authz_actor *who;
        enum authz_op op;
        int64_t tenant;
        int allowed;
    } rows[] = {
        {"op reads a global rule", &OP, AUTHZ_READ, 0, A},
        {"op creates a global rule", &OP, AUTHZ_CREATE, 0, A},
        {"op deletes another tenant's rule", &OP, AUTHZ_DELETE, T_B, A},
        {"admin reads own tenant's rule", &ADM, AUTHZ_READ, T_A, A},
        {"admin reads a global rule", &ADM, AUTHZ_READ, 0, A},
        {"admin reads another tenant's rule", &ADM, AUTHZ_READ, T_B, D},
        {"admin creates in own tenant", &ADM, AUTHZ_CREATE, T_A, A},
        {"admin creates a global rule", &ADM, AUTHZ_CREATE, 0, D},
        {"admin creates in another tenant", &ADM, AUTHZ_CREATE, T_B, D},
        {"admin deletes own tenant's rule", &ADM, AUTHZ_DELETE, T_A, A},
        {"admin deletes a global rule", &ADM, AUTHZ_DELETE, 0, D},
        {"admin updates (no such operation)", &ADM, AUTHZ_UPDATE, T_A, D},
        {"member reads own tenant's rule", &MEM, AUTHZ_READ, T_A, D},
        {"member reads a global rule", &MEM, AUTHZ_READ, 0, D},
        {"member creates", &MEM, AUTHZ_CREATE, T_A, D},
    };
    char why[256];
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        why[0] = '\0';
        int got = authz_rule(rows[r].who, rows[r].op, rows[r].tenant, why, sizeof why) == 0;
        CHECK(got == rows[r].allowed, "%s: got %s (%s)", rows[r].what, got ? "allowed" : "denied", why);
        CHECK(got || why[0], "%s: a refusal says why", rows[r].what);
    }
    struct authz_scope asked = {0, 0}, out;
    CHECK(authz_list(&ADM, AUTHZ_RULE, &asked, &out, why, sizeof why) == 0 && out.tenant_id == T_A,
          "an admin's listing is narrowed to its tenant (and the global ones)");
    CHECK(authz_list(&MEM, AUTHZ_RULE, &asked, &out, why, sizeof why) != 0, "members list no rules");
}

int main(void)
{
    test_rule();
    test_check();
    test_list();
    test_route();
    test_key_limits();
    test_user();
    test_ceiling_after();
    test_upstream_url();
    test_quota();
    test_key_priority();
    return check_done();
}
