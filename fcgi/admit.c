/* admit.c: idempotency and key limits before any work is done (DESIGN.md stage 3, SPEC §12-13). */
#include "admit.h"

#include "account.h"
#include "dbpool.h"
#include "idem.h"
#include "keystate.h"
#include "kstate.h"
#include "layers.h"
#include "log.h"
#include "reply.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct conf *admit_conf;
static _Atomic int64_t last_expire_ms, budget_checked_ms;
static _Atomic int over_budget;
static const struct keystate_ops *keystate;   /* where the keys' limits live; chosen once */

int admit_init(const struct conf *c)
{
    admit_conf = c;
    /* sluice.conf's `state`: the mapped file, or Redis (its client started here). Chosen
     * here, not in keystate.c, which both implementations call (no circle of files). */
    if (!c->state[0])
        keystate = &keystate_file;
    else if (kstate_start(c->state) == 0)
        keystate = &keystate_redis;
    else
        return -1;
    return dbpool_init(c->database, c->db_connections, c->quota_db_wait_ms, c->db_mmap_bytes);
}


/* ---- idempotency (R-IDEM-1..3) ------------------------------------------- */

static void idem_housekeeping(struct dbconn *c, int64_t now)
{
    /* Expired records go at most once a minute per process; the budget is
     * re-read at most once a second (a count over up to max_records rows). */
    int64_t last = atomic_load(&last_expire_ms);
    if (now - last > 60000 && atomic_compare_exchange_strong(&last_expire_ms, &last, now))
        idem_expire(c, now, 10000);
    int64_t checked = atomic_load(&budget_checked_ms);
    if (now - checked > 1000 && atomic_compare_exchange_strong(&budget_checked_ms, &checked, now)) {
        int64_t records = 0, bytes = 0;
        if (idem_usage(c, &records, &bytes) == 0)
            atomic_store(&over_budget, records >= admit_conf->idem_max_records ||
                                           bytes >= admit_conf->idem_max_bytes);
    }
}

static void reply_replay(struct request *r, const struct idem_replay *rp)
{
    char extra[96];
    snprintf(extra, sizeof extra, "X-Idempotent-Replay: true\r\nContent-Length: %zu\r\n", rp->body_len);
    if (reply_head(r, rp->status >= 200 && rp->status < 300 ? rp->status : 200,
                   rp->content_type ? rp->content_type : "application/json", extra) == 0)
        reply_body(r, rp->body ? rp->body : "", rp->body_len, 0);
    r->replayed = 1;
}

static int admit_idempotency(struct request *r)
{
    const char *h = request_header(r, "Idempotency-Key");
    if (!h)
        return 0;
    if (idem_parse_key(h, r->idem_key) != 0) {
        reply_error(r, ERR_INVALID_HEADER, "Idempotency-Key must be 1-128 printable characters, quoted or a token",
                    NULL);
        return -1;
    }
    /* The record belongs to the credential: a member key, an endpoint (by id),
     * or a login session's user. */
    if (r->caller.key_id > 0)
        snprintf(r->idem_scope, sizeof r->idem_scope, "k:%lld", (long long)r->caller.key_id);
    else if (r->caller.endpoint >= 0)
        snprintf(r->idem_scope, sizeof r->idem_scope, "e:%lld",
                 (long long)r->snap->endpoints[r->caller.endpoint].id);
    else
        snprintf(r->idem_scope, sizeof r->idem_scope, "u:%lld", (long long)r->caller.user_id);
    /* R-IDEM-1: fingerprint = SHA-256(method + path + raw body). */
    struct buf fp_in;
    buf_init(&fp_in, 0);
    buf_printf(&fp_in, "%s %s\n", r->method, r->path);
    buf_append(&fp_in, r->body, r->body_len);
    char fp[65];
    sha256_hex(fp_in.data, fp_in.len, fp);
    buf_free(&fp_in);

    int64_t now = now_ms();
    struct idem_replay rp = {0};
    struct dbconn *c = dbpool_get();
    idem_housekeeping(c, now);
    enum idem_begin res = idem_begin(c, r->idem_scope, r->idem_key, fp, now,
                                     (int64_t)admit_conf->idem_ttl_minutes * 60000, &rp, r->arena, r->idem_token);
    dbpool_put(c);
    switch (res) {
    case IDEM_OWNED:
        r->idem_owned = 1;
        r->capture = arena_alloc(r->arena, sizeof *r->capture);
        buf_init(r->capture, (size_t)admit_conf->idem_max_record_bytes);
        return 0;
    case IDEM_IN_PROGRESS:
        /* R-USE-4: a refusal is recorded with its status, like any failure. */
        reply_error(r, ERR_IDEMPOTENCY_REQUEST_IN_PROGRESS,
                    "A request with this Idempotency-Key is still in progress; retry later.", NULL);
        return -1;
    case IDEM_MISMATCH:
        reply_error(r, ERR_IDEMPOTENCY_KEY_BODY_MISMATCH,
                    "This Idempotency-Key was used with a different request body.", NULL);
        return -1;
    case IDEM_NOT_STORED:
        reply_error(r, ERR_IDEMPOTENCY_RESULT_NOT_STORED,
                    "This Idempotency-Key already succeeded; its response was not kept (storage budget).", NULL);
        return -1;
    case IDEM_REPLAY:
        reply_replay(r, &rp);
        return -1;
    case IDEM_DB_ERROR:
    default:
        log_warn("request %s: idempotency store unavailable; serving without it", r->request_id);
        return 0;
    }
}

