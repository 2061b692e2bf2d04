/* shm.c: create, map and maintain the pool-wide shared state file. */
#include "shm.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t shm_proc_start_time(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* Field 2 (comm) may contain spaces; count fields after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    int field = 2;
    for (p++; *p && field < 22; p++)
        if (*p == ' ')
            field++;
    return strtoull(p, NULL, 10);
}

int shm_proc_alive(int pid, uint64_t start_time)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    uint64_t now_start = shm_proc_start_time(pid);
    return now_start == 0 || now_start == start_time;
}

/* fresh: the file was just made by ftruncate, so it reads as zeros already;
 * clearing it again would make every page of it resident (30 MB) in the
 * process that created it. */
static int shm_init_region(struct shm_region *r, int fresh)
{
    if (!fresh)
        memset(r, 0, sizeof *r);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(&r->lock, &a);
    if (rc == 0)
        rc = pthread_mutex_init(&r->affinity.lock, &a);
    if (rc == 0)
        rc = pthread_mutex_init(&r->gate.lock, &a);
    r->gate.initialised = 1;
    pthread_mutexattr_destroy(&a);
    if (rc != 0)
        return -1;
    r->version = SHM_VERSION;
    r->size = (uint32_t)sizeof *r;
    atomic_thread_fence(memory_order_release);
    r->magic = SHM_MAGIC;               /* last: marks the region complete */
    return 0;
}

static int shm_attach_once(struct shm *s, const char *path, int *stale);

/* A state file of another layout (an older or newer sluice) is moved aside to
 * PATH.stale and a fresh one made: processes of the other version keep the
 * mapping they have, so an upgrade restarts the counters instead of refusing
 * to start (the call and token quotas reload from SQLite). */
int shm_attach(struct shm *s, const char *path)
{
    int stale = 0;
    int rc = shm_attach_once(s, path, &stale);
    if (rc != 0 && stale) {
        char aside[4096];
        snprintf(aside, sizeof aside, "%s.stale", path);
        int moved = rename(path, aside) == 0;
        if (moved || errno == ENOENT) {      /* ENOENT: a process starting with us moved it first */
            if (moved)
                log_warn("state file %s was of another layout; moved to %s, starting a fresh one", path, aside);
            rc = shm_attach_once(s, path, &stale);
        }
    }
    return rc;
}

static int shm_attach_once(struct shm *s, const char *path, int *stale)
{
    s->r = NULL;
    s->row = -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        log_error("state file %s: %s", path, strerror(errno));
        return -1;
    }
    /* flock serialises first-time creation between processes starting together. */
    flock(fd, LOCK_EX);
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) != 0)
        goto out;
    int fresh = st.st_size == 0;
    if (fresh && ftruncate(fd, (off_t)sizeof(struct shm_region)) != 0) {
        log_error("state file %s: ftruncate: %s", path, strerror(errno));
        goto out;
    }
    if (!fresh && (size_t)st.st_size != sizeof(struct shm_region)) {
        log_error("state file %s has another layout (size %lld)", path, (long long)st.st_size);
        *stale = 1;
        goto out;
    }
    void *m = mmap(NULL, sizeof(struct shm_region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        log_error("state file %s: mmap: %s", path, strerror(errno));
        goto out;
    }
    s->r = m;
    if (fresh || s->r->magic != SHM_MAGIC) {
        if (shm_init_region(s->r, fresh) != 0)
            goto out;
    } else if (s->r->version != SHM_VERSION) {
        log_error("state file %s has version %u, this build needs %u", path, s->r->version,
                  SHM_VERSION);
        munmap(m, sizeof(struct shm_region));
        s->r = NULL;
        *stale = 1;
        goto out;
    }
    rc = 0;
out:
    flock(fd, LOCK_UN);
    close(fd);
    return rc;
}

int shm_lock(struct shm *s)
{
    int rc = pthread_mutex_lock(&s->r->lock);
    if (rc == EOWNERDEAD) {
        /* The holder died mid-transition; the guarded fields are plain
         * counters that stay valid, so mark the mutex consistent and go on. */
        pthread_mutex_consistent(&s->r->lock);
        rc = 0;
    }
    return rc == 0 ? 0 : -1;
}

void shm_unlock(struct shm *s) { pthread_mutex_unlock(&s->r->lock); }

