/* request.h: the request struct every pipeline stage reads and fills (DESIGN.md
 * "One request, in order"), and the read stage that starts it. */
#ifndef SLUICE_REQUEST_H
#define SLUICE_REQUEST_H

#include "arena.h"
#include "buf.h"
#include "conf.h"
#include "gate.h"
#include "shm.h"
#include "snapshot.h"
#include "usage.h"

#include <curl/curl.h>
#include "fcgiconn.h"
#include <json-c/json.h>
#include <stdint.h>

enum req_kind {
    REQ_CHAT, REQ_COMPLETIONS, REQ_EMBEDDINGS, REQ_MODELS, REQ_PROXY,
    REQ_MESSAGES,                 /* POST /v1/messages (R-ANT-6) */
    REQ_COUNT_TOKENS,             /* POST /v1/messages/count_tokens (R-ANT-7) */
    REQ_RESPONSES,                /* POST /v1/responses (R-API-8) */
    REQ_RESPONSE_OP,              /* GET/DELETE /v1/responses/{id}, .../cancel, .../input_items */
    REQ_METRICS,                  /* GET /metrics (R-OBS-1): no key, no usage */
    REQ_UNKNOWN
};

/* Does a request of this kind spend tokens (TPM, token quotas, a usage event
 * with tokens)? Listings, token counts and stored-response calls spend calls only. */
static inline int req_kind_spends_tokens(enum req_kind k)
{
    return k != REQ_MODELS && k != REQ_COUNT_TOKENS && k != REQ_RESPONSE_OP && k != REQ_METRICS;
}

/* The protocol the caller speaks on a path (a row of the route table, main.c):
 * errors, events and translations take its shape. */
enum ingress { INGRESS_NONE, INGRESS_OPENAI, INGRESS_ANTHROPIC };

#define PLAN_MAX_MODELS 4           /* one model, or auto's chain (AUTO_MAX_TRIES) */
#define PLAN_MAX_ROUTES 64
#define PLAN_MAX_EXCLUDED 8

/* The route stage's plan (DESIGN.md stage 5): ordered candidate models (one,
 * or auto's degradation chain), the routes of the current one, and replicas
 * already tried. The driver walks it; route.c owns its contents. */
struct plan {
    const char *models[PLAN_MAX_MODELS];
    int n_models, pos;                            /* pos: the model being tried (degradation level) */
    const struct snap_route *routes[PLAN_MAX_ROUTES];
    int n_routes;                                 /* caller-visible routes of models[pos] */
    const struct snap_endpoint *proxy;            /* REQ_PROXY: the named endpoint */
    int excluded[PLAN_MAX_EXCLUDED];              /* replica indexes already tried */
    int n_excluded;
    int excluded_ep[PLAN_MAX_EXCLUDED];           /* endpoints whose adapter refused the request */
    int n_excluded_ep;
    int pinned;                                   /* R-API-8: replica index that holds the response, -1 */
    /* R-PRIO-1 / R-KEY-6: why the last choice found nothing free */
    int layer_full;                               /* LAYER_MODEL / LAYER_ENDPOINT bits (route.c) */
    int layer_ep;                                 /* the endpoint whose concurrency layer is full */
    int wait_pos;                                 /* the model position wait_ep belongs to */
    int take_misses;                              /* places lost to other requests since the choice */
};

/* R-OBS-3: one upstream attempt, as spans and the attempts counter see it. */
#define OBS_MAX_ATTEMPTS 8
struct obs_attempt {
    int64_t start_us, end_us;     /* mono_us() around the transfer */
    int64_t connect_us;           /* connection ready, from start (curl's connect time; 0 = reused) */
    int64_t first_byte_us;        /* first upstream byte, from start; 0 = none */
    const struct snap_endpoint *ep;
    const struct snap_replica *replica;
    long status;                  /* upstream HTTP status, 0 = none */
    const char *outcome;          /* drive.c's word for it: answered, connection failed, ... */
    const char *next;             /* what followed: "success", "retry", "failover", "failed", "refused" */
    char span_id[17];             /* the span id sent upstream in traceparent */
};

/* What observability reads of a request (metrics, access log, spans,
 * Server-Timing), filled along the pipeline; account reads it at the end. */
