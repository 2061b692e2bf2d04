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
#define SHM_VERSION 2
#define SHM_MAX_PROCS 128
#define SHM_MAX_REPLICAS 4096
#define SHM_MAX_ENDPOINTS 1024
#define SHM_MAX_NODES 256
#define SHM_MAX_KEYS 4096
#define SHM_QPS_RING 256              /* exact sliding window up to this qps_limit */
#define SHM_MAX_CLIENTS 1024          /* client addresses tracked for auth failures */

enum circuit_state { CIRCUIT_CLOSED, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN };

/* R-HC-5 state of one replica, shared by the pool. */
struct shm_replica {
    _Atomic int64_t id;               /* replica id owning the slot, 0 = free */
    _Atomic int64_t ban_until_ms;
    _Atomic int64_t open_until_ms;
    _Atomic int failures;             /* consecutive proxy failures */
    _Atomic int circuit;              /* enum circuit_state */
    _Atomic int trials;               /* half-open trial requests handed out */
    _Atomic int removed;              /* R-HC-2: taken out by sluice-healthd */
    /* R-LB-2, R-HC-6: engine metrics written by sluice-healthd's scraper. */
    _Atomic int64_t metrics_ms;       /* when scraped (wall clock ms), 0 = never */
    _Atomic int32_t waiting;          /* vllm:num_requests_waiting */
    _Atomic int32_t running;          /* vllm:num_requests_running */
    _Atomic int32_t kv_permille;      /* 1000 x vllm:kv_cache_usage_perc */
    int32_t pad_;
};

struct shm_endpoint {
    _Atomic int64_t id;
    _Atomic uint64_t rr;              /* round-robin position, pool-wide */
    _Atomic int64_t wake_started_ms;  /* R-WAKE-3: one wake for many requests; 0 = none */
    _Atomic int wake_state;           /* 0 idle, 1 waking, 2 failed */
    int pad_;
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
};

/* R-SEC-6: authentication failures per client address (hash of it). */
struct shm_client {
    _Atomic uint64_t addr_hash;
    _Atomic int64_t window_start_ms;
    _Atomic int32_t failures;
    int32_t pad_;
};

/* One row per live responder process; only that process writes its counters. */
struct shm_proc {
    _Atomic int pid;                  /* 0 = free */
    _Atomic uint64_t start_time;      /* /proc/PID/stat field 22, guards PID reuse */
    _Atomic int32_t active[SHM_MAX_REPLICAS];
    _Atomic int32_t key_active[SHM_MAX_KEYS];   /* R-KEY-3 concurrency, by key slot */
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

void shm_active_add(struct shm *s, int slot, int delta);
int shm_active_sum(const struct shm *s, int slot);   /* over live rows */

int shm_lock(struct shm *s);
void shm_unlock(struct shm *s);

#endif
