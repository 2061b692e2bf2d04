/* redis_conn.c: connecting to the `state` Redis with its password and database. */
#include "redis_conn.h"

#ifdef SLUICE_HIREDIS

#include "log.h"

static int command_ok(redisContext *c, redisReply *r, const struct state_url *u, const char *what)
{
    int ok = r && r->type != REDIS_REPLY_ERROR;
    if (r && r->type == REDIS_REPLY_ERROR) {
        char text[300];
        state_url_describe(u, text, sizeof text);
        log_warn("state %s: %s: %s", text, what, r->str);
    }
    if (r)
        freeReplyObject(r);
    (void)c;
    return ok;
}

redisContext *redis_connect(const struct state_url *u, int timeout_ms, int select_db)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *c = u->unix_socket ? redisConnectUnixWithTimeout(u->path, tv)
                                     : redisConnectWithTimeout(u->host, u->port, tv);
    if (!c || c->err)
        goto failed;
    redisSetTimeout(c, tv);
    if (!u->unix_socket)
        redisEnableKeepAlive(c);    /* a host lost without a reset is found, not waited on for ever */
    if (u->password[0] && !command_ok(c, redisCommand(c, "AUTH %s", u->password), u, "AUTH"))
        goto failed;
    if (select_db && u->db && !command_ok(c, redisCommand(c, "SELECT %d", u->db), u, "SELECT"))
        goto failed;
    return c;
failed:
    if (c)
        redisFree(c);
    return NULL;
}

#endif
