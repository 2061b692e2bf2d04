/* screen.c: the content rules stage (R-GUARD-3). */
#include "screen.h"

int screen_input(struct request *r)
{
    (void)r;
    return 0;
}
