/* state_url.c: parses the `state` option (see state_url.h). */
#include "state_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, unsigned errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    return -1;
}

/* A whole decimal number in [lo, hi] from s[0..n). */
static int number(const char *s, size_t n, int lo, int hi, int *out)
{
    if (n == 0 || n > 9)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* "[:PASSWORD@]" at the start of *p (a user name before the colon is ignored,
 * as Redis 6 ACL users are not used yet). */
static int userinfo(const char **p, struct state_url *u, char *err, unsigned errlen)
{
    const char *at = strchr(*p, '@');
    const char *slash = strchr(*p, '/');
    if (!at || (slash && slash < at))
        return 0;
    const char *colon = memchr(*p, ':', (size_t)(at - *p));
    if (!colon)
        return fail(err, errlen, "state: a password is written as redis://:PASSWORD@host");
    size_t n = (size_t)(at - colon - 1);
    if (n == 0 || n >= sizeof u->password)
        return fail(err, errlen, "state: the password is empty or longer than 255 bytes");
    memcpy(u->password, colon + 1, n);
    u->password[n] = '\0';
    *p = at + 1;
    return 0;
}

int state_url_parse(const char *text, struct state_url *u, char *err, unsigned errlen)
{
    memset(u, 0, sizeof *u);
    u->port = 6379;
    if (!text || !*text)
        return fail(err, errlen, "state: empty");
    for (const char *c = text; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return fail(err, errlen, "state: no spaces or control characters");
    const char *p;
    if (strncmp(text, "redis+unix://", 13) == 0) {
        u->unix_socket = 1;
        p = text + 13;
        if (userinfo(&p, u, err, errlen) != 0)
            return -1;
        if (*p != '/')
            return fail(err, errlen, "state: redis+unix:// needs an absolute socket path (redis+unix:///run/redis.sock)");
        const char *q = strchr(p, '?');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n < 2 || n >= sizeof u->path)
            return fail(err, errlen, "state: the socket path is empty or longer than 255 bytes");
        memcpy(u->path, p, n);
        u->path[n] = '\0';
        if (q) {
            if (strncmp(q, "?db=", 4) != 0 || number(q + 4, strlen(q + 4), 0, 1023, &u->db) != 0)
                return fail(err, errlen, "state: after the socket path only ?db=N (0-1023)");
        }
        return 0;
    }
    if (strncmp(text, "redis://", 8) != 0)
        return fail(err, errlen, "state: must start with redis:// or redis+unix:// (or be empty: the state file)");
    p = text + 8;
    if (userinfo(&p, u, err, errlen) != 0)
        return -1;
    const char *end = p + strcspn(p, "/");
    const char *hend = end;
    if (*p == '[') {                                   /* [IPv6]:port */
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb)
            return fail(err, errlen, "state: an IPv6 address needs its closing ]");
        size_t n = (size_t)(rb - p - 1);
        if (n == 0 || n >= sizeof u->host)
            return fail(err, errlen, "state: the host is empty or too long");
        memcpy(u->host, p + 1, n);
        u->host[n] = '\0';
        hend = rb + 1;
        if (hend < end && *hend != ':')
            return fail(err, errlen, "state: after ] only :PORT");
    } else {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        hend = colon ? colon : end;
        size_t n = (size_t)(hend - p);
        if (n == 0 || n >= sizeof u->host)
            return fail(err, errlen, "state: the host is empty or too long");
        memcpy(u->host, p, n);
        u->host[n] = '\0';
    }
    if (hend < end && number(hend + 1, (size_t)(end - hend - 1), 1, 65535, &u->port) != 0)
        return fail(err, errlen, "state: the port must be a number from 1 to 65535");
    if (*end == '/' && end[1] && number(end + 1, strlen(end + 1), 0, 1023, &u->db) != 0)
        return fail(err, errlen, "state: the database after the host must be a number from 0 to 1023");
    return 0;
}

void state_url_describe(const struct state_url *u, char *out, unsigned n)
{
    if (u->unix_socket)
        snprintf(out, n, "redis+unix://%s?db=%d", u->path, u->db);
    else if (strchr(u->host, ':'))
        snprintf(out, n, "redis://[%s]:%d/%d", u->host, u->port, u->db);
    else
        snprintf(out, n, "redis://%s:%d/%d", u->host, u->port, u->db);
}
