/* ops_endpoint.c: endpoints, their keys and their replicas (SPEC §0, R-SEC-1, R-SEC-3). */
#include "ops_internal.h"

#include "secret.h"
#include "util.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ENDPOINT_KEY_RANDOM 48  /* "sk-" + 48 characters */
#define KEY_PREFIX_LEN 12       /* characters of a key kept for people to recognise it */
#define HEALTH_PATH_MAX 256

static const char *const endpoint_algorithms[] = {
    "round_robin", "random", "least_connections", "engine_aware", NULL};
static const char *const endpoint_protocols[] = {"openai", "anthropic", NULL};
static const char *const replica_engines[] = {
    "vllm", "ollama", "openai", "anthropic", "other", NULL};
static const char *const replica_states[] = {"running", "sleeping", "disabled", NULL};

/* ---- endpoints ------------------------------------------------------------- */

/* Never key_hash or upstream_auth (R-SEC-1, R-ANT-4). */
#define ENDPOINT_SELECT \
    "SELECT e.id, e.name, t.name, t.id, e.algorithm, e.protocol, e.affinity, e.stream_guard," \
    " e.health_path, e.connect_timeout_ms, e.first_byte_timeout_ms, e.idle_timeout_ms," \
    " e.key_prefix, e.upstream_auth IS NOT NULL," \
    " (SELECT COUNT(*) FROM replicas r WHERE r.endpoint_id = e.id), e.created_at," \
    " e.health_check, e.failure_threshold, e.start_period_seconds, e.business_probe_rounds," \
    " e.wake_url, e.anthropic_version, e.default_max_tokens," \
    " CASE WHEN e.upstream_auth IS NOT NULL THEN e.upstream_auth_by END, e.wake_url_approved," \
    " e.max_concurrency, e.queue_max, e.queue_timeout_ms" \
    " FROM endpoints e JOIN tenants t ON t.id = e.tenant_id"

static struct json_object *endpoint_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "name", st, 1);
    ops_json_text(o, "tenant", st, 2);
    ops_json_int(o, "tenant_id", st, 3);
    ops_json_text(o, "algorithm", st, 4);
    ops_json_text(o, "protocol", st, 5);
    ops_json_bool(o, "affinity", st, 6);
    ops_json_bool(o, "stream_guard", st, 7);
    ops_json_text(o, "health_path", st, 8);
    ops_json_int(o, "connect_timeout_ms", st, 9);
    ops_json_int(o, "first_byte_timeout_ms", st, 10);
    ops_json_int(o, "idle_timeout_ms", st, 11);
    ops_json_text(o, "key_prefix", st, 12);
    ops_json_bool(o, "upstream_auth_set", st, 13);
    ops_json_bool(o, "health_check", st, 16);
    ops_json_int(o, "failure_threshold", st, 17);
    ops_json_int(o, "start_period_seconds", st, 18);
    ops_json_int(o, "business_probe_rounds", st, 19);
    ops_json_text(o, "wake_url", st, 20);
    ops_json_text(o, "anthropic_version", st, 21);
    ops_json_int(o, "default_max_tokens", st, 22);
    ops_json_text(o, "upstream_auth_by", st, 23);         /* R-SEC-9: operator | tenant | null */
    ops_json_bool(o, "wake_url_approved", st, 24);
    ops_json_int(o, "max_concurrency", st, 25);           /* R-PRIO-1 */
    ops_json_int(o, "queue_max", st, 26);
    ops_json_int(o, "queue_timeout_ms", st, 27);
    ops_json_int(o, "replicas", st, 14);
    ops_json_int(o, "created_at", st, 15);
    return o;
}

struct json_object *ops_endpoint_get(struct sdb *db, int64_t id, struct ops_error *err)
{
    struct json_object *res = ops_query_one(db, err, endpoint_row, "endpoint",
                                            ENDPOINT_SELECT " WHERE e.id = ?1", "i", id);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "endpoint not found: %lld", (long long)id);
    return res;
}

/* Endpoint names are one path segment of /api/v1/proxy/{endpoint}/... (SPEC §1). */
static int endpoint_check_name(const char *name, struct ops_error *err)
{
    if (ops_check_name("name", name, err) != 0)
        return -1;
    if (strchr(name, '/')) {
        ops_fail(err, OPS_ERR_INVALID, "name", "endpoint name must not contain '/'");
        return -1;
    }
    return 0;
}

static int endpoint_check_health_path(const char *p, struct ops_error *err)
{
    size_t n = strlen(p);
    if (n == 0 || n > HEALTH_PATH_MAX || p[0] != '/') {
        ops_fail(err, OPS_ERR_INVALID, "health_path",
                 "health_path must start with '/' and be at most %d bytes", HEALTH_PATH_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c <= 0x20 || c >= 0x7f || c == '\\' || c == '#') {
            ops_fail(err, OPS_ERR_INVALID, "health_path",
                     "health_path must be printable ASCII without spaces, '\\' or '#'");
            return -1;
        }
    }
    if (strstr(p, "/../") || (n >= 3 && strcmp(p + n - 3, "/..") == 0)) {
        ops_fail(err, OPS_ERR_INVALID, "health_path", "health_path must not contain '..'");
        return -1;
    }
    return 0;
}

