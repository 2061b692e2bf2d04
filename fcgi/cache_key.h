/* cache_key.h: the exact answer cache's key (R-CACHE-1, R-CACHE-2) and the
 * semantic cache's scope (R-CACHE-4), pure: a canonical text of everything
 * that decides an answer, hashed with SHA-256.
 * No sockets, no database: unit-tested in tests/unit/test_cache_key.c. */
#ifndef SLUICE_CACHE_KEY_H
#define SLUICE_CACHE_KEY_H

#include "buf.h"

#include <json-c/json.h>
#include <stdint.h>

/* What the key is made of. sluice has no model version or adapter field: the
 * endpoint (its id) and the model name that endpoint knows (the route's target)
 * identify what answers, so both are in the key; a new model version deployed
 * under the same endpoint and name is the operator's to purge (or wait out the TTL). */
struct cache_key_in {
    int64_t tenant_id;            /* an answer never crosses tenants */
    int64_t endpoint_id;          /* the endpoint the route chose */
    const char *routed_model;     /* the model name that endpoint knows */
    const char *path;             /* the request's path: the kind of answer */
    int stream;                   /* a stream and a JSON body are different answers */
    int want_usage;               /* a stream's usage chunk, as the client asked */
    const char *extra;            /* request headers that change the answer (Anthropic's version, betas), or NULL */
    struct json_object *body;     /* the parsed body as forwarded (internal fields already stripped) */
};

/* The canonical text into b: one "name=value" line per part, then the body
 * as JSON with object members sorted by name (so their order does not
 * matter), numbers in one form (0, 0.0 and -0.0 are one temperature), and the
 * members that cannot change the answer left out (cache_key_ignored). 0, or
 * -1 when b's maximum was reached. */
int cache_key_text(const struct cache_key_in *in, struct buf *b);

/* SHA-256 hex of the canonical text. 0, or -1 (the body is too large to key). */
int cache_key_hash(const struct cache_key_in *in, char hex[65]);

/* R-CACHE-4: the text of the request's last user turn appended to text: the
 * last message with role user of a chat or Messages body (its string content,
 * or its text parts joined by newlines), else a completions body's prompt
 * string; *where is that content's JSON value (the scope's hole). -1 when
 * there is none, it is empty, or it holds anything but text (an image, a tool
 * result): such a request is not semantic-cacheable. */
int cache_key_last_user(struct json_object *body, struct buf *text, struct json_object **where);

/* R-CACHE-4: the semantic scope: SHA-256 hex over everything the exact key
 * covers (tenant, endpoint, routed model, path, stream, usage chunk, headers,
 * every parameter, the system prompt and earlier messages) except the text of
 * turn (cache_key_last_user's *where), which is left as a hole. Only entries
 * of one scope are compared by similarity. 0, or -1. */
int cache_key_scope_hash(const struct cache_key_in *in, const struct json_object *turn, char hex[65]);

/* Top-level body members that never change an answer and are left out of
 * the key: user (an end-user id for abuse monitoring), metadata and store
 * (what the provider keeps), prompt_cache_key and safety_identifier (hints),
 * stream (a part of its own). stream_options is kept without include_usage
 * (which is want_usage). 1 when name is one. */
int cache_key_ignored(const char *name);

/* R-CACHE-1: does the body ask for the greedy answer? temperature present and
 * 0, or absent (or null) when the model's default is greedy. */
int cache_key_greedy(struct json_object *body, int default_greedy);

#endif
