/* supervise.h: sluice-fcgi --listen: a small supervisor of its own for front
 * servers that do not start FastCGI programs (Apache mod_proxy_fcgi, nginx).
 * It opens the socket, forks the responders (each finds the socket on fd 0, as
 * under lighttpd's bin-path), starts again one that dies, passes SIGHUP on, and
 * on SIGTERM stops them and waits for their drain (R-DEP-6). Under lighttpd the
 * bin-path mode stays: lighttpd is the supervisor there. */
#ifndef SLUICE_SUPERVISE_H
#define SLUICE_SUPERVISE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

struct listen_addr {
    int unix_socket;            /* 1: path; 0: host and port */
    char path[108];             /* sun_path's size */
    char host[64];
    int port;
};

/* "unix:PATH" or "HOST:PORT" (an IPv4 loopback address: FastCGI has no
 * authentication of its own, so only this machine may speak it). 0, or -1 with
 * why (a static string). Pure. */
int listen_parse(const char *s, struct listen_addr *a, const char **why);

/* How long to wait before starting a responder again, given how long the one
 * that died ran and how many died quickly in a row: at once after a long run,
 * then doubling from 100 ms to at most 10 s, so a responder that cannot start
 * (a bad database path) does not spin. Pure. */
int64_t respawn_delay_ms(int64_t ran_ms, int quick_deaths);

struct supervise_opts {
    const char *listen;         /* --listen */
    int processes;              /* --processes */
    int daemon;                 /* --daemon: detach from the terminal */
    const char *pid_file;       /* --pid-file, or NULL */
    void (*on_hup)(void);       /* SIGHUP: re-read the configuration (and reopen the log) */
};

/* Runs the supervisor. Returns 0 in each responder child (fd 0 is the
 * listening socket; the caller goes on as a responder), -1 when it could not
 * start (said on stderr and in the log); the supervisor itself exits. blocked
 * is the signal set main blocked (the children inherit it). */
int supervise(const struct supervise_opts *o, const sigset_t *blocked);

#endif