struct obs {
    int64_t start_us;             /* mono_us() when the request was read */
    int64_t route_start_us, route_end_us;
    int64_t upstream_us;          /* finished attempts' time on the upstream */
    int64_t attempt_start_us;     /* the attempt in flight (0 = none): Server-Timing counts it so far */
    int64_t ttft_us;              /* first content byte to the client, from start_us; 0 = none */
    struct obs_attempt attempts[OBS_MAX_ATTEMPTS];
    int n_attempts;
    /* W3C trace context (R-OBS-3): the caller's, or a fresh one */
    char trace_id[33];            /* 32 lowercase hex */
    char parent_span_id[17];      /* the caller's span, "" when sluice started the trace */
    char span_id[17];             /* sluice's own span for this request */
    int trace_flags;              /* 0x01 = sampled */
    const char *tracestate;       /* the caller's tracestate, forwarded unchanged */
    int64_t wall_offset_ns;       /* CLOCK_REALTIME ns - mono_us() * 1000, at spans_begin (spans' wall times) */
    uint64_t bytes_out;           /* response body bytes written to the client */
    const char *cache;            /* X-Cache word ("hit", "hit-semantic", "miss") or NULL: a cacheable request */
    const char *cache_kind;       /* R-CACHE-4: the metrics' kind of that word: "exact" (NULL) or "semantic" */
    int64_t cache_lookup_us;      /* R-CACHE-3: the lookup's time (key and database), 0 = none */
    int64_t guard_us;             /* R-GUARD-1..3: guard, screen and fit together; -1 = not run */
    const char *client_addr;      /* REMOTE_ADDR, or the trusted X-Forwarded-For client */
    const char *content_flag;     /* R-GUARD-3: flag rules that matched ("a, b"), NULL = none */
    const char *content_block;    /* R-GUARD-3: the block rule that refused it, NULL = none */
};

/* The uniform caller (R-AUTH-1): routing and accounting see only this. */
struct caller {
    int64_t tenant_id, user_id, key_id;
    int endpoint;                 /* endpoint key: its endpoint index, else -1 (R-AUTH-5) */
    enum role role;
    const char *user_name;
    const struct snap_key *key;   /* the key record (limits), valid with the snapshot */
};

/* Per worker thread, reused request after request; owned by its thread. */
struct worker {
    struct fcgi_conn fcgi;        /* the front server's connection and its request */
    struct arena arena;
    CURL *curl;                   /* reused so upstream connections stay alive */
    CURL *side;                   /* sluice's own calls before the attempt (embed.c), made on first use */
    CURLM *multi;
    struct buf resp;              /* buffered upstream body */
    struct buf out;               /* scratch for rewritten events / error bodies */
    uint64_t rng;                 /* xorshift state for weighted choices */
    const atomic_int *cut;        /* set by main when the shutdown grace ran out (R-DEP-6) */
    int index;
    struct request *req;          /* the request it serves: with the worker, it may move to the stream loop */
    int up_socks[4];              /* the sockets its curl handle has open (upstream connections) */
    int n_up_socks;               /* how many; -1: more than up_socks holds (not all known) */
    unsigned up_opened;           /* sockets curl opened so far: a new one may have a closed one's number */
    struct worker *next_free;     /* on main's list of spare workers */
};

struct attempt;

struct request {
    struct worker *w;
    int may_park;                 /* a stream under way may leave this thread (the stream loop runs) */
    struct attempt *parked_attempt;  /* it did: the loop goes on with it, then drive_resume */
    struct arena *arena;
    const struct conf *conf;
    struct shm *shm;
    struct snapshot *snap;        /* held for the whole request */
    int64_t start_ms, start_mono;

    /* read */
    const char *method, *uri, *path, *query;
    enum req_kind kind;
    enum ingress ingress;
    const char *route_pattern;    /* the route-table row's path ("/v1/responses/"), NULL = no row: a label, never the client's path */
    char *body;
    size_t body_len;
    int body_complete;            /* the FastCGI input was read to its end */
    char request_id[80];
    const char *cors_origin;      /* R-API-7: an allowed Origin, echoed on the response */

    /* auth */
    struct caller caller;

