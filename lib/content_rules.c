/* content_rules.c: compile content rules with PCRE2 (UTF + UCP, JIT when
 * available) and match texts against them in bounded time (R-GUARD-3). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "content_rules.h"
#include "arena.h"

/* R-GUARD-3: the builtin prompt-injection set, off by default (setting
 * builtin_injection_rules). Each is a flag rule on input. */
const struct content_builtin content_builtins[] = {
    {"builtin:ignore-instructions",
     "(?i)\\b(ignore|disregard|forget|override)\\s+(all\\s+|any\\s+|the\\s+|your\\s+)*(previous|prior|above|earlier|"
     "preceding)\\s+(instructions|prompts?|rules|directions)"},
    {"builtin:reveal-system-prompt", "(?i)\\b(reveal|print|show|repeat|output|display|leak)\\s+(me\\s+)?(your|the)\\s+("
                                     "system|hidden|initial|original)\\s+(prompt|instructions|message)"},
    {"builtin:dan", "(?i)\\byou\\s+are\\s+now\\s+(DAN|in\\s+developer\\s+mode)\\b"},
    {"builtin:developer-mode", "(?i)\\b(developer|god|jailbreak)\\s+mode\\s+(enabled|on|activated)\\b"},
    {"builtin:do-anything-now", "(?i)\\bdo\\s+anything\\s+now\\b"},
    {"builtin:chatml-token", "<\\|(im_start|im_end|system|endoftext)\\|>"},
    {"builtin:inst-token", "\\[/?INST\\]|<<SYS>>|<</SYS>>"},
    {"builtin:new-instructions", "(?i)\\b(new|updated)\\s+system\\s+(instructions|prompt)\\s*:"},
    {"builtin:pretend-no-rules",
     "(?i)\\b(pretend|act\\s+as\\s+if)\\s+(you\\s+)?(have|had|are)\\s+no\\s+(rules|restrictions|filters|guidelines)"},
    {"builtin:bypass-safety", "(?i)\\b(bypass|disable|turn\\s+off)\\s+(your\\s+|the\\s+|all\\s+)*(safety|content)\\s+("
                              "filters?|guidelines|policies)"},
};
const int content_n_builtins = (int)(sizeof content_builtins / sizeof content_builtins[0]);

void *content_rules_compile(enum rule_kind kind, const char *pattern, char *err, size_t errlen)
{
    char *src = NULL;
    /* MATCH_INVALID_UTF: an invalid byte is a character no pattern matches, not an
     * error that would let a text past every rule; and no UTF check of the whole
     * text per rule. */
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    if (kind == RULE_KEYWORD) {
        /* Whole word, caseless; \Q..\E quotes the word, except a literal "\E" inside it. */
        size_t n = strlen(pattern);
        src = malloc(n * 4 + 16);
        if (!src)
            abort();
        char *p = src;
        memcpy(p, "\\b\\Q", 4);
        p += 4;
        for (size_t i = 0; i < n; i++) {
            if (pattern[i] == '\\' && pattern[i + 1] == 'E') {
                memcpy(p, "\\E\\\\\\Q", 6);
                p += 6;
                continue;
            }
            *p++ = pattern[i];
        }
        memcpy(p, "\\E\\b", 5);
        opts |= PCRE2_CASELESS;
    }
    int ec;
    PCRE2_SIZE off;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)(src ? src : pattern), PCRE2_ZERO_TERMINATED, opts, &ec, &off, NULL);
    free(src);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        snprintf(err, errlen, "%s at offset %zu", (char *)msg, (size_t)off);
        return NULL;
    }
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* interpreter if JIT is absent */
    return code;
}

void content_rules_code_free(void *code)
{
    pcre2_code_free((pcre2_code *)code);
}

/* Per-thread match state: match data grows to fit, context and JIT stack reused. */
static _Thread_local pcre2_match_context *tl_mctx;
static _Thread_local pcre2_jit_stack *tl_jit;
static _Thread_local uint32_t tl_limit;
static _Thread_local pcre2_match_data *tl_md;   /* one pair: only whether it matched is read */

void content_rules_thread_end(void)
{
    if (!tl_mctx)
        return;
    pcre2_match_data_free(tl_md);
    pcre2_jit_stack_free(tl_jit);
    pcre2_match_context_free(tl_mctx);
    tl_md = NULL, tl_jit = NULL, tl_mctx = NULL, tl_limit = 0;
}

