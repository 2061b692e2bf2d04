/* cache.c: the exact answer cache on the request path (R-CACHE-1..3, cache.h).
 *
 * A request is cacheable when its route (or else the model policy of the name
 * it asked for) says cache = exact (or semantic) and it asks for the greedy answer; the key
 * (cache_key.c) names the tenant, the endpoint and model name the route chose,
 * and the whole request. The lookup is one primary-key read through the
 * responder's database pool; a miss captures what the client gets and, when
 * the answer was complete, account hands it to the usage writer, which stores
 * it in the same transaction as the usage event (cache_store.c).
 * In the semantic mode (R-CACHE-4) an exact miss asks cache_semantic.c for the
 * most similar entry of the request's scope; its answer is replayed the same
 * way, as X-Cache: hit-semantic. */
#include "cache.h"

#include "cache_key.h"
#include "cache_semantic.h"
#include "dbpool.h"
#include "log.h"
#include "reply.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_GET[] =
    "SELECT content_type, body, chunks, prompt_tokens, completion_tokens FROM cache_entries"
    " WHERE key_hash = ?1 AND tenant_id = ?2 AND stream = ?3 AND expires_ms > ?4";

/* The stored answer a hit replays; request arena. */
struct cache_answer {
    const char *content_type;
    const char *body;
    size_t body_len;
    const unsigned char *chunks;  /* a stream's write lengths, 4 bytes little-endian each */
    size_t chunks_len;
    int64_t prompt_tokens, completion_tokens;
};

static const char KEEPALIVE[] = ": keep-alive\n\n";   /* relay.c's, never part of an answer */

/* R-CACHE-1: the cache mode of the chosen route, or else of the model policy
 * of the public name asked for: CACHE_EXACT, CACHE_SEMANTIC (R-CACHE-4: the
 * exact lookup first, then cache_semantic.c; without an embedding model it is
 * the exact mode), or CACHE_OFF. */
static enum cache_mode cacheable(const struct request *r, const struct snap_policy **policy)
{
    if (r->kind != REQ_CHAT && r->kind != REQ_COMPLETIONS && r->kind != REQ_MESSAGES)
        return 0;
    /* auto picks by load; a cheaper model or a shrunk max_tokens answers another
     * question than the one asked (and says so in headers a replay would lose). */
    if (!r->json || !r->route || !r->ep || !r->model || r->auto_plan || r->degraded_from || r->shrunk_max_tokens)
        return 0;
    if (r->conf->cache_max_bytes <= 0 || r->conf->cache_max_entry_bytes <= 0)
        return 0;
    *policy = snapshot_policy(r->snap, r->model);
    enum cache_mode mode = r->route->cache != CACHE_INHERIT ? r->route->cache : *policy ? (*policy)->cache : CACHE_OFF;
    if (mode == CACHE_SEMANTIC && !cache_semantic_enabled(r))
        mode = CACHE_EXACT;
    if (mode != CACHE_EXACT && mode != CACHE_SEMANTIC)
        return CACHE_OFF;
    return cache_key_greedy(r->json, *policy ? (*policy)->default_greedy : 0) ? mode : CACHE_OFF;
}

/* What else travels upstream and changes the answer: the query string (a
 * native pass-on of `?beta=true`), and the Anthropic headers, on any path an
 * anthropic endpoint serves (the chat translation forwards anthropic-beta too). */
static const char *answer_headers(struct request *r)
{
    const char *q = r->query && *r->query ? r->query : "";
    if (r->kind != REQ_MESSAGES && r->ep->protocol != PROTO_ANTHROPIC)
        return *q ? arena_printf(r->arena, "query: %s", q) : NULL;
    const char *v = request_header(r, "anthropic-version"), *b = request_header(r, "anthropic-beta");
    return arena_printf(r->arena, "query: %s\nanthropic-version: %s\nanthropic-beta: %s", q, v ? v : "",
                        b ? b : "");
}

