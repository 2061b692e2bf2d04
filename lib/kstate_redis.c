/* kstate_redis.c: the key-limit hot state in Redis (kstate.h, issue 19).
 *
 * Every admission is one EVALSHA of ADMIT_LUA: all checks first, in R-KEY-2
 * order, on the server's clock (redis.call('TIME'), so hosts' clocks do not
 * matter), then every take; nothing to give back when a check refuses. Keys
 * of one API key share the hash tag {ID}:
 *   sluice:k:{ID}:qps           ZSET admission id -> admission ms (the sliding second)
 *   sluice:k:{ID}:conc          ZSET lease id -> expiry ms (renewed while the request lives)
 *   sluice:k:{ID}:d:YYYY-MM-DD  HASH calls                     (seeded from SQLite)
 *   sluice:k:{ID}:m:YYYY-MM     HASH calls, tokens             (seeded from SQLite)
 *   sluice:k:{ID}:tpm           HASH level (milli-tokens), refill ms, limit
 * Connections, script loading and the lease renewal are lib/redis_eval.c's. */
#include "kstate.h"

#include "log.h"
#include "redis_eval.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

#ifndef SLUICE_HIREDIS

int kstate_remote(void) { return 0; }

int kstate_start(const char *url)
{
    if (!url || !*url)
        return 0;
    return redis_eval_start(url);       /* says what this build lacks */
}

enum kstate_result kstate_admit(const struct kstate_ask *a, struct kstate_hold *h, struct kstate_refusal *why)
{
    return KSTATE_UNAVAILABLE;
}

int kstate_release(struct kstate_hold *h, int give_back, int64_t tpm_actual, int64_t month_actual, int timeout_ms)
{
    return -1;
}

#else

#include <hiredis/hiredis.h>

static const char ADMIT_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local lease = ARGV[1]\n"
    "local qps, conc, lease_ms = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    "local daily, monthly, mtok, mwant = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]\n"
    "local tpm, twant = tonumber(ARGV[9]), tonumber(ARGV[10])\n"
    "local quotas = daily > 0 or monthly > 0 or mtok > 0\n"
    "if qps > 0 then\n"
    "  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 1000)\n"
    "  local n = redis.call('ZCARD', KEYS[1])\n"
    "  if n >= qps then\n"
    "    local o = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')\n"
    "    return {1, 1, n, tonumber(o[2]) + 1000 - now}\n"
    "  end\n"
    "end\n"
    "if conc > 0 then\n"
    "  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)\n"
    "  local n = redis.call('ZCARD', KEYS[2])\n"
    "  if n >= conc then return {1, 2, n, 1000} end\n"
    "end\n"
    "if quotas then\n"
    "  local d = redis.call('HGET', KEYS[3], 'calls')\n"
    "  local m = redis.call('HMGET', KEYS[4], 'calls', 'tokens')\n"
    "  if (not d) or (not m[1]) then\n"
    "    if ARGV[11] ~= '1' then return {2} end\n"
    "    if not d then redis.call('HSET', KEYS[3], 'calls', ARGV[12]); d = ARGV[12] end\n"
    "    if not m[1] then redis.call('HSET', KEYS[4], 'calls', ARGV[13], 'tokens', ARGV[14]); m = {ARGV[13], ARGV[14]} end\n"
    "  end\n"
    "  local dc, mc, mt = tonumber(d), tonumber(m[1]), tonumber(m[2] or '0')\n"
    "  if daily > 0 and dc >= daily then return {1, 3, dc, 0} end\n"
    "  if monthly > 0 and mc >= monthly then return {1, 4, mc, 0} end\n"
    "  if mtok > 0 and mt >= mtok then return {1, 5, mt, 0} end\n"
    "end\n"
    "if tpm > 0 then\n"
    "  local b = redis.call('HMGET', KEYS[5], 'level', 'refill', 'limit')\n"
    "  local level, refill, lim = tonumber(b[1]), tonumber(b[2]), tonumber(b[3])\n"
    "  if (not level) or (not refill) or lim ~= tpm then\n"
    "    level, refill = tpm * 1000, now\n"
    "  else\n"
    "    local el = now - refill\n"
    "    if el > 0 then\n"
    "      if el > 60000 then el = 60000 end\n"
    "      level = math.min(level + math.floor(el * tpm / 60), tpm * 1000)\n"
    "      refill = now\n"
    "    end\n"
    "  end\n"
    "  local want = twant\n"
    "  if want > tpm then want = tpm end\n"
    "  if want < 1 then want = 1 end\n"
    "  if level < want * 1000 then\n"
    "    local missing = want * 1000 - level\n"
    "    local used = tpm\n"
    "    if level > 0 then used = tpm - math.floor(level / 1000) end\n"
    "    return {1, 6, used, math.floor((missing * 60 + tpm - 1) / tpm)}\n"
    "  end\n"
    "  redis.call('HSET', KEYS[5], 'level', string.format('%.0f', level - want * 1000),\n"
    "             'refill', string.format('%.0f', refill), 'limit', string.format('%.0f', tpm))\n"
    "  redis.call('PEXPIRE', KEYS[5], 120000)\n"
    "end\n"
    "if qps > 0 then\n"
    "  redis.call('ZADD', KEYS[1], now, lease)\n"
    "  redis.call('PEXPIRE', KEYS[1], 2000)\n"
    "end\n"
    "if conc > 0 then\n"
    "  redis.call('ZADD', KEYS[2], now + lease_ms, lease)\n"
    "  redis.call('PEXPIRE', KEYS[2], lease_ms * 2 + 1000)\n"
    "end\n"
    "if quotas then\n"
    "  redis.call('HINCRBY', KEYS[3], 'calls', 1)\n"
    "  redis.call('EXPIRE', KEYS[3], 259200)\n"
    "  redis.call('HINCRBY', KEYS[4], 'calls', 1)\n"
    "  if mtok > 0 then redis.call('HINCRBY', KEYS[4], 'tokens', mwant) end\n"
    "  redis.call('EXPIRE', KEYS[4], 3456000)\n"
    "end\n"
    "return {0, now}\n";

