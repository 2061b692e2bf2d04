/* fuzz_guard.c: request JSON validation (fcgi/guard.c, R-API-3, R-API-5, R-USE-1, R-ANT-6,
 * R-ANT-7, R-API-8) on client bodies, for chat, completions, embeddings, Messages,
 * count_tokens and Responses and for the pass-through to /v1/chat/completions and
 * /v1/messages; and on paths, for the stored-response calls /v1/responses/{id}[/...]:
 * the input's first line (up to a NUL) is the rest of the path, with each method.
 *
 * guard.c's parser and checks are static and take the request struct, so this file
 * includes guard.c (as unit tests may, STYLE.md "Tests") and stands in for what it
 * calls outside the pure modules: reply_error (recorded, not written) and
 * snapshot_policy (the same lookup, without lib/snapshot.c's SQLite). Nothing in
 * fcgi/ changes for it; when guard.c calls something new, add it here.
 *
 * Invariants: a refusal replies exactly once with a 4xx error and an acceptance
 * never replies; an accepted /v1 body is one JSON object and nothing but
 * whitespace after it, with a model that is a non-empty string of at most 256 bytes
 * and the field its operation needs; max_tokens is within the model's max_output
 * or limits.max_tokens_cap; an embeddings request never streams; the body
 * sent upstream is the client's bytes or a JSON object without the internal fields,
 * with stream_options.include_usage when sluice injected it (chat and completions
 * only). A Messages request that passes has 1 <= max_tokens <= cap (the body's)
 * and a non-empty messages array; count_tokens passes whatever Messages passes and
 * reserves nothing; a Responses request has 0 <= max_tokens <= cap and a
 * response_ref exactly when previous_response_id is given, of [A-Za-z0-9_-]{1,128};
 * the model of every accepted body has no control character (R-SEC-4). A
 * stored-response call is accepted, refused as not found, unknown id or wrong
 * method exactly as its path and method say, with response_ref the id. The
 * pass-through is refused only for an unreadable inference body and never rewrites
 * a Messages body. */
#include "fuzz.h"

#include "guard.c"

#include "errors.h"

static int replies;
static enum error_code last_code;

/* Stands in for reply.c: records the refusal instead of writing it. */
void reply_error(struct request *r, enum error_code code, const char *message, const char *param)
{
    FUZZ_CHECK((unsigned)code < ERR_COUNT, "error code %d", (int)code);
    /* NULL: reply.c writes the table's meaning */
    FUZZ_CHECK(!message || *message, "an error with an empty message");
    FUZZ_CHECK(error_table[code].status >= 400 && error_table[code].status < 500, "%s has status %d",
               error_table[code].code, error_table[code].status);
    replies++;
    last_code = code;
}

/* Stands in for lib/snapshot.c: the model's policy, by name. */
const struct snap_policy *snapshot_policy(const struct snapshot *s, const char *model)
{
    for (int i = 0; model && i < s->n_policies; i++)
        if (strcmp(s->policies[i].model, model) == 0)
            return &s->policies[i];
    return NULL;
}

static const char *internal[] = {"internal_note", "x_cost_center"};
static struct snap_policy policies[] = {{.model = "small", .max_output = 100}};

static void check_forwarded(const struct request *r, enum req_kind kind)
{
    FUZZ_CHECK(r->fwd_body != NULL, "nothing to forward");
    if (r->fwd_body == r->body) {
        FUZZ_CHECK(r->fwd_len == r->body_len, "forwarded length %zu of a %zu-byte body", r->fwd_len, r->body_len);
        FUZZ_CHECK(!r->injected_usage, "usage injected into an unchanged body");
        return;
    }
    FUZZ_CHECK(r->fwd_len == strlen(r->fwd_body), "forwarded length %zu, text %zu", r->fwd_len, strlen(r->fwd_body));
    struct json_object *fwd = fuzz_json(r->fwd_body, r->fwd_len, 0);
    FUZZ_CHECK(fwd && json_object_is_type(fwd, json_type_object), "the rewritten body is no JSON object: %s",
               r->fwd_body);
    for (size_t i = 0; i < sizeof internal / sizeof internal[0]; i++)
        FUZZ_CHECK(!json_object_object_get_ex(fwd, internal[i], NULL), "internal field %s forwarded", internal[i]);
    if (r->injected_usage) {
        struct json_object *so = fuzz_member(fwd, "stream_options", json_type_object);
        struct json_object *inc = fuzz_member(so, "include_usage", json_type_boolean);
        FUZZ_CHECK(inc && json_object_get_boolean(inc), "injected usage missing: %s", r->fwd_body);
        FUZZ_CHECK(r->stream && kind != REQ_EMBEDDINGS, "usage injected into a non-stream or embeddings request");
    }
    json_object_put(fwd);
}

