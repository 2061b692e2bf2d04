/* test_metrics.c: the shared-state series tables (lib/metrics.c). */
#include "check.h"
#include "metrics.h"

int main(void)
{
    CHECK(metric_get(MET_REQUESTS) != NULL, "family table");
    return check_done();
}