/* ---- key limits (R-KEY-1..5): keystate.h, the state file or Redis ----------- */

static int admit_key(struct request *r, const struct snap_key *k)
{
    r->key = k;
    if (keystate->admit(r) != 0) {
        r->key = NULL;
        return -1;
    }
    return 0;
}

int admit_request(struct request *r)
{
    if (admit_idempotency(r) != 0)
        return -1;
    const struct snap_key *k = r->caller.key;
    /* R-KEY-1: a key without limits does no key-limit work at all. */
    if (k && k->has_limits && admit_key(r, k) != 0)
        return -1;
    /* R-KEY-6: the tenant and user layers, ANDed with the key's limits. */
    if (layers_admit(r) != 0) {
        if (r->key)
            keystate->give_back(r);     /* R-KEY-6: everything the key's limits took */
        r->key = NULL;
        return -1;
    }
    return 0;
}

void admit_finish(struct request *r)
{
    layers_finish(r);
    if (r->key) {
        int64_t prompt, completion;
        int64_t actual = account_billable_tokens(r, &prompt, &completion);   /* -1: keep the estimate */
        keystate->finish(r, actual);
    }
    if (r->idem_owned) {
        int ok = r->status >= 200 && r->status < 300 && !r->client_gone && !r->error_code;
        struct dbconn *c = dbpool_get();
        if (ok) {
            int keep = !r->capture_overflow && !atomic_load(&over_budget);
            if (idem_done(c, r->idem_scope, r->idem_key, r->idem_token, r->status, r->response_content_type,
                          keep ? r->capture->data : NULL, keep ? r->capture->len : 0) != 0) {
                /* Better a retry that runs again than one stuck at 409 for the TTL. */
                log_warn("request %s: could not store the idempotent response; releasing the key", r->request_id);
                if (idem_release(c, r->idem_scope, r->idem_key, r->idem_token) != 0)
                    log_error("request %s: idempotency key left in progress until it expires", r->request_id);
            }
        } else if (idem_release(c, r->idem_scope, r->idem_key, r->idem_token) != 0) {
            log_error("request %s: idempotency key left in progress until it expires", r->request_id);
        }
        dbpool_put(c);
        buf_free(r->capture);
        r->idem_owned = 0;
    }
}

/* ---- R-SEC-6: authentication failures per client address ------------------ */

/* Is addr one of limits.trusted_proxies (comma- or space-separated)? */
static int trusted_proxy(const char *addr, size_t n)
{
    const char *p = admit_conf->trusted_proxies;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t k = strcspn(p, ", ");
        if (k && k == n && strncmp(p, addr, n) == 0)
            return 1;
        p += k;
    }
    return 0;
}

/* The client's address: REMOTE_ADDR, or when that is a trusted front, the
 * rightmost X-Forwarded-For hop that is not one (a client can prepend any
 * hops it likes, never append after the front's own). */
static size_t client_address_of(struct request *r, const char **addr);

/* ... and kept for the access log (R-OBS-2), which names the same client. */
static size_t client_address(struct request *r, const char **addr)
{
    size_t n = client_address_of(r, addr);
    if (!r->obs.client_addr)
        r->obs.client_addr = arena_strndup(r->arena, *addr, n);
    return n;
}

static size_t client_address_of(struct request *r, const char **addr)
{
    const char *remote = request_param(r, "REMOTE_ADDR");
    *addr = remote ? remote : "";
    size_t n = strlen(*addr);
    const char *xff = request_header(r, "X-Forwarded-For");
    if (!xff || !*admit_conf->trusted_proxies || !trusted_proxy(*addr, n))
        return n;
    const char *end = xff + strlen(xff);
    while (end > xff) {
        const char *start = end;
        while (start > xff && start[-1] != ',')
            start--;
        const char *a = start, *b = end;
        while (a < b && *a == ' ')
            a++;
        while (b > a && b[-1] == ' ')
            b--;
        if (b > a && !trusted_proxy(a, (size_t)(b - a))) {
            *addr = a;
            return (size_t)(b - a);
        }
        end = start > xff ? start - 1 : xff;
    }
    return n;
}

/* The client as the slow-down counts it: an IPv4 address, an IPv6 /64 (one
 * host can hold a whole /64, so rotating addresses in it gains nothing), an
 * IPv4-mapped IPv6 address as its IPv4; anything unparsable as its text. */