static int endpoint_check_opts(const struct ops_endpoint_opts *o, struct ops_error *err)
{
    if (o->algorithm && ops_check_enum("algorithm", o->algorithm, endpoint_algorithms, err) != 0)
        return -1;
    if (o->protocol && ops_check_enum("protocol", o->protocol, endpoint_protocols, err) != 0)
        return -1;
    if (o->health_path && endpoint_check_health_path(o->health_path, err) != 0)
        return -1;
    /* R-ANT-4: a credential is one header value: no CR/LF or other control bytes. */
    if (o->upstream_auth && *o->upstream_auth &&
        ops_check_text("upstream_auth", o->upstream_auth, 4096, err) != 0)
        return -1;
    if (o->wake_url && *o->wake_url && ops_check_replica_url(o->wake_url, err) != 0) {
        snprintf(err->param, sizeof err->param, "wake_url");
        return -1;
    }
    /* An anthropic-version is a date-like token sent as a header value. */
    if (o->anthropic_version) {
        const char *v = o->anthropic_version;
        size_t n = strlen(v), ok = n > 0 && n <= 64;
        for (size_t i = 0; ok && i < n; i++)
            ok = isalnum((unsigned char)v[i]) || v[i] == '-' || v[i] == '.' || v[i] == '_';
        if (!ok) {
            ops_fail(err, OPS_ERR_INVALID, "anthropic_version",
                     "anthropic_version must be 1-64 letters, digits, '-', '.' or '_' (e.g. 2023-06-01)");
            return -1;
        }
    }
    if (ops_check_range("default_max_tokens", o->default_max_tokens, 1, 1000000, err) != 0)
        return -1;
    if (ops_check_range("health_check", o->health_check, 0, 1, err) != 0 ||
        ops_check_range("failure_threshold", o->failure_threshold, 1, 1000, err) != 0 ||
        ops_check_range("start_period_seconds", o->start_period_seconds, 0, 86400, err) != 0 ||
        ops_check_range("business_probe_rounds", o->business_probe_rounds, 0, 100000, err) != 0)
        return -1;
    if (ops_check_range("affinity", o->affinity, 0, 1, err) != 0 ||
        ops_check_range("stream_guard", o->stream_guard, 0, 1, err) != 0 ||
        ops_check_range("connect_timeout_ms", o->connect_timeout_ms, 1, 600000, err) != 0 ||
        ops_check_range("first_byte_timeout_ms", o->first_byte_timeout_ms, 1, 3600000, err) != 0 ||
        ops_check_range("idle_timeout_ms", o->idle_timeout_ms, 1, 3600000, err) != 0)
        return -1;
    /* R-PRIO-1: 0 = no cap (max_concurrency), no waiting (queue_max, queue_timeout_ms). */
    if (ops_check_range("max_concurrency", o->max_concurrency, 0, OPS_COUNT_MAX, err) != 0 ||
        ops_check_range("queue_max", o->queue_max, 0, OPS_COUNT_MAX, err) != 0 ||
        ops_check_range("queue_timeout_ms", o->queue_timeout_ms, 0, 3600000, err) != 0)
        return -1;
    return 0;
}

/* ---- the credential at rest (R-SEC-9) ---------------------------------------------
 * upstream_auth is stored sealed (lib/secret.h: "enc1:" + AES-256-GCM, the endpoint's id
 * as additional data) with the key file beside the database (or secrets.key_file), which
 * the first credential stored creates (0600) when `sluicectl init` has not. */

static const struct secret_key *endpoint_key(struct sdb *db, char *path, size_t cap, struct ops_error *err)
{
    const struct secret_key *key = secret_process_key(sdb_filename(db), 1, path, cap);
    if (!key)
        ops_fail(err, OPS_ERR_INTERNAL, "upstream_auth",
                 "the upstream credential cannot be stored: the key file that seals it cannot be read"
                 " or created (the reason is logged)");
    return key;
}

/* The stored form of endpoint id's credential plain: NULL for NULL or "" (kept or cleared
 * as they are), else sealed (heap). 0, or -1 with err set. */
static int endpoint_seal(struct sdb *db, int64_t id, const char *plain, char **stored, struct ops_error *err)
{
    char path[PATH_MAX], aad[SECRET_AAD_MAX];
    *stored = NULL;
    if (!plain || !*plain)
        return 0;
    const struct secret_key *key = endpoint_key(db, path, sizeof path, err);
    if (!key)
        return -1;
    secret_aad_endpoint(id, aad);
    if (!(*stored = secret_seal(key, plain, aad))) {
        ops_fail(err, OPS_ERR_INVALID, "upstream_auth", "upstream_auth is too long");
        return -1;
    }
    return 0;
}

