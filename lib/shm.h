/* shm.h: the pool-wide shared state file (DESIGN.md "Where state lives").
 *
 * One fixed-layout region mapped by every responder process of the host (and
 * later healthd): per-process counter rows summed over live PIDs, so a
 * responder killed at any instruction leaks nothing once its row is reaped;
 * per-replica passive-health state; per-endpoint round-robin counters.
 * Counters are lock-free atomics; the one robust process-shared mutex guards
 * only rare transitions (claiming rows, circuit changes), so a process that
 * dies holding it never deadlocks the pool. */
#ifndef SLUICE_SHM_H
#define SLUICE_SHM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define SHM_MAGIC 0x534c434553544154ULL /* "SLCESTAT" */
#define SHM_VERSION 8
#define SHM_MAX_PROCS 128
#define SHM_MAX_REPLICAS 4096
#define SHM_MAX_ENDPOINTS 1024
#define SHM_MAX_NODES 256
#define SHM_MAX_KEYS 4096
#define SHM_QPS_RING 256              /* exact sliding window up to this qps_limit */
#define SHM_MAX_CLIENTS 1024          /* client addresses tracked for auth failures */
#define SHM_MAX_QUOTAS 1024           /* R-KEY-6 quota layer rows */
#define SHM_RPM_RING 256              /* exact sliding minute up to this rpm */
#define SHM_MAX_WAITERS 1024          /* R-PRIO-1 queued requests, pool-wide */
#define SHM_FAIR_SLOTS 2048           /* R-PRIO-2 fairness tags (endpoint x tenant, endpoint x user) */
#define SHM_EP_REPLICAS 64            /* replicas of an endpoint the queue can hand out */

enum circuit_state { CIRCUIT_CLOSED, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN };

/* shm_replica.removed (R-HC-2). A fresh state file holds SHM_RM_UNKNOWN, so
 * after a restart the snapshot's `healthy` column (the database) decides. */
enum shm_removed {
    SHM_RM_UNKNOWN = 0,     /* no word from sluice-healthd: the snapshot decides */
    SHM_RM_REMOVED = 1,     /* taken out by sluice-healthd */
    SHM_RM_IN_SERVICE = 2,  /* in service per sluice-healthd */
    SHM_RM_DATA_OK = 3,     /* was removed; a real request succeeded; healthd records the recovery */
};

/* R-WAKE-3: shm_endpoint.wake_state. */
enum shm_wake { SHM_WAKE_IDLE = 0, SHM_WAKE_WAKING = 1, SHM_WAKE_FAILED = 2 };

/* R-HC-5 state of one replica, shared by the pool. */
struct shm_replica {
    _Atomic int64_t id;               /* replica id owning the slot, 0 = free */
    _Atomic int64_t ban_until_ms;
    _Atomic int64_t open_until_ms;
    _Atomic int failures;             /* consecutive proxy failures */
    _Atomic int circuit;              /* enum circuit_state */
    _Atomic int trials;               /* half-open trial requests handed out */
    /* R-HC-2: enum shm_removed; sluice-healthd's view, ahead of the database. */
    _Atomic int removed;
    /* R-LB-2, R-HC-6: engine metrics written by sluice-healthd's scraper. */
    _Atomic int64_t metrics_ms;       /* when scraped (wall clock ms), 0 = never */
    _Atomic int32_t waiting;          /* vllm:num_requests_waiting */
    _Atomic int32_t running;          /* vllm:num_requests_running */
    _Atomic int32_t kv_permille;      /* 1000 x vllm:kv_cache_usage_perc */
    /* R-WAKE-1: 1 once the data plane woke this sleeping replica and saw it
     * ready; sluice-healthd then records state=running and clears it. */
    _Atomic int32_t awake;
    _Atomic int32_t cap;              /* R-PRIO-1: max_concurrency from the snapshot, 0 = none */
    int32_t pad_;
    /* issue 19: the count across hosts (lib/gate_redis.c) refused a place of it;
     * this host hands none out until then (mono ms) or a release's news. 0 = none. */
    _Atomic int64_t remote_full_ms;
    _Atomic int64_t remote_clears;    /* marks cleared so far: a refusal older than a clear sets none */
};

struct shm_endpoint {
    _Atomic int64_t id;
    _Atomic uint64_t rr;              /* round-robin position, pool-wide */
    _Atomic int64_t wake_started_ms;  /* R-WAKE-3: one wake for many requests; 0 = none */
    _Atomic int wake_state;           /* enum shm_wake */
    /* R-PRIO-1, written from the snapshot by whoever loads it: the cap, and the
     * replica slots (with their caps) the queue may hand a waiter. */
    _Atomic int32_t cap;              /* max_concurrency, 0 = none */
    _Atomic int32_t n_reps;
    _Atomic int32_t rep_slots[SHM_EP_REPLICAS];
    _Atomic int32_t waiting;          /* requests in its queue (gauge) */
    int32_t pad_;
    _Atomic int64_t remote_full_ms;   /* issue 19: as a replica's */
    _Atomic int64_t remote_clears;
};