    /* admit (set by admit_request, undone by admit_finish) */
    const struct snap_key *key;   /* the member key when it has limits */
    int key_slot_held;            /* a concurrency slot of the key is counted */
    int64_t tpm_reserved;         /* tokens pre-deducted from the TPM bucket */
    int64_t month_tokens_reserved;/* tokens pre-deducted from the monthly token quota */
    char month_period[16];
    int idem_owned;               /* this request owns an Idempotency-Key record */
    char idem_scope[32];
    char idem_key[129];
    char idem_token[33];              /* the claim's id (fcgi/idem.h IDEM_TOKEN_LEN) */
    struct buf *capture;          /* the response as sent, for the idempotency record */
    int capture_overflow;
    int64_t max_tokens;           /* the request's max_tokens / max_completion_tokens, or 0 */
    int choices;                  /* n (1..128), 0 when absent: answers the reservation covers */
    int64_t month_tokens_delta;   /* settlement of the monthly token quota (account writes it) */
    int quota_shared;             /* the call/token quotas were counted in the shared state */
    char quota_day[16];           /* ... for this day period (month: month_period) */
    int64_t quota_month_tokens;   /* ... and this request's net tokens, for SQLite */
    int replayed;                 /* answered from an idempotency record: no usage, no quota */
    int64_t admitted_ms;          /* when the QPS window admitted it (the event's time) */
    const char *response_content_type;
    struct auto_plan *auto_plan;  /* R-AUTO: the candidates when the client asked for "auto" */
    const char *routing_reason;   /* R-SEM: X-Routing-Reason of a semantic choice, NULL otherwise */
    struct semindex *semindex;    /* R-SEM: held from semvec_prepare to semvec_end, or NULL */
    const float *sem_qvec;        /* R-SEM-2: the last user turn's embedding (arena); NULL: BM25 only */
    size_t sem_qdims;
    struct sticky *sticky;        /* R-AFF: the affinity lookup of this request, or NULL */
    char session_id[260];         /* R-AFF-5: X-Session-Id of the response */
    char affinity_header[48];     /* R-AFF-5: X-Session-Affinity of the response */

    /* R-KEY-6 tenant and user quota layers (layers.c: set by layers_admit,
     * undone by layers_finish), and what admit.c needs to give the key's
     * limits back when a layer refuses. */
    const struct snap_quota *tenant_quota, *user_quota;  /* the layers that applied, valid with snap */
    int tenant_slot_held;         /* a concurrency place of the tenant is counted */
    int64_t tenant_tokens_reserved;   /* pre-deducted from the tenant's month ... */
    char tenant_month[16];            /* ... of this period */
    int64_t user_tokens_reserved;     /* pre-deducted from the user's day ... */
    char user_day[16];                /* ... of this period */
    int64_t shrunk_max_tokens;    /* max_tokens shrunk to this by a token layer (0 = not) */
    int context_counted;          /* R-GUARD-2: the prompt was counted by the replica's /tokenize */
    int clamped_max_tokens;       /* R-GUARD-1: max_tokens was above max_output and the policy clamps it */
    int key_qps_taken;            /* admit.c: the key's QPS window counted this request */
    int key_quota_sql;            /* admit.c: the key's calls were counted in SQLite (no shared slot) */
    struct kstate_hold *kstate_hold; /* admit.c: what a Redis `state` admission took (NULL: none) */

    /* guard */
    struct json_object *json;     /* parsed body, owned until request_end */
    const char *model;            /* the client's model name */
    int stream;
    int injected_usage;           /* sluice added include_usage (R-USE-2) */
    const char *fwd_body;         /* body sent upstream */
    size_t fwd_len;
    int64_t prompt_estimate;      /* rough prompt tokens, for disconnect records */
    const char *response_ref;     /* R-API-8: previous_response_id, or the {id} of a responses call */

    /* route: the plan, and the attempt being made from it (set by route, read by the rest) */
    struct plan plan;
    const struct snap_route *route;
    const struct snap_endpoint *ep;
    const struct snap_replica *replica;
    const char *upstream_path;    /* path + query appended to the replica URL */
    const char *routed_model;     /* the model name the backend knows */