int ops_endpoint_seal_all(struct sdb *db, char *key_path, size_t cap, int64_t *sealed, struct ops_error *err)
{
    *sealed = 0;
    if (!endpoint_key(db, key_path, cap, err))
        return -1;
    /* Read first, then written: a table is not changed under its own scan. */
    struct sdb_stmt *st = ops_prepare(db, err, "SELECT id, upstream_auth FROM endpoints"
                                   " WHERE upstream_auth IS NOT NULL AND upstream_auth <> ''"
                                   " AND substr(upstream_auth, 1, length(?1)) <> ?1 ORDER BY id",
                                   "t", SECRET_PREFIX);
    if (!st)
        return -1;
    struct clear { int64_t id; char *value; } *rows = NULL;
    size_t n = 0, cap_rows = 0;
    int rc;
    while ((rc = sdb_step(st)) == SDB_ROW) {
        if (n == cap_rows) {
            cap_rows = cap_rows ? 2 * cap_rows : 16;
            if (!(rows = realloc(rows, cap_rows * sizeof *rows)))
                abort();
        }
        rows[n].id = sdb_column_int64(st, 0);
        if (!(rows[n++].value = strdup((const char *)sdb_column_text(st, 1))))
            abort();
    }
    sdb_finalize(st);
    int res = 0;
    if (rc != SDB_DONE) {
        ops_fail_db(err, db);
        res = -1;
    }
    for (size_t i = 0; i < n; i++) {
        char *stored = NULL;
        if (res == 0 && endpoint_seal(db, rows[i].id, rows[i].value, &stored, err) == 0) {
            struct json_object *after = json_object_new_object();
            json_object_object_add(after, "credential", json_object_new_string("sealed"));
            res = ops_run(db, err, "UPDATE endpoints SET upstream_auth = ?1 WHERE id = ?2", "ti", stored,
                          rows[i].id) != 0 ||
                  ops_audit_event(db, "seal", "endpoint", rows[i].id, 0, after, err) != 0 ? -1 : 0;
            json_object_put(after);
            if (res == 0)
                (*sealed)++;
        } else {
            res = -1;
        }
        free(stored);
        secret_free(rows[i].value);
    }
    free(rows);
    return res;
}

/* wake_approved: R-SEC-9 approval of a wake URL given in o (endpoint_check_wake_url). */
static int endpoint_update(struct sdb *db, int64_t id, const struct ops_endpoint_opts *o,
                           int64_t wake_approved, struct ops_error *err)
{
    char *sealed = NULL;
    if (endpoint_seal(db, id, o->upstream_auth, &sealed, err) != 0)
        return -1;
    /* R-SEC-9: who set the credential is recorded with it. */
    const char *by = ops_actor_role() == AUTHZ_OPERATOR ? "operator" : "tenant";
    /* Text "" clears; NULL keeps. */
    if (ops_run(db, err,
                "UPDATE endpoints SET"
                " upstream_auth = CASE WHEN ?1 IS NULL THEN upstream_auth WHEN ?1 = '' THEN NULL"
                "   ELSE ?1 END,"
                " upstream_auth_by = CASE WHEN ?1 IS NULL THEN upstream_auth_by WHEN ?1 = '' THEN NULL"
                "   ELSE ?10 END,"
                " wake_url = CASE WHEN ?2 IS NULL THEN wake_url WHEN ?2 = '' THEN NULL ELSE ?2 END,"
                " wake_url_approved = CASE WHEN ?2 IS NULL THEN wake_url_approved WHEN ?2 = '' THEN 1"
                "   ELSE ?11 END,"
                " health_check = COALESCE(?3, health_check),"
                " failure_threshold = COALESCE(?4, failure_threshold),"
                " start_period_seconds = COALESCE(?5, start_period_seconds),"
                " business_probe_rounds = COALESCE(?6, business_probe_rounds),"
                " anthropic_version = COALESCE(?7, anthropic_version),"
                " default_max_tokens = COALESCE(?8, default_max_tokens) WHERE id = ?9",
                "ttooootoiti", sealed ? sealed : o->upstream_auth, o->wake_url, o->health_check,
                o->failure_threshold, o->start_period_seconds, o->business_probe_rounds,
                o->anthropic_version, o->default_max_tokens, id, by, wake_approved) != 0) {
        free(sealed);
        return -1;
    }
    free(sealed);
    return ops_run(db, err,
                   "UPDATE endpoints SET algorithm = COALESCE(?1, algorithm),"
                   " protocol = COALESCE(?2, protocol), health_path = COALESCE(?3, health_path),"
                   " affinity = COALESCE(?4, affinity), stream_guard = COALESCE(?5, stream_guard),"
                   " connect_timeout_ms = COALESCE(?6, connect_timeout_ms),"
                   " first_byte_timeout_ms = COALESCE(?7, first_byte_timeout_ms),"
                   " idle_timeout_ms = COALESCE(?8, idle_timeout_ms),"
                   " max_concurrency = COALESCE(?10, max_concurrency),"
                   " queue_max = COALESCE(?11, queue_max),"
                   " queue_timeout_ms = COALESCE(?12, queue_timeout_ms) WHERE id = ?9",
                   "tttoooooiooo", o->algorithm, o->protocol, o->health_path, o->affinity,
                   o->stream_guard, o->connect_timeout_ms, o->first_byte_timeout_ms,
                   o->idle_timeout_ms, id, o->max_concurrency, o->queue_max, o->queue_timeout_ms);
}

/* ---- where the upstream credential may go (R-ANT-4, R-SEC-9) --------------------
 * An operator's credential goes only to URLs an operator registered or approved, or at
 * the origin of a replica an operator approved (authz_upstream_url). Every write below
 * keeps that true in the database, so the data plane and healthd send the credential to
 * every replica as before, with no per-request check. */

/* The origin of a URL that passed ops_check_replica_url: scheme://host:port, scheme and
 * host in lower case, the port always written. */
