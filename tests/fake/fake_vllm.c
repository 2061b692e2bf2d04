/* fake_vllm.c: what vLLM serves besides OpenAI: /health, /metrics, sleep mode (R-WAKE), and a DCGM exporter (R-HC-7). */
#include "fake.h"

#include <stdio.h>
#include <time.h>

static long long mono_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Asleep right now? A wake in progress ends on its own time. */
bool vllm_sleeping(void)
{
    pthread_mutex_lock(&G.mu);
    if (G.sleeping && G.wake_at_ms && mono_now_ms() >= G.wake_at_ms)
        G.sleeping = false;
    bool s = G.sleeping;
    pthread_mutex_unlock(&G.mu);
    return s;
}

/* The same question for GET /_fake/stats, which must not end a wake; called with G.mu held. */
bool vllm_asleep_locked(void)
{
    return G.sleeping && !(G.wake_at_ms && mono_now_ms() >= G.wake_at_ms);
}

/* ---- probes ---- */

enum outcome vllm_health(struct conn *c, const struct behavior *b)
{
    c->rbody.len = 0;
    return reply_send(c, b, atomic_load(&G.health_off) || vllm_sleeping() ? 503 : 200, NULL);
}

/* Prometheus text: integers still print as "3.0", as vLLM's client library does. */
static void metric_add(struct buf *o, const char *name, const char *help, double v)
{
    char num[64];
    int n = snprintf(num, sizeof num, "%.6g", v);
    if (!strpbrk(num, ".eEn") && n > 0 && (size_t)n + 3 <= sizeof num)
        memcpy(num + n, ".0", 3);
    buf_printf(o, "# HELP %s %s\n# TYPE %s gauge\n%s{engine=\"0\",model_name=\"%s\"} %s\n",
               name, help, name, name, G.model, num);
}

enum outcome vllm_metrics(struct conn *c, const struct behavior *b)
{
    pthread_mutex_lock(&G.mu);
    double running = G.running >= 0 ? G.running : (double)atomic_load(&S.inflight);
    double waiting = G.waiting, kv = G.kv;
    bool legacy = G.legacy;
    pthread_mutex_unlock(&G.mu);
    struct buf *o = &c->rbody;
    o->len = 0;
    metric_add(o, "vllm:num_requests_running", "Number of requests in model execution batches.", running);
    metric_add(o, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", waiting);
    if (legacy)
        metric_add(o, "vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", kv);
    else
        metric_add(o, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv);
    return reply_send(c, b, 200, "text/plain; version=0.0.4; charset=utf-8");
}

/* ---- sleep mode ---- */

enum outcome vllm_sleep(struct conn *c, const struct behavior *b)
{
    (void)b;
    pthread_mutex_lock(&G.mu);
    G.sleeping = true;
    G.wake_at_ms = 0;
    pthread_mutex_unlock(&G.mu);
    return reply_ok(c);
}

enum outcome vllm_wake_up(struct conn *c, const struct behavior *b)
{
    (void)b;
    atomic_fetch_add(&S.wake_ups, 1);
    pthread_mutex_lock(&G.mu);
    if (G.sleeping && !G.wake_at_ms)
        G.wake_at_ms = mono_now_ms() + (G.wake_delay_ms > 0 ? G.wake_delay_ms : 0);
    pthread_mutex_unlock(&G.mu);
    return reply_ok(c);
}

enum outcome vllm_is_sleeping(struct conn *c, const struct behavior *b)
{
    c->rbody.len = 0;
    buf_printf(&c->rbody, "{\"is_sleeping\":%s}", vllm_sleeping() ? "true" : "false");
    return reply_send(c, b, 200, CT_JSON);
}

/* POST /tokenize: the prompt's words are its tokens (the count the chat route
 * reports as prompt_tokens), or tokenize_count; tokenize_ms / tokenize_status
 * delay or fail this route alone, so the chat beside it still answers. */
enum outcome vllm_tokenize(struct conn *c, const struct behavior *b)
{
    if (b->tokenize_ms > 0 && conn_wait(c, b->tokenize_ms) < 0)
        return OUT_ABORTED;
    if (b->tokenize_status && b->tokenize_status != 200)
        return reply_error(c, b, b->tokenize_status, "tokenize refused");
    struct jscan j;
    json_scan(&j, c->req.body, c->req.blen);
    long n = b->tokenize_count >= 0 ? b->tokenize_count : j.words;
    c->rbody.len = 0;
    buf_printf(&c->rbody, "{\"count\":%ld,\"max_model_len\":4096,\"tokens\":[]}", n);
    return reply_send(c, b, 200, CT_JSON);
}

/* ---- DCGM exporter stand-in ---- */

enum outcome vllm_dcgm(struct conn *c, const struct behavior *b)
{
    struct buf *o = &c->rbody;
    o->len = 0;
    buf_adds(o, "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n");
    pthread_mutex_lock(&G.mu);
    for (int i = 0; i < G.n_gpus; i++)
        buf_printf(o, "DCGM_FI_DEV_GPU_TEMP{gpu=\"%d\",UUID=\"GPU-fake-%d\",device=\"nvidia%d\",Hostname=\"%s\"} %lld\n",
                   i, i, i, G.name, G.gpu_temps[i] < 0 ? 9223372036854775794LL : G.gpu_temps[i]);
    pthread_mutex_unlock(&G.mu);
    return reply_send(c, b, 200, "text/plain; version=0.0.4; charset=utf-8");
}
