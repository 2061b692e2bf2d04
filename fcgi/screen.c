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

/* A stream's recent text, one window per channel (a chat choice, a tool call, a
 * content block: their pieces interleave, and joined they would hide a match). A stream
 * of more than SCREEN_CHANNELS channels (n > 16, or that many parallel tool calls) shares
 * the last window among the rest: their texts join there, as every text did once.
 * About 64 KiB of the request's arena, and only for streams that output rules read. */
#define SCREEN_CHANNELS 16
struct screen_window {
    struct screen_channel id;
    size_t len;
    char text[SCREEN_WINDOW];     /* the end of this channel's text so far */
};

/* A stream's flag rules found so far (each is counted and named once). */
#define SCREEN_MAX_FLAGGED 32
struct screen_stream {
    struct screen_window win[SCREEN_CHANNELS];
    int n_win;
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

/* What the model reads of a request in any protocol: the conversation, the system
 * prompt and Responses instructions, completions' prompt and suffix, and the tools it
 * is offered (their names and descriptions, their parameters' descriptions). */
static void screen_input_text(struct json_object *req, struct buf *text)
{
    static const char *fields[] = {"messages", "system", "instructions", "prompt", "suffix", "input", NULL};
    static const char *tool_fields[] = {"tools", "tool_choice", NULL};
    struct json_object *v;
    for (int f = 0; fields[f]; f++)
        if (json_object_object_get_ex(req, fields[f], &v))
            screen_text_request(v, text);
    for (int f = 0; tool_fields[f]; f++)
        if (json_object_object_get_ex(req, tool_fields[f], &v))
            screen_text_tools(v, text);
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
    screen_input_text(r->json, &text);
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

/* The window of channel id, made when it is new (the last one when all are taken). */
static struct screen_window *screen_window_of(struct screen_stream *st, struct screen_channel id)
{
    for (int i = 0; i < st->n_win; i++)
        if (st->win[i].id.major == id.major && st->win[i].id.minor == id.minor)
            return &st->win[i];
    if (st->n_win == SCREEN_CHANNELS)
        return &st->win[SCREEN_CHANNELS - 1];
    struct screen_window *w = &st->win[st->n_win++];
    w->id = id;
    w->len = 0;
    return w;
}

/* Output rules on text of the stream; 0, or -1 after ending it with the error event. */
static int screen_stream_match(struct request *r, struct screen_stream *st, const char *text, size_t len)
{
    if (!len)
        return 0;
    struct crule_set *set = screen_acquire(r);
    const struct crule *blocked = screen_match(r, set, RULE_OUTPUT, text, len, st);
    if (blocked)
        screen_block(r, blocked, RULE_OUTPUT);
    screen_release(set);
    return blocked ? -1 : 0;
}

/* v's text continues channel id: the window with it is matched up to its settled end
 * (R-GUARD-3: a match that spans events is found the moment its last piece arrives, a
 * word still being written is not taken for a whole one), and its end is kept. */
static int screen_channel_add(struct request *r, struct screen_stream *st, struct screen_channel id,
                              struct json_object *v)
{
    struct buf piece, text;
    buf_init(&piece, 0);
    screen_text_answer(v, 0, "", &piece);
    if (!piece.len) {
        buf_free(&piece);
        return 0;               /* no text: no window taken (message_start, ping, ...) */
    }
    struct screen_window *w = screen_window_of(st, id);
    buf_init(&text, 0);
    buf_append(&text, w->text, w->len);
    buf_append(&text, piece.data, piece.len);
    int rc = screen_stream_match(r, st, text.data, screen_text_settled(text.data, text.len));
    size_t from = screen_text_tail(text.data, text.len, SCREEN_WINDOW);
    w->len = text.len - from;
    memcpy(w->text, text.data + from, w->len);
    buf_free(&piece);
    buf_free(&text);
    return rc;
}

/* An event's text, each choice on its own channel. */
static int screen_event_text(struct request *r, struct screen_stream *st, struct json_object *o)
{
    struct json_object *choices;
    if (!json_object_object_get_ex(o, "choices", &choices) || !json_object_is_type(choices, json_type_array))
        return screen_channel_add(r, st, screen_text_event_channel(o), o);
    for (size_t i = 0; i < json_object_array_length(choices); i++) {
        struct json_object *choice = json_object_array_get_idx(choices, i);
        if (screen_channel_add(r, st, screen_text_choice_channel(choice, i), choice) != 0)
            return -1;
    }
    return 0;
}

/* Does this event end the stream (Anthropic message_stop, Responses completed or
 * incomplete)? OpenAI's [DONE] is not JSON and is asked before. */
static int screen_event_ends(struct json_object *o)
{
    struct json_object *t;
    if (!json_object_object_get_ex(o, "type", &t) || !json_object_is_type(t, json_type_string))
        return 0;
    const char *s = json_object_get_string(t);
    return strcmp(s, "message_stop") == 0 || strcmp(s, "response.completed") == 0 ||
           strcmp(s, "response.incomplete") == 0;
}

/* The stream ends: every channel's whole window, its held-back last word included. */
static int screen_stream_end(struct request *r, struct screen_stream *st)
{
    for (int i = 0; i < st->n_win; i++)
        if (screen_stream_match(r, st, st->win[i].text, st->win[i].len) != 0)
            return -1;
    return 0;
}

int screen_output_event(struct request *r, const char *data, size_t len)
{
    if (!screen_output_wanted(r))
        return 0;
    if (!r->screen_stream)
        r->screen_stream = arena_alloc(r->arena, sizeof *r->screen_stream);
    struct screen_stream *st = r->screen_stream;
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0)
        return screen_stream_end(r, st);
    struct json_object *o = screen_parse(data, len);
    if (!o)
        return 0;               /* not JSON: no text the rules could read */
    int rc = screen_event_counts(o) ? screen_event_text(r, st, o) : 0;
    if (rc == 0 && screen_event_ends(o))
        rc = screen_stream_end(r, st);
    json_object_put(o);
    return rc;
}
