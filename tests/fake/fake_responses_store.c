/* fake_responses_store.c: the responses this process made, and the routes that read them back. */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>

/*
 * A ring of the last STORE_MAX responses, each with its JSON and its input text (at most
 * INPUT_KEEP bytes of it), so a long test run or a benchmark cannot grow us without bound.
 * Only these ids are known to previous_response_id and the routes below, as on a real
 * account, which knows no other account's (or here: no other replica's) responses.
 * /_fake/reset forgets them all.
 */
enum { STORE_MAX = 4096, INPUT_KEEP = 64 * 1024 };

static const char PATH_PREFIX[] = "/v1/responses/";

struct stored {
    char id[RESP_ID_MAX], input_id[RESP_ID_MAX];   /* id[0] == 0: a free slot */
    char *json, *input;            /* the response object; its input text, JSON-escaped (NULL: no input) */
    size_t jlen, ilen;
};

static pthread_mutex_t store_mu = PTHREAD_MUTEX_INITIALIZER;
static struct stored ring[STORE_MAX];
static size_t ring_next;

static void slot_free(struct stored *s)
{
    free(s->json);
    free(s->input);
    *s = (struct stored){ 0 };
}

void responses_clear(void)
{
    pthread_mutex_lock(&store_mu);
    for (size_t i = 0; i < STORE_MAX; i++)
        slot_free(&ring[i]);
    ring_next = 0;
    pthread_mutex_unlock(&store_mu);
}

/* Called with store_mu held; id is raw bytes (a path segment or a JSON string's inside). */
static struct stored *store_find(const char *id, size_t n)
{
    for (size_t i = 0; i < STORE_MAX; i++)
        if (ring[i].id[0] && mem_is(id, n, ring[i].id))
            return &ring[i];
    return NULL;
}

bool responses_stored(const char *id, size_t n)
{
    pthread_mutex_lock(&store_mu);
    bool has = store_find(id, n) != NULL;
    pthread_mutex_unlock(&store_mu);
    return has;
}

static char *dup_mem(const char *p, size_t n)
{
    char *d = xrealloc(NULL, n + 1);
    memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

/* Keeps at most max bytes of JSON-escaped text, never cutting an escape or a UTF-8 character. */
static size_t text_cut(const char *s, size_t n, size_t max)
{
    size_t i = 0;
    if (n <= max)
        return n;
    for (;;) {
        size_t step = s[i] == '\\' ? (s[i + 1] == 'u' ? 6 : 2) : 1;   /* the reader checked the escapes */
        if (i + step > max)
            break;
        i += step;
    }
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80)
        i--;
    return i;
}

/* Remembers a done response; the oldest is forgotten when the ring is full. input NULL: the request had none. */
void responses_store(const char *id, const char *input_id, const char *json, size_t jlen, const char *input,
                     size_t ilen)
{
    pthread_mutex_lock(&store_mu);
    struct stored *s = &ring[ring_next++ % STORE_MAX];
    slot_free(s);
    snprintf(s->id, sizeof s->id, "%s", id);
    snprintf(s->input_id, sizeof s->input_id, "%s", input_id);
    s->json = dup_mem(json, jlen);
    s->jlen = jlen;
    if (input) {
        s->ilen = text_cut(input, ilen, INPUT_KEEP);
        s->input = dup_mem(input, s->ilen);
    }
    pthread_mutex_unlock(&store_mu);
}

/* ---- routes ---- */

enum op { OP_GET, OP_DELETE, OP_CANCEL, OP_ITEMS };

/* The answer for a stored response into o; called with store_mu held. */
static void item_answer(struct buf *o, struct stored *s, enum op op)
{
    o->len = 0;
    if (op == OP_GET) {
        buf_add(o, s->json, s->jlen);
    } else if (op == OP_DELETE) {
        buf_printf(o, "{\"id\":\"%s\",\"object\":\"response\",\"deleted\":true}", s->id);
        slot_free(s);
    } else if (op == OP_CANCEL) {   /* the top-level status comes before any item's */
        char *st = strstr(s->json, "\"status\":\"");
        char *end = st ? strchr(st + 10, '"') : NULL;
        if (end) {
            buf_add(o, s->json, (size_t)(st - s->json));
            buf_adds(o, "\"status\":\"cancelled");
            buf_add(o, end, s->jlen - (size_t)(end - s->json));
            free(s->json);
            s->json = dup_mem(o->p, o->len);
            s->jlen = o->len;
        } else {
            buf_add(o, s->json, s->jlen);
        }
    } else if (!s->input) {
        buf_adds(o, "{\"object\":\"list\",\"data\":[],\"first_id\":null,\"last_id\":null,\"has_more\":false}");
    } else {
        buf_printf(o, "{\"object\":\"list\",\"data\":[{\"type\":\"message\",\"id\":\"%s\",\"status\":\"completed\","
                   "\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"", s->input_id);
        buf_add(o, s->input, s->ilen);
        buf_printf(o, "\"}]}],\"first_id\":\"%s\",\"last_id\":\"%s\",\"has_more\":false}", s->input_id, s->input_id);
    }
}

/* /v1/responses/{id}: GET, DELETE; /cancel: POST; /input_items: GET. */
enum outcome responses_item(struct conn *c, const struct behavior *b)
{
    const struct request *r = &c->req;
    const char *id = r->path + sizeof PATH_PREFIX - 1;
    size_t rest = r->plen - (sizeof PATH_PREFIX - 1);
    const char *slash = memchr(id, '/', rest);
    size_t idn = slash ? (size_t)(slash - id) : rest;
    const char *sub = id + idn;
    size_t subn = rest - idn;
    bool get = mem_is(r->method, r->mlen, "GET") || r->is_head;
    enum op op;
    bool method_ok;
    if (subn == 0) {
        op = get ? OP_GET : OP_DELETE;
        method_ok = get || mem_is(r->method, r->mlen, "DELETE");
    } else if (mem_is(sub, subn, "/cancel")) {
        op = OP_CANCEL;
        method_ok = mem_is(r->method, r->mlen, "POST");
    } else if (mem_is(sub, subn, "/input_items")) {
        op = OP_ITEMS;
        method_ok = get;
    } else {
        char msg[300];
        snprintf(msg, sizeof msg, "Invalid URL (%.*s %.*s)", (int)(r->mlen > 16 ? 16 : r->mlen), r->method,
                 (int)(r->plen > 200 ? 200 : r->plen), r->path);
        return reply_error(c, b, 404, msg);
    }
    if (!method_ok)
        return reply_error(c, b, 405, "method not allowed");
    pthread_mutex_lock(&store_mu);
    struct stored *s = idn ? store_find(id, idn) : NULL;
    if (s)
        item_answer(&c->rbody, s, op);
    pthread_mutex_unlock(&store_mu);
    if (s)
        return reply_send(c, b, 200, CT_JSON);
    char msg[200];
    snprintf(msg, sizeof msg, "Response with id '%.*s' not found.", (int)(idn > 128 ? 128 : idn), id);
    return reply_error(c, b, 404, msg);
}
