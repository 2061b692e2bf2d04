/* test_healthd_parse.c: vLLM /metrics and DCGM exporter parsing of sluice-healthd (healthd/metrics.c, healthd/dcgm.c; R-LB-2, R-HC-6, R-HC-7). */
#include "check.h"

#include "../../healthd/healthd.h"

#include <string.h>

static const char VLLM_NEW[] =
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{engine=\"0\",model_name=\"qwen\"} 3.0\n"
    "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
    "# TYPE vllm:num_requests_waiting gauge\n"
    "vllm:num_requests_waiting{engine=\"0\",model_name=\"qwen\"} 7.0\n"
    "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"qwen\"} 0.42\n"
    "vllm:num_requests_waiting_by_reason{reason=\"x\"} 99\n"
    "vllm:request_success_total{finished_reason=\"stop\"} 1234.0\n";

static const char VLLM_OLD[] =
    "vllm:num_requests_running{model_name=\"m\"} 1\n"
    "vllm:num_requests_waiting{model_name=\"m\"} 0\n"
    "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.905\n";

static const struct {
    const char *name, *text;
    int rc, waiting, running, kv_permille, legacy;
} vllm_cases[] = {
    {"R-LB-2 current names", VLLM_NEW, 0, 7, 3, 420, 0},
    {"R-LB-2 older gpu_cache_usage_perc as fallback", VLLM_OLD, 0, 0, 1, 905, 1},
    {"both kv names: the current one wins",
     "vllm:num_requests_waiting 2\nvllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.1\n", 0, 2, 0, 100, 0},
    {"two engines: waiting summed, kv the fullest",
     "vllm:num_requests_waiting{engine=\"0\"} 2\nvllm:num_requests_waiting{engine=\"1\"} 3\n"
     "vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.5\n", 0, 5, 0, 500, 0},
    {"labels with braces, spaces and escapes",
     "vllm:num_requests_waiting{model_name=\"a} b\\\" {c\"} 4\nvllm:kv_cache_usage_perc{x=\"}\"} 1\n", 0, 4, 0, 1000, 0},
    {"timestamps and CRLF",
     "vllm:num_requests_waiting 6 1700000000000\r\nvllm:kv_cache_usage_perc 0.0005 1700000000000\r\n", 0, 6, 0, 1, 0},
    {"kv above 1 is clamped", "vllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 1.7\n", 0, 0, 0, 1000, 0},
    {"NaN and negative ignored",
     "vllm:num_requests_waiting NaN\nvllm:num_requests_waiting -3\nvllm:num_requests_waiting 1\n"
     "vllm:kv_cache_usage_perc +Inf\nvllm:kv_cache_usage_perc 0.3\n", 0, 1, 0, 300, 0},
    {"a longer name is not the gauge", "vllm:num_requests_waiting_total 5\nvllm:kv_cache_usage_perc 0.1\n", -1, 0, 0, 100, 0},
    {"no kv gauge: no data", "vllm:num_requests_waiting 1\n", -1, 1, 0, 0, 0},
    {"not vLLM at all", "# HELP go_goroutines x\ngo_goroutines 12\n", -1, 0, 0, 0, 0},
    {"empty", "", -1, 0, 0, 0, 0},
    {"unterminated labels skipped", "vllm:num_requests_waiting{a=\"b 9\nvllm:num_requests_waiting 2\nvllm:kv_cache_usage_perc 0\n", 0, 2, 0, 0, 0},
};

static const char DCGM[] =
    "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
    "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
    "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-a\",device=\"nvidia0\",Hostname=\"n1\"} 64\n"
    "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"GPU-b\",device=\"nvidia1\",Hostname=\"n1\"} 90\n"
    "DCGM_FI_DEV_GPU_TEMP{gpu=\"2\",UUID=\"GPU-c\",device=\"nvidia2\",Hostname=\"n1\"} 71\n"
    "DCGM_FI_DEV_MEM_COPY_UTIL{gpu=\"0\"} 100\n";

static const struct {
    const char *name, *text;
    int gpus, deci;
} dcgm_cases[] = {
    {"R-HC-7 max over GPUs", DCGM, 3, 900},
    {"fractional degrees", "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 85.25\n", 1, 853},
    {"R-HC-7 int64 blank sentinel is no data",
     "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 9223372036854775792\nDCGM_FI_DEV_GPU_TEMP{gpu=\"1\"} 50\n", 1, 500},
    {"sentinels above the first blank too",
     "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 9223372036854775807\nDCGM_FI_DEV_GPU_TEMP{gpu=\"1\"} 9223372036854775794\n", 0, -1},
    {"sentinel written as a float", "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 9.223372036854776e+18\n", 0, -1},
    {"int32 blank", "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 2147483632\nDCGM_FI_DEV_GPU_TEMP{gpu=\"1\"} 40\n", 1, 400},
    {"only blanks: no reading", "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 9223372036854775794\n", 0, -1},
    {"no temperature metric", "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\"} 1410\n", 0, -1},
    {"junk value skipped", "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} hot\nDCGM_FI_DEV_GPU_TEMP{gpu=\"1\"} 33\n", 1, 330},
    {"empty", "", 0, -1},
};

int main(void)
{
    for (size_t i = 0; i < sizeof vllm_cases / sizeof vllm_cases[0]; i++) {
        struct vllm_metrics m;
        int rc = metrics_parse_vllm(vllm_cases[i].text, strlen(vllm_cases[i].text), &m);
        CHECK(rc == vllm_cases[i].rc, "%s: rc %d, want %d", vllm_cases[i].name, rc, vllm_cases[i].rc);
        CHECK(m.waiting == vllm_cases[i].waiting, "%s: waiting %d, want %d", vllm_cases[i].name, m.waiting,
              vllm_cases[i].waiting);
        CHECK(m.running == vllm_cases[i].running, "%s: running %d, want %d", vllm_cases[i].name, m.running,
              vllm_cases[i].running);
        CHECK(m.kv_permille == vllm_cases[i].kv_permille, "%s: kv %d, want %d", vllm_cases[i].name, m.kv_permille,
              vllm_cases[i].kv_permille);
        CHECK(m.legacy_kv == vllm_cases[i].legacy, "%s: legacy %d", vllm_cases[i].name, m.legacy_kv);
    }
    /* Not NUL-terminated input: the parser honours len. */
    {
        char buf[64];
        memcpy(buf, "vllm:num_requests_waiting 3\nvllm:kv_cache_usage_perc 0.5\nXXXX", 62);
        struct vllm_metrics m;
        CHECK_INT(metrics_parse_vllm(buf, 56, &m), 0, "len-bounded rc");
        CHECK_INT(m.kv_permille, 500, "len-bounded kv");
    }
    for (size_t i = 0; i < sizeof dcgm_cases / sizeof dcgm_cases[0]; i++) {
        int deci = -1;
        int gpus = dcgm_parse_temp(dcgm_cases[i].text, strlen(dcgm_cases[i].text), &deci);
        CHECK(gpus == dcgm_cases[i].gpus, "%s: %d GPUs, want %d", dcgm_cases[i].name, gpus, dcgm_cases[i].gpus);
        CHECK(deci == dcgm_cases[i].deci, "%s: %d deci-C, want %d", dcgm_cases[i].name, deci, dcgm_cases[i].deci);
    }
    return check_done();
}
