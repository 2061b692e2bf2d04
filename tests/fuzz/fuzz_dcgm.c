/* fuzz_dcgm.c: a DCGM exporter's /metrics (healthd/dcgm.c, R-HC-7) as a node serves it.
 *
 * Invariants: the GPU count is never negative; a temperature is reported exactly
 * when some GPU had a reading, and it lies between absolute zero and the 1000 °C
 * cap (in tenths); bytes past the length given never change the answer. */
#include "fuzz.h"

#include "healthd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    int deci = -99999;
    int gpus = dcgm_parse_temp((const char *)data, size, &deci);
    FUZZ_CHECK(gpus >= 0, "%d GPUs", gpus);
    if (gpus == 0)
        FUZZ_CHECK(deci == -99999, "a temperature without a GPU");
    else
        FUZZ_CHECK(deci >= -2730 && deci <= 10000, "temperature %d tenths", deci);

    char *padded = malloc(size + 64);
    if (!padded)
        abort();
    memcpy(padded, data, size);
    memcpy(padded + size, "9\nDCGM_FI_DEV_GPU_TEMP{gpu=\"9\"} 99\n", 35);
    int deci2 = -99999;
    int gpus2 = dcgm_parse_temp(padded, size, &deci2);
    FUZZ_CHECK(gpus2 == gpus && deci2 == deci, "bytes past the length changed the answer");
    free(padded);
    return 0;
}