/* A count is only adjusted where the period is held: a hash created here by a
 * refund would look seeded and hide SQLite's count. */
static const char RELEASE_LUA[] =
    "if ARGV[3] == '1' then redis.call('ZREM', KEYS[2], ARGV[1]) end\n"
    "if ARGV[2] == '1' then redis.call('ZREM', KEYS[1], ARGV[1]) end\n"
    "local calls = tonumber(ARGV[4])\n"
    "if calls ~= 0 then\n"
    "  for i = 3, 4 do\n"
    "    if redis.call('HEXISTS', KEYS[i], 'calls') == 1 and\n"
    "       redis.call('HINCRBY', KEYS[i], 'calls', calls) < 0 then redis.call('HSET', KEYS[i], 'calls', 0) end\n"
    "  end\n"
    "end\n"
    "if ARGV[5] ~= '0' and redis.call('HEXISTS', KEYS[4], 'calls') == 1 then\n"
    "  if redis.call('HINCRBY', KEYS[4], 'tokens', ARGV[5]) < 0 then redis.call('HSET', KEYS[4], 'tokens', 0) end\n"
    "end\n"
    "local td, lim = tonumber(ARGV[6]), tonumber(ARGV[7])\n"
    "if td ~= 0 and lim > 0 then\n"
    "  local b = redis.call('HMGET', KEYS[5], 'level', 'limit')\n"
    "  if b[1] and tonumber(b[2]) == lim then\n"
    "    local level = tonumber(b[1]) + td * 1000\n"
    "    if level > lim * 1000 then level = lim * 1000 end\n"
    "    if level < -lim * 1000 then level = -lim * 1000 end\n"
    "    redis.call('HSET', KEYS[5], 'level', string.format('%.0f', level))\n"
    "  end\n"
    "end\n"
    "return 0\n";

static int script_admit, script_release;
static int configured;

int kstate_remote(void) { return configured; }

static void key_names(int64_t key_id, const char *day, const char *month, char names[5][64])
{
    snprintf(names[0], 64, "sluice:k:{%lld}:qps", (long long)key_id);
    snprintf(names[1], 64, "sluice:k:{%lld}:conc", (long long)key_id);
    snprintf(names[2], 64, "sluice:k:{%lld}:%s", (long long)key_id, day);
    snprintf(names[3], 64, "sluice:k:{%lld}:%s", (long long)key_id, month);
    snprintf(names[4], 64, "sluice:k:{%lld}:tpm", (long long)key_id);
}

int kstate_start(const char *text)
{
    if (!text || !*text)
        return 0;
    script_admit = redis_eval_script(ADMIT_LUA);
    script_release = redis_eval_script(RELEASE_LUA);
    if (redis_eval_start(text) != 0)
        return -1;
    configured = 1;
    if (redis_eval_connect_now() == 0)
        log_info("state %s: key limits are kept in Redis (pool-wide across hosts)", redis_eval_url_text());
    return 0;
}

static void num(char *out, int64_t v) { snprintf(out, 24, "%lld", (long long)v); }

