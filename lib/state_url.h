/* state_url.h: the sluice.conf `state` option (issue 19): where the pool-wide hot
 * state of key limits lives. Empty: the mapped state file (state_file), the
 * embedded default. Otherwise a Redis server:
 *   redis://[:PASSWORD@]HOST[:PORT][/DB]          TCP, port 6379, database 0
 *   redis+unix://[:PASSWORD@]/PATH[?db=DB]        a unix socket
 * A pure parser, so sluice.conf can refuse a bad value with its line. */
#ifndef SLUICE_STATE_URL_H
#define SLUICE_STATE_URL_H

struct state_url {
    int unix_socket;            /* 1: path is a unix socket; 0: host:port */
    char host[256];
    int port;
    char path[256];
    char password[256];         /* "" = no AUTH */
    int db;                     /* SELECT this database (0-1023) */
};

/* 0 and *out filled, or -1 with err (no password in it) saying what is wrong. */
int state_url_parse(const char *text, struct state_url *out, char *err, unsigned errlen);

/* The address without the password, for logs: "redis://h:6379/0", "redis+unix:///p?db=0". */
void state_url_describe(const struct state_url *u, char *out, unsigned n);

#endif