static void warn_db(struct request *r, struct sdb *db)
{
    static _Atomic int64_t warned_ms;
    int64_t now = now_ms(), last = atomic_load(&warned_ms);
    if (now - last > 60000 && atomic_compare_exchange_strong(&warned_ms, &last, now))
        log_warn("request %s: answer cache unreadable (%s); serving as misses (logged once a minute)",
                 r->request_id, sdb_errmsg(db));
}

static const void *col_copy(struct arena *a, struct sdb_stmt *st, int i, size_t *len)
{
    const void *p = sdb_column_blob(st, i);
    *len = (size_t)sdb_column_bytes(st, i);
    return p ? arena_strndup(a, p, *len) : NULL;
}

/* One primary-key read: the answer, or NULL (none, expired, or a database error). */
static struct cache_answer *cache_get(struct request *r)
{
    struct cache_answer *ans = NULL;
    struct dbconn *c = dbpool_get();
    struct sdb_stmt *st = dbpool_stmt(c, DBQ_CACHE_GET, SQL_GET);
    if (!st) {
        warn_db(r, c->db);
        goto out;
    }
    sdb_bind_text(st, 1, r->cache_key, -1, SDB_STATIC);
    sdb_bind_int64(st, 2, r->caller.tenant_id);
    sdb_bind_int(st, 3, r->stream ? 1 : 0);
    sdb_bind_int64(st, 4, now_ms());
    int rc = sdb_step(st);
    if (rc == SDB_ROW) {
        ans = arena_alloc(r->arena, sizeof *ans);
        const char *ct = (const char *)sdb_column_text(st, 0);
        ans->content_type = arena_strdup(r->arena, ct ? ct : "application/json");
        ans->body = col_copy(r->arena, st, 1, &ans->body_len);
        ans->chunks = col_copy(r->arena, st, 2, &ans->chunks_len);
        ans->prompt_tokens = sdb_column_int64(st, 3);
        ans->completion_tokens = sdb_column_int64(st, 4);
        if (!ans->body || (r->stream && (!ans->chunks || ans->chunks_len % 4)))
            ans = NULL;             /* not an answer this request can replay */
    } else if (rc != SDB_DONE) {
        warn_db(r, c->db);
    }
    sdb_reset(st);
out:
    dbpool_put(c);
    return ans;
}

/* R-CACHE-4: the exact key missed: the most similar entry of the scope, whose
 * key replaces the request's while its answer is read. */
static enum cache_result semantic_lookup(struct request *r, const struct snap_policy *policy,
                                         const struct cache_key_in *in)
{
    char matched[65];
    r->obs.cache_kind = "semantic";
    if (cache_semantic_match(r, policy, in, matched) != 1)
        return CACHE_MISS;
    memcpy(r->cache_key, matched, sizeof matched);
    r->cache_answer = cache_get(r);
    if (!r->cache_answer) {
        cache_semantic_unmatch(r);
        return CACHE_MISS;
    }
    r->obs.cache = "hit-semantic";
    return CACHE_HIT;
}

