/* fcgiconn.h: one FastCGI connection from the front server, one request at a
 * time (FCGI_MPXS_CONNS 0): its params, its stdin, its stdout (DESIGN.md
 * stage 1 and 8). Replaces libfcgi: the request's params are read into one
 * buffer instead of a malloc per param, stdout goes out in as few writes as
 * the answer allows, and FCGI_ABORT_REQUEST counts as the client leaving. */
#ifndef SLUICE_FCGICONN_H
#define SLUICE_FCGICONN_H

#include "buf.h"

#include <stddef.h>

struct fcgi_conn {
    int fd;                     /* -1: no connection */
    unsigned id;                /* the request being served (0: none yet) */
    int keep;                   /* FCGI_KEEP_CONN: the front server reuses the connection */
    int params_done, stdin_done, aborted, eof, dead;
    /* NAME=VALUE strings of the request, NULL-terminated, as an environment. */
    char **envp;
    size_t *name_len;           /* each param's name length, for lookups */
    size_t nparams, envp_cap;
    struct buf params;          /* the PARAMS stream as sent */
    struct buf env;             /* the strings envp points into */
    struct buf mgmt;            /* content of a record read whole (BEGIN_REQUEST, GET_VALUES) */
    unsigned char *in;          /* bytes read, not yet consumed */
    size_t in_off, in_len;
    int rtype;                  /* the record being read: its type, id, content and padding left */
    unsigned rid;
    size_t rlen, rleft, rpad;
    int rstarted;
    struct buf out;             /* STDOUT records not yet written */
    long rec_at;                /* offset of the open STDOUT record's header in out, -1: none */
    int nonblock;               /* writes never wait: what the socket takes now goes, the rest stays in out */
};

void fcgi_conn_init(struct fcgi_conn *c);
void fcgi_conn_free(struct fcgi_conn *c);

/* Waits for the next request: on the kept connection when the front server
 * asked to keep it, else a new one from listen_fd. Returns 0 when the
 * request's params are in, -1 with errno set when accept failed. */
int fcgi_accept(struct fcgi_conn *c, int listen_fd);

/* A param of the request (CONTENT_LENGTH, HTTP_AUTHORIZATION, ...), or NULL. */
const char *fcgi_param(const struct fcgi_conn *c, const char *name);

/* Up to n bytes of the request body: > 0 read, 0 at its end, -1 on an error. */
long fcgi_read(struct fcgi_conn *c, char *buf, size_t n);

/* Response bytes (head and body alike, as CGI output): kept until enough
 * gather or fcgi_flush, written at once when large. 0, or -1 once the
 * connection is lost. */
int fcgi_write(struct fcgi_conn *c, const char *data, size_t n);
int fcgi_flush(struct fcgi_conn *c);

/* Non-blocking writes (a loop serving many connections: fcgi_pending says
 * what waits for the socket), or blocking again. */
void fcgi_set_nonblocking(struct fcgi_conn *c, int on);
size_t fcgi_pending(const struct fcgi_conn *c);

/* Without blocking: 1 when the front server closed the connection or aborted
 * the request (the client left), else 0. */
int fcgi_gone(struct fcgi_conn *c);

/* Ends the request (the end of stdout, END_REQUEST) and closes the connection
 * unless it is kept; when the body was not read to its end, closes only after
 * the front server has (so the answer is not lost to a reset). */
void fcgi_finish(struct fcgi_conn *c);
/* fcgi_finish for a non-blocking connection: when the socket does not take
 * the end at once, the connection is given away instead of waited for: *fd,
 * and the bytes still to send (*rest, malloc'd, *len), for the caller's loop
 * to send and close. 1 given away, 0 finished here. */
int fcgi_finish_unsent(struct fcgi_conn *c, int *fd, char **rest, size_t *len);

#endif
