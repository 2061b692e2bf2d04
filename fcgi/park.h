/* park.h: the responder's stream loop (issue 17). A stream under way (its
 * head and first data sent: nothing can be retried any more) leaves its worker
 * thread: the worker - request, curl handle, FastCGI connection, arena - moves
 * here, and one thread turns every parked transfer from one epoll set, so a
 * stream no longer holds a thread and its stack, and no stream waits in the
 * listen backlog for a free thread. When a transfer ends, the loop calls the
 * resume function it was handed with, which finishes the request as its
 * thread would have (DESIGN.md: request pipeline, the stream loop). */
#ifndef SLUICE_PARK_H
#define SLUICE_PARK_H

#include "conf.h"
#include "request.h"

/* Starts the loop. 0, or -1 (logged): streams then keep their threads. */
int park_start(const struct conf *c);
int park_running(void);

/* w->req has parked (r->parked_attempt set); resume(w) ends it, on the loop. */
void park_hand(struct worker *w, void (*resume)(struct worker *w));

/* From any thread: the end of a stream the client has not taken yet
 * (fcgi_finish_unsent's fd and bytes, given to the loop): sent as the socket
 * takes it, for at most a minute, then closed. */
void park_drain(int fd, char *data, size_t len);

/* Stream ends still being sent: the shutdown waits for them as for requests
 * (R-DEP-6: the last bytes, a shutting_down event too, reach the client). */
int park_draining(void);

#endif
