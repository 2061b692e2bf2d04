/* forward.c: libcurl transfers driven from the worker's loop (DESIGN.md stage 6). */
#include "forward.h"

#include "auto.h"
#include "guard.h"
#include "log.h"
#include "pathcheck.h"
#include "relay.h"
#include "upstream.h"
#include "reply.h"
#include "route.h"
#include "util.h"

#include <ctype.h>
#include <poll.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

enum outcome {
    OUT_DONE,           /* an upstream answer, relayed or ready in the buffer */
    OUT_CONNECT,        /* no response byte: connection-level failure */
    OUT_BROKEN,         /* the body stopped early */
    OUT_FIRST_BYTE,     /* first-byte timeout */
    OUT_IDLE,           /* idle timeout */
    OUT_CLIENT_GONE,
    OUT_TOO_LARGE,
};

/* Client headers never forwarded: credentials, hop-by-hop, sluice's own (R-API-5, R-ANT-4). */
static int header_private(const char *env_name)
{
    static const char *drop[] = {"HTTP_AUTHORIZATION", "HTTP_COOKIE", "HTTP_HOST", "HTTP_CONTENT_LENGTH",
                                 "HTTP_CONNECTION", "HTTP_TRANSFER_ENCODING", "HTTP_EXPECT", "HTTP_KEEP_ALIVE",
                                 "HTTP_TE", "HTTP_UPGRADE", "HTTP_X_API_KEY", "HTTP_X_REQUEST_ID",
                                 "HTTP_CONTENT_TYPE", "HTTP_ACCEPT_ENCODING", "HTTP_IDEMPOTENCY_KEY"};
    if (strncmp(env_name, "HTTP_PROXY", 10) == 0 || strncmp(env_name, "HTTP_X_SLUICE_", 14) == 0)
        return 1;
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        if (strcmp(env_name, drop[i]) == 0)
            return 1;
    return 0;
}

static struct curl_slist *forward_headers(struct request *r)
{
    struct curl_slist *h = NULL;
    const char *ct = request_param(r, "CONTENT_TYPE");
    if (r->fwd_len > 0 || (ct && *ct))
        h = curl_slist_append(h, arena_printf(r->arena, "Content-Type: %s",
                                              ct && *ct && pathcheck_header_ok(ct, 256) ? ct : "application/json"));
    h = curl_slist_append(h, arena_printf(r->arena, "X-Request-Id: %s", r->request_id));
    h = curl_slist_append(h, "Expect:");        /* no 100-continue round trip */
    if (r->ep->upstream_auth && *r->ep->upstream_auth)
        h = curl_slist_append(h, arena_printf(r->arena, "Authorization: Bearer %s", r->ep->upstream_auth));
    for (char **e = r->w->fcgi.envp; *e; e++) {
        if (strncmp(*e, "HTTP_", 5) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char env_name[128];
        size_t n = (size_t)(eq - *e);
        if (n >= sizeof env_name)
            continue;
        memcpy(env_name, *e, n);
        env_name[n] = '\0';
        if (header_private(env_name) || !pathcheck_header_ok(eq + 1, 8192))
            continue;
        /* HTTP_X_FOO_BAR -> X-Foo-Bar */
        char name[128];
        size_t k = 0;
        int up = 1;
        for (const char *p = env_name + 5; *p && k < sizeof name - 1; p++) {
            char c = *p == '_' ? '-' : *p;
            name[k++] = up ? c : (char)tolower((unsigned char)c);
            up = c == '-';
        }
        name[k] = '\0';
        h = curl_slist_append(h, arena_printf(r->arena, "%s: %s", name, eq + 1));
    }
    return h;
}

void forward_curl_init(CURL *c)
{
    /* Options that never change: set once, so no curl_easy_reset (which frees
     * and reallocates curl's buffers) is needed between requests. */
    upstream_safe_defaults(c);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, relay_header_cb);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, relay_write_cb);
}

static void forward_setup(struct request *r, struct relay *x, struct curl_slist *hdrs)
{
    CURL *c = r->w->curl;
    const char *url = arena_printf(r->arena, "%s%s", r->replica->url, r->upstream_path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)r->ep->connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    /* The method: each request sets every option the previous one may have changed. */
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, NULL);
    curl_easy_setopt(c, CURLOPT_NOBODY, 0L);
    if (strcmp(r->method, "GET") == 0 && r->fwd_len == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(r->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->fwd_body ? r->fwd_body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->fwd_len);
        if (strcmp(r->method, "POST") != 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
    }
}