static uint64_t client_hash(const char *addr, size_t n)
{
    char text[INET6_ADDRSTRLEN + 1];
    unsigned char bin[16];
    const unsigned char *key = (const unsigned char *)addr;
    size_t klen = n;
    if (n < sizeof text) {
        memcpy(text, addr, n);
        text[n] = '\0';
        if (inet_pton(AF_INET, text, bin) == 1) {
            key = bin, klen = 4;
        } else if (inet_pton(AF_INET6, text, bin) == 1) {
            static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
            key = memcmp(bin, mapped, 12) == 0 ? bin + 12 : bin;
            klen = key == bin ? 8 : 4;
        }
    }
    uint64_t h = 1469598103934665603ULL;       /* FNV-1a */
    for (size_t i = 0; i < klen; i++)
        h = (h ^ key[i]) * 1099511628211ULL;
    return h;
}

/* The failure counter of (client, credential prefix), or of the client alone
 * when prefix is NULL. The two kinds live in separate halves of the table, so
 * spraying prefixes cannot push the per-client counters out; a full probe
 * window gives way to its oldest entry, so filling the table evicts rather
 * than blinds the slow-down. */
static struct shm_client *client_slot(struct request *r, const char *prefix, int create)
{
    const char *addr;
    size_t n = client_address(r, &addr);
    uint64_t h = client_hash(addr, n);
    if (prefix) {
        h = (h ^ '|') * 1099511628211ULL;
        for (const char *p = prefix; *p && p - prefix < 8; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    }
    if (!h)
        h = 1;
    const int half = SHM_MAX_CLIENTS / 2, base = prefix ? half : 0;
    struct shm_client *oldest = NULL;
    int64_t now = now_ms(), oldest_start = INT64_MAX;
    for (int k = 0; k < 8; k++) {
        struct shm_client *c = &r->shm->r->clients[base + (int)((h + (uint64_t)k) % (uint64_t)half)];
        uint64_t cur = atomic_load(&c->addr_hash);
        if (cur == h)
            return c;
        if (!create)
            continue;
        int64_t start = atomic_load(&c->window_start_ms);
        /* Free, or an entry whose window has ended: take it. */
        if ((cur == 0 || now - start >= admit_conf->auth_fail_window_ms) &&
            atomic_compare_exchange_strong(&c->addr_hash, &cur, h)) {
            atomic_store(&c->window_start_ms, now);
            atomic_store(&c->failures, 0);
            return c;
        }
        if (start < oldest_start)
            oldest = c, oldest_start = start;
    }
    if (oldest) {
        uint64_t cur = atomic_load(&oldest->addr_hash);
        if (atomic_compare_exchange_strong(&oldest->addr_hash, &cur, h)) {
            atomic_store(&oldest->window_start_ms, now);
            atomic_store(&oldest->failures, 0);
            return oldest;
        }
    }
    return NULL;
}

/* Seconds until the window of c ends when it is over limit, else 0. */
static int64_t client_wait(const struct shm_client *c, int64_t limit)
{
    if (!c)
        return 0;
    int64_t now = now_ms(), start = atomic_load(&c->window_start_ms);
    if (now - start >= admit_conf->auth_fail_window_ms || atomic_load(&c->failures) < limit)
        return 0;
    int64_t wait = (start + admit_conf->auth_fail_window_ms - now + 999) / 1000;
    return wait > 0 ? wait : 1;
}

int admit_auth_blocked(struct request *r, const char *credential)
{
    /* auth.fail_limit per address and credential prefix (one client's typos
     * never lock out its neighbours behind the same NAT or proxy), and ten
     * times that per address, against guessing with ever new keys. */
    int64_t a = client_wait(client_slot(r, credential ? credential : "", 0), admit_conf->auth_fail_limit);
    int64_t b = client_wait(client_slot(r, NULL, 0), (int64_t)admit_conf->auth_fail_limit * 10);
    int64_t wait = a > b ? a : b;
    if (!wait)
        return 0;
    char extra[64];
    snprintf(extra, sizeof extra, "Retry-After: %lld\r\n", (long long)wait);
    reply_error_extra(r, ERR_TOO_MANY_AUTH_FAILURES, NULL, extra);
    return 1;
}

static void client_count(struct shm_client *c)
{
    if (!c)
        return;
    int64_t now = now_ms(), start = atomic_load(&c->window_start_ms);
    if (now - start >= admit_conf->auth_fail_window_ms) {
        atomic_store(&c->window_start_ms, now);
        atomic_store(&c->failures, 0);
    }
    atomic_fetch_add(&c->failures, 1);
}

void admit_auth_failed(struct request *r, const char *credential)
{
    client_count(client_slot(r, credential ? credential : "", 1));
    client_count(client_slot(r, NULL, 1));
}
