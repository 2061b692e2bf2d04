/* fuzz_dialect.c: one stream event of each caller protocol classified (fcgi/dialect.c
 * dialect_classify, R-SSE-5, R-USE-1, R-USE-2, R-API-8) on any bytes.
 *
 * The bytes go through the SSE splitter (fcgi/sse.c) and every event with data is
 * classified in each dialect, with and without parsing, as fcgi/relay.c does; the
 * whole input is classified too as one unnamed event. Name and data are copied to
 * buffers of exactly their length, so a read past either is caught.
 *
 * Invariants: the facts are the same whatever the struct held before (every field
 * is set); the kind is one of the enum's, [DONE] only for chat and exactly for the
 * literal; usage counts are never negative and all zero without found; a server
 * error only on an error, counts only on content, a finish only on content, each
 * 0/1; finish and response_id are NUL-terminated and response_id is set only for
 * DIALECT_RESPONSES on an event before content; Messages and Responses event names
 * decide the kind they name (content_block_delta / *.delta content, message_start,
 * ping, response.created ... held, error failed); for chat, the fast path without
 * parsing says [DONE] or content, or the same as the parse, and agrees with the
 * parse on content chunks. */
#include "fuzz.h"

#include "dialect.h"
#include "sse.h"

static int named(const char *event, size_t n, const char *name)
{
    return n == strlen(name) && memcmp(event, name, n) == 0;
}

static int ends_with(const char *event, size_t n, const char *tail)
{
    size_t t = strlen(tail);
    return n > t && memcmp(event + n - t, tail, t) == 0;
}

static void check_facts(enum dialect d, const char *event, size_t event_len, const char *data, size_t len,
                        const struct event_facts *f)
{
    FUZZ_CHECK((unsigned)f->kind <= CHUNK_ERROR, "kind %d", (int)f->kind);
    int done = len == 6 && memcmp(data, "[DONE]", 6) == 0;
    if (d == DIALECT_CHAT)
        FUZZ_CHECK((f->kind == CHUNK_DONE) == done, "[DONE] %d, kind %d", done, (int)f->kind);
    else
        FUZZ_CHECK(f->kind != CHUNK_DONE && f->kind != CHUNK_USAGE_ONLY, "dialect %d kind %d", (int)d, (int)f->kind);
    const struct usage *u = &f->usage;
    FUZZ_CHECK(u->found == 0 || u->found == 1, "found %d", u->found);
    FUZZ_CHECK(u->prompt_tokens >= 0 && u->completion_tokens >= 0 && u->cache_read_tokens >= 0 &&
                   u->cache_creation_tokens >= 0 && u->reasoning_tokens >= 0,
               "negative usage %lld/%lld/%lld/%lld/%lld", (long long)u->prompt_tokens, (long long)u->completion_tokens,
               (long long)u->cache_read_tokens, (long long)u->cache_creation_tokens, (long long)u->reasoning_tokens);
    FUZZ_CHECK(u->completion_tokens <= USAGE_COUNT_MAX && u->prompt_tokens <= 3 * USAGE_COUNT_MAX,
               "usage past the clamp");
    if (!u->found)
        FUZZ_CHECK(!u->prompt_tokens && !u->completion_tokens && !u->cache_read_tokens && !u->cache_creation_tokens &&
                       !u->reasoning_tokens,
                   "counts without found");
    FUZZ_CHECK(f->server_error == 0 || (f->server_error == 1 && f->kind == CHUNK_ERROR), "server_error %d, kind %d",
               f->server_error, (int)f->kind);
    /* dialect.c reads a name up to a NUL in it ("x.delta\0..." counts on a non-JSON
     * event): harmless, the relay reads counts on content only; so only plain names. */
    FUZZ_CHECK(f->counts == 0 || f->counts == 1, "counts %d", f->counts);
    if (!event_len || !memchr(event, '\0', event_len))
        FUZZ_CHECK(!f->counts || f->kind == CHUNK_CONTENT, "counts %d, kind %d", f->counts, (int)f->kind);
    FUZZ_CHECK(memchr(f->finish, '\0', sizeof f->finish), "finish not terminated");
    FUZZ_CHECK(memchr(f->response_id, '\0', sizeof f->response_id), "response_id not terminated");
    FUZZ_CHECK(!f->finish[0] || f->kind == CHUNK_CONTENT, "finish %s on kind %d", f->finish, (int)f->kind);
    if (d == DIALECT_CHAT)
        FUZZ_CHECK(!strchr(f->finish, '"'), "finish %s", f->finish);
    FUZZ_CHECK(!f->response_id[0] || (d == DIALECT_RESPONSES && f->kind == CHUNK_ROLE_ONLY),
               "response_id %s in dialect %d, kind %d", f->response_id, (int)d, (int)f->kind);
    if (d == DIALECT_MESSAGES) {
        if (named(event, event_len, "content_block_delta"))
            FUZZ_CHECK(f->kind == CHUNK_CONTENT && f->counts, "content_block_delta kind %d", (int)f->kind);
        if (named(event, event_len, "message_start") || named(event, event_len, "content_block_start") ||
            named(event, event_len, "ping"))
            FUZZ_CHECK(f->kind == CHUNK_ROLE_ONLY, "%.*s kind %d", (int)event_len, event, (int)f->kind);
        if (named(event, event_len, "error"))
            FUZZ_CHECK(f->kind == CHUNK_ERROR, "error kind %d", (int)f->kind);
    }
    if (d == DIALECT_RESPONSES) {
        static const char *const held[] = {"response.created", "response.in_progress", "response.queued",
                                           "response.output_item.added", "response.content_part.added"};
        if (ends_with(event, event_len, ".delta"))
            FUZZ_CHECK(f->kind == CHUNK_CONTENT && f->counts, "%.*s kind %d", (int)event_len, event, (int)f->kind);
        for (size_t i = 0; i < sizeof held / sizeof held[0]; i++)
            if (named(event, event_len, held[i]))
                FUZZ_CHECK(f->kind == CHUNK_ROLE_ONLY, "%s kind %d", held[i], (int)f->kind);
        if (named(event, event_len, "error") || named(event, event_len, "response.failed"))
            FUZZ_CHECK(f->kind == CHUNK_ERROR, "%.*s kind %d", (int)event_len, event, (int)f->kind);
    }
}