/* R-HC-7: GPU temperature per node, written by sluice-healthd or the admin API. */
struct shm_node {
    _Atomic int64_t id;
    _Atomic int32_t temp_decicelsius; /* tenths of a degree; valid when temp_ms > 0 */
    int32_t pad_;
    _Atomic int64_t temp_ms;
};

/* R-KEY-3: one member key's pool-wide QPS window and token bucket. The mutex
 * is robust: a holder killed mid-update leaves plain counters behind. */
struct shm_key {
    _Atomic int64_t id;
    pthread_mutex_t lock;
    int64_t qps_ring[SHM_QPS_RING];   /* admission times (ms), a ring of the last N */
    int32_t qps_head;
    int32_t pad_;
    int64_t tpm_tokens_milli;         /* token bucket level x 1000 */
    int64_t tpm_refill_ms;            /* last refill */
    int64_t tpm_limit;                /* the limit the level was computed for */
    int32_t initialised;
    int32_t pad2_;
    /* R-KEY-4: the call and token quotas of the current periods, pool-wide and
     * exact under the lock; loaded from SQLite when a period is first seen
     * here, written back by every responder's usage writer. "" = not loaded. */
    char day[16], month[16];          /* "d:YYYY-MM-DD", "m:YYYY-MM" */
    int64_t day_calls, month_calls, month_tokens;
};

/* R-KEY-6: one quota layer's pool-wide counters (a row of quotas). The
 * robust lock guards the minute window and the token periods; concurrency is
 * counted in the process rows (quota_active), like a key's. */
struct shm_quota {
    _Atomic int64_t id;               /* quotas.id, 0 = free */
    pthread_mutex_t lock;
    int32_t initialised;
    _Atomic int32_t cap;              /* concurrency from the snapshot, 0 = none */
    _Atomic int32_t queue_max;        /* model layer: its waiters at most, -1 = the endpoint's */
    _Atomic int32_t waiting;          /* waiters that also need a place in it (a release looks here) */
    _Atomic int32_t queued;           /* model layer: waiters in its own queue (its queue_max bounds them) */
    int32_t pad0_;
    int64_t rpm_ring[SHM_RPM_RING];   /* admission times (ms) of the last requests */
    int32_t rpm_head;
    int32_t pad_;
    char day[16], month[16];          /* periods the tokens are of ("" = not loaded) */
    int64_t day_tokens, month_tokens; /* reserved + settled in those periods */
    _Atomic int64_t remote_full_ms;   /* issue 19: as a replica's */
    _Atomic int64_t remote_clears;
};

/* R-PRIO-1: one queued request. state is the futex word its owner sleeps on. */
enum shm_wait_state { WAIT_FREE = 0, WAIT_WAITING = 1, WAIT_GRANTED = 2 };
#define SHM_WAIT_QUOTAS 2             /* quota layers a place is also counted in (model, endpoint) */
#define SHM_WAIT_EXCLUDED 4           /* replicas the waiter turned down */
struct shm_waiter {
    _Atomic uint32_t state;           /* enum shm_wait_state */
    int32_t row, pid;                 /* the owner process's row and pid */
    int32_t ep_slot;                  /* the endpoint whose queue it is in */
    int32_t quota_slot[SHM_WAIT_QUOTAS]; /* quota layers it also needs a place in, -1 = none */
    int32_t queue_quota;              /* the model layer whose queue length it counts in, -1 = none */
    int32_t priority;                 /* 0 highest */
    int32_t weight;                   /* its tenant's */
    int32_t granted_rep;              /* replica slot handed over with WAIT_GRANTED */
    int32_t excluded[SHM_WAIT_EXCLUDED];  /* replica slots not to hand it, -1 = none */
    int32_t only_rep;                 /* the one replica it can use (a stored response's), -1 = any */
    int64_t tenant_id, user_id;
    int64_t seq;                      /* arrival order */
    /* issue 19: the fairness tags as they were before its grant, put back when the
     * count across hosts refuses the place (lib/gate.c) */
    int64_t undo_tenant, undo_user, undo_user_vnow, undo_vnow, undo_tenant_start, undo_user_start;
};

/* R-PRIO-2: a fairness tag (virtual finish time) of a tenant or user on an endpoint. */
struct shm_fair {
    uint64_t key;                     /* hash of (endpoint slot, kind, id); 0 = free */
    int64_t finish;                   /* virtual time, in thousandths of a request */
    int64_t used_ms;                  /* last use (an idle tag may be reused) */
};