/* R-SSE-6: the front server closing the FastCGI connection means the client left. */
static int fcgi_closed(struct request *r)
{
    char c;
    ssize_t n = recv(r->w->fcgi.ipcFd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Drives one transfer to its end from this thread's loop (curl multi), with
 * the phase timeouts of R-RT-7, keep-alives of R-SSE-2 and the client watch. */
static enum outcome forward_transfer(struct request *r, struct relay *x)
{
    CURLM *m = r->w->multi;
    struct curl_slist *hdrs = forward_headers(r);
    forward_setup(r, x, hdrs);
    curl_multi_add_handle(m, r->w->curl);
    int64_t start = mono_ms();
    int watch_fcgi = 1;
    enum outcome out = OUT_DONE;
    CURLcode result = CURLE_OK;
    for (;;) {
        int running = 0;
        curl_multi_perform(m, &running);
        if (x->abort != ABORT_NONE || !running)
            break;
        int64_t now = mono_ms();
        int64_t wait = 1000;
        if (!x->upstream_bytes) {
            int64_t left = start + r->ep->first_byte_timeout_ms - now;
            if (left <= 0) { out = OUT_FIRST_BYTE; break; }
            wait = min64(wait, left);
        } else {
            int64_t left = x->last_upstream_ms + r->ep->idle_timeout_ms - now;
            if (left <= 0) { out = OUT_IDLE; break; }
            wait = min64(wait, left);
        }
        /* R-SSE-2: comments only on a stream (or before the upstream said what
         * it sends); a buffered answer (an upstream error) must keep its head. */
        if (r->stream && x->mode != RELAY_BUFFER) {
            int64_t left = x->last_client_ms + r->conf->keepalive_ms - now;
            if (left <= 0) {
                if (relay_keepalive(x) != 0) { out = OUT_CLIENT_GONE; break; }
                left = r->conf->keepalive_ms;
            }
            wait = min64(wait, left);
        }
        struct curl_waitfd wfd = {.fd = r->w->fcgi.ipcFd, .events = CURL_WAIT_POLLIN, .revents = 0};
        curl_multi_poll(m, watch_fcgi ? &wfd : NULL, watch_fcgi ? 1 : 0, (int)(wait > 0 ? wait : 1), NULL);
        if (watch_fcgi && wfd.revents) {
            if (fcgi_closed(r)) {
                r->client_gone = 1;
                out = OUT_CLIENT_GONE;
                break;
            }
            watch_fcgi = 0;     /* a record we do not expect; stop watching rather than spin */
        }
    }
    int msgs;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(m, &msgs)))
        if (msg->msg == CURLMSG_DONE)
            result = msg->data.result;
    curl_multi_remove_handle(m, r->w->curl);   /* aborts the transfer if still running */
    curl_slist_free_all(hdrs);
    if (out != OUT_DONE)
        return out;
    if (x->abort == ABORT_CLIENT_GONE || r->client_gone)
        return OUT_CLIENT_GONE;
    if (x->abort == ABORT_TOO_LARGE)
        return OUT_TOO_LARGE;
    if (result == CURLE_OK)
        return OUT_DONE;
    if (result == CURLE_OPERATION_TIMEDOUT && !x->upstream_bytes)
        return OUT_CONNECT;
    return x->upstream_bytes && x->status ? OUT_BROKEN : OUT_CONNECT;
}

static int retryable_status(long s) { return s == 502 || s == 503 || s == 504; }

void forward_run(struct request *r)
{
    for (;;) {
        struct relay x;
        guard_forward_body(r);
        relay_init(&x, r);
        const struct snap_replica *rep = r->replica;
        shm_active_add(r->shm, rep->slot, 1);
        enum outcome out = forward_transfer(r, &x);
        shm_active_add(r->shm, rep->slot, -1);

        /* R-HC-8: what may be tried again on another replica. */
        int retry_ok = !r->data_sent && r->candidate_retries == 0;
        int failed_before_data =
            out == OUT_CONNECT || (out == OUT_DONE && retryable_status(x.status)) ||
            (out == OUT_BROKEN && x.mode == RELAY_SSE && !r->data_sent);
        if (failed_before_data) {
            route_report(r, rep, 0);
            if (retry_ok && r->n_excluded < (int)(sizeof r->excluded / sizeof r->excluded[0])) {
                r->excluded[r->n_excluded++] = (int)(rep - r->snap->replicas);
                const struct snap_replica *keep_rep = r->replica;
                if (route_choose(r, 0) == 0) {
                    r->retries++;
                    r->candidate_retries++;
                    log_info("request %s: retrying on replica %lld after a failure of replica %lld",
                             r->request_id, (long long)r->replica->id, (long long)rep->id);
                    relay_free(&x);
                    continue;
                }
                r->replica = keep_rep;
            }
            /* R-AUTO-5: then the next candidate model, body model rewritten. */
            int degraded = 0;
            while (!r->data_sent && !r->headers_sent && auto_next(r) == 0)
                if (route_choose(r, 0) == 0) {
                    degraded = 1;
                    break;
                }
            if (degraded) {
                r->retries++;
                r->candidate_retries = 0;
                log_info("request %s: model auto degrades to %s (level %d)", r->request_id, r->model,
                         r->auto_plan->pos);
                relay_free(&x);
                continue;
            }
            if (r->auto_plan)
                reply_error(r, "auto_routing_all_failed", NULL, NULL);
            else if (out == OUT_DONE)
                relay_send_buffered(&x);        /* pass the upstream's own 5xx on */
            else if (r->data_sent || r->headers_sent)
                reply_error(r, "upstream_error", "the upstream stream broke", NULL);
            else
                reply_error(r, "upstream_error", "the upstream could not be reached", NULL);
            relay_free(&x);
            return;
        }
        switch (out) {
        case OUT_DONE:
            route_report(r, rep, x.status < 500);
            if (x.mode == RELAY_SSE)
                relay_finish_sse(&x);
            else
                relay_send_buffered(&x);
            break;
        case OUT_FIRST_BYTE:
            route_report(r, rep, 0);
            reply_error(r, "upstream_timeout", NULL, NULL);
            break;
        case OUT_IDLE:
            route_report(r, rep, 0);
            reply_error(r, "upstream_idle_timeout", NULL, NULL);
            break;
        case OUT_BROKEN:
            route_report(r, rep, 0);
            reply_error(r, r->data_sent ? "upstream_error" : "upstream_bad_response",
                        "the upstream response ended early", NULL);
            break;
        case OUT_TOO_LARGE:
            reply_error(r, "upstream_bad_response", "the upstream response is over the size limit", NULL);
            break;
        case OUT_CLIENT_GONE:
        case OUT_CONNECT:
            break;
        }
        if (out == OUT_CLIENT_GONE) {
            r->error_code = "client_disconnected";
            snprintf(r->finish_reason, sizeof r->finish_reason, "client_disconnected");
            log_info("request %s: client disconnected; upstream transfer aborted", r->request_id);
        }
        relay_free(&x);
        return;
    }
}
