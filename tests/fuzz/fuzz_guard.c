/* fuzz_guard.c: request JSON validation (fcgi/guard.c, R-API-3, R-API-5, R-USE-1) on client
 * bodies, for chat, completions and embeddings and for the pass-through to
 * /v1/chat/completions.
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
 * with stream_options.include_usage when sluice injected it. The pass-through is
 * never refused. */
#include "fuzz.h"

#include "guard.c"

#include "errors.h"

static int replies;
static enum error_code last_code;

/* Stands in for reply.c: records the refusal instead of writing it. */
void reply_error(struct request *r, enum error_code code, const char *message, const char *param)
{
    FUZZ_CHECK((unsigned)code < ERR_COUNT, "error code %d", (int)code);
    FUZZ_CHECK(message && *message, "an error without a message");
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

static void run(const uint8_t *data, size_t size, enum req_kind kind, const char *uri)
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
    r.method = "POST";
    r.uri = uri;
    r.kind = kind;
    r.body = arena_alloc(&a, size + 1);     /* as request.c reads it: NUL-terminated */
    memcpy(r.body, data, size);
    r.body[size] = '\0';
    r.body_len = size;
    replies = 0;

    int rc = guard_check(&r);
    FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
    if (kind == REQ_PROXY) {
        /* Only an inference path whose body is not one JSON object may be refused. */
        enum req_kind op = REQ_UNKNOWN;
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
    json_object_put(body);
    FUZZ_CHECK(r.json && json_object_is_type(r.json, json_type_object), "no parsed object");
    FUZZ_CHECK(r.model && strlen(r.model) > 0 && strlen(r.model) <= 256, "model \"%s\"", r.model ? r.model : "(null)");
    FUZZ_CHECK(json_object_object_get_ex(r.json, guard_required_field(kind), NULL), "accepted without %s",
               guard_required_field(kind));
    FUZZ_CHECK(!(kind == REQ_EMBEDDINGS && r.stream), "a streamed embeddings request");
    const struct snap_policy *pol = snapshot_policy(&snap, r.model);
    int64_t cap = pol && pol->max_output > 0 ? pol->max_output : conf.max_tokens_cap;
    FUZZ_CHECK(r.max_tokens >= 0 && r.max_tokens <= cap, "max_tokens %lld, cap %lld", (long long)r.max_tokens,
               (long long)cap);
    FUZZ_CHECK(r.prompt_estimate > 0, "prompt estimate %lld", (long long)r.prompt_estimate);
    /* R-USE-1: usage is always asked of the upstream for a stream the client takes no usage chunk from. */
    if (r.stream && kind != REQ_EMBEDDINGS && !r.want_usage_chunk)
        FUZZ_CHECK(r.injected_usage, "a stream without include_usage");
    check_forwarded(&r, kind);
out:
    json_object_put(r.json);
    arena_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    run(data, size, REQ_CHAT, "/v1/chat/completions");
    run(data, size, REQ_COMPLETIONS, "/v1/completions");
    run(data, size, REQ_EMBEDDINGS, "/v1/embeddings");
    run(data, size, REQ_PROXY, "/api/v1/proxy/ep/v1/chat/completions");
    return 0;
}
