/* metrics.c: the stored series of /metrics in the shared state (metrics.h). */
#include "metrics.h"

#include <stdio.h>
#include <string.h>

_Static_assert(MET_BUCKETS == SHM_MET_BUCKETS, "metrics.h and shm.h bucket counts");

static const struct metric_def defs[] = {
#define METRIC(id, name, type, source, help) {name, type, source, help},
#include "metrics.def"
#undef METRIC
};

const struct metric_def *metric_get(enum metric_id id)
{
    return (unsigned)id < MET__COUNT ? &defs[id] : NULL;
}

/* 5 ms .. 10 min: a cache hit, a short answer, a long generation. */
const int64_t metric_bucket_us[MET_BUCKETS] = {
    5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000,
    2500000, 5000000, 10000000, 30000000, 60000000, 120000000, 300000000, 600000000,
};

static uint64_t series_key(enum metric_id m, const char *labels)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)m;   /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)labels; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h ? h : 1;
}

#define HEAD_AT(table, stride, i) ((struct shm_met_head *)((char *)(table) + (size_t)(i) * (stride)))

static int series_is(const struct shm_met_head *e, uint64_t cur, uint64_t key, enum metric_id m, const char *labels)
{
    return cur == key && e->metric == (int32_t)m && strcmp(e->labels, labels) == 0;
}

/* Slots a lookup looks at from its hash: a crowded or full table costs a
 * request at most this many probes (and one lock for a series that finds no
 * room, then dropped and counted), never a scan of the whole table. */
#define MET_PROBE 128

/* The slot of a series in a table of n entries (each starting with a
 * shm_met_head, stride bytes apart), claimed when absent; -1: no room. An
 * existing series is found without a lock; a claim takes the pool lock so
 * two processes never claim the same series twice. */
static int series_slot(struct shm *s, void *table, size_t stride, int n, enum metric_id m, const char *labels)
{
    if (strlen(labels) >= SHM_MET_LABELS)
        return -1;
    uint64_t key = series_key(m, labels);
    int start = (int)(key % (uint64_t)n);
    int probe = n < MET_PROBE ? n : MET_PROBE;
    for (int k = 0; k < probe; k++) {
        struct shm_met_head *e = HEAD_AT(table, stride, (start + k) % n);
        uint64_t cur = atomic_load_explicit(&e->key, memory_order_acquire);
        if (cur == 0)
            break;
        if (series_is(e, cur, key, m, labels))
            return (start + k) % n;
    }
    if (shm_lock(s) != 0)
        return -1;
    int found = -1;
    for (int k = 0; k < probe && found < 0; k++) {
        struct shm_met_head *e = HEAD_AT(table, stride, (start + k) % n);
        uint64_t cur = atomic_load_explicit(&e->key, memory_order_acquire);
        if (cur == 0) {
            e->metric = (int32_t)m;
            memcpy(e->labels, labels, strlen(labels) + 1);
            atomic_store_explicit(&e->key, key, memory_order_release);
            found = (start + k) % n;
        } else if (series_is(e, cur, key, m, labels)) {
            found = (start + k) % n;
        }
    }
    shm_unlock(s);
    return found;
}

void metrics_add(struct shm *s, enum metric_id m, const char *labels, uint64_t n)
{
    if (!s || !s->r)
        return;
    struct shm_metrics *t = &s->r->metrics;
    int i = series_slot(s, t->counters, sizeof t->counters[0], SHM_MET_COUNTERS, m, labels ? labels : "");
    if (i < 0) {
        atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&t->counters[i].value, n, memory_order_relaxed);
}

static int bucket_of(int64_t us)
{
    int b = 0;
    while (b < MET_BUCKETS && us > metric_bucket_us[b])
        b++;
    return b;
}

