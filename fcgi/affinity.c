/* affinity.c: session keys, the overload rule and the affinity table (R-AFF-1..4). */
#include "affinity.h"

#include <openssl/evp.h>
#include <string.h>

#define AFF_PROBES 64          /* slots examined per lookup / store */

const char *const aff_level_names[AFF_LEVELS] = {"header", "prompt_cache_key", "user", "l2", "l1"};

static void aff_hash(unsigned char out[32], const char *scope, int level, const char *a, size_t an,
                     const char *b, size_t bn, const char *c, size_t cn)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char lv = (unsigned char)level, sep = 0;
    unsigned int len = 0;
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    EVP_DigestUpdate(ctx, scope, strlen(scope));
    EVP_DigestUpdate(ctx, &sep, 1);
    EVP_DigestUpdate(ctx, &lv, 1);
    /* Each part is followed by a separator so ("ab","c") and ("a","bc") differ. */
    EVP_DigestUpdate(ctx, a, an);
    EVP_DigestUpdate(ctx, &sep, 1);
    EVP_DigestUpdate(ctx, b, bn);
    EVP_DigestUpdate(ctx, &sep, 1);
    EVP_DigestUpdate(ctx, c, cn);
    EVP_DigestFinal_ex(ctx, out, &len);
    EVP_MD_CTX_free(ctx);
}

/* Text of a message's content: a string, or the text parts of an array joined. */
static const char *content_text(struct json_object *msg, char *tmp, size_t cap, size_t *len)
{
    struct json_object *c;
    *len = 0;
    if (!json_object_object_get_ex(msg, "content", &c))
        return "";
    if (json_object_get_type(c) == json_type_string) {
        *len = (size_t)json_object_get_string_len(c);
        return json_object_get_string(c);
    }
    if (json_object_get_type(c) != json_type_array)
        return "";
    size_t n = 0;
    for (size_t i = 0; i < json_object_array_length(c); i++) {
        struct json_object *part = json_object_array_get_idx(c, i), *text;
        if (!json_object_object_get_ex(part, "text", &text) || json_object_get_type(text) != json_type_string)
            continue;
        size_t tn = (size_t)json_object_get_string_len(text);
        if (tn > cap - n)
            tn = cap - n;
        memcpy(tmp + n, json_object_get_string(text), tn);
        n += tn;
    }
    *len = n;
    return tmp;
}

/* A Messages system prompt: a string, or text blocks. A client may put a block
 * that changes on every request (a billing or attribution line) next to the
 * stable prompt; the blocks it marks cache_control are the stable prefix, so
 * when any are marked only those are hashed. */
static const char *system_text(struct json_object *sys, char *tmp, size_t cap, size_t *len)
{
    *len = 0;
    if (json_object_is_type(sys, json_type_string)) {
        *len = (size_t)json_object_get_string_len(sys);
        return json_object_get_string(sys);
    }
    if (!json_object_is_type(sys, json_type_array))
        return "";
    int marked = 0;
    for (size_t i = 0; i < json_object_array_length(sys); i++)
        marked |= json_object_object_get_ex(json_object_array_get_idx(sys, i), "cache_control", NULL);
    size_t n = 0;
    for (size_t i = 0; i < json_object_array_length(sys); i++) {
        struct json_object *part = json_object_array_get_idx(sys, i), *text;
        if ((marked && !json_object_object_get_ex(part, "cache_control", NULL)) ||
            !json_object_object_get_ex(part, "text", &text) || !json_object_is_type(text, json_type_string))
            continue;
        size_t tn = (size_t)json_object_get_string_len(text);
        if (tn > cap - n)
            tn = cap - n;
        memcpy(tmp + n, json_object_get_string(text), tn);
        n += tn;
        if (n < cap)
            tmp[n++] = '\n';                /* ("ab","c") and ("a","bc") differ */
    }
    *len = n;
    return tmp;
}

static const char *role_of(struct json_object *msg)
{
    struct json_object *r;
    return json_object_object_get_ex(msg, "role", &r) && json_object_get_type(r) == json_type_string
               ? json_object_get_string(r) : "";
}

static size_t capped(size_t n, size_t cap) { return n < cap ? n : cap; }

static int string_field(struct json_object *body, const char *name, const char **s, size_t *n)
{
    struct json_object *v;
    if (!body || !json_object_object_get_ex(body, name, &v) || json_object_get_type(v) != json_type_string ||
        json_object_get_string_len(v) == 0)
        return 0;
    *s = json_object_get_string(v);
    *n = (size_t)json_object_get_string_len(v);
    return 1;
}