static void shm_clear_row(struct shm_proc *p)
{
    for (int i = 0; i < SHM_MAX_REPLICAS; i++)
        atomic_store(&p->active[i], 0);
    for (int i = 0; i < SHM_MAX_KEYS; i++)
        atomic_store(&p->key_active[i], 0);
    atomic_store(&p->usage_backlog, 0);
    atomic_store(&p->shadow_inflight, 0);
    for (int i = 0; i < SHM_MAX_REPLICAS; i++)
        atomic_store(&p->rep_held[i], 0);
    for (int i = 0; i < SHM_MAX_ENDPOINTS; i++)
        atomic_store(&p->ep_held[i], 0);
    for (int i = 0; i < SHM_MAX_QUOTAS; i++)
        atomic_store(&p->quota_active[i], 0);
    atomic_store(&p->start_time, 0);
    atomic_store(&p->pid, 0);
}

int shm_reap(struct shm *s)
{
    int reaped = 0;
    /* Only rows ever used: reading a pid maps the pages around it (the kernel's
     * fault-around), and all 128 rows of 56 KB would be 7 MB of RSS in every
     * responder, the reaper's once a second. */
    int hi = atomic_load(&s->r->rows_hi);
    for (int i = 0; i < hi && i < SHM_MAX_PROCS; i++) {
        struct shm_proc *p = &s->r->procs[i];
        int pid = atomic_load(&p->pid);
        if (pid == 0 || i == s->row)
            continue;
        if (!shm_proc_alive(pid, atomic_load(&p->start_time))) {
            if (shm_lock(s) != 0)
                continue;
            if (atomic_load(&p->pid) == pid) {
                /* Under the gate's lock too: it hands places to rows (lib/gate.c). */
                int died = 0, gated = shm_robust_lock(&s->r->gate.lock, &died) == 0;
                if (died)
                    s->r->gate.recount = 1;
                /* Its waiters go with it: a queue full of the dead would refuse every
                 * newcomer while the replicas idle. The next gate call recounts. */
                for (int w = 0; gated && w < s->r->gate.hi; w++) {
                    struct shm_waiter *e = &s->r->gate.waiters[w];
                    if (atomic_load(&e->state) != WAIT_FREE && e->row == i && e->pid == pid) {
                        atomic_store(&e->state, WAIT_FREE);
                        s->r->gate.recount = 1;
                    }
                }
                shm_clear_row(p);
                if (gated)
                    pthread_mutex_unlock(&s->r->gate.lock);
                reaped++;
                log_info("reaped shared-state row %d of dead process %d", i, pid);
            }
            shm_unlock(s);
        }
    }
    return reaped;
}

int shm_register(struct shm *s)
{
    shm_reap(s);
    if (shm_lock(s) != 0)
        return -1;
    int me = getpid();
    for (int i = 0; i < SHM_MAX_PROCS; i++) {
        struct shm_proc *p = &s->r->procs[i];
        if (atomic_load(&p->pid) != 0)
            continue;
        int died = 0, gated = shm_robust_lock(&s->r->gate.lock, &died) == 0;
        if (died)
            s->r->gate.recount = 1;
        shm_clear_row(p);
        if (gated)
            pthread_mutex_unlock(&s->r->gate.lock);
        atomic_store(&p->start_time, shm_proc_start_time(me));
        atomic_store(&p->pid, me);
        s->row = i;
        if (atomic_load(&s->r->rows_hi) <= i)
            atomic_store(&s->r->rows_hi, i + 1);
        break;
    }
    shm_unlock(s);
    if (s->row < 0) {
        log_error("shared state: all %d process rows are in use", SHM_MAX_PROCS);
        return -1;
    }
    return 0;
}

static int slot_for(_Atomic int64_t *ids, size_t stride, int cap, int64_t id)
{
    if (id <= 0)
        return -1;
    int start = (int)((uint64_t)id * 2654435761u % (uint64_t)cap);
    for (int k = 0; k < cap; k++) {
        int i = (start + k) % cap;
        _Atomic int64_t *slot = (_Atomic int64_t *)((char *)ids + (size_t)i * stride);
        int64_t cur = atomic_load(slot);
        if (cur == id)
            return i;
        if (cur == 0) {
            int64_t expect = 0;
            if (atomic_compare_exchange_strong(slot, &expect, id) || expect == id)
                return i;
        }
    }
    return -1;
}

static int slot_find(const _Atomic int64_t *ids, size_t stride, int cap, int64_t id)
{
    if (id <= 0)
        return -1;
    int start = (int)((uint64_t)id * 2654435761u % (uint64_t)cap);
    for (int k = 0; k < cap; k++) {
        int i = (start + k) % cap;
        int64_t cur = atomic_load((const _Atomic int64_t *)((const char *)ids + (size_t)i * stride));
        if (cur == id)
            return i;
        if (cur == 0)
            return -1;
    }
    return -1;
}

int shm_replica_find(const struct shm *s, int64_t id)
{
    return slot_find(&s->r->replicas[0].id, sizeof(struct shm_replica), SHM_MAX_REPLICAS, id);
}

