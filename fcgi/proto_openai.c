/* proto_openai.c: the adapter for OpenAI-compatible upstreams (vLLM, Ollama,
 * OpenAI itself), and the raw pass-through of /api/v1/proxy: the client's body
 * and headers as they came, minus what sluice owns (R-API-5, R-RT-5, R-ANT-4). */
#include "proto.h"

#include "pathcheck.h"

#include <ctype.h>
#include <string.h>

/* Client headers never forwarded: credentials, hop-by-hop, sluice's own (R-API-5, R-ANT-4). */
static int header_private(const char *env_name)
{
    static const char *drop[] = {"HTTP_AUTHORIZATION", "HTTP_COOKIE", "HTTP_HOST", "HTTP_CONTENT_LENGTH",
                                 "HTTP_CONNECTION", "HTTP_TRANSFER_ENCODING", "HTTP_EXPECT", "HTTP_KEEP_ALIVE",
                                 "HTTP_TE", "HTTP_UPGRADE", "HTTP_X_API_KEY", "HTTP_X_REQUEST_ID",
                                 "HTTP_CONTENT_TYPE", "HTTP_ACCEPT_ENCODING", "HTTP_IDEMPOTENCY_KEY",
                                 /* which of the operator's upstream accounts pays is not the caller's choice */
                                 "HTTP_OPENAI_ORGANIZATION", "HTTP_OPENAI_PROJECT", "HTTP_ORIGIN",
                                 /* forward.c sends sluice's own, under the attempt's span (R-OBS-3) */
                                 "HTTP_TRACEPARENT", "HTTP_TRACESTATE"};
    if (strncmp(env_name, "HTTP_PROXY", 10) == 0 || strncmp(env_name, "HTTP_X_SLUICE_", 14) == 0)
        return 1;
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        if (strcmp(env_name, drop[i]) == 0)
            return 1;
    return 0;
}

/* The client's headers that may travel, then sluice's; cred is the endpoint's
 * credential line or NULL. */
static struct curl_slist *client_headers(struct request *r, size_t body_len, const char *cred)
{
    struct curl_slist *h = NULL;
    const char *ct = request_param(r, "CONTENT_TYPE");
    if (body_len > 0 || (ct && *ct))
        h = curl_slist_append(h, arena_cat(r->arena, "Content-Type: ",
                                           ct && *ct && pathcheck_header_ok(ct, 256) ? ct : "application/json", NULL));
    h = curl_slist_append(h, arena_cat(r->arena, "X-Request-Id: ", r->request_id, NULL));
    h = curl_slist_append(h, "Expect:");        /* no 100-continue round trip */
    if (cred)
        h = curl_slist_append(h, cred);
    for (char **e = r->w->fcgi.envp; *e; e++) {
        if (strncmp(*e, "HTTP_", 5) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char env_name[128];
        size_t n = (size_t)(eq - *e);
        if (n >= sizeof env_name)
            continue;
        memcpy(env_name, *e, n);
        env_name[n] = '\0';
        if (header_private(env_name) || !pathcheck_header_ok(eq + 1, 8192))
            continue;
        /* HTTP_X_FOO_BAR -> X-Foo-Bar */
        char name[128];
        size_t k = 0;
        int up = 1;
        for (const char *p = env_name + 5; *p && k < sizeof name - 1; p++) {
            char c = *p == '_' ? '-' : *p;
            name[k++] = up ? c : (char)tolower((unsigned char)c);
            up = c == '-';
        }
        name[k] = '\0';
        h = curl_slist_append(h, arena_cat(r->arena, name, ": ", eq + 1, NULL));
    }
    return h;
}

static const char *bearer(struct request *r)
{
    const char *a = r->ep->upstream_auth;
    return a && *a ? arena_cat(r->arena, "Authorization: Bearer ", a, NULL) : NULL;
}

/* R-RT-5: the backend gets the model name it knows; the body is serialised
 * again only when this attempt's name differs from what it says. */
void proto_model_body(struct request *r, struct proto_request *out)
{
    out->body = r->fwd_body;
    out->len = r->fwd_len;
    struct json_object *v;
    if (!r->json || !r->routed_model ||
        (json_object_object_get_ex(r->json, "model", &v) && strcmp(json_object_get_string(v), r->routed_model) == 0))
        return;
    json_object_object_add(r->json, "model", json_object_new_string(r->routed_model));
    const char *s = json_object_to_json_string_ext(r->json, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    r->fwd_body = arena_strdup(r->arena, s);
    r->fwd_len = strlen(r->fwd_body);
    out->body = r->fwd_body;
    out->len = r->fwd_len;
}

static int openai_build(struct request *r, struct proto_request *out, struct proto_refusal *why)
{
    (void)why;
    proto_model_body(r, out);
    out->path = r->upstream_path;
    out->headers = client_headers(r, out->len, bearer(r));
    return 0;
}

/* The pass-through speaks whatever the endpoint speaks; only the credential
 * line follows the endpoint's protocol (R-ANT-4). */
static int passthrough_build(struct request *r, struct proto_request *out, struct proto_refusal *why)
{
    (void)why;
    const char *a = r->ep->upstream_auth;
    const char *cred = !a || !*a ? NULL
                       : r->ep->protocol == PROTO_ANTHROPIC ? arena_cat(r->arena, "x-api-key: ", a, NULL)
                                                            : bearer(r);
    proto_model_body(r, out);
    out->path = r->upstream_path;
    out->headers = client_headers(r, out->len, cred);
    return 0;
}

const struct proto_ops proto_openai = {
    .name = "openai",
    .build = openai_build,
};

const struct proto_ops proto_passthrough = {
    .name = "passthrough",
    .build = passthrough_build,
};