static void url_origin(const char *url, char *out, size_t cap)
{
    int https = strncasecmp(url, "https://", 8) == 0;
    const char *p = url + (https ? 8 : 7);
    size_t alen = strcspn(p, "/"), hlen = alen;
    if (p[0] == '[') {
        const char *close = memchr(p, ']', alen);
        hlen = close ? (size_t)(close - p) + 1 : alen;
    } else {
        const char *colon = memchr(p, ':', alen);
        if (colon)
            hlen = (size_t)(colon - p);
    }
    int64_t port = https ? 443 : 80;
    if (hlen < alen && p[hlen] == ':') {
        char num[8];
        size_t n = alen - hlen - 1;
        if (n > 0 && n < sizeof num) {
            memcpy(num, p + hlen + 1, n);
            num[n] = '\0';
            if (parse_i64(num, 1, 65535, &port) != 0)
                port = 0;
        }
    }
    char host[OPS_URL_MAX + 1];
    size_t k;
    for (k = 0; k < hlen && k < sizeof host - 1; k++)
        host[k] = (char)tolower((unsigned char)p[k]);
    host[k] = '\0';
    snprintf(out, cap, "%s://%s:%lld", https ? "https" : "http", host, (long long)port);
}

/* 1 if url has the origin of a replica of the endpoint an operator approved, 0 if not, -1 error. */
static int endpoint_origin_known(struct sdb *db, int64_t endpoint_id, const char *url,
                                 struct ops_error *err)
{
    char want[OPS_URL_MAX + 32], have[OPS_URL_MAX + 32];
    url_origin(url, want, sizeof want);
    struct sdb_stmt *st = ops_prepare(db, err, "SELECT url FROM replicas WHERE endpoint_id = ?1"
                                   " AND approved = 1", "i", endpoint_id);
    if (!st)
        return -1;
    int rc, found = 0;
    while (!found && (rc = sdb_step(st)) == SDB_ROW) {
        const char *u = (const char *)sdb_column_text(st, 0);
        if (u && ops_check_replica_url(u, &(struct ops_error){0}) == 0) {
            url_origin(u, have, sizeof have);
            found = strcmp(want, have) == 0;
        }
    }
    if (!found && rc != SDB_DONE) {
        sdb_finalize(st);
        ops_fail_db(err, db);
        return -1;
    }
    sdb_finalize(st);
    return found;
}

/* Who set the endpoint's credential, as it is stored now. */
static int endpoint_cred(struct sdb *db, int64_t id, enum authz_cred *cred, struct ops_error *err)
{
    int64_t v = 0;
    int rc = ops_query_i64(db, err, &v,
                           "SELECT CASE WHEN upstream_auth IS NULL THEN 0"
                           " WHEN upstream_auth_by = 'tenant' THEN 1 ELSE 2 END"
                           " FROM endpoints WHERE id = ?1", "i", id);
    if (rc == 0)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "endpoint not found: %lld", (long long)id);
    *cred = v == 2 ? AUTHZ_CRED_OPERATOR : v == 1 ? AUTHZ_CRED_TENANT : AUTHZ_CRED_NONE;
    return rc == 1 ? 0 : -1;
}

/* Whether a URL registered now on endpoint id is approved (authz_upstream_url with the
 * credential the endpoint has, or will have when o sets one): 1 or 0 into *approved, or
 * -1 with FORBIDDEN and the reason also in refused. */
static int endpoint_check_url(struct sdb *db, int64_t id, const char *url, const char *new_auth,
                              int64_t *approved, char *refused, size_t n, struct ops_error *err)
{
    enum authz_cred cred;
    if (endpoint_cred(db, id, &cred, err) != 0)
        return -1;
    if (new_auth)
        cred = !*new_auth ? AUTHZ_CRED_NONE
               : ops_actor_role() == AUTHZ_OPERATOR ? AUTHZ_CRED_OPERATOR : AUTHZ_CRED_TENANT;
    int known = endpoint_origin_known(db, id, url, err);
    if (known < 0)
        return -1;
    int rc = authz_upstream_url(ops_actor_role(), cred, known, refused, n);
    if (rc < 0) {
        ops_fail(err, OPS_ERR_FORBIDDEN, "url", "%s", refused);
        return -1;
    }
    *approved = rc;
    return 0;
}

static int endpoint_check_wake_url(struct sdb *db, int64_t id, const struct ops_endpoint_opts *o,
                                   int64_t *approved, char *refused, size_t n, struct ops_error *err)
{
    *approved = 1;
    if (!o->wake_url || !*o->wake_url)
        return 0;
    if (endpoint_check_url(db, id, o->wake_url, o->upstream_auth, approved, refused, n, err) != 0) {
        snprintf(err->param, sizeof err->param, "wake_url");
        return -1;
    }
    return 0;
}

/* The rule's invariant after a write that sets a credential, a wake URL or an approval:
 * an operator's credential is never stored beside a URL a tenant admin registered that no
 * operator approved (CONFLICT for the operator, who can approve; FORBIDDEN for anyone
 * else). New replicas keep it by endpoint_check_url. */
