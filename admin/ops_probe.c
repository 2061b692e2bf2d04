/* ops_probe.c: POST /api/v1/endpoints/{id}/test, one minimal real request to one healthy
 * replica in the endpoint's protocol (R-ANT-5). */
#include "ops_internal.h"
#include "upstream.h"

#include "secret.h"
#include "util.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_BODY_MAX 65536        /* the answer is read up to this and then ignored */
#define PROBE_TIMEOUT_DEFAULT_MS 60000

struct probe_target {
    int64_t endpoint_id, replica_id;
    char url[OPS_URL_MAX + 64];
    char protocol[16];
    char anthropic_version[72];
    char model[OPS_NAME_MAX + 1];
    char *auth;                     /* upstream credential or NULL; wiped after use */
    int auth_unopened;              /* one is stored but cannot be opened (secret.c) */
};

struct probe_body {
    char data[PROBE_BODY_MAX + 1];
    size_t len;
};

static size_t probe_write(char *p, size_t size, size_t n, void *arg)
{
    struct probe_body *b = arg;
    size_t len = size * n, room = PROBE_BODY_MAX - b->len;
    size_t take = len < room ? len : room;
    memcpy(b->data + b->len, p, take);
    b->len += take;
    b->data[b->len] = '\0';
    return len;
}

static void probe_copy(char *dst, size_t cap, struct sdb_stmt *st, int col)
{
    const char *s = (const char *)sdb_column_text(st, col);
    snprintf(dst, cap, "%s", s ? s : "");
}

/* Endpoint, first healthy running replica and a model name the backend knows. 1 found,
 * 0 no healthy replica, -1 error. */
static int probe_find(struct sdb *db, const char *name, struct probe_target *t, struct ops_error *err)
{
    int64_t tenant_id;
    if (ops_endpoint_ids(db, name, &t->endpoint_id, &tenant_id, err) != 0)
        return -1;
    int64_t operator_cred = 0;
    struct sdb_stmt *st = ops_prepare(db, err, "SELECT protocol, upstream_auth, anthropic_version,"
                                   " upstream_auth IS NOT NULL AND upstream_auth_by IS NOT 'tenant'"
                                   " FROM endpoints WHERE id = ?1", "i", t->endpoint_id);
    if (!st)
        return -1;
    if (sdb_step(st) == SDB_ROW) {
        probe_copy(t->protocol, sizeof t->protocol, st, 0);
        /* R-SEC-9: stored sealed; one that cannot be opened is logged and the test says so. */
        const char *a = (const char *)sdb_column_text(st, 1);
        t->auth = secret_open_endpoint(sdb_filename(db), t->endpoint_id, name, a);
        t->auth_unopened = a && *a && !t->auth;
        probe_copy(t->anthropic_version, sizeof t->anthropic_version, st, 2);
        operator_cred = sdb_column_int64(st, 3);
    }
    sdb_finalize(st);
    st = ops_prepare(db, err, "SELECT COALESCE(NULLIF(target_model, ''), model) FROM routes"
                     " WHERE endpoint_id = ?1 ORDER BY status = 'active' DESC, priority, id LIMIT 1",
                     "i", t->endpoint_id);
    if (!st)
        return -1;
    if (sdb_step(st) == SDB_ROW)
        probe_copy(t->model, sizeof t->model, st, 0);
    else
        snprintf(t->model, sizeof t->model, "%s", name);
    sdb_finalize(st);
    /* R-SEC-9, as for the data plane: the operator's credential only to an approved URL
     * (ops keeps every replica of such an endpoint approved; a row written behind its
     * back is left out here too). */
    st = ops_prepare(db, err, "SELECT id, url FROM replicas WHERE endpoint_id = ?1"
                     " AND state = 'running' AND healthy = 1 AND (approved = 1 OR ?2 = 0)"
                     " ORDER BY id LIMIT 1", "ii", t->endpoint_id, operator_cred);
    if (!st)
        return -1;
    int found = sdb_step(st) == SDB_ROW;
    if (found) {
        t->replica_id = sdb_column_int64(st, 0);
        probe_copy(t->url, sizeof t->url, st, 1);
        size_t n = strlen(t->url);
        while (n > 0 && t->url[n - 1] == '/')
            t->url[--n] = '\0';
    }
    sdb_finalize(st);
    return found;
}

