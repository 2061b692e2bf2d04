/* content_rules.h: compile content rules with PCRE2 and match text against them
 * in bounded time (R-GUARD-3). Used by the responder (screening) and by admin
 * (refusing a bad pattern at creation). */
#ifndef SLUICE_CONTENT_RULES_H
#define SLUICE_CONTENT_RULES_H

#include <stddef.h>
#include <stdint.h>
#include "snapshot.h"

/* One compiled rule; owned by its set. */
struct crule {
    const char *name;             /* the set's own copy (heap) */
    uint64_t key;                 /* content_rules_key(): its match counter in the shared state */
    int64_t tenant_id;            /* 0: every tenant */
    enum rule_action action;
    enum rule_scope scope;
    void *code;                   /* pcre2_code_8 * */
};

/* A compiled set for one snapshot version; heap object, owner frees with _free. */
struct crule_set {
    int64_t version;
    struct crule *rules; int n_rules;
    uint32_t match_limit;
    int refs;                     /* the user's (screen.c: under its mutex) */
};

/* Compile one rule's text: keywords become caseless \bWORD\b (quoted). Returns the
 * pcre2 code or NULL with PCRE2's message and offset in err. */
void *content_rules_compile(enum rule_kind kind, const char *pattern, char *err, size_t errlen);
void content_rules_code_free(void *code);

/* Admin check: compile and run against adversarial probes with the match limit;
 * 0 = acceptable, -1 = refused with a reason in err. */
int content_rules_check(enum rule_kind kind, const char *pattern, uint32_t match_limit,
                        char *err, size_t errlen);

/* Match text: 1 = match (or the limit was hit: a crafted text cannot talk past a
 * rule by making it slow), 0 = no match. *limited set to 1 when a limit was hit. */
int content_rules_match(void *code, const char *text, size_t len, uint32_t match_limit, int *limited);
/* A thread that matched ends: its match state goes (the responder's grown workers). */
void content_rules_thread_end(void);

/* The key of a rule's match counter (sluice_content_rule_matches_total): its id
 * and name together, so a new rule that gets a deleted one's id starts at 0.
 * Builtins have the ids -1, -2, ... (their index + 1, negated). Never 0. */
uint64_t content_rules_key(int64_t id, const char *name);

/* Build the set for a snapshot (its rules + the builtin set when on); never NULL. */
struct crule_set *content_rules_set_new(const struct snapshot *s, uint32_t match_limit);
void content_rules_set_free(struct crule_set *set);

/* The builtin prompt-injection patterns (name "builtin:X", action flag, scope input). */
struct content_builtin { const char *name; const char *pattern; };
extern const struct content_builtin content_builtins[];
extern const int content_n_builtins;

#endif