static int endpoint_check_credential(struct sdb *db, int64_t id, struct ops_error *err)
{
    struct sdb_stmt *st = ops_prepare(db, err,
        "SELECT upstream_auth IS NOT NULL AND upstream_auth_by IS NOT 'tenant',"
        " wake_url IS NOT NULL AND wake_url_approved = 0,"
        " (SELECT COUNT(*) FROM replicas WHERE endpoint_id = ?1 AND approved = 0)"
        " FROM endpoints WHERE id = ?1", "i", id);
    if (!st)
        return -1;
    int rc = sdb_step(st);
    int op = rc == SDB_ROW && sdb_column_int(st, 0);
    int wake = rc == SDB_ROW && sdb_column_int(st, 1);
    int64_t n = rc == SDB_ROW ? sdb_column_int64(st, 2) : 0;
    sdb_finalize(st);
    if (rc != SDB_ROW) {
        ops_fail_db(err, db);
        return -1;
    }
    if (!op || (!wake && n == 0))
        return 0;
    char what[96];
    if (n > 0)
        snprintf(what, sizeof what, "%lld replica URL%s%s", (long long)n, n == 1 ? "" : "s",
                 wake ? " and the wake URL" : "");
    else
        snprintf(what, sizeof what, "the wake URL");
    ops_fail(err, ops_actor_role() == AUTHZ_OPERATOR ? OPS_ERR_CONFLICT : OPS_ERR_FORBIDDEN,
             "upstream_auth",
             "the operator's upstream credential would go to %s that a tenant admin registered and"
             " no operator approved: approve them first (sluicectl replica set ENDPOINT URL --approve,"
             " or PUT .../replicas/{id} {\"approved\":true}; the wake URL by setting it again) or"
             " remove them", what);
    return -1;
}

/* Whether o sets what endpoint_check_credential is about. */
static int endpoint_sets_urls(const struct ops_endpoint_opts *o)
{
    return (o->upstream_auth && *o->upstream_auth) || (o->wake_url && *o->wake_url);
}

/* R-ADM-5: a refused URL leaves an audit record of its own (the change was rolled back). */
static void endpoint_audit_refusal(struct sdb *db, const char *object_type, int64_t object_id,
                                   int64_t tenant_id, const char *endpoint, const char *field,
                                   const char *url, const char *why)
{
    struct ops_error e2;
    ops_error_clear(&e2);
    int64_t eid = 0, tid = 0;
    if (ops_endpoint_ids(db, endpoint, &eid, &tid, &e2) != 0)
        eid = object_id;
    struct json_object *o = json_object_new_object();
    ops_json_str(o, "endpoint", endpoint);
    json_object_object_add(o, "endpoint_id", eid ? json_object_new_int64(eid) : NULL);
    ops_json_str(o, field, url);
    ops_json_str(o, "reason", why);
    ops_error_clear(&e2);
    ops_audit_event(db, "refuse", object_type, object_id, tenant_id, o, &e2);
    json_object_put(o);
}

/* Stores a fresh endpoint key's hash and prefix; the clear key goes into res (R-SEC-1). */
static int endpoint_new_key(struct sdb *db, int64_t id, struct json_object *res,
                            struct ops_error *err)
{
    char key[3 + ENDPOINT_KEY_RANDOM + 1], hash[65], prefix[KEY_PREFIX_LEN + 1];
    memcpy(key, "sk-", 3);
    random_token(key + 3, ENDPOINT_KEY_RANDOM);
    sha256_hex(key, strlen(key), hash);
    memcpy(prefix, key, KEY_PREFIX_LEN);
    prefix[KEY_PREFIX_LEN] = '\0';
    int rc = ops_run(db, err, "UPDATE endpoints SET key_hash = ?1, key_prefix = ?2 WHERE id = ?3",
                     "tti", hash, prefix, id);
    if (rc == 0) {
        json_object_object_add(res, "key", json_object_new_string(key));
        json_object_object_add(res, "key_prefix", json_object_new_string(prefix));
    }
    explicit_bzero(key, sizeof key);
    return rc;
}

