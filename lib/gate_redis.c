/* gate_redis.c: places under caps counted across hosts; see gate_redis.h. */
#include "gate_redis.h"

#include "log.h"
#include "redis_bus.h"
#include "redis_eval.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t gate_news_format(const struct gate_cap *caps, int n, char *out, size_t size)
{
    size_t len = (size_t)snprintf(out, size, "gate");
    for (int i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(out + len, size - len, " %c:%lld", caps[i].kind, (long long)caps[i].id);
    return len < size ? len : 0;
}

int gate_news_parse(const char *msg, size_t n, struct gate_cap *caps, int max)
{
    char text[256];
    if (n >= sizeof text || n < 5 || memcmp(msg, "gate ", 5) != 0)
        return 0;
    memcpy(text, msg, n);
    text[n] = 0;
    int k = 0;
    for (char *p = text + 4; *p == ' ' && k < max;) {
        p++;
        char *end;
        if ((p[0] != 'r' && p[0] != 'e' && p[0] != 'q') || p[1] != ':')
            return 0;
        long long id = strtoll(p + 2, &end, 10);
        if (end == p + 2 || id <= 0 || (*end && *end != ' '))
            return 0;
        caps[k].kind = p[0];
        caps[k].id = id;
        caps[k].cap = 0;
        k++;
        p = end;
    }
    return k;
}

#ifndef SLUICE_HIREDIS

int gate_redis_start(const char *url) { return url && *url ? redis_eval_start(url) : 0; }
int gate_redis_on(void) { return 0; }
int gate_redis_take(const struct gate_cap *caps, int n, char *lease, size_t lease_n)
{
    (void)caps, (void)n, (void)lease, (void)lease_n;
    return -1;
}
void gate_redis_release(const struct gate_cap *caps, int n, const char *lease) { (void)caps, (void)n, (void)lease; }
void gate_redis_abandon(const struct gate_cap *caps, int n, const char *lease) { (void)caps, (void)n, (void)lease; }

#else

/* KEYS: the caps' ZSETs; ARGV: lease, lease ms, then each cap. All checks before
 * any take: a refusal takes nothing, and marks the full ZSET as wanted; a take
 * that leaves room unmarks it (nobody waits for a place there any more). */
static const char TAKE_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local ms = tonumber(ARGV[2])\n"
    "for i, k in ipairs(KEYS) do\n"
    "  redis.call('ZREMRANGEBYSCORE', k, '-inf', now)\n"
    "  if redis.call('ZCARD', k) >= tonumber(ARGV[i + 2]) then\n"
    "    redis.call('SET', k .. ':w', '1', 'PX', 5000)\n"
    "    return i\n"
    "  end\n"
    "end\n"
    "for i, k in ipairs(KEYS) do\n"
    "  redis.call('ZADD', k, now + ms, ARGV[1])\n"
    "  redis.call('PEXPIRE', k, ms * 2 + 1000)\n"
    "  if redis.call('ZCARD', k) < tonumber(ARGV[i + 2]) then redis.call('DEL', k .. ':w') end\n"
    "end\n"
    "return 0\n";

/* KEYS: the ZSETs; ARGV: lease, channel, the news. */
static const char RELEASE_LUA[] =
    "local wanted = 0\n"
    "for i, k in ipairs(KEYS) do\n"
    "  redis.call('ZREM', k, ARGV[1])\n"
    "  if redis.call('EXISTS', k .. ':w') == 1 then wanted = 1 end\n"
    "end\n"
    "if wanted == 1 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end\n"
    "return wanted\n";

static int script_take, script_release, started;

int gate_redis_start(const char *url)
{
    if (!url || !*url)
        return 0;
    script_take = redis_eval_script(TAKE_LUA);
    script_release = redis_eval_script(RELEASE_LUA);
    if (redis_eval_start(url) != 0)
        return -1;
    started = 1;
    return 0;
}

int gate_redis_on(void) { return started; }

static void key_of(const struct gate_cap *c, char *out, size_t n)
{
    snprintf(out, n, "sluice:{cap}:%c:%lld", c->kind, (long long)c->id);
}

int gate_redis_take(const struct gate_cap *caps, int n, char *lease, size_t lease_n)
{
    if (n <= 0 || n > GATE_REDIS_MAX_CAPS)
        return n <= 0 ? 0 : -1;
    char names[GATE_REDIS_MAX_CAPS][48], nums[GATE_REDIS_MAX_CAPS + 1][16];
    const char *keys[GATE_REDIS_MAX_CAPS], *args[GATE_REDIS_MAX_CAPS + 2];
    redis_eval_lease_id(lease, lease_n);
    snprintf(nums[0], sizeof nums[0], "%d", redis_eval_lease_ms());
    args[0] = lease;
    args[1] = nums[0];
    for (int i = 0; i < n; i++) {
        key_of(&caps[i], names[i], sizeof names[i]);
        keys[i] = names[i];
        snprintf(nums[i + 1], sizeof nums[i + 1], "%d", caps[i].cap);
        args[i + 2] = nums[i + 1];
    }
    redisReply *r = redis_eval_call(script_take, n, keys, n + 2, args, 0);
    if (!r)
        return -1;
    int rc = r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer <= n ? (int)r->integer : -1;
    freeReplyObject(r);
    if (rc == 0)
        for (int i = 0; i < n; i++)
            redis_lease_keep(names[i], lease);
    return rc;
}

void gate_redis_abandon(const struct gate_cap *caps, int n, const char *lease)
{
    char name[48];
    for (int i = 0; i < n && i < GATE_REDIS_MAX_CAPS; i++) {
        key_of(&caps[i], name, sizeof name);
        redis_lease_forget(name, lease);
    }
}

void gate_redis_release(const struct gate_cap *caps, int n, const char *lease)
{
    if (n <= 0 || n > GATE_REDIS_MAX_CAPS)
        return;
    char names[GATE_REDIS_MAX_CAPS][48], news[200];
    const char *keys[GATE_REDIS_MAX_CAPS];
    for (int i = 0; i < n; i++) {
        key_of(&caps[i], names[i], sizeof names[i]);
        keys[i] = names[i];
        redis_lease_forget(names[i], lease);
    }
    if (!gate_news_format(caps, n, news, sizeof news))
        news[0] = 0;
    const char *args[3] = {lease, REDIS_BUS_CHANNEL, news};
    redisReply *r = redis_eval_call(script_release, n, keys, 3, args, 0);
    if (r)
        freeReplyObject(r);             /* not answered: the lease expires by itself */
}

#endif