int content_rules_match(void *code, const char *text, size_t len, uint32_t match_limit, int *limited)
{
    if (!tl_mctx) {
        tl_mctx = pcre2_match_context_create(NULL);
        tl_jit = pcre2_jit_stack_create(32 * 1024, 256 * 1024, NULL);
        if (!tl_mctx || !tl_jit)
            abort();
        pcre2_jit_stack_assign(tl_mctx, NULL, tl_jit);
        pcre2_set_depth_limit(tl_mctx, 10000);
        pcre2_set_heap_limit(tl_mctx, 8 * 1024); /* KiB */
        tl_md = pcre2_match_data_create(1, NULL);
        if (!tl_md)
            abort();
    }
    if (tl_limit != match_limit) {
        pcre2_set_match_limit(tl_mctx, match_limit);
        tl_limit = match_limit;
    }
    int rc = pcre2_match((pcre2_code *)code, (PCRE2_SPTR)text, len, 0, 0, tl_md, tl_mctx);
    if (limited)
        *limited = 0;
    if (rc >= 0)
        return 1;
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT ||
        rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        if (limited)
            *limited = 1;
        return 1; /* a crafted text cannot talk past a rule by making it slow */
    }
    /* Out of memory or another failure of PCRE2 itself: as for a limit, the text
     * is not let past the rule on the engine's say. */
    if (limited)
        *limited = 1;
    return 1;
}

/* The probe texts: a run of one character, a character that ends no run ("!"),
 * then the pattern's own literal characters. Fixed runs alone miss a pattern like
 * (x+x+)+y, which PCRE2 rejects at once when the text has no "y" after the start
 * (its required character); the literals after the run make the engine try it.
 * Runs of the literals themselves and of a letter, a space, a digit. */
#define PROBE_LITERALS 24
#define PROBE_RUN 3000

static int probe_literals(const char *pattern, char *lit)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)pattern; *p && n < PROBE_LITERALS; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == ' ' ||
              *p == '-' || *p == '_' || *p == '@' || *p == '.'))
            continue;
        if (!memchr(lit, *p, (size_t)n))
            lit[n++] = (char)*p;
    }
    return n;
}

int content_rules_check(enum rule_kind kind, const char *pattern, uint32_t match_limit, char *err, size_t errlen)
{
    void *code = content_rules_compile(kind, pattern, err, errlen);
    if (!code)
        return -1;
    char lit[PROBE_LITERALS + 4];
    int nlit = probe_literals(pattern, lit);
    char runs[PROBE_LITERALS + 4];
    memcpy(runs, lit, (size_t)nlit);
    int nruns = nlit;
    for (const char *c = "a x1"; *c; c++)
        if (!memchr(runs, *c, (size_t)nruns))
            runs[nruns++] = *c;
    char buf[PROBE_LITERALS + PROBE_RUN + 2];
    int rc = 0;
    /* each run as it is, with the end, and with the end and the literals */
    for (int i = 0; i < nruns && rc == 0; i++) {
        memset(buf, runs[i], PROBE_RUN);
        buf[PROBE_RUN] = '!';
        memcpy(buf + PROBE_RUN + 1, lit, (size_t)nlit);
        const size_t lens[] = {PROBE_RUN, PROBE_RUN + 1, PROBE_RUN + 1 + (size_t)nlit};
        for (int k = 0; k < 3; k++) {
            int limited = 0;
            content_rules_match(code, buf, lens[k], match_limit, &limited);
            if (limited) {
                snprintf(err, errlen,
                         "pattern refused: catastrophic backtracking (hits the match limit on a probe text)");
                rc = -1;
                break;
            }
        }
    }
    content_rules_code_free(code);
    return rc;
}

uint64_t content_rules_key(int64_t id, const char *name)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)id; /* FNV-1a over the id, then the name */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h ? h : 1;
}

struct crule_set *content_rules_set_new(const struct snapshot *s, uint32_t match_limit)
{
    struct crule_set *set = calloc(1, sizeof *set);
    if (!set)
        abort();
    set->version = s->version;
    set->match_limit = match_limit;
    int cap = s->n_rules + (s->builtin_injection_rules ? content_n_builtins : 0);
    set->rules = calloc((size_t)(cap ? cap : 1), sizeof *set->rules);
    if (!set->rules)
        abort();
    char err[256];
    for (int i = 0; i < s->n_rules; i++) {
        const struct snap_rule *r = &s->rules[i];
        void *code = content_rules_compile(r->kind, r->pattern, err, sizeof err);
        if (!code)
            continue; /* refused at creation; a row edited by hand is skipped */
        /* The name is the set's own: a set outlives the snapshot that built it
         * when a later snapshot carries the same version. */
        set->rules[set->n_rules++] = (struct crule){.name = xstrdup(r->name), .key = content_rules_key(r->id, r->name),
                                                    .tenant_id = r->tenant_id, .action = r->action,
                                                    .scope = r->scope, .code = code};
    }
    for (int i = 0; s->builtin_injection_rules && i < content_n_builtins; i++) {
        void *code = content_rules_compile(RULE_PATTERN, content_builtins[i].pattern, err, sizeof err);
        if (!code)
            continue;
        const char *name = content_builtins[i].name;
        set->rules[set->n_rules++] = (struct crule){.name = xstrdup(name), .key = content_rules_key(-(int64_t)i - 1, name),
                                                    .action = RULE_FLAG, .scope = RULE_INPUT, .code = code};
    }
    return set;
}

void content_rules_set_free(struct crule_set *set)
{
    if (!set)
        return;
    for (int i = 0; i < set->n_rules; i++) {
        content_rules_code_free(set->rules[i].code);
        free((char *)set->rules[i].name);
    }
    free(set->rules);
    free(set);
}