struct json_object *ops_endpoint_add(struct sdb *db, const char *name, const char *tenant,
                                     const struct ops_endpoint_opts *o, struct ops_error *err)
{
    int64_t tenant_id, id = 0, wake_approved = 1;
    char refused[256] = "";
    if (ops_actor_check(err) != 0 || endpoint_check_name(name, err) != 0 ||
        endpoint_check_opts(o, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (ops_tenant_id(db, tenant, &tenant_id, err) != 0)
        goto out;
    int rc = ops_query_i64(db, err, &id, "SELECT id FROM endpoints WHERE name = ?1", "t", name);
    if (rc == 1)
        ops_fail(err, OPS_ERR_CONFLICT, "name", "endpoint already exists: %s", name);
    if (rc != 0)
        goto out;
    if (ops_run(db, err, "INSERT INTO endpoints (tenant_id, name) VALUES (?1, ?2)", "it",
                tenant_id, name) != 0)
        goto out;
    id = sdb_last_insert_rowid(db);
    if (endpoint_check_wake_url(db, id, o, &wake_approved, refused, sizeof refused, err) != 0 ||
        endpoint_update(db, id, o, wake_approved, err) != 0 ||
        (endpoint_sets_urls(o) && endpoint_check_credential(db, id, err) != 0) ||
        !(res = ops_endpoint_get(db, id, err)))
        goto out;
    if (endpoint_new_key(db, id, res, err) != 0 ||
        ops_audit(db, err, "create", "endpoint", NULL, res) != 0) {
        json_object_put(res);
        res = NULL;
    }
out:
    res = ops_finish(db, res, err);
    if (refused[0])
        endpoint_audit_refusal(db, "endpoint", 0, tenant_id, name, "wake_url", o->wake_url, refused);
    return res;
}

struct json_object *ops_endpoint_set(struct sdb *db, const char *name,
                                     const struct ops_endpoint_opts *o, struct ops_error *err)
{
    int64_t id = 0, tenant_id = 0, wake_approved = 1;
    char refused[256] = "";
    if (ops_actor_check(err) != 0 || endpoint_check_opts(o, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL, *before = NULL;
    if (ops_endpoint_ids(db, name, &id, &tenant_id, err) == 0 &&
        (before = ops_endpoint_get(db, id, err)) &&
        endpoint_check_wake_url(db, id, o, &wake_approved, refused, sizeof refused, err) == 0 &&
        endpoint_update(db, id, o, wake_approved, err) == 0 &&
        (!endpoint_sets_urls(o) || endpoint_check_credential(db, id, err) == 0))
        res = ops_audited(db, err, "update", "endpoint", before, ops_endpoint_get(db, id, err));
    json_object_put(before);
    res = ops_finish(db, res, err);
    if (refused[0])
        endpoint_audit_refusal(db, "endpoint", id, tenant_id, name, "wake_url", o->wake_url, refused);
    return res;
}

struct json_object *ops_endpoint_rotate_key(struct sdb *db, const char *name, struct ops_error *err)
{
    int64_t id, tenant_id;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL, *before = NULL;
    if (ops_endpoint_ids(db, name, &id, &tenant_id, err) == 0 &&
        (before = ops_endpoint_get(db, id, err)) && (res = ops_endpoint_get(db, id, err)) &&
        (endpoint_new_key(db, id, res, err) != 0 ||
         ops_audit(db, err, "rotate_key", "endpoint", before, res) != 0)) {
        json_object_put(res);
        res = NULL;
    }
    json_object_put(before);
    return ops_finish(db, res, err);
}

struct json_object *ops_endpoint_rm(struct sdb *db, const char *name, struct ops_error *err)
{
    int64_t id, tenant_id;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (ops_endpoint_ids(db, name, &id, &tenant_id, err) != 0 || !(res = ops_endpoint_get(db, id, err)))
        goto out;
    /* Its replicas and routes go with it (ON DELETE CASCADE). */
    if (ops_run(db, err, "DELETE FROM endpoints WHERE id = ?1", "i", id) != 0 ||
        ops_audit(db, err, "delete", "endpoint", res, NULL) != 0) {
        json_object_put(res);
        res = NULL;
        goto out;
    }
    json_object_object_add(res, "deleted", json_object_new_boolean(1));
out:
    return ops_finish(db, res, err);
}

struct json_object *ops_endpoint_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid;
    if (ops_list_ids(db, l, &tid, NULL, NULL, err) != 0)
        return NULL;
    return ops_query_page(db, err, "endpoints", endpoint_row, l,
                          ENDPOINT_SELECT " WHERE ?1 IS NULL OR e.tenant_id = ?1 ORDER BY e.id",
                          "o", tid);
}

/* ---- replica URLs (R-SEC-3) ---------------------------------------------------
 * A base URL is http:// or https://, a host (name, IPv4 or [IPv6]), an optional
 * port and an optional path. Refused: userinfo, query, fragment, whitespace and
 * control characters (raw or %-encoded CR, LF, NUL), backslashes, non-ASCII,
 * '.' and '..' path segments. Messages never repeat the URL: it may hold a password. */

static int url_bad(struct ops_error *err, const char *why)
{
    ops_fail(err, OPS_ERR_INVALID, "url", "replica URL %s", why);
    return -1;
}

static int url_check_host(const char *h, size_t n, struct ops_error *err)
{
    if (n == 0)
        return url_bad(err, "must name a host");
    if (h[0] == '[') {
        if (n < 3 || h[n - 1] != ']')
            return url_bad(err, "has a malformed IPv6 address");
        for (size_t i = 1; i < n - 1; i++)
            if (!isxdigit((unsigned char)h[i]) && h[i] != ':' && h[i] != '.')
                return url_bad(err, "has a malformed IPv6 address");
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)h[i]) && h[i] != '-' && h[i] != '.' && h[i] != '_')
            return url_bad(err, "has a host with characters other than letters, digits, '-', '.', '_'");
    return 0;
}

int ops_check_replica_url(const char *url, struct ops_error *err)
{
    if (!url || !*url)
        return url_bad(err, "must not be empty");
    size_t n = strlen(url);
    if (n > OPS_URL_MAX)
        return url_bad(err, "is too long");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)url[i];
        if (c <= 0x20 || c == 0x7f)
            return url_bad(err, "must not contain whitespace or control characters");
        if (c >= 0x80)
            return url_bad(err, "must be ASCII (use punycode and %-encoding)");
        if (c == '\\')
            return url_bad(err, "must not contain '\\'");
        if (c == '?' || c == '#')
            return url_bad(err, "must not have a query or fragment");
    }
    const char *p;
    if (strncasecmp(url, "http://", 7) == 0)
        p = url + 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        p = url + 8;
    else
        return url_bad(err, "must start with http:// or https://");

    size_t alen = strcspn(p, "/");
    const char *path = p + alen;
    if (memchr(p, '@', alen))
        return url_bad(err, "must not contain userinfo ('@' before the host)");
    if (memchr(p, '%', alen))
        return url_bad(err, "must not %-encode the host");
    /* host[:port]; an IPv6 host is bracketed */
    size_t hlen = alen;
    const char *colon = NULL;
    if (p[0] == '[') {
        const char *close = memchr(p, ']', alen);
        if (!close)
            return url_bad(err, "has a malformed IPv6 address");
        hlen = (size_t)(close - p) + 1;
        if (hlen < alen) {
            if (p[hlen] != ':')
                return url_bad(err, "has text after the IPv6 address");
            colon = p + hlen;
        }
    } else {
        colon = memchr(p, ':', alen);
        if (colon)
            hlen = (size_t)(colon - p);
    }
    if (url_check_host(p, hlen, err) != 0)
        return -1;
    if (colon) {
        char port[8];
        size_t plen = alen - (size_t)(colon + 1 - p);
        int64_t v;
        if (plen == 0 || plen >= sizeof port)
            return url_bad(err, "has an invalid port");
        memcpy(port, colon + 1, plen);
        port[plen] = '\0';
        if (!isdigit((unsigned char)port[0]) || parse_i64(port, 1, 65535, &v) != 0)
            return url_bad(err, "has an invalid port");
    }
    /* path: %XX must be two hex digits and not encode a control character */
    for (const char *q = path; *q; q++) {
        if (*q != '%')
            continue;
        if (!isxdigit((unsigned char)q[1]) || !isxdigit((unsigned char)q[2]))
            return url_bad(err, "has a malformed %-escape");
        if (q[1] == '0' || q[1] == '1' || (q[1] == '7' && (q[2] == 'f' || q[2] == 'F')))
            return url_bad(err, "must not %-encode control characters");
        if (q[1] == '2' && (q[2] == 'e' || q[2] == 'E'))
            return url_bad(err, "must not %-encode '.'");
        q += 2;
    }
    for (const char *s = path; *s; ) {
        s++;                                    /* past '/' */
        size_t seg = strcspn(s, "/");
        if ((seg == 1 && s[0] == '.') || (seg == 2 && s[0] == '.' && s[1] == '.'))
            return url_bad(err, "must not contain '.' or '..' path segments");
        s += seg;
    }
    return 0;
}

