/* drive.h: the driver (DESIGN.md stage 6): walks the route stage's plan one
 * attempt at a time until an answer stands or nothing more may be tried. */
#ifndef SLUICE_DRIVE_H
#define SLUICE_DRIVE_H

#include "request.h"

/* r's first attempt is chosen (route_plan returned 0). Always replies. */
void drive_run(struct request *r);

#endif