void aff_keys_build(struct aff_keys *k, const char *scope, const char *session_header,
                    struct json_object *body, size_t cap)
{
    memset(k, 0, sizeof *k);
    const char *s;
    size_t n;
    if (session_header && *session_header) {
        k->present[AFF_HEADER] = 1;
        aff_hash(k->hash[AFF_HEADER], scope, AFF_HEADER, session_header, capped(strlen(session_header), cap),
                 "", 0, "", 0);
    }
    if (string_field(body, "prompt_cache_key", &s, &n)) {
        k->present[AFF_PROMPT_CACHE_KEY] = 1;
        aff_hash(k->hash[AFF_PROMPT_CACHE_KEY], scope, AFF_PROMPT_CACHE_KEY, s, capped(n, cap), "", 0, "", 0);
    }
    struct json_object *meta = NULL;
    if (string_field(body, "user", &s, &n) ||
        (body && json_object_object_get_ex(body, "metadata", &meta) && string_field(meta, "user_id", &s, &n))) {
        k->present[AFF_USER] = 1;           /* Anthropic's metadata.user_id is its "user" */
        aff_hash(k->hash[AFF_USER], scope, AFF_USER, s, capped(n, cap), "", 0, "", 0);
    }
    struct json_object *msgs;
    if (!body || !json_object_object_get_ex(body, "messages", &msgs) || json_object_get_type(msgs) != json_type_array)
        return;
    /* system (or developer) + first user (+ first assistant after it). */
    char sys_tmp[4096], user_tmp[4096], asst_tmp[4096];
    const char *sys = "", *user = NULL, *asst = NULL;
    size_t sys_n = 0, user_n = 0, asst_n = 0;
    struct json_object *top_system;
    if (json_object_object_get_ex(body, "system", &top_system))     /* Messages: system is top-level */
        sys = system_text(top_system, sys_tmp, sizeof sys_tmp, &sys_n);
    for (size_t i = 0; i < json_object_array_length(msgs); i++) {
        struct json_object *m = json_object_array_get_idx(msgs, i);
        const char *role = role_of(m);
        if (!user && (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0) && sys_n == 0)
            sys = content_text(m, sys_tmp, sizeof sys_tmp, &sys_n);
        else if (!user && strcmp(role, "user") == 0)
            user = content_text(m, user_tmp, sizeof user_tmp, &user_n);
        else if (user && !asst && strcmp(role, "assistant") == 0)
            asst = content_text(m, asst_tmp, sizeof asst_tmp, &asst_n);
    }
    if (!user)
        return;
    if (asst) {
        k->present[AFF_L2] = 1;
        aff_hash(k->hash[AFF_L2], scope, AFF_L2, sys, capped(sys_n, cap), user, capped(user_n, cap), asst,
                 capped(asst_n, cap));
    }
    k->present[AFF_L1] = 1;
    aff_hash(k->hash[AFF_L1], scope, AFF_L1, sys, capped(sys_n, cap), user, capped(user_n, cap), "", 0);
}

int aff_overloaded(double l_sticky, double l_min, double abs_margin, double rel_margin)
{
    return l_sticky - l_min >= abs_margin && l_sticky >= rel_margin * l_min;
}

static int aff_start(const unsigned char hash[32], int slots)
{
    uint64_t h;
    memcpy(&h, hash, sizeof h);
    return (int)(h % (uint64_t)slots);
}

int64_t aff_table_lookup(struct aff_entry *t, int slots, const unsigned char hash[32], int64_t now,
                         int64_t ttl_ms)
{
    int start = aff_start(hash, slots);
    for (int k = 0; k < AFF_PROBES && k < slots; k++) {
        struct aff_entry *e = &t[(start + k) % slots];
        if (e->replica_id == 0)
            return 0;                   /* never used: the key is not further on */
        if (memcmp(e->hash, hash, 32) == 0) {
            if (now - e->last_used_ms > ttl_ms)
                return 0;
            e->last_used_ms = now;      /* R-AFF-4: sliding TTL */
            return e->replica_id;
        }
    }
    return 0;
}

void aff_table_store(struct aff_entry *t, int slots, const unsigned char hash[32], int64_t replica_id,
                     int64_t now, int64_t ttl_ms)
{
    int start = aff_start(hash, slots);
    struct aff_entry *free_slot = NULL, *oldest = NULL;
    for (int k = 0; k < AFF_PROBES && k < slots; k++) {
        struct aff_entry *e = &t[(start + k) % slots];
        if (e->replica_id != 0 && memcmp(e->hash, hash, 32) == 0) {
            e->replica_id = replica_id;
            e->last_used_ms = now;
            return;
        }
        int expired = e->replica_id == 0 || now - e->last_used_ms > ttl_ms;
        if (expired && !free_slot)
            free_slot = e;
        if (!oldest || e->last_used_ms < oldest->last_used_ms)
            oldest = e;
        if (e->replica_id == 0)
            break;                      /* nothing of this key beyond a never-used slot */
    }
    struct aff_entry *e = free_slot ? free_slot : oldest;   /* expired first, then oldest */
    memcpy(e->hash, hash, 32);
    e->replica_id = replica_id;
    e->last_used_ms = now;
}