struct shm_gate {
    pthread_mutex_t lock;             /* robust; guards waiters, tags and every take */
    int32_t initialised;
    int32_t hi;                       /* waiters [0, hi) may be in use */
    int32_t recount;                  /* a holder died inside the lock: recount queue lengths */
    int32_t pad_;
    int64_t seq;
    struct shm_waiter waiters[SHM_MAX_WAITERS];
    int64_t vnow[SHM_MAX_ENDPOINTS];  /* each queue's virtual time */
    struct shm_fair fair[SHM_FAIR_SLOTS];
};

/* R-AFF-4: one mapping of the pool-wide affinity table (SHA-256 of the scoped
 * session key -> replica). */
struct shm_aff_entry {
    unsigned char hash[32];
    int64_t replica_id;               /* 0 = never used */
    int64_t last_used_ms;
};

#define SHM_AFF_SLOTS 100000          /* R-AFF-4: at most 100 000 entries */
#define SHM_AFF_OUTCOMES 4            /* hit, miss, overload, stale */
#define SHM_AFF_LEVELS 5              /* header, prompt_cache_key, user, l2, l1 */
#define SHM_AUTO_OUTCOMES 4           /* routed, degraded, failed, no_candidates */
#define SHM_AUTO_STRATEGIES 4         /* balanced, cost, latency, semantic */

struct shm_affinity {
    pthread_mutex_t lock;             /* robust; guards entries */
    int32_t initialised;
    int32_t pad_;
    _Atomic uint64_t outcomes[SHM_AFF_OUTCOMES][SHM_AFF_LEVELS];   /* R-AFF-6 */
    struct shm_aff_entry entries[SHM_AFF_SLOTS];
};

/* R-AUTO-4/6: observed time to first token per endpoint slot, and outcomes. */
struct shm_routing {
    _Atomic int64_t ttft_ewma_us[SHM_MAX_ENDPOINTS];   /* 0 = no sample yet */
    _Atomic uint64_t auto_outcomes[SHM_AUTO_OUTCOMES][SHM_AUTO_STRATEGIES];
};

/* R-SEC-6: authentication failures per client address (hash of it). */
struct shm_client {
    _Atomic uint64_t addr_hash;
    _Atomic int64_t window_start_ms;
    _Atomic int32_t failures;
    int32_t pad_;
};

/* R-OBS-1: the stored series of /metrics (lib/metrics.h reads and writes them).
 * A slot is claimed once under the pool lock (family and label text written,
 * then the key published); after that every update is an atomic add. */
#define SHM_MET_COUNTERS 16384
#define SHM_MET_HISTS 2048
#define SHM_MET_LABELS 200            /* label text of one series, escaped */
#define SHM_MET_BUCKETS 16            /* finite histogram bounds (metric_bucket_us) */
#define SHM_MET_MINUTES 16            /* the live view's ring of whole minutes */

struct shm_met_head {
    _Atomic uint64_t key;             /* hash of family + labels, never 0; 0 = free */
    int32_t metric;                   /* enum metric_id */
    int32_t pad_;
    char labels[SHM_MET_LABELS];
};

struct shm_met_counter {
    struct shm_met_head h;
    _Atomic uint64_t value;
};

struct shm_met_minute {
    _Atomic int64_t minute;           /* epoch minute these counts are of */
    _Atomic uint32_t count, errors;
    _Atomic uint32_t buckets[SHM_MET_BUCKETS + 1];
    uint32_t pad_;
};

struct shm_met_hist {
    struct shm_met_head h;
    _Atomic uint64_t buckets[SHM_MET_BUCKETS + 1];   /* per bucket; the last is above every bound */
    _Atomic uint64_t count;
    _Atomic int64_t sum_us;
    struct shm_met_minute live[SHM_MET_MINUTES];
};

/* R-GUARD-3: one content rule's matches (sluice_content_rule_matches_total).
 * Keyed by content_rules_key() (rule id and name); the names, action and
 * scope are rendered from the snapshot of the scrape, so a deleted rule's
 * counter is no longer shown. A full table hands its least recently used slot
 * to a new rule (that rule's counter restarts at 0, which Prometheus reads as
 * a reset). */
#define SHM_RULE_COUNTERS 256
struct shm_rule_counter {
    _Atomic uint64_t key;             /* 0 = free */
    _Atomic uint64_t matches;
    _Atomic int64_t used_ms;          /* last match (wall clock ms) */
};

