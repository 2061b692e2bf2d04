/* screen.c: the content rules stage (R-GUARD-3): the text the model reads from
 * the client, matched against the input rules of the caller's tenant and the
 * global ones before any backend sees it; and the text of the answer, against
 * the output rules, before the client gets it (a stream event by event). */
#include "screen.h"

#include "arena.h"
#include "buf.h"
#include "content_rules.h"
#include "errors.h"
#include "log.h"
#include "metrics.h"
#include "reply.h"
#include "screen_text.h"
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* One compiled set per snapshot version per process; replaced when the
 * configuration changes. Readers hold the mutex only to take a reference. */
static pthread_mutex_t screen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct crule_set *screen_set; /* holds one reference while current */

static void screen_unref(struct crule_set *s)
{
    if (--s->refs == 0)
        content_rules_set_free(s);
}

static struct crule_set *screen_acquire(const struct request *r)
{
    pthread_mutex_lock(&screen_lock);
    if (!screen_set || screen_set->version != r->snap->version) {
        if (screen_set)
            screen_unref(screen_set); /* freed by its last reader */
        screen_set = content_rules_set_new(r->snap, (uint32_t)r->conf->rule_match_limit);
        screen_set->refs = 1;
    }
    struct crule_set *s = screen_set;
    s->refs++;
    pthread_mutex_unlock(&screen_lock);
    return s;
}

static void screen_release(struct crule_set *s)
{
    pthread_mutex_lock(&screen_lock);
    screen_unref(s);
    pthread_mutex_unlock(&screen_lock);
}

/* Does rule cr apply to this request's tenant and scope? */
static int screen_applies(const struct crule *cr, enum rule_scope scope, const struct request *r)
{
    return cr->scope == scope && (cr->tenant_id == 0 || cr->tenant_id == r->caller.tenant_id);
}

/* Appends a flag rule's name to the request's ("a, b"). */
static void screen_flag(struct request *r, const char *name)
{
    r->obs.content_flag = r->obs.content_flag ? arena_printf(r->arena, "%s, %s", r->obs.content_flag, name)
                                              : arena_strdup(r->arena, name);
}

/* A stream's flag rules found so far (each is counted and named once). */
#define SCREEN_MAX_FLAGGED 32
struct screen_stream {
    char tail[SCREEN_WINDOW];     /* the end of the answer's text so far */
    size_t tail_len;
    uint64_t flagged[SCREEN_MAX_FLAGGED];
    int n_flagged;
};

static int screen_flagged(const struct screen_stream *st, uint64_t key)
{
    for (int i = 0; st && i < st->n_flagged; i++)
        if (st->flagged[i] == key)
            return 1;
    return 0;
}

/* Matches text against the rules of scope; flags are noted (once per stream when st is
 * given) and counted. Returns the first block rule that matched, or NULL. */
static const struct crule *screen_match(struct request *r, const struct crule_set *set, enum rule_scope scope,
                                        const char *text, size_t len, struct screen_stream *st)
{
    for (int i = 0; len && i < set->n_rules; i++) {
        const struct crule *cr = &set->rules[i];
        if (!screen_applies(cr, scope, r) || screen_flagged(st, cr->key))
            continue;
        int limited = 0;
        if (!content_rules_match(cr->code, text, len, set->match_limit, &limited))
            continue;
        if (limited)
            log_warn("request %s: rule %s hit the match limit, counted as a match", r->request_id, cr->name);
        metrics_rule_add(r->shm, cr->key, now_ms());
        if (cr->action == RULE_BLOCK)
            return cr;
        log_info("request %s: %s flagged by content rule %s", r->request_id, scope == RULE_INPUT ? "request" : "answer",
                 cr->name);
        screen_flag(r, cr->name);
        if (st && st->n_flagged < SCREEN_MAX_FLAGGED)
            st->flagged[st->n_flagged++] = cr->key;
    }
    return NULL;
}

/* The refusal naming the rule: a 400, or the error event of a stream already under way
 * (reply_error knows which). An answer's tokens stay billed: the upstream made them. */
static void screen_block(struct request *r, const struct crule *cr, enum rule_scope scope)
{
    char msg[300];
    snprintf(msg, sizeof msg, "The %s was blocked by content rule '%s'.", scope == RULE_INPUT ? "request" : "answer",
             cr->name);
    log_info("request %s: %s blocked by content rule %s", r->request_id, scope == RULE_INPUT ? "request" : "answer",
             cr->name);
    r->obs.content_block = arena_strdup(r->arena, cr->name);
    if (scope == RULE_OUTPUT)
        r->output_blocked = 1;
    int streaming = r->headers_sent;
    reply_error(r, ERR_CONTENT_POLICY_VIOLATION, msg, NULL);
    if (streaming)
        r->status = errors_get(ERR_CONTENT_POLICY_VIOLATION)->status;  /* the record says what ended it */
}

