/* affinity.h: session affinity (SPEC §5) as pure functions: the five-level key
 * cascade, the two-margin overload rule and the pool-wide table's lookup and
 * store over a plain array (the shared-state locking lives in the caller). */
#ifndef SLUICE_AFFINITY_H
#define SLUICE_AFFINITY_H

#include "shm.h"

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

enum aff_level { AFF_HEADER, AFF_PROMPT_CACHE_KEY, AFF_USER, AFF_L2, AFF_L1, AFF_LEVELS };

extern const char *const aff_level_names[AFF_LEVELS];   /* header, prompt_cache_key, user, l2, l1 */

/* The keys of one request, most specific first; absent levels have present = 0. */
struct aff_keys {
    int present[AFF_LEVELS];
    unsigned char hash[AFF_LEVELS][32];   /* SHA-256 of (scope, level, capped input) */
};

/* R-AFF-1/2: builds the cascade for a chat or Messages body (a top-level
 * system, and metadata.user_id as the user level; see system_text). scope is "endpoint_id/tenant_id"
 * so no key works across endpoints or tenants; inputs are capped at cap bytes. */
void aff_keys_build(struct aff_keys *k, const char *scope, const char *session_header,
                    struct json_object *body, size_t cap);

/* R-AFF-3: is the sticky replica overloaded? Both margins must hold:
 * L_sticky - L_min >= abs_margin AND L_sticky >= rel_margin * L_min. */
int aff_overloaded(double l_sticky, double l_min, double abs_margin, double rel_margin);

/* The table's slots live in the shared state file (struct shm_aff_entry). */
#define aff_entry shm_aff_entry

/* Finds the live mapping of hash (sliding TTL: a hit refreshes last_used).
 * Returns the replica id or 0. */
int64_t aff_table_lookup(struct aff_entry *t, int slots, const unsigned char hash[32], int64_t now,
                         int64_t ttl_ms);
/* Maps hash to replica: updates in place, else takes a never-used or expired
 * slot, else evicts the least recently used slot of the probe window (R-AFF-4). */
void aff_table_store(struct aff_entry *t, int slots, const unsigned char hash[32], int64_t replica_id,
                     int64_t now, int64_t ttl_ms);

#endif
