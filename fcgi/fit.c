/* fit.c: the context pre-check (R-GUARD-2). */
#include "fit.h"

int fit_check(struct request *r)
{
    (void)r;
    return 0;
}