enum cache_result cache_lookup(struct request *r)
{
    const struct snap_policy *policy = NULL;
    enum cache_mode mode = cacheable(r, &policy);
    if (mode == CACHE_OFF)
        return CACHE_NONE;
    int64_t t0 = mono_us();
    struct cache_key_in in = {
        .tenant_id = r->caller.tenant_id, .endpoint_id = r->ep->id,
        .routed_model = r->routed_model ? r->routed_model : r->model, .path = r->path,
        .stream = r->stream, .want_usage = r->want_usage_chunk, .extra = answer_headers(r), .body = r->json,
    };
    if (cache_key_hash(&in, r->cache_key) != 0) {
        r->cache_key[0] = '\0';
        return CACHE_NONE;
    }
    r->cache_endpoint_id = r->ep->id;
    r->cache_route = r->route;
    r->cache_ttl_s = r->route->cache_ttl_s > 0 ? r->route->cache_ttl_s : policy ? policy->cache_ttl_s : 3600;
    r->cache_answer = cache_get(r);
    if (r->cache_answer) {
        r->obs.cache_lookup_us = mono_us() - t0;
        r->obs.cache = "hit";
        return CACHE_HIT;
    }
    if (mode == CACHE_SEMANTIC && semantic_lookup(r, policy, &in) == CACHE_HIT) {
        r->obs.cache_lookup_us = mono_us() - t0;
        return CACHE_HIT;
    }
    r->obs.cache_lookup_us = mono_us() - t0;
    r->obs.cache = "miss";
    size_t cap = (size_t)r->conf->cache_max_entry_bytes;
    r->cache_body = arena_alloc(r->arena, sizeof *r->cache_body);
    r->cache_chunks = arena_alloc(r->arena, sizeof *r->cache_chunks);
    buf_init(r->cache_body, cap);
    buf_init(r->cache_chunks, cap);
    return CACHE_MISS;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void sent_first(struct request *r)
{
    if (r->data_sent)
        return;
    r->data_sent = 1;
    r->ttft_ms = mono_ms() - r->start_mono;
    r->obs.ttft_us = mono_us() - r->obs.start_us;
}

void cache_replay(struct request *r)
{
    const struct cache_answer *a = r->cache_answer;
    r->cache_hit = 1;
    r->replica = NULL;              /* no upstream answered */
    if (r->degrade_level == 2)
        r->degrade_level = 0;       /* it did not wait for the model after all */
    memset(&r->usage, 0, sizeof r->usage);
    r->usage.found = 1;
    r->usage.prompt_tokens = a->prompt_tokens;
    r->usage.completion_tokens = a->completion_tokens;
    r->usage_partial = 0;
    const char *routed = r->routed_model ? r->routed_model : "";
    const char *who = arena_printf(r->arena, "X-Cache: %s\r\nX-Routed-Endpoint: %s\r\n%s%s%s", r->obs.cache, r->ep->name,
                                   *routed ? "X-Routed-Model: " : "", routed, *routed ? "\r\n" : "");
    /* R-GUARD-3: the request's flag rules matched whatever answers it. */
    if (r->obs.content_flag)
        who = arena_printf(r->arena, "%sX-Content-Flag: %s\r\n", who, r->obs.content_flag);
    if (!r->stream) {
        const char *extra = arena_printf(r->arena, "%sContent-Length: %zu\r\n", who, a->body_len);
        if (reply_head(r, 200, a->content_type, extra) == 0 && reply_body(r, a->body, a->body_len, 0) == 0)
            sent_first(r);
        return;
    }
    /* R-SSE-1 as for any stream; each stored write is one write and one flush. */
    const char *extra = arena_printf(r->arena, "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n%s", who);
    if (reply_head(r, 200, a->content_type, extra) != 0)
        return;
    size_t off = 0;
    for (size_t i = 0; i + 4 <= a->chunks_len; i += 4) {
        size_t n = le32(a->chunks + i);
        if (n > a->body_len - off)
            break;                  /* a damaged entry: what fits, never past the body */
        if (reply_body(r, a->body + off, n, 1) != 0)
            return;
        sent_first(r);
        off += n;
    }
}

void cache_answer_end(struct request *r, int complete)
{
    r->cache_complete = complete;
}

/* Did the stream end as the caller's protocol ends one? */
static int stream_ended(const struct request *r, const char *last, size_t n)
{
    if (r->kind == REQ_MESSAGES)
        return memmem(last, n, "message_stop", 12) != NULL;
    return memmem(last, n, "[DONE]", 6) != NULL;
}

struct cache_entry *cache_entry_take(struct request *r)
{
    /* R-CACHE-3: only a complete 200 answer with its usage: no cut stream, no
     * error (sluice's or the upstream's), no client that left, no answer from
     * another endpoint or route (target model) than the key names: a retry may
     * have landed on another route to the same endpoint. */
    if (!r->cache_body || r->cache_hit || !r->cache_complete || r->cache_overflow || r->status != 200 ||
        r->client_gone || r->error_code || !r->usage.found || r->usage_partial || !r->ep ||
        r->ep->id != r->cache_endpoint_id || r->route != r->cache_route || !r->cache_body->len ||
        !r->response_content_type)
        return NULL;
    const char *body = r->cache_body->data;
    const unsigned char *lens = (const unsigned char *)r->cache_chunks->data;
    size_t n_chunks = r->cache_chunks->len / 4;
    /* A stream keeps its events and their boundaries; sluice's keep-alives are
     * the timing of that one answer, not part of it. */
    size_t keep_bytes = 0, keep_chunks = 0, off = 0, last_off = 0, last_len = 0;
    for (size_t i = 0; i < n_chunks; i++) {
        size_t n = le32(lens + 4 * i);
        int ka = n == sizeof KEEPALIVE - 1 && memcmp(body + off, KEEPALIVE, n) == 0;
        if (!ka) {
            keep_bytes += n;
            keep_chunks++;
            last_off = off, last_len = n;
        }
        off += n;
    }
    if (!keep_bytes || (r->stream && !stream_ended(r, body + last_off, last_len)))
        return NULL;
    const char *model = r->model ? r->model : "", *routed = r->routed_model ? r->routed_model : model;
    const char *ct = r->response_content_type;
    size_t chunks_len = r->stream ? keep_chunks * 4 : 0;
    size_t need = sizeof(struct cache_entry) + keep_bytes + chunks_len + strlen(model) + strlen(routed) + strlen(ct) + 3;
    if (!cache_store_hold(need, r->conf->cache_max_entry_bytes))
        return NULL;                /* the writer is far behind: served, not stored */
    struct cache_entry *e = xcalloc(1, need);
    e->held = need;
    char *p = (char *)(e + 1);
    str_copy(e->key_hash, sizeof e->key_hash, r->cache_key);
    e->kind = CACHE_KIND_EXACT;
    /* R-CACHE-4: with the embedding of a semantic miss, a semantic entry too. */
    size_t sem_bytes = 0;
    if ((e->sem = cache_semantic_part(r, &sem_bytes))) {
        e->kind = CACHE_KIND_SEMANTIC;
        e->held += sem_bytes;
    }
    e->tenant_id = r->caller.tenant_id;
    e->endpoint_id = r->cache_endpoint_id;
    e->stream = r->stream ? 1 : 0;
    e->prompt_tokens = r->usage.prompt_tokens;
    e->completion_tokens = r->usage.completion_tokens;
    e->created_ms = now_ms();
    e->expires_ms = e->created_ms + (int64_t)r->cache_ttl_s * 1000;
    unsigned char *chunks = chunks_len ? (unsigned char *)p : NULL;
    p += chunks_len;
    char *out = p;
    p += keep_bytes;
    off = 0;
    size_t k = 0, at = 0;
    for (size_t i = 0; i < n_chunks; i++) {
        size_t n = le32(lens + 4 * i);
        int ka = n == sizeof KEEPALIVE - 1 && memcmp(body + off, KEEPALIVE, n) == 0;
        if (!ka) {
            memcpy(out + at, body + off, n);
            at += n;
            if (chunks)
                memcpy(chunks + 4 * k++, lens + 4 * i, 4);
        }
        off += n;
    }
    e->body = out;
    e->body_len = keep_bytes;
    e->chunks = chunks;
    e->chunks_len = chunks_len;
    const char *strs[3] = {model, routed, ct};
    const char **dst[3] = {&e->model, &e->routed_model, &e->content_type};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(strs[i]) + 1;
        memcpy(p, strs[i], n);      /* room counted above, the NUL included */
        *dst[i] = p;
        p += n;
    }
    return e;
}

void cache_end(struct request *r)
{
    if (r->cache_body)
        buf_free(r->cache_body);
    if (r->cache_chunks)
        buf_free(r->cache_chunks);
    r->cache_body = r->cache_chunks = NULL;
}