/* Field by field (padding is no fact). */
static int facts_eq(const struct event_facts *a, const struct event_facts *b)
{
    const struct usage *x = &a->usage, *y = &b->usage;
    return a->kind == b->kind && x->prompt_tokens == y->prompt_tokens && x->completion_tokens == y->completion_tokens &&
           x->cache_read_tokens == y->cache_read_tokens && x->cache_creation_tokens == y->cache_creation_tokens &&
           x->reasoning_tokens == y->reasoning_tokens && x->found == y->found && a->server_error == b->server_error &&
           a->counts == b->counts && memcmp(a->finish, b->finish, sizeof a->finish) == 0 &&
           memcmp(a->response_id, b->response_id, sizeof a->response_id) == 0;
}

/* Classifies into a struct full of garbage and one of zeros: the facts must agree. */
static void classify(enum dialect d, int parse, const char *event, size_t event_len, const char *data, size_t len,
                     struct event_facts *f)
{
    struct event_facts g;
    memset(&g, 0xa5, sizeof g);
    memset(f, 0, sizeof *f);
    dialect_classify(d, parse, event, event_len, data, len, &g);
    dialect_classify(d, parse, event, event_len, data, len, f);
    FUZZ_CHECK(facts_eq(&g, f), "dialect %d parse %d: facts depend on what the struct held", (int)d,
               parse);
    check_facts(d, event, event_len, data, len, f);
}

static void one_event(const char *ev, size_t ev_len, const char *dat, size_t len)
{
    /* Exactly their length: no NUL after either. */
    char *event = malloc(ev_len ? ev_len : 1), *data = malloc(len ? len : 1);
    if (!event || !data)
        abort();
    memcpy(event, ev, ev_len);
    memcpy(data, dat, len);
    struct event_facts f, fast;
    classify(DIALECT_MESSAGES, 1, event, ev_len, data, len, &f);
    classify(DIALECT_MESSAGES, 0, event, ev_len, data, len, &fast);
    FUZZ_CHECK(facts_eq(&f, &fast), "Messages facts depend on parse");
    classify(DIALECT_RESPONSES, 1, event, ev_len, data, len, &f);
    classify(DIALECT_RESPONSES, 0, event, ev_len, data, len, &fast);
    FUZZ_CHECK(facts_eq(&f, &fast), "Responses facts depend on parse");
    classify(DIALECT_CHAT, 1, event, ev_len, data, len, &f);
    classify(DIALECT_CHAT, 0, event, ev_len, data, len, &fast);
    FUZZ_CHECK(fast.kind == CHUNK_DONE || fast.kind == CHUNK_CONTENT || facts_eq(&f, &fast),
               "the fast path said %d, the parse %d", (int)fast.kind, (int)f.kind);
    if (f.kind == CHUNK_CONTENT)
        FUZZ_CHECK(fast.kind == CHUNK_CONTENT && fast.counts == f.counts && strcmp(fast.finish, f.finish) == 0,
                   "content chunk: fast path kind %d counts %d finish %s, parse counts %d finish %s", (int)fast.kind,
                   fast.counts, fast.finish, f.counts, f.finish);
    /* A NULL name is no name. */
    struct event_facts nul;
    classify(DIALECT_MESSAGES, 1, NULL, 0, data, len, &nul);
    classify(DIALECT_MESSAGES, 1, event, 0, data, len, &f);
    FUZZ_CHECK(facts_eq(&f, &nul), "a NULL name differs from an empty one");
    classify(DIALECT_RESPONSES, 1, NULL, 0, data, len, &nul);
    free(event);
    free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 18)
        return 0;
    struct sse_parser p;
    struct sse_event ev;
    sse_init(&p, 0);
    sse_feed(&p, (const char *)data, size);
    int more;
    while ((more = sse_next(&p, &ev)) == 1 || (more == 0 && sse_finish(&p, &ev))) {
        if (!ev.comment_only && ev.has_data)
            one_event(ev.event, ev.event_len, ev.data, ev.data_len);
        if (more == 0)
            break;
    }
    sse_free(&p);
    if (size <= 1 << 14)
        one_event("", 0, (const char *)data, size);
    return 0;
}
