/* metrics.h: the pool-wide series tables behind /metrics (R-OBS-1).
 *
 * Counters and histograms live in the shared state file, not in a process:
 * every responder adds to the same atomics, so a responder killed at any
 * instruction loses nothing it counted and a restart keeps counting from
 * where the pool was (the file outlives the processes). A series is found by
 * a hash of its family and label text; a new one is claimed under the pool
 * lock, an existing one is a lock-free atomic add. The families are the rows
 * of metrics.def. */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include "shm.h"

#include <stdint.h>

enum metric_type { COUNTER, GAUGE, HISTOGRAM };
enum metric_source { STORED, DERIVED };

enum metric_id {
#define METRIC(id, name, type, source, help) MET_##id,
#include "metrics.def"
#undef METRIC
    MET__COUNT
};

struct metric_def {
    const char *name;
    enum metric_type type;
    enum metric_source source;
    const char *help;
};

const struct metric_def *metric_get(enum metric_id id);

/* Histogram bucket upper bounds in microseconds (le= in seconds when shown). */
#define MET_BUCKETS 16
extern const int64_t metric_bucket_us[MET_BUCKETS];

/* Adds n to the counter series of family m with the label text labels
 * (already escaped, e.g. `model="a",status="200"`; "" for none). A label
 * text longer than SHM_MET_LABELS, or a full table, counts into
 * metrics_dropped() instead. */
void metrics_add(struct shm *s, enum metric_id m, const char *labels, uint64_t n);
/* Records one observation of us microseconds in the histogram series; error
 * marks it as a failed request in the live per-minute view. */
void metrics_observe(struct shm *s, enum metric_id m, const char *labels, int64_t us, int error, int64_t now_ms);

/* Appends `"value"` with Prometheus escaping (\\, \", \n) to out (cap bytes,
 * always terminated); returns the new length or -1 when it did not fit. */
int metrics_label(char *out, size_t cap, size_t len, const char *name, const char *value);

/* Iteration over the stored series of one family, in table order; the
 * callbacks receive the label text and the values read atomically now. */
struct metric_hist_read {
    uint64_t buckets[MET_BUCKETS + 1];   /* per bucket, not cumulative; [MET_BUCKETS] = above the last bound */
    uint64_t count;
    int64_t sum_us;
};
void metrics_each_counter(const struct shm *s, enum metric_id m,
                          void (*fn)(void *ctx, const char *labels, uint64_t value), void *ctx);
void metrics_each_hist(const struct shm *s, enum metric_id m,
                       void (*fn)(void *ctx, const char *labels, const struct metric_hist_read *h), void *ctx);

/* A scrape reads every family: one pass over each table groups the used
 * slots by family, where each_counter/each_hist would scan the whole table
 * once per family (16 384 counter slots x 9 families). Slots of a family are
 * chained in table order; -1 ends a chain. */
struct metric_index {
    int32_t first[MET__COUNT];
    int32_t next_counter[SHM_MET_COUNTERS];
    int32_t next_hist[SHM_MET_HISTS];
};
void metrics_index(const struct shm *s, struct metric_index *ix);
void metrics_index_counters(const struct shm *s, const struct metric_index *ix, enum metric_id m,
                            void (*fn)(void *ctx, const char *labels, uint64_t value), void *ctx);
void metrics_index_hists(const struct shm *s, const struct metric_index *ix, enum metric_id m,
                         void (*fn)(void *ctx, const char *labels, const struct metric_hist_read *h), void *ctx);

/* The live view (R-OBS, Live tab): the sum over the series of family m whose
 * labels contain match ("" = all) of the last `minutes` whole and current
 * minutes (at most SHM_MET_MINUTES - 1). */
struct metric_window {
    uint64_t count, errors;
    uint64_t buckets[MET_BUCKETS + 1];
};
void metrics_window(const struct shm *s, enum metric_id m, const char *match, int minutes, int64_t now_ms,
                    struct metric_window *out);

/* The q-quantile (0..1) of bucket counts, interpolated inside the bucket as
 * Prometheus' histogram_quantile does; microseconds, -1 when empty. */
int64_t metrics_quantile_us(const uint64_t buckets[MET_BUCKETS + 1], double q);

/* R-GUARD-3: one match of the content rule with counter key key (its
 * content_rules_key()), and the count so far (0 for a key never seen). */
void metrics_rule_add(struct shm *s, uint64_t key, int64_t now_ms);
uint64_t metrics_rule_value(const struct shm *s, uint64_t key);

/* Series that could not be stored (table full, labels too long). */
uint64_t metrics_dropped(const struct shm *s);
/* Counts one such series: a caller whose label text did not fit its buffer. */
void metrics_drop(struct shm *s);

#endif
