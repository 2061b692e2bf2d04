/* drive.h: the driver (DESIGN.md stage 6): walks the route stage's plan one
 * attempt at a time until an answer stands or nothing more may be tried. */
#ifndef SLUICE_DRIVE_H
#define SLUICE_DRIVE_H

#include "request.h"

/* r's first attempt is chosen (route_plan returned 0). Always replies. */
void drive_run(struct request *r);

/* The end of an attempt that parked (r->parked_attempt): the driver's report
 * and reply, as drive_run would have finished it (on the stream loop). 1: the
 * request's answer is settled; 0: another attempt follows (a retry before
 * any data went out): drive_continue, on a thread of its own, makes it. */
int drive_resume(struct request *r);
void drive_continue(struct request *r);

#endif
