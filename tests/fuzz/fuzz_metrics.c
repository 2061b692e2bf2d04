/* fuzz_metrics.c: vLLM's Prometheus text (healthd/metrics.c, R-LB-2, R-HC-6) as a replica
 * serves it on /metrics.
 *
 * Invariants: every sample handed out lies inside the text, on one line, with a
 * non-empty name free of '{' and blanks and a non-empty value free of blanks; the
 * parsed figures stay in their ranges (queue depths 0..1000000, KV use 0..1000 per
 * mille), the flags agree with each other and with the return value, and the result
 * does not depend on bytes past the length given. */
#include "fuzz.h"

#include "healthd.h"

struct walk {
    const char *text;
    size_t len;
    long samples;
};

static void on_sample(void *arg, const char *name, size_t nlen, const char *value, size_t vlen)
{
    struct walk *w = arg;
    const char *end = w->text + w->len;
    FUZZ_CHECK(name >= w->text && name + nlen <= end, "name outside the text");
    FUZZ_CHECK(value >= w->text && value + vlen <= end, "value outside the text");
    FUZZ_CHECK(nlen > 0 && vlen > 0, "empty name or value");
    FUZZ_CHECK(value > name, "value before the name");
    FUZZ_CHECK(!memchr(name, '\n', (size_t)(value + vlen - name)), "a sample across lines");
    for (size_t i = 0; i < nlen; i++)
        FUZZ_CHECK(name[i] != '{' && name[i] != ' ' && name[i] != '\t', "name byte 0x%02x", (unsigned char)name[i]);
    for (size_t i = 0; i < vlen; i++)
        FUZZ_CHECK(value[i] != ' ' && value[i] != '\t' && value[i] != '\r', "value byte 0x%02x",
                   (unsigned char)value[i]);
    w->samples++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    const char *text = (const char *)data;
    struct walk w = {text, size, 0};
    metrics_each_sample(text, size, on_sample, &w);

    struct vllm_metrics m;
    int rc = metrics_parse_vllm(text, size, &m);
    FUZZ_CHECK(rc == 0 || rc == -1, "returned %d", rc);
    FUZZ_CHECK(rc == (m.has_waiting && m.has_kv ? 0 : -1), "return value %d against the flags", rc);
    FUZZ_CHECK(m.waiting >= 0 && m.waiting <= 1000000 && m.running >= 0 && m.running <= 1000000,
               "queue %d/%d", m.waiting, m.running);
    FUZZ_CHECK(m.kv_permille >= 0 && m.kv_permille <= 1000, "kv %d", m.kv_permille);
    FUZZ_CHECK(!m.legacy_kv || m.has_kv, "legacy kv without kv");
    if (!m.has_kv)
        FUZZ_CHECK(m.kv_permille == 0, "kv %d without a gauge", m.kv_permille);
    if (!m.has_waiting)
        FUZZ_CHECK(m.waiting == 0, "waiting %d without the metric", m.waiting);

    /* The same text followed by junk that a reader past the end would see. */
    char *padded = malloc(size + 64);
    if (!padded)
        abort();
    memcpy(padded, data, size);
    memcpy(padded + size, " 7\nvllm:num_requests_waiting 5\nvllm:kv_cache_usage_perc 1\n", 58);
    struct vllm_metrics m2;
    int rc2 = metrics_parse_vllm(padded, size, &m2);
    FUZZ_CHECK(rc2 == rc && memcmp(&m, &m2, sizeof m) == 0, "bytes past the length changed the result");
    free(padded);
    return 0;
}