/* ---- replicas -------------------------------------------------------------- */

#define REPLICA_SELECT \
    "SELECT r.id, e.name, e.id, t.name, t.id, r.url, r.engine, r.weight, r.max_concurrency," \
    " r.state, r.healthy, r.created_at, n.name, r.node_id, r.approved FROM replicas r" \
    " JOIN endpoints e ON e.id = r.endpoint_id JOIN tenants t ON t.id = e.tenant_id" \
    " LEFT JOIN nodes n ON n.id = r.node_id"

static struct json_object *replica_row(struct sdb_stmt *st)
{
    struct json_object *o = json_object_new_object();
    ops_json_int(o, "id", st, 0);
    ops_json_text(o, "endpoint", st, 1);
    ops_json_int(o, "endpoint_id", st, 2);
    ops_json_text(o, "tenant", st, 3);
    ops_json_int(o, "tenant_id", st, 4);
    ops_json_text(o, "url", st, 5);
    ops_json_text(o, "engine", st, 6);
    ops_json_int(o, "weight", st, 7);
    ops_json_int(o, "max_concurrency", st, 8);
    ops_json_text(o, "state", st, 9);
    ops_json_bool(o, "healthy", st, 10);
    ops_json_text(o, "node", st, 12);
    ops_json_int(o, "node_id", st, 13);
    ops_json_int(o, "created_at", st, 11);
    ops_json_bool(o, "approved", st, 14);                  /* R-SEC-9 */
    return o;
}

struct json_object *ops_replica_get(struct sdb *db, int64_t id, struct ops_error *err)
{
    struct json_object *res = ops_query_one(db, err, replica_row, "replica",
                                            REPLICA_SELECT " WHERE r.id = ?1", "i", id);
    if (!res && err->kind == OPS_ERR_NOT_FOUND)
        ops_fail(err, OPS_ERR_NOT_FOUND, "id", "replica not found: %lld", (long long)id);
    return res;
}

static int replica_check_opts(const struct ops_replica_opts *o, struct ops_error *err)
{
    if (o->engine && ops_check_enum("engine", o->engine, replica_engines, err) != 0)
        return -1;
    if (o->state && ops_check_enum("state", o->state, replica_states, err) != 0)
        return -1;
    if (o->node && *o->node && ops_check_name("node", o->node, err) != 0)
        return -1;
    if (ops_check_range("weight", o->weight, 0, OPS_COUNT_MAX, err) != 0 ||
        ops_check_range("max_concurrency", o->max_concurrency, 0, OPS_COUNT_MAX, err) != 0 ||
        ops_check_range("approved", o->approved, 0, 1, err) != 0)
        return -1;
    /* R-SEC-9: approving a URL for the operator's credential is the operator's. */
    if (o->approved.set && ops_actor_role() != AUTHZ_OPERATOR) {
        ops_fail(err, OPS_ERR_FORBIDDEN, "approved", "only the operator approves replica URLs");
        return -1;
    }
    return 0;
}