/* The field a body of this kind must have besides "model" (NULL: none). */
static const char *required_field(enum req_kind kind)
{
    return kind == REQ_MESSAGES || kind == REQ_COUNT_TOKENS ? "messages" : guard_required_field(kind);
}

static int response_id_valid(const char *s, size_t n)
{
    if (n == 0 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

/* A number field, when there and a number, within [lo, hi]. */
static void check_range(struct json_object *body, const char *name, double lo, double hi)
{
    struct json_object *v;
    if (json_object_object_get_ex(body, name, &v) &&
        (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double))) {
        double d = json_object_get_double(v);
        FUZZ_CHECK(d >= lo && d <= hi, "%s %g accepted", name, d);
    }
}

/* The stored-response call on path with method, judged as the header says. */
static void check_response_op(const struct request *r, int rc, const char *path)
{
    const char *id = path + strlen("/v1/responses/");
    size_t n = strcspn(id, "/");
    const char *tail = id + n;
    const char *m = r->method;
    int op = !*tail ? 1 : strcmp(tail, "/cancel") == 0 ? 2 : strcmp(tail, "/input_items") == 0 ? 3 : 0;
    int method_ok = op == 1 ? strcmp(m, "GET") == 0 || strcmp(m, "DELETE") == 0
                    : op == 2 ? strcmp(m, "POST") == 0
                              : strcmp(m, "GET") == 0;
    enum error_code want = !op ? ERR_NOT_FOUND : !response_id_valid(id, n) ? ERR_RESPONSE_NOT_FOUND
                           : !method_ok                                    ? ERR_METHOD_NOT_ALLOWED
                                                                           : ERR_NONE;
    if (want != ERR_NONE) {
        FUZZ_CHECK(rc == -1 && replies == 1 && last_code == want, "%s %s: rc %d, code %d, want %d", m, path, rc,
                   (int)last_code, (int)want);
        return;
    }
    FUZZ_CHECK(rc == 0 && replies == 0, "%s %s refused (code %d)", m, path, (int)last_code);
    FUZZ_CHECK(r->response_ref && strlen(r->response_ref) == n && memcmp(r->response_ref, id, n) == 0,
               "%s %s: response_ref %s", m, path, r->response_ref ? r->response_ref : "(null)");
    FUZZ_CHECK(r->fwd_body == r->body && r->fwd_len == r->body_len, "a stored-response call's body was changed");
}

/* 0 when accepted, -1 when refused. */
static int run(const uint8_t *data, size_t size, enum req_kind kind, const char *method, const char *uri)
{
    static struct snapshot snap;
    static struct conf conf;
    static int ready;
    if (!ready) {
        conf_defaults(&conf);
        snap.internal_fields = internal;
        snap.n_internal_fields = (int)(sizeof internal / sizeof internal[0]);
        snap.policies = policies;
        snap.n_policies = (int)(sizeof policies / sizeof policies[0]);
        ready = 1;
    }
    struct arena a;
    arena_init(&a);
    struct request r;
    memset(&r, 0, sizeof r);
    r.arena = &a;
    r.conf = &conf;
    r.snap = &snap;
    r.method = method;
    r.uri = uri;
    /* as request.c splits it: the path is the URI before its query */
    const char *q = strchr(uri, '?');
    r.path = q ? arena_strndup(&a, uri, (size_t)(q - uri)) : uri;
    r.kind = kind;
    r.body = arena_alloc(&a, size + 1);     /* as request.c reads it: NUL-terminated */
    memcpy(r.body, data, size);
    r.body[size] = '\0';
    r.body_len = size;
    replies = 0;
    last_code = ERR_NONE;

    int rc = guard_check(&r);
    FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
    if (kind == REQ_RESPONSE_OP) {
        check_response_op(&r, rc, r.path);
        goto out;
    }
    if (kind == REQ_PROXY) {
        /* Only an inference path whose body is not one JSON object may be refused. */
        enum req_kind op = REQ_CHAT;
        int inference = guard_proxy_inference(&r, &op);
        if (rc != 0) {
            struct json_object *body = fuzz_json((const char *)data, size, 0);
            FUZZ_CHECK(inference && replies == 1, "a pass-through refused outside the rule");
            FUZZ_CHECK(!body || !json_object_is_type(body, json_type_object) || memchr(data, 0, size) ||
                       guard_parse(&r) == NULL, "an inference pass-through with a readable body refused");
            json_object_put(body);
            goto out;
        }
        FUZZ_CHECK(replies == 0, "accepted after a reply");
        FUZZ_CHECK(r.max_tokens >= 0 && r.max_tokens <= conf.max_tokens_cap, "pass-through max_tokens %lld",
                   (long long)r.max_tokens);
        if (inference && op == REQ_UNKNOWN)
            FUZZ_CHECK(r.fwd_body == r.body && r.fwd_len == r.body_len && !r.injected_usage,
                       "a Messages pass-through was rewritten");
        check_forwarded(&r, op);
        goto out;
    }
    if (rc != 0) {
        FUZZ_CHECK(replies == 1, "refused with %d replies", replies);
        goto out;
    }
    FUZZ_CHECK(replies == 0, "accepted after a reply");
    struct json_object *body = fuzz_json((const char *)data, size, 0);
    FUZZ_CHECK(body && json_object_is_type(body, json_type_object),
               "accepted a body that is not exactly one JSON object (%zu bytes)", size);
    FUZZ_CHECK(r.json && json_object_is_type(r.json, json_type_object), "no parsed object");
    FUZZ_CHECK(r.model && strlen(r.model) > 0 && strlen(r.model) <= 256, "model \"%s\"", r.model ? r.model : "(null)");
    for (const char *c = r.model; *c; c++)
        FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f, "model with control character 0x%02x", (unsigned char)*c);
    const char *field = required_field(kind);
    FUZZ_CHECK(!field || json_object_object_get_ex(r.json, field, NULL), "accepted without %s", field);
    FUZZ_CHECK(!(kind == REQ_EMBEDDINGS && r.stream), "a streamed embeddings request");
    const struct snap_policy *pol = snapshot_policy(&snap, r.model);
    int64_t cap = pol && pol->max_output > 0 ? pol->max_output : conf.max_tokens_cap;
    FUZZ_CHECK(r.max_tokens >= 0 && r.max_tokens <= cap, "max_tokens %lld, cap %lld", (long long)r.max_tokens,
               (long long)cap);
    FUZZ_CHECK(r.prompt_estimate > 0, "prompt estimate %lld", (long long)r.prompt_estimate);
    struct json_object *v, *st = fuzz_member(body, "stream", json_type_boolean);
    if (kind == REQ_MESSAGES || kind == REQ_COUNT_TOKENS) {
        struct json_object *msgs = fuzz_member(body, "messages", json_type_array);
        FUZZ_CHECK(msgs && json_object_array_length(msgs) > 0, "Messages accepted without a non-empty messages array");
    }
    if (kind == REQ_MESSAGES) {
        struct json_object *mt = fuzz_member(body, "max_tokens", json_type_int);
        FUZZ_CHECK(r.max_tokens >= 1 && mt && json_object_get_int64(mt) == r.max_tokens,
                   "Messages max_tokens %lld (cap %lld)", (long long)r.max_tokens, (long long)cap);
        FUZZ_CHECK(r.stream == (st && json_object_get_boolean(st)), "stream %d", r.stream);
        check_range(body, "temperature", 0, 1);
        check_range(body, "top_p", 0, 1);
    }
    if (kind == REQ_COUNT_TOKENS)
        FUZZ_CHECK(r.max_tokens == 0 && !r.stream, "count_tokens reserves %lld, stream %d", (long long)r.max_tokens,
                   r.stream);
    if (kind == REQ_RESPONSES) {
        struct json_object *mt = fuzz_member(body, "max_output_tokens", json_type_int);
        FUZZ_CHECK(r.max_tokens == (mt ? json_object_get_int64(mt) : 0), "Responses max_tokens %lld",
                   (long long)r.max_tokens);
        FUZZ_CHECK(r.stream == (st && json_object_get_boolean(st)), "stream %d", r.stream);
        FUZZ_CHECK(!json_object_object_get_ex(body, "input", &v) || !v || json_object_is_type(v, json_type_string) ||
                       json_object_is_type(v, json_type_array),
                   "input of type %d", (int)json_object_get_type(v));
        check_range(body, "temperature", 0, 2);
        check_range(body, "top_p", 0, 1);
        struct json_object *prev = fuzz_member(body, "previous_response_id", json_type_string);
        if (prev)
            FUZZ_CHECK(r.response_ref && strcmp(r.response_ref, json_object_get_string(prev)) == 0,
                       "response_ref %s", r.response_ref ? r.response_ref : "(null)");
        else
            FUZZ_CHECK(!r.response_ref, "response_ref %s without previous_response_id", r.response_ref);
        if (r.response_ref)
            FUZZ_CHECK(response_id_valid(r.response_ref, strlen(r.response_ref)), "response_ref \"%s\"",
                       r.response_ref);
    } else {
        FUZZ_CHECK(!r.response_ref, "response_ref on kind %d", (int)kind);
    }
    if (kind != REQ_CHAT && kind != REQ_COMPLETIONS)
        FUZZ_CHECK(!r.injected_usage, "usage injected into kind %d", (int)kind);
    json_object_put(body);
    /* R-USE-1: usage is always asked of the upstream for a stream the client takes no usage chunk from. */
    if (r.stream && (kind == REQ_CHAT || kind == REQ_COMPLETIONS) && !r.want_usage_chunk)
        FUZZ_CHECK(r.injected_usage, "a stream without include_usage");
    check_forwarded(&r, kind);
out:
    json_object_put(r.json);
    arena_free(&a);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    run(data, size, REQ_CHAT, "POST", "/v1/chat/completions");
    run(data, size, REQ_COMPLETIONS, "POST", "/v1/completions");
    run(data, size, REQ_EMBEDDINGS, "POST", "/v1/embeddings");
    run(data, size, REQ_PROXY, "POST", "/api/v1/proxy/ep/v1/chat/completions");
    run(data, size, REQ_PROXY, "POST", "/api/v1/proxy/ep/v1/messages");
    int messages = run(data, size, REQ_MESSAGES, "POST", "/v1/messages");
    int count = run(data, size, REQ_COUNT_TOKENS, "POST", "/v1/messages/count_tokens");
    FUZZ_CHECK(messages != 0 || count == 0, "count_tokens refused a body /v1/messages accepts");
    run(data, size, REQ_RESPONSES, "POST", "/v1/responses");

    /* The path of a stored-response call: the input's first line, up to a NUL. */
    static const char base[] = "/v1/responses/";
    size_t n = 0;
    while (n < size && data[n] != '\n' && data[n] != '\0')
        n++;
    char *uri = malloc(sizeof base + n);
    if (!uri)
        abort();
    memcpy(uri, base, sizeof base - 1);
    memcpy(uri + sizeof base - 1, data, n);
    uri[sizeof base - 1 + n] = '\0';
    static const char *const methods[] = {"GET", "DELETE", "POST", "PUT"};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        run(data, size, REQ_RESPONSE_OP, methods[i], uri);
    free(uri);
    return 0;
}
