/* screen.c: the content rules stage (R-GUARD-3): the text the model reads from
 * the client, matched against the input rules of the caller's tenant and the
 * global ones before any backend sees it. */
#include "screen.h"

#include "arena.h"
#include "buf.h"
#include "content_rules.h"
#include "log.h"
#include "metrics.h"
#include "util.h"
#include "reply.h"

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

/* The keys whose strings are not text the model reads. */
static int screen_skip_key(const char *k)
{
    static const char *skip[] = {"role", "type",      "name",          "id",    "tool_call_id",
                                 "url",  "image_url", "cache_control", "model", NULL};
    for (int i = 0; skip[i]; i++)
        if (strcmp(k, skip[i]) == 0)
            return 1;
    return 0;
}

/* Appends every text string under v, one per line (the body limit bounds it). */
static void screen_collect(struct json_object *v, struct buf *text)
{
    switch (json_object_get_type(v)) {
    case json_type_string:
        buf_append(text, json_object_get_string(v), (size_t)json_object_get_string_len(v));
        buf_append(text, "\n", 1);
        break;
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(v); i++)
            screen_collect(json_object_array_get_idx(v, i), text);
        break;
    case json_type_object: {
        json_object_object_foreach(v, k, sub) {
            if (!screen_skip_key(k))
                screen_collect(sub, text);
        }
        break;
    }
    default:
        break;
    }
}

int screen_input(struct request *r)
{
    if (!r->snap || (r->snap->n_rules == 0 && !r->snap->builtin_injection_rules) || !r->json)
        return 0; /* no rules: zero cost */
    struct crule_set *set = screen_acquire(r);
    int rc = 0, any = 0;
    for (int i = 0; i < set->n_rules && !any; i++)
        any = set->rules[i].scope == RULE_INPUT &&
              (set->rules[i].tenant_id == 0 || set->rules[i].tenant_id == r->caller.tenant_id);
    if (!any)
        goto out;
    struct buf text;
    buf_init(&text, 0);
    static const char *fields[] = {"messages", "system", "prompt", "input", NULL};
    for (int f = 0; fields[f]; f++) {
        struct json_object *v;
        if (json_object_object_get_ex(r->json, fields[f], &v))
            screen_collect(v, &text);
    }
    char flags[512] = "";
    for (int i = 0; text.len && i < set->n_rules; i++) {
        const struct crule *cr = &set->rules[i];
        if (cr->scope != RULE_INPUT || (cr->tenant_id != 0 && cr->tenant_id != r->caller.tenant_id))
            continue;
        int limited = 0;
        if (!content_rules_match(cr->code, text.data, text.len, set->match_limit, &limited))
            continue;
        if (limited)
            log_warn("request %s: rule %s hit the match limit, counted as a match", r->request_id, cr->name);
        metrics_rule_add(r->shm, cr->key, now_ms());
        if (cr->action == RULE_BLOCK) {
            r->obs.content_block = arena_strdup(r->arena, cr->name);
            char msg[300];
            snprintf(msg, sizeof msg, "The request was blocked by content rule '%s'.", cr->name);
            log_info("request %s: blocked by content rule %s", r->request_id, cr->name);
            reply_error(r, ERR_CONTENT_POLICY_VIOLATION, msg, NULL);
            rc = -1;
            break;
        }
        size_t fl = strlen(flags);
        snprintf(flags + fl, sizeof flags - fl, "%s%s", fl ? ", " : "", cr->name);
        log_info("request %s: flagged by content rule %s", r->request_id, cr->name);
    }
    if (rc == 0 && flags[0])
        r->obs.content_flag = arena_strdup(r->arena, flags);
    buf_free(&text);
out:
    screen_release(set);
    return rc;
}
