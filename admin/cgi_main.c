/* cgi_main.c: sluice-admin.cgi, the management API (R-ADM-1): configuration → request →
 * route → authenticate → handler → one JSON answer. One process per request. */
#include "api.h"
#include "router.h"
#include "session.h"

#include "conf.h"
#include "db.h"
#include "log.h"
#include "secret.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* SLUICE_CONF names sluice.conf (lighttpd's setenv.add-environment sets it). */
static int main_conf(struct conf *conf)
{
    conf_defaults(conf);
    const char *path = getenv("SLUICE_CONF");
    if (path && *path && conf_load(conf, path) != 0)
        return -1;
    secret_use_key_file(conf->secrets_key_file);   /* R-SEC-9: seals and opens upstream credentials */
    if (conf->billing_tz[0] && !getenv("SLUICE_BILLING_TZ"))
        setenv("TZ", conf->billing_tz, 1);
    else if (getenv("SLUICE_BILLING_TZ"))
        setenv("TZ", getenv("SLUICE_BILLING_TZ"), 1);
    tzset();
    return 0;
}

static int64_t main_default_tenant(struct sdb *db)
{
    struct sdb_stmt *st = NULL;
    int64_t id = 0;
    if (sdb_prepare(db, "SELECT id FROM tenants WHERE name = 'default'", &st) ==
            SDB_OK && sdb_step(st) == SDB_ROW)
        id = sdb_column_int64(st, 0);
    sdb_finalize(st);
    return id;
}

/* A write's body must be one JSON object (R-SEC-2); a bodiless POST is an empty one. */
static int main_parse_body(struct api_ctx *c)
{
    if (!router_is_write(c->req->method))
        return 0;
    if (!c->req->body || c->req->body_len == 0) {
        c->body = json_object_new_object();
        return 0;
    }
    enum json_tokener_error jerr = json_tokener_success;
    struct json_tokener *tok = json_tokener_new_ex(64);
    if (!tok)
        abort();
    c->body = json_tokener_parse_ex(tok, c->req->body, (int)c->req->body_len);
    jerr = json_tokener_get_error(tok);
    /* Trailing bytes after the object (other than blanks) are refused too. */
    if (jerr == json_tokener_success) {
        size_t end = json_tokener_get_parse_end(tok);
        if (strspn(c->req->body + end, " \t\r\n") != c->req->body_len - end)
            jerr = json_tokener_error_parse_unexpected;
    }
    json_tokener_free(tok);
    if (jerr != json_tokener_success || !c->body || !json_object_is_type(c->body, json_type_object)) {
        json_object_put(c->body);
        c->body = NULL;
        api_error(c, 400, "invalid_json", NULL, "the request body must be one JSON object");
        return -1;
    }
    return 0;
}

static void main_actor_name(struct api_ctx *c)
{
    char actor[API_NAME_MAX + 32];
    if (c->auth == API_AUTH_KEY)
        snprintf(actor, sizeof actor, "%s (key %lld)", c->user_name, (long long)c->key_id);
    else
        snprintf(actor, sizeof actor, "%s", c->user_name);
    ops_set_actor(actor);
    /* R-SEC-5, R-SEC-9: the rules ops keeps for whoever acts need the caller's rights. */
    ops_set_actor_rights(c->actor.role, &c->actor.ceiling);
}

static void main_serve(struct api_ctx *c)
{
    const struct router_route *route = NULL;
    char allow[128];
    enum router_result rr = router_match(c, &route, allow, sizeof allow);
    if (rr == ROUTER_NOT_FOUND) {
        api_error(c, 404, "not_found", NULL, "no such path in the management API");
        return;
    }
    if (rr == ROUTER_BAD_METHOD) {
        api_header(c, "Allow: %s", allow);
        api_error(c, 405, "method_not_allowed", NULL, "this path takes %s", allow);
        return;
    }
    if (!(c->db = db_open(c->conf->database, 0))) {
        api_error(c, 503, "internal_error", NULL, "the database is not available");
        return;
    }
    c->default_tenant_id = main_default_tenant(c->db);
    ops_set_actor_rights(AUTHZ_NOBODY, NULL);   /* nobody until authenticated */
    if (!(route->flags & ROUTER_PUBLIC)) {
        if (session_authenticate(c, router_is_write(c->req->method)) != 0)
            return;
        main_actor_name(c);
    }
    if (main_parse_body(c) != 0)
        return;
    route->handler(c);
}

int main(void)
{
    struct conf conf;
    struct cgi_req req;
    struct api_ctx c;
    memset(&c, 0, sizeof c);
    c.req = &req;
    c.conf = &conf;
    c.status = 500;
    /* "Proxy:" from a client arrives as HTTP_PROXY; libcurl (the endpoint test) must
     * never take an upstream route from a request (httpoxy, R-SEC-3). */
    unsetenv("HTTP_PROXY");
    if (main_conf(&conf) != 0) {
        memset(&req, 0, sizeof req);
        api_error(&c, 500, "internal_error", NULL, "the configuration cannot be read");
        cgi_send(c.status, NULL, c.out);
        return 0;
    }
    log_open(conf.log_file, "sluice-admin");
    log_set_level(log_level_of(conf.log_level));
    int bad = cgi_read(&req, (size_t)conf.admin_max_body_bytes);
    if (bad == 413)
        api_error(&c, 413, "request_too_large", NULL, "the body is over %lld bytes",
                  (long long)conf.admin_max_body_bytes);
    else if (bad)
        api_error(&c, bad, bad == 414 ? "uri_too_long" : "invalid_request", NULL,
                  "the request cannot be read");
    else
        main_serve(&c);
    if (!c.out && !c.text)
        api_error(&c, 500, "internal_error", NULL, "no answer");
    const char *headers[5];
    for (int i = 0; i < c.nheaders && i < 4; i++)
        headers[i] = c.headers[i];
    headers[c.nheaders < 4 ? c.nheaders : 4] = NULL;
    if (c.text && c.status < 400)
        cgi_send_text(c.status, headers, c.text_type, c.text, c.text_len);
    else
        cgi_send(c.status, headers, c.out);
    if (c.status >= 500)
        log_error("%s %s -> %d", req.method, req.path, c.status);
    json_object_put(c.out);
    free(c.text);
    json_object_put(c.body);
    db_close(c.db);
    cgi_free(&req);
    return 0;
}