struct shm_metrics {
    _Atomic uint64_t dropped;         /* series that found no room */
    _Atomic int64_t healthd_round_ms; /* sluice-healthd's last finished round (wall clock ms) */
    /* R-CACHE-3: bytes of the cached answers by kind (0 exact, 1 semantic): the
     * usage writers change them under SQLite's write lock with what they store
     * and delete, and sum the table again now and then (anything else that
     * deletes entries, such as an operator's purge, is caught up then). */
    _Atomic int64_t cache_bytes[2];
    _Atomic int64_t cache_summed_ms;  /* when a writer last summed cache_entries (wall clock ms, 0 = never) */
    struct shm_met_counter counters[SHM_MET_COUNTERS];
    struct shm_met_hist hists[SHM_MET_HISTS];
    struct shm_rule_counter rules[SHM_RULE_COUNTERS];
};

/* One row per live responder process; only that process writes its counters. */
struct shm_proc {
    _Atomic int pid;                  /* 0 = free */
    _Atomic uint64_t start_time;      /* /proc/PID/stat field 22, guards PID reuse */
    _Atomic int32_t active[SHM_MAX_REPLICAS];
    _Atomic int32_t key_active[SHM_MAX_KEYS];   /* R-KEY-3 concurrency, by key slot */
    _Atomic int32_t usage_backlog;    /* R-OBS-1: records queued in its usage writer */
    _Atomic int32_t shadow_inflight;  /* R-SHD-1: its mirrored requests in flight (shadow.max_inflight is pool-wide) */
    /* R-PRIO-1 / R-KEY-6: capacity held under a cap (taken and handed over
     * under the gate lock; a reaped row gives its places back) */
    _Atomic int32_t rep_held[SHM_MAX_REPLICAS];
    _Atomic int32_t ep_held[SHM_MAX_ENDPOINTS];
    _Atomic int32_t quota_active[SHM_MAX_QUOTAS];
};

struct shm_region {
    uint64_t magic;
    uint32_t version;
    uint32_t size;
    pthread_mutex_t lock;             /* robust, process-shared */
    _Atomic int rows_hi;              /* rows [0, rows_hi) may be in use */
    struct shm_replica replicas[SHM_MAX_REPLICAS];
    struct shm_endpoint endpoints[SHM_MAX_ENDPOINTS];
    struct shm_node nodes[SHM_MAX_NODES];
    struct shm_key keys[SHM_MAX_KEYS];
    struct shm_client clients[SHM_MAX_CLIENTS];
    struct shm_affinity affinity;
    struct shm_routing routing;
    struct shm_metrics metrics;
    struct shm_quota quotas[SHM_MAX_QUOTAS];
    struct shm_gate gate;
    struct shm_proc procs[SHM_MAX_PROCS];
};

/* A process's handle on the mapping; owned by main(), lives until exit. */
struct shm {
    struct shm_region *r;
    int row;                          /* this process's row, -1 if not registered */
};

/* Maps (creating and initialising if needed) the state file. 0 or -1 (logged). */
int shm_attach(struct shm *s, const char *path);
/* Claims a row for this process (reaping dead rows first). */
int shm_register(struct shm *s);
/* Clears rows of processes that no longer exist; returns how many. */
int shm_reap(struct shm *s);

/* Slot index for an id (allocated on first use), or -1 when the table is full. */
int shm_replica_slot(struct shm *s, int64_t replica_id);
int shm_endpoint_slot(struct shm *s, int64_t endpoint_id);
int shm_node_slot(struct shm *s, int64_t node_id);
int shm_key_slot(struct shm *s, int64_t key_id);   /* initialises the key's mutex */
int shm_quota_slot(struct shm *s, int64_t quota_id); /* initialises the quota's mutex */
/* The slot an id has, without claiming one: -1 when it has none. */
int shm_replica_find(const struct shm *s, int64_t replica_id);
int shm_endpoint_find(const struct shm *s, int64_t endpoint_id);
int shm_quota_find(const struct shm *s, int64_t quota_id);

/* Locks a robust process-shared mutex; a holder that died leaves the guarded
 * plain counters valid, so the mutex is made consistent. 0, -1; *owner_died
 * (may be NULL) says the previous holder died. */
int shm_robust_lock(pthread_mutex_t *m, int *owner_died);
/* Sum of a per-process counter (rows' arrays at byte offset off, index i) over live rows. */
int shm_row_sum(const struct shm *s, size_t off, int i);

void shm_active_add(struct shm *s, int slot, int delta);
int shm_active_sum(const struct shm *s, int slot);   /* over live rows */

/* Is pid still the process that started at start_time (/proc field 22)? A pid
 * that cannot be checked counts as alive. */
int shm_proc_alive(int pid, uint64_t start_time);
uint64_t shm_proc_start_time(int pid);

int shm_lock(struct shm *s);
void shm_unlock(struct shm *s);

#endif