int shm_endpoint_find(const struct shm *s, int64_t id)
{
    return slot_find(&s->r->endpoints[0].id, sizeof(struct shm_endpoint), SHM_MAX_ENDPOINTS, id);
}

int shm_quota_find(const struct shm *s, int64_t id)
{
    return slot_find(&s->r->quotas[0].id, sizeof(struct shm_quota), SHM_MAX_QUOTAS, id);
}

int shm_replica_slot(struct shm *s, int64_t replica_id)
{
    return slot_for(&s->r->replicas[0].id, sizeof(struct shm_replica), SHM_MAX_REPLICAS, replica_id);
}

int shm_endpoint_slot(struct shm *s, int64_t endpoint_id)
{
    return slot_for(&s->r->endpoints[0].id, sizeof(struct shm_endpoint), SHM_MAX_ENDPOINTS,
                    endpoint_id);
}

int shm_node_slot(struct shm *s, int64_t node_id)
{
    return slot_for(&s->r->nodes[0].id, sizeof(struct shm_node), SHM_MAX_NODES, node_id);
}

int shm_key_slot(struct shm *s, int64_t key_id)
{
    int slot = slot_for(&s->r->keys[0].id, sizeof(struct shm_key), SHM_MAX_KEYS, key_id);
    if (slot < 0)
        return -1;
    struct shm_key *k = &s->r->keys[slot];
    if (!__atomic_load_n(&k->initialised, __ATOMIC_ACQUIRE) && shm_lock(s) == 0) {
        /* The pool lock makes the one-time mutex set-up happen once. */
        if (!k->initialised) {
            pthread_mutexattr_t a;
            pthread_mutexattr_init(&a);
            pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
            pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
            pthread_mutex_init(&k->lock, &a);
            pthread_mutexattr_destroy(&a);
            __atomic_store_n(&k->initialised, 1, __ATOMIC_RELEASE);
        }
        shm_unlock(s);
    }
    return slot;
}

int shm_quota_slot(struct shm *s, int64_t quota_id)
{
    int slot = slot_for(&s->r->quotas[0].id, sizeof(struct shm_quota), SHM_MAX_QUOTAS, quota_id);
    if (slot < 0)
        return -1;
    struct shm_quota *q = &s->r->quotas[slot];
    if (!__atomic_load_n(&q->initialised, __ATOMIC_ACQUIRE) && shm_lock(s) == 0) {
        if (!q->initialised) {
            pthread_mutexattr_t a;
            pthread_mutexattr_init(&a);
            pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
            pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
            pthread_mutex_init(&q->lock, &a);
            pthread_mutexattr_destroy(&a);
            __atomic_store_n(&q->initialised, 1, __ATOMIC_RELEASE);
        }
        shm_unlock(s);
    }
    return slot;
}

int shm_robust_lock(pthread_mutex_t *m, int *owner_died)
{
    int rc = pthread_mutex_lock(m);
    if (owner_died)
        *owner_died = rc == EOWNERDEAD;
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(m);
        rc = 0;
    }
    return rc == 0 ? 0 : -1;
}

int shm_row_sum(const struct shm *s, size_t off, int i)
{
    int sum = 0, hi = atomic_load_explicit(&s->r->rows_hi, memory_order_acquire);
    for (int r = 0; r < hi && r < SHM_MAX_PROCS; r++) {
        const struct shm_proc *p = &s->r->procs[r];
        if (atomic_load_explicit(&p->pid, memory_order_acquire) == 0)
            continue;
        const _Atomic int32_t *a = (const _Atomic int32_t *)((const char *)p + off);
        /* seq_cst: a release's decrement and a waiter's count-then-sum must not both miss (gate.c) */
        sum += atomic_load_explicit(&a[i], memory_order_seq_cst);
    }
    return sum;
}

void shm_active_add(struct shm *s, int slot, int delta)
{
    if (slot < 0 || s->row < 0)
        return;
    atomic_fetch_add_explicit(&s->r->procs[s->row].active[slot], delta, memory_order_relaxed);
}

int shm_active_sum(const struct shm *s, int slot)
{
    if (slot < 0)
        return 0;
    int sum = 0, hi = atomic_load_explicit(&s->r->rows_hi, memory_order_relaxed);
    for (int i = 0; i < hi && i < SHM_MAX_PROCS; i++) {
        const struct shm_proc *p = &s->r->procs[i];
        if (atomic_load_explicit(&p->pid, memory_order_relaxed) == 0)
            continue;
        sum += atomic_load_explicit(&p->active[slot], memory_order_relaxed);
    }
    return sum;
}