static int replica_update(struct sdb *db, int64_t id, const struct ops_replica_opts *o,
                          struct ops_error *err)
{
    struct ops_i64 node = {0, 0};
    if (o->node && *o->node) {
        int rc = ops_query_i64(db, err, &node.v, "SELECT id FROM nodes WHERE name = ?1", "t",
                               o->node);
        if (rc == 0)
            ops_fail(err, OPS_ERR_NOT_FOUND, "node", "node not found: %s", o->node);
        if (rc != 1)
            return -1;
        node.set = 1;
    }
    if (o->node && ops_run(db, err, "UPDATE replicas SET node_id = ?1 WHERE id = ?2", "oi",
                           node, id) != 0)
        return -1;
    return ops_run(db, err,
                   "UPDATE replicas SET engine = COALESCE(?1, engine), state = COALESCE(?2, state),"
                   " weight = COALESCE(?3, weight),"
                   " max_concurrency = COALESCE(?4, max_concurrency),"
                   " approved = COALESCE(?6, approved) WHERE id = ?5",
                   "ttooio", o->engine, o->state, o->weight, o->max_concurrency, id, o->approved);
}

/* The replica of endpoint with this URL. Looking up needs no URL validation
 * beyond text rules, so replicas stored under older rules can still be removed. */
static int replica_find(struct sdb *db, const char *endpoint, const char *url, int64_t *id,
                        struct ops_error *err)
{
    int64_t eid, tid;
    if (ops_endpoint_ids(db, endpoint, &eid, &tid, err) != 0)
        return -1;
    if (!url || !*url || strlen(url) > OPS_URL_MAX) {
        ops_fail(err, OPS_ERR_INVALID, "url", "replica URL must be 1 to %d bytes", OPS_URL_MAX);
        return -1;
    }
    int rc = ops_query_i64(db, err, id,
                           "SELECT id FROM replicas WHERE endpoint_id = ?1 AND url = ?2",
                           "it", eid, url);
    if (rc == 0)
        ops_fail(err, OPS_ERR_NOT_FOUND, "url", "endpoint %s has no replica with that URL",
                 endpoint);
    return rc == 1 ? 0 : -1;
}

struct json_object *ops_replica_add(struct sdb *db, const char *endpoint, const char *url,
                                    const struct ops_replica_opts *o, struct ops_error *err)
{
    int64_t eid = 0, tid = 0, id, approved = 1;
    char refused[256] = "";
    if (ops_actor_check(err) != 0 || ops_check_replica_url(url, err) != 0 ||
        replica_check_opts(o, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (ops_endpoint_ids(db, endpoint, &eid, &tid, err) != 0 ||
        endpoint_check_url(db, eid, url, NULL, &approved, refused, sizeof refused, err) != 0)
        goto out;
    int rc = ops_query_i64(db, err, &id,
                           "SELECT id FROM replicas WHERE endpoint_id = ?1 AND url = ?2",
                           "it", eid, url);
    if (rc == 1)
        ops_fail(err, OPS_ERR_CONFLICT, "url", "endpoint %s already has a replica with that URL",
                 endpoint);
    if (rc != 0)
        goto out;
    if (ops_run(db, err, "INSERT INTO replicas (endpoint_id, url, approved) VALUES (?1, ?2, ?3)",
                "iti", eid, url, approved) != 0)
        goto out;
    id = sdb_last_insert_rowid(db);
    if (replica_update(db, id, o, err) == 0)
        res = ops_audited(db, err, "create", "replica", NULL, ops_replica_get(db, id, err));
out:
    res = ops_finish(db, res, err);
    if (refused[0])
        endpoint_audit_refusal(db, "replica", 0, tid, endpoint, "url", url, refused);
    return res;
}

struct json_object *ops_replica_set(struct sdb *db, const char *endpoint, const char *url,
                                    const struct ops_replica_opts *o, struct ops_error *err)
{
    int64_t id;
    if (ops_actor_check(err) != 0 || replica_check_opts(o, err) != 0 || ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL, *before = NULL;
    if (replica_find(db, endpoint, url, &id, err) == 0 && (before = ops_replica_get(db, id, err)) &&
        replica_update(db, id, o, err) == 0 &&
        (!o->approved.set ||
         endpoint_check_credential(db, json_object_get_int64(json_object_object_get(before, "endpoint_id")),
                                   err) == 0))
        res = ops_audited(db, err, "update", "replica", before, ops_replica_get(db, id, err));
    json_object_put(before);
    return ops_finish(db, res, err);
}

struct json_object *ops_replica_rm(struct sdb *db, const char *endpoint, const char *url,
                                   struct ops_error *err)
{
    int64_t id;
    if (ops_begin(db, err) != 0)
        return NULL;
    struct json_object *res = NULL;
    if (replica_find(db, endpoint, url, &id, err) != 0 || !(res = ops_replica_get(db, id, err)))
        goto out;
    if (ops_run(db, err, "DELETE FROM replicas WHERE id = ?1", "i", id) != 0 ||
        ops_audit(db, err, "delete", "replica", res, NULL) != 0) {
        json_object_put(res);
        res = NULL;
        goto out;
    }
    json_object_object_add(res, "deleted", json_object_new_boolean(1));
out:
    return ops_finish(db, res, err);
}

struct json_object *ops_replica_list(struct sdb *db, const struct ops_list *l, struct ops_error *err)
{
    struct ops_i64 tid, eid;
    if (ops_list_ids(db, l, &tid, NULL, &eid, err) != 0)
        return NULL;
    return ops_query_page(db, err, "replicas", replica_row, l,
                          REPLICA_SELECT " WHERE (?1 IS NULL OR e.tenant_id = ?1)"
                          " AND (?2 IS NULL OR r.endpoint_id = ?2) ORDER BY r.id",
                          "oo", tid, eid);
}