int screen_input(struct request *r)
{
    if (!r->snap || (r->snap->n_rules == 0 && !r->snap->builtin_injection_rules) || !r->json)
        return 0; /* no rules: zero cost */
    struct crule_set *set = screen_acquire(r);
    int rc = 0, any = 0;
    for (int i = 0; i < set->n_rules && !any; i++)
        any = screen_applies(&set->rules[i], RULE_INPUT, r);
    if (!any)
        goto out;
    struct buf text;
    buf_init(&text, 0);
    static const char *fields[] = {"messages", "system", "prompt", "input", NULL};
    for (int f = 0; fields[f]; f++) {
        struct json_object *v;
        if (json_object_object_get_ex(r->json, fields[f], &v))
            screen_text_request(v, &text);
    }
    const struct crule *blocked = screen_match(r, set, RULE_INPUT, text.data, text.len, NULL);
    if (blocked) {
        screen_block(r, blocked, RULE_INPUT);
        rc = -1;
    }
    buf_free(&text);
out:
    screen_release(set);
    return rc;
}

/* ---- output rules: the answer's text ---- */

/* Output rules of the caller's tenant for an answer of this kind? Asked once. */
int screen_output_wanted(struct request *r)
{
    if (!r->screen_output) {
        int any = 0;
        int kind_ok = r->kind == REQ_CHAT || r->kind == REQ_COMPLETIONS || r->kind == REQ_MESSAGES ||
                      r->kind == REQ_RESPONSES;
        for (int i = 0; kind_ok && r->snap && i < r->snap->n_rules && !any; i++) {
            const struct snap_rule *sr = &r->snap->rules[i];
            any = sr->scope == RULE_OUTPUT && (sr->tenant_id == 0 || sr->tenant_id == r->caller.tenant_id);
        }
        r->screen_output = any ? 2 : 1;
    }
    return r->screen_output == 2;
}

static struct json_object *screen_parse(const char *p, size_t len)
{
    if (!len || len > INT32_MAX)
        return NULL;
    struct json_tokener *tok = json_tokener_new();
    struct json_object *o = json_tokener_parse_ex(tok, p, (int)len);
    json_tokener_free(tok);
    return o;
}

int screen_output_body(struct request *r, const char *body, size_t len)
{
    if (!screen_output_wanted(r))
        return 0;
    struct json_object *o = screen_parse(body, len);
    if (!o)
        return 0;               /* not JSON: no text the rules could read */
    struct buf text;
    buf_init(&text, 0);
    screen_text_answer(o, 0, "\n", &text);
    json_object_put(o);
    int rc = 0;
    if (text.len) {
        struct crule_set *set = screen_acquire(r);
        const struct crule *blocked = screen_match(r, set, RULE_OUTPUT, text.data, text.len, NULL);
        if (blocked) {
            screen_block(r, blocked, RULE_OUTPUT);
            rc = -1;
        }
        screen_release(set);
    }
    buf_free(&text);
    return rc;
}

/* A Responses stream repeats the whole text in its .done events and in the response
 * objects (created, completed): only its deltas are new text. */
static int screen_event_counts(struct json_object *o)
{
    struct json_object *t;
    if (!json_object_object_get_ex(o, "type", &t) || !json_object_is_type(t, json_type_string))
        return 1;
    const char *s = json_object_get_string(t);
    size_t n = (size_t)json_object_get_string_len(t);
    return strncmp(s, "response.", 9) != 0 || (n > 6 && strcmp(s + n - 6, ".delta") == 0);
}

int screen_output_event(struct request *r, const char *data, size_t len)
{
    if (!screen_output_wanted(r))
        return 0;
    struct json_object *o = screen_parse(data, len);
    if (!o)
        return 0;               /* [DONE], or not JSON */
    if (!r->screen_stream)
        r->screen_stream = arena_alloc(r->arena, sizeof *r->screen_stream);
    struct screen_stream *st = r->screen_stream;
    struct buf text;
    buf_init(&text, 0);
    buf_append(&text, st->tail, st->tail_len);
    size_t before = text.len;
    if (screen_event_counts(o))
        screen_text_answer(o, 0, "", &text);
    json_object_put(o);
    int rc = 0;
    if (text.len > before) {
        /* R-GUARD-3: the text so far (its last SCREEN_WINDOW bytes at most), so a match
         * that spans events is found the moment its last piece arrives */
        struct crule_set *set = screen_acquire(r);
        const struct crule *blocked = screen_match(r, set, RULE_OUTPUT, text.data, text.len, st);
        if (blocked) {
            screen_block(r, blocked, RULE_OUTPUT);
            rc = -1;
        }
        screen_release(set);
        size_t from = screen_text_tail(text.data, text.len, SCREEN_WINDOW);
        st->tail_len = text.len - from;
        memcpy(st->tail, text.data + from, st->tail_len);
    }
    buf_free(&text);
    return rc;
}
