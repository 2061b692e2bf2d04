/* metrics.c: read vLLM's /metrics (Prometheus text) into queue depth and KV cache use (R-LB-2, R-HC-6). */
#include "healthd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define METRIC_VALUE_MAX 64     /* characters of a sample's value text */

/* End of the label block that starts at p ('{'): quoted values may hold '}' and escapes. */
static const char *skip_labels(const char *p, const char *end)
{
    int quoted = 0;
    for (p++; p < end; p++) {
        if (quoted) {
            if (*p == '\\' && p + 1 < end)
                p++;
            else if (*p == '"')
                quoted = 0;
        } else if (*p == '"') {
            quoted = 1;
        } else if (*p == '}') {
            return p + 1;
        } else if (*p == '\n') {
            return NULL;
        }
    }
    return NULL;
}

void metrics_each_sample(const char *text, size_t len,
                         void (*fn)(void *arg, const char *name, size_t nlen, const char *value, size_t vlen),
                         void *arg)
{
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        const char *s = p;
        p = eol + 1;
        while (s < eol && (*s == ' ' || *s == '\t'))
            s++;
        if (s == eol || *s == '#')
            continue;
        const char *name = s;
        while (s < eol && *s != '{' && *s != ' ' && *s != '\t')
            s++;
        size_t nlen = (size_t)(s - name);
        if (s < eol && *s == '{') {
            s = skip_labels(s, eol);
            if (!s)
                continue;
        }
        while (s < eol && (*s == ' ' || *s == '\t'))
            s++;
        const char *v = s;
        while (s < eol && *s != ' ' && *s != '\t' && *s != '\r')
            s++;
        if (nlen > 0 && s > v)
            fn(arg, name, nlen, v, (size_t)(s - v));
    }
}

/* A finite number, or -1 when the text is not one (NaN, Inf, junk). */
static int value_parse(const char *v, size_t n, double *out)
{
    char buf[METRIC_VALUE_MAX + 1];
    if (n == 0 || n > METRIC_VALUE_MAX)
        return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    char *e;
    double d = strtod(buf, &e);
    if (*e || !isfinite(d))
        return -1;
    *out = d;
    return 0;
}

static int name_is(const char *name, size_t n, const char *want)
{
    return strlen(want) == n && memcmp(name, want, n) == 0;
}

struct vllm_acc {
    double waiting, running, kv, kv_legacy;
    int n_waiting, n_running, n_kv, n_kv_legacy;
};

static void vllm_sample(void *arg, const char *name, size_t nlen, const char *value, size_t vlen)
{
    struct vllm_acc *a = arg;
    double d;
    if (value_parse(value, vlen, &d) != 0 || d < 0)
        return;
    if (name_is(name, nlen, "vllm:num_requests_waiting")) {
        a->waiting += d;
        a->n_waiting++;
    } else if (name_is(name, nlen, "vllm:num_requests_running")) {
        a->running += d;
        a->n_running++;
    } else if (name_is(name, nlen, "vllm:kv_cache_usage_perc")) {
        /* One engine per label set (data parallel): the fullest decides. */
        if (!a->n_kv++ || d > a->kv)
            a->kv = d;
    } else if (name_is(name, nlen, "vllm:gpu_cache_usage_perc")) {
        if (!a->n_kv_legacy++ || d > a->kv_legacy)
            a->kv_legacy = d;
    }
}

static int clamp_int(double d, int max)
{
    return d >= (double)max ? max : d <= 0 ? 0 : (int)(d + 0.5);
}

int metrics_parse_vllm(const char *text, size_t len, struct vllm_metrics *m)
{
    struct vllm_acc a;
    memset(&a, 0, sizeof a);
    memset(m, 0, sizeof *m);
    metrics_each_sample(text, len, vllm_sample, &a);
    m->has_waiting = a.n_waiting > 0;
    m->waiting = clamp_int(a.waiting, 1000000);
    m->running = clamp_int(a.running, 1000000);
    /* R-LB-2: a 0-1 fraction; the newer name wins, the older is the fallback. */
    double kv = a.n_kv ? a.kv : a.kv_legacy;
    m->has_kv = a.n_kv > 0 || a.n_kv_legacy > 0;
    m->legacy_kv = !a.n_kv && a.n_kv_legacy;
    m->kv_permille = clamp_int((kv > 1 ? 1 : kv) * 1000, 1000);
    return m->has_waiting && m->has_kv ? 0 : -1;
}
