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
#define SHM_VERSION 1
#define SHM_MAX_PROCS 128
#define SHM_MAX_REPLICAS 4096
#define SHM_MAX_ENDPOINTS 1024

enum circuit_state { CIRCUIT_CLOSED, CIRCUIT_OPEN, CIRCUIT_HALF_OPEN };

/* R-HC-5 state of one replica, shared by the pool. */
struct shm_replica {
    _Atomic int64_t id;               /* replica id owning the slot, 0 = free */
    _Atomic int64_t ban_until_ms;
    _Atomic int64_t open_until_ms;
    _Atomic int failures;             /* consecutive proxy failures */
    _Atomic int circuit;              /* enum circuit_state */
    _Atomic int trials;               /* half-open trial requests handed out */
    int pad_;
};

struct shm_endpoint {
    _Atomic int64_t id;
    _Atomic uint64_t rr;              /* round-robin position, pool-wide */
};

/* One row per live responder process; only that process writes its counters. */
struct shm_proc {
    _Atomic int pid;                  /* 0 = free */
    _Atomic uint64_t start_time;      /* /proc/PID/stat field 22, guards PID reuse */
    _Atomic int32_t active[SHM_MAX_REPLICAS];
};

struct shm_region {
    uint64_t magic;
    uint32_t version;
    uint32_t size;
    pthread_mutex_t lock;             /* robust, process-shared */
    _Atomic int rows_hi;              /* rows [0, rows_hi) may be in use */
    struct shm_replica replicas[SHM_MAX_REPLICAS];
    struct shm_endpoint endpoints[SHM_MAX_ENDPOINTS];
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

void shm_active_add(struct shm *s, int slot, int delta);
int shm_active_sum(const struct shm *s, int slot);   /* over live rows */

int shm_lock(struct shm *s);
void shm_unlock(struct shm *s);

#endif