/* Runs the request; fills status, latency and a reason that never quotes the upstream
 * (its error text may repeat the credential it was given). */
static void probe_run(const struct probe_target *t, int64_t timeout_ms, long *status,
                      int64_t *latency_ms, char *why, size_t whylen)
{
    int anthropic = strcmp(t->protocol, "anthropic") == 0;
    char url[sizeof t->url + 32], hdr[4200];
    snprintf(url, sizeof url, "%s%s", t->url, anthropic ? "/v1/messages" : "/v1/chat/completions");
    struct json_object *req = json_object_new_object(), *msgs = json_object_new_array(),
                       *m = json_object_new_object();
    json_object_object_add(req, "model", json_object_new_string(t->model));
    json_object_object_add(m, "role", json_object_new_string("user"));
    json_object_object_add(m, "content", json_object_new_string("ping"));
    json_object_array_add(msgs, m);
    json_object_object_add(req, "messages", msgs);
    json_object_object_add(req, "max_tokens", json_object_new_int(1));
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (anthropic) {
        snprintf(hdr, sizeof hdr, "anthropic-version: %s",
                 t->anthropic_version[0] ? t->anthropic_version : "2023-06-01");
        h = curl_slist_append(h, hdr);
    }
    if (t->auth) {
        snprintf(hdr, sizeof hdr, anthropic ? "x-api-key: %s" : "Authorization: Bearer %s", t->auth);
        h = curl_slist_append(h, hdr);
        explicit_bzero(hdr, sizeof hdr);
    }
    struct probe_body *body = calloc(1, sizeof *body);
    CURL *c = curl_easy_init();
    if (!body || !c || !h)
        abort();
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, json_object_to_json_string(req));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ms < 10000 ? timeout_ms : 10000));
    upstream_safe_defaults(c);                           /* R-SEC-3 */
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, probe_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    int64_t t0 = mono_ms();
    CURLcode rc = curl_easy_perform(c);
    *latency_ms = mono_ms() - t0;
    *status = 0;
    why[0] = '\0';
    if (rc != CURLE_OK) {
        snprintf(why, whylen, "upstream request failed: %s", curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
        struct json_object *ans = json_tokener_parse(body->data);
        if (*status < 200 || *status > 299)
            snprintf(why, whylen, "upstream answered HTTP %ld", *status);
        else if (!ans || !json_object_is_type(ans, json_type_object) ||
                 json_object_object_get_ex(ans, "error", NULL))
            snprintf(why, whylen, "upstream answer is not a %s response",
                     anthropic ? "Messages" : "chat completion");
        json_object_put(ans);
    }
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    free(body);
    json_object_put(req);
}

struct json_object *ops_endpoint_test(struct sdb *db, const char *name, int64_t timeout_ms,
                                      struct ops_error *err)
{
    struct probe_target t;
    memset(&t, 0, sizeof t);
    if (timeout_ms <= 0)
        timeout_ms = PROBE_TIMEOUT_DEFAULT_MS;
    int found = probe_find(db, name, &t, err);
    if (found < 0) {
        secret_free(t.auth);
        return NULL;
    }
    char why[256] = "no healthy running replica";
    long status = 0;
    int64_t latency = 0;
    if (found && t.auth_unopened)
        snprintf(why, sizeof why, "the upstream credential cannot be opened: the key file is missing"
                 " or not the one it was sealed with (see the log)");
    else if (found)
        probe_run(&t, timeout_ms, &status, &latency, why, sizeof why);
    secret_free(t.auth);
    struct json_object *res = json_object_new_object();
    json_object_object_add(res, "ok", json_object_new_boolean(found && why[0] == '\0'));
    json_object_object_add(res, "endpoint", json_object_new_string(name));
    json_object_object_add(res, "endpoint_id", json_object_new_int64(t.endpoint_id));
    json_object_object_add(res, "protocol", json_object_new_string(t.protocol));
    json_object_object_add(res, "model", json_object_new_string(t.model));
    json_object_object_add(res, "replica_id", found ? json_object_new_int64(t.replica_id) : NULL);
    ops_json_str(res, "replica", found ? t.url : NULL);
    json_object_object_add(res, "status", status ? json_object_new_int64(status) : NULL);
    json_object_object_add(res, "latency_ms", found ? json_object_new_int64(latency) : NULL);
    ops_json_str(res, "error", why[0] ? why : NULL);
    return res;
}
