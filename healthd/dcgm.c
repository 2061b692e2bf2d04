/* dcgm.c: the hottest GPU of a node from a DCGM exporter's /metrics (R-HC-7). */
#include "healthd.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DCGM_VALUE_MAX 64
/* DCGM's blank sentinels: int64 values >= 0x7FFFFFFFFFFFFFF0 (the spec's), and
 * int32 ones >= 0x7FFFFFF0 for exporters that widen them; the lower bound
 * covers both, since no GPU reports two billion degrees. */
#define DCGM_BLANK 0x7FFFFFF0ULL
#define DCGM_TEMP_MAX 1000.0                 /* anything hotter is not a reading */

struct dcgm_acc {
    int gpus;
    double max;
};

/* -1 for a blank sentinel or text that is not a temperature. */
static int dcgm_value(const char *v, size_t n, double *out)
{
    char buf[DCGM_VALUE_MAX + 1];
    if (n == 0 || n > DCGM_VALUE_MAX)
        return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    char *e;
    if (strspn(buf, "0123456789") == n) {
        /* Integers compare exactly: a double cannot tell 0x7FFFFFFFFFFFFFF0 from 2^63. */
        errno = 0;
        unsigned long long u = strtoull(buf, &e, 10);
        if (errno == ERANGE || u >= DCGM_BLANK)
            return -1;
        *out = (double)u;
        return 0;
    }
    double d = strtod(buf, &e);
    if (*e || !isfinite(d) || d >= (double)DCGM_BLANK || d > DCGM_TEMP_MAX || d < -273.0)
        return -1;
    *out = d;
    return 0;
}

static void dcgm_sample(void *arg, const char *name, size_t nlen, const char *value, size_t vlen)
{
    struct dcgm_acc *a = arg;
    static const char want[] = "DCGM_FI_DEV_GPU_TEMP";
    double d;
    if (nlen != sizeof want - 1 || memcmp(name, want, nlen) != 0 || dcgm_value(value, vlen, &d) != 0)
        return;
    if (d > DCGM_TEMP_MAX)
        return;
    if (!a->gpus++ || d > a->max)
        a->max = d;
}

int dcgm_parse_temp(const char *text, size_t len, int *deci)
{
    struct dcgm_acc a = {0, 0};
    metrics_each_sample(text, len, dcgm_sample, &a);
    if (a.gpus > 0)
        *deci = (int)lround(a.max * 10);
    return a.gpus;
}