enum kstate_result kstate_admit(const struct kstate_ask *a, struct kstate_hold *h, struct kstate_refusal *why)
{
    redis_eval_tune(a->lease_ms, a->timeout_ms);
    memset(h, 0, sizeof *h);
    redis_eval_lease_id(h->lease, sizeof h->lease);
    char names[5][64], v[13][24];
    key_names(a->key_id, a->day, a->month, names);
    const char *keys[5] = {names[0], names[1], names[2], names[3], names[4]};
    num(v[0], a->qps_limit);
    num(v[1], a->concurrency_limit);
    num(v[2], a->lease_ms);
    num(v[3], a->daily_limit);
    num(v[4], a->monthly_quota);
    num(v[5], a->monthly_token_quota);
    num(v[6], a->month_want);
    num(v[7], a->tpm_limit);
    num(v[8], a->tpm_want);
    num(v[9], a->seeded);
    num(v[10], a->seed_day_calls);
    num(v[11], a->seed_month_calls);
    num(v[12], a->seed_month_tokens);
    const char *args[14] = {h->lease, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]};
    redisReply *r = redis_eval_call(script_admit, 5, keys, 14, args, a->timeout_ms > 0 ? a->timeout_ms : 200);
    if (!r)
        return KSTATE_UNAVAILABLE;
    enum kstate_result res = KSTATE_UNAVAILABLE;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->type == REDIS_REPLY_INTEGER) {
        long long code = r->element[0]->integer;
        if (code == 0) {
            res = KSTATE_OK;
            h->key_id = a->key_id;
            if (r->elements >= 2 && r->element[1]->type == REDIS_REPLY_INTEGER)
                h->admitted_ms = r->element[1]->integer;
            h->qps = a->qps_limit > 0;
            h->slot = a->concurrency_limit > 0;
            h->calls = a->daily_limit > 0 || a->monthly_quota > 0 || a->monthly_token_quota > 0;
            h->month_tokens = a->monthly_token_quota > 0 ? a->month_want : 0;
            if (a->tpm_limit > 0) {
                h->tpm_limit = a->tpm_limit;
                h->tpm_reserved = a->tpm_want > a->tpm_limit ? a->tpm_limit : (a->tpm_want < 1 ? 1 : a->tpm_want);
            }
            str_copy(h->day, sizeof h->day, a->day);
            str_copy(h->month, sizeof h->month, a->month);
        } else if (code == 1 && r->elements >= 4) {
            res = KSTATE_REFUSED;
            why->which = (enum kstate_limit)r->element[1]->integer;
            why->current = r->element[2]->integer;
            why->retry_ms = r->element[3]->integer;
        } else if (code == 2) {
            res = KSTATE_NEED_SEED;
        }
    }
    freeReplyObject(r);
    if (res == KSTATE_OK && h->slot) {
        char conc[64];
        snprintf(conc, sizeof conc, "sluice:k:{%lld}:conc", (long long)h->key_id);
        redis_lease_keep(conc, h->lease);
    }
    return res;
}

int kstate_release(struct kstate_hold *h, int give_back, int64_t tpm_actual, int64_t month_actual, int timeout_ms)
{
    if (h->slot) {
        char conc[64];
        snprintf(conc, sizeof conc, "sluice:k:{%lld}:conc", (long long)h->key_id);
        redis_lease_forget(conc, h->lease);
    }
    int64_t month_delta = 0, tpm_back = 0;
    if (give_back) {
        month_delta = -h->month_tokens;
        tpm_back = h->tpm_reserved;
    } else {
        if (h->month_tokens && month_actual >= 0)
            month_delta = month_actual - h->month_tokens;
        if (h->tpm_reserved && tpm_actual >= 0)
            tpm_back = h->tpm_reserved - tpm_actual;
    }
    int calls = give_back && h->calls ? -1 : 0;
    if (!h->slot && !(give_back && h->qps) && !calls && !month_delta && !tpm_back)
        return 0;                           /* nothing held: no round trip */
    char names[5][64], v[5][24];
    key_names(h->key_id, h->day, h->month, names);
    const char *keys[5] = {names[0], names[1], names[2], names[3], names[4]};
    num(v[0], calls);
    num(v[1], month_delta);
    num(v[2], tpm_back);
    num(v[3], h->tpm_limit);
    const char *args[7] = {h->lease, give_back && h->qps ? "1" : "0", h->slot ? "1" : "0", v[0], v[1], v[2], v[3]};
    redisReply *r = redis_eval_call(script_release, 5, keys, 7, args, timeout_ms > 0 ? timeout_ms : 200);
    h->slot = h->qps = h->calls = 0;
    h->month_tokens = h->tpm_reserved = 0;
    if (!r)
        return -1;
    freeReplyObject(r);
    return 0;
}

#endif