void metrics_observe(struct shm *s, enum metric_id m, const char *labels, int64_t us, int error, int64_t now)
{
    if (!s || !s->r)
        return;
    struct shm_metrics *t = &s->r->metrics;
    int i = series_slot(s, t->hists, sizeof t->hists[0], SHM_MET_HISTS, m, labels ? labels : "");
    if (i < 0) {
        atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
        return;
    }
    if (us < 0)
        us = 0;
    struct shm_met_hist *h = &t->hists[i];
    int b = bucket_of(us);
    atomic_fetch_add_explicit(&h->buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    int64_t minute = now / 60000;
    struct shm_met_minute *w = &h->live[minute % SHM_MET_MINUTES];
    if (atomic_load_explicit(&w->minute, memory_order_acquire) != minute && shm_lock(s) == 0) {
        /* The first observation of a new minute recycles the slot, once. */
        if (atomic_load(&w->minute) != minute) {
            atomic_store(&w->count, 0);
            atomic_store(&w->errors, 0);
            for (int k = 0; k <= MET_BUCKETS; k++)
                atomic_store(&w->buckets[k], 0);
            atomic_store_explicit(&w->minute, minute, memory_order_release);
        }
        shm_unlock(s);
    }
    atomic_fetch_add_explicit(&w->count, 1, memory_order_relaxed);
    if (error)
        atomic_fetch_add_explicit(&w->errors, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->buckets[b], 1, memory_order_relaxed);
}

int metrics_label(char *out, size_t cap, size_t len, const char *name, const char *value)
{
    if (len >= cap)
        return -1;
    size_t n = len, name_len = strlen(name);
    if (n + (n ? 1 : 0) + name_len + 2 >= cap)
        goto full;
    if (n)
        out[n++] = ',';
    memcpy(out + n, name, name_len);
    n += name_len;
    out[n++] = '=';
    out[n++] = '"';
    for (const char *p = value ? value : ""; *p; p++) {
        const char *esc = *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p == '\n' ? "\\n" : NULL;
        size_t need = esc ? 2 : 1;
        if (n + need + 2 > cap)
            goto full;
        if (esc) {
            memcpy(out + n, esc, 2);
        } else {
            out[n] = *p;
        }
        n += need;
    }
    if (n + 2 > cap)
        goto full;
    out[n++] = '"';
    out[n] = '\0';
    return (int)n;
full:
    out[len] = '\0';
    return -1;
}

void metrics_each_counter(const struct shm *s, enum metric_id m,
                          void (*fn)(void *ctx, const char *labels, uint64_t value), void *ctx)
{
    const struct shm_metrics *t = &s->r->metrics;
    for (int i = 0; i < SHM_MET_COUNTERS; i++) {
        const struct shm_met_counter *e = &t->counters[i];
        if (atomic_load_explicit(&e->h.key, memory_order_acquire) == 0 || e->h.metric != (int32_t)m)
            continue;
        fn(ctx, e->h.labels, atomic_load_explicit(&e->value, memory_order_relaxed));
    }
}

static void hist_read(const struct shm_met_hist *e, struct metric_hist_read *h)
{
    h->sum_us = atomic_load_explicit(&e->sum_us, memory_order_relaxed);
    uint64_t total = 0;
    for (int b = 0; b <= MET_BUCKETS; b++) {
        h->buckets[b] = atomic_load_explicit(&e->buckets[b], memory_order_relaxed);
        total += h->buckets[b];
    }
    /* Prometheus requires +Inf == _count; read while observations go on,
     * the buckets' total is the one consistent count. */
    h->count = total;
}

void metrics_each_hist(const struct shm *s, enum metric_id m,
                       void (*fn)(void *ctx, const char *labels, const struct metric_hist_read *h), void *ctx)
{
    const struct shm_metrics *t = &s->r->metrics;
    for (int i = 0; i < SHM_MET_HISTS; i++) {
        const struct shm_met_hist *e = &t->hists[i];
        if (atomic_load_explicit(&e->h.key, memory_order_acquire) == 0 || e->h.metric != (int32_t)m)
            continue;
        struct metric_hist_read h;
        hist_read(e, &h);
        fn(ctx, e->h.labels, &h);
    }
}

/* Chains the used slots of a table by family: walked backwards so that each
 * slot is put in front and the chains come out in table order. */
static void index_table(const void *table, size_t stride, int n, int32_t *first, int32_t *next)
{
    for (int i = n - 1; i >= 0; i--) {
        const struct shm_met_head *e = (const struct shm_met_head *)((const char *)table + (size_t)i * stride);
        next[i] = -1;
        if (atomic_load_explicit(&e->key, memory_order_acquire) == 0)
            continue;
        if ((unsigned)e->metric >= MET__COUNT)
            continue;
        next[i] = first[e->metric];
        first[e->metric] = i;
    }
}

void metrics_index(const struct shm *s, struct metric_index *ix)
{
    const struct shm_metrics *t = &s->r->metrics;
    int32_t first_hist[MET__COUNT];
    for (int m = 0; m < MET__COUNT; m++)
        ix->first[m] = first_hist[m] = -1;
    index_table(t->counters, sizeof t->counters[0], SHM_MET_COUNTERS, ix->first, ix->next_counter);
    index_table(t->hists, sizeof t->hists[0], SHM_MET_HISTS, first_hist, ix->next_hist);
    /* A family is a counter or a histogram: its chain is in its own table. */
    for (int m = 0; m < MET__COUNT; m++)
        if (defs[m].type == HISTOGRAM)
            ix->first[m] = first_hist[m];
}

void metrics_index_counters(const struct shm *s, const struct metric_index *ix, enum metric_id m,
                            void (*fn)(void *ctx, const char *labels, uint64_t value), void *ctx)
{
    if ((unsigned)m >= MET__COUNT || defs[m].type == HISTOGRAM)
        return;
    const struct shm_metrics *t = &s->r->metrics;
    for (int i = ix->first[m]; i >= 0; i = ix->next_counter[i])
        fn(ctx, t->counters[i].h.labels, atomic_load_explicit(&t->counters[i].value, memory_order_relaxed));
}

void metrics_index_hists(const struct shm *s, const struct metric_index *ix, enum metric_id m,
                         void (*fn)(void *ctx, const char *labels, const struct metric_hist_read *h), void *ctx)
{
    if ((unsigned)m >= MET__COUNT || defs[m].type != HISTOGRAM)
        return;
    const struct shm_metrics *t = &s->r->metrics;
    for (int i = ix->first[m]; i >= 0; i = ix->next_hist[i]) {
        struct metric_hist_read h;
        hist_read(&t->hists[i], &h);
        fn(ctx, t->hists[i].h.labels, &h);
    }
}

void metrics_window(const struct shm *s, enum metric_id m, const char *match, int minutes, int64_t now,
                    struct metric_window *out)
{
    memset(out, 0, sizeof *out);
    if (minutes < 1)
        minutes = 1;
    if (minutes > SHM_MET_MINUTES - 1)
        minutes = SHM_MET_MINUTES - 1;
    int64_t cur = now / 60000;
    const struct shm_metrics *t = &s->r->metrics;
    for (int i = 0; i < SHM_MET_HISTS; i++) {
        const struct shm_met_hist *e = &t->hists[i];
        if (atomic_load_explicit(&e->h.key, memory_order_acquire) == 0 || e->h.metric != (int32_t)m)
            continue;
        if (match && *match && !strstr(e->h.labels, match))
            continue;
        for (int k = 0; k <= minutes; k++) {
            const struct shm_met_minute *w = &e->live[(cur - k) % SHM_MET_MINUTES];
            if (atomic_load_explicit(&w->minute, memory_order_acquire) != cur - k)
                continue;
            out->count += atomic_load_explicit(&w->count, memory_order_relaxed);
            out->errors += atomic_load_explicit(&w->errors, memory_order_relaxed);
            for (int b = 0; b <= MET_BUCKETS; b++)
                out->buckets[b] += atomic_load_explicit(&w->buckets[b], memory_order_relaxed);
        }
    }
}

int64_t metrics_quantile_us(const uint64_t buckets[MET_BUCKETS + 1], double q)
{
    uint64_t total = 0;
    for (int b = 0; b <= MET_BUCKETS; b++)
        total += buckets[b];
    if (total == 0)
        return -1;
    double rank = q * (double)total, seen = 0;
    for (int b = 0; b <= MET_BUCKETS; b++) {
        if (buckets[b] == 0 || seen + (double)buckets[b] < rank) {
            seen += (double)buckets[b];
            continue;
        }
        if (b == MET_BUCKETS)
            return metric_bucket_us[MET_BUCKETS - 1];   /* above the last bound: the bound, as Prometheus */
        double lo = b == 0 ? 0 : (double)metric_bucket_us[b - 1], hi = (double)metric_bucket_us[b];
        return (int64_t)(lo + (hi - lo) * ((rank - seen) / (double)buckets[b]));
    }
    return metric_bucket_us[MET_BUCKETS - 1];
}

uint64_t metrics_dropped(const struct shm *s)
{
    return atomic_load_explicit(&s->r->metrics.dropped, memory_order_relaxed);
}

void metrics_drop(struct shm *s)
{
    if (s && s->r)
        atomic_fetch_add_explicit(&s->r->metrics.dropped, 1, memory_order_relaxed);
}

/* R-GUARD-3: the per-rule table is small (SHM_RULE_COUNTERS): open addressing
 * from the key's hash; a free slot is claimed with a compare-and-swap, a full
 * table's least recently used slot under the pool lock. */
static int rule_find(const struct shm *s, uint64_t key, int *free_slot)
{
    const struct shm_rule_counter *t = s->r->metrics.rules;
    if (free_slot)
        *free_slot = -1;
    int start = (int)(key % SHM_RULE_COUNTERS);
    for (int k = 0; k < SHM_RULE_COUNTERS; k++) {
        int i = (start + k) % SHM_RULE_COUNTERS;
        uint64_t cur = atomic_load(&t[i].key);
        if (cur == key)
            return i;
        if (cur == 0) {
            if (free_slot)
                *free_slot = i;
            return -1;
        }
    }
    return -1;
}

void metrics_rule_add(struct shm *s, uint64_t key, int64_t now_ms)
{
    if (!s || !s->r || key == 0)
        return;
    struct shm_rule_counter *t = s->r->metrics.rules;
    int free_slot, i = rule_find(s, key, &free_slot);
    while (i < 0 && free_slot >= 0) {
        uint64_t expect = 0;
        if (atomic_compare_exchange_strong(&t[free_slot].key, &expect, key) || expect == key)
            i = free_slot;
        else
            i = rule_find(s, key, &free_slot);   /* another rule took it: look again */
    }
    if (i < 0) {
        if (shm_lock(s) != 0)
            return;
        i = rule_find(s, key, NULL);
        if (i < 0) {
            i = 0;
            for (int k = 1; k < SHM_RULE_COUNTERS; k++)
                if (atomic_load(&t[k].used_ms) < atomic_load(&t[i].used_ms))
                    i = k;
            /* the table is full, so no probe stops early; an add of the old
             * rule racing with this may land in the new one's count */
            atomic_store(&t[i].matches, 0);
            atomic_store(&t[i].key, key);
        }
        shm_unlock(s);
    }
    atomic_fetch_add_explicit(&t[i].matches, 1, memory_order_relaxed);
    atomic_store_explicit(&t[i].used_ms, now_ms, memory_order_relaxed);
}

uint64_t metrics_rule_value(const struct shm *s, uint64_t key)
{
    if (!s || !s->r || key == 0)
        return 0;
    int i = rule_find(s, key, NULL);
    return i < 0 ? 0 : atomic_load_explicit(&s->r->metrics.rules[i].matches, memory_order_relaxed);
}