    /* route / queue / drive: capacity under caps (R-PRIO-1, R-KEY-6 model and endpoint layers) */
    struct gate_hold hold;        /* the place the current attempt holds; released after it */
    int wait_ep;                  /* every candidate full: the endpoint (index) to queue on, -1 = none */
    int wait_model_layer;         /* ... and it is the model layer that is full (the 429 names it) */
    int wait_only_rep;            /* ... and only this replica slot can serve it (R-API-8), -1 = any */
    struct gate_ask wait_ask;     /* ... and what its place asks (route fills it with wait_ep) */
    int64_t queue_seq;            /* its turn, kept when it turns a granted replica down */
    int queue_excluded[SHM_WAIT_EXCLUDED];   /* replica slots it turned down */
    int n_queue_excluded;
    int priority;                 /* R-PRIO-2: the effective priority, 0 highest */
    int64_t queue_ms;             /* time spent queued, all waits together */
    int64_t queue_start_us, queue_end_us;  /* the (last) wait, for its span */
    const char *queue_outcome;    /* "granted", "full", "timeout", "gone"; NULL = never queued */
    /* R-KEY-6 degrade order: the furthest step taken (1 cheaper model, 2 queued for
     * the model, 3 max_tokens shrunk), sent as X-Degradation-Level */
    int degrade_level;
    const char *degraded_from;    /* the model asked for, when a cheaper one serves */

    /* forward / reply */
    int status;                   /* status sent to the client */
    int headers_sent;             /* response head written to the client */
    int data_sent;                /* a response byte other than a comment went out */
    int client_gone;
    int retries;                  /* attempts after the first (one event, R-USE-4) */
    int candidate_retries;        /* replica retries of the current candidate (R-HC-8) */
    const struct snap_replica *trial_rep; /* the replica whose half-open trial serving_take last handed out */
    int want_usage_chunk;         /* the client asked for stream_options.include_usage */
    int64_t ttft_ms;
    /* R-GUARD-3 output rules (screen.c) */
    int screen_output;            /* 0 not known yet, 1 no output rule applies, 2 some do */
    struct screen_stream *screen_stream;  /* a stream's recent text and flagged rules, request arena */
    int output_blocked;           /* an output rule refused the upstream's answer: its tokens are billed */

    /* R-CACHE-1..3 (cache.c): the exact cache's part. On a cacheable miss
     * reply_body captures what the client gets, and the length of each write,
     * for account to hand to the store; freed by cache_end. */
    char cache_key[65];           /* "" = not cacheable */
    int64_t cache_endpoint_id;    /* the endpoint the key names */
    const struct snap_route *cache_route; /* ... and the route (its target model): a retry elsewhere is not this answer */
    int cache_ttl_s;
    int cache_hit;                /* answered from the cache (cached = 1, no upstream) */
    struct cache_answer *cache_answer;   /* the stored answer found (request arena) */
    struct buf *cache_body;       /* the capture, capped at cache.max_entry_bytes ... */
    struct buf *cache_chunks;     /* ... and each write's length, 4 bytes little-endian */
    int cache_overflow;           /* ... which it outgrew: nothing is stored */
    int cache_complete;           /* drive: the last attempt's answer was delivered as it ended */
    struct cache_sem *cache_sem;  /* R-CACHE-4 (cache_semantic.c): the embedding, scope and match, or NULL */

    /* R-SHD-1 (shadow.c): the mirror of this request, owned by the shadow thread once handed over */
    struct shadow_job *shadow;
    int shadow_tried;             /* the mirror decision was made */

    /* account */
    struct usage usage;
    int usage_partial;            /* the stream's usage so far is not its final word (message_start) */
    int64_t content_chunks;
    const char *error_code;
    char finish_reason[32];

    /* observability (R-OBS): read by observe.c at the end */
    struct obs obs;
};

/* Fills method, uri, path, query, request id and the body (R-API-3 limit).
 * Returns 0, or -1 after replying with an error. */
int request_read(struct request *r);
const char *request_param(const struct request *r, const char *name);
/* Header value from the FastCGI environment, e.g. "X-Request-Id" -> HTTP_X_REQUEST_ID. */
const char *request_header(const struct request *r, const char *name);
uint64_t request_random(struct request *r);

#endif
