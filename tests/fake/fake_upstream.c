/* fake_upstream.c: start-up of a stand-in OpenAI/vLLM upstream whose behaviour the request chooses (tests, bench, demo). */

/*
 * sluice-fake-upstream --port N [--host 127.0.0.1] [--name NAME] [--pidfile F]
 *
 * Serves what a vLLM replica serves (chat, completions, embeddings, models,
 * /health, /metrics), the Anthropic Messages and OpenAI Responses APIs, and
 * /echo, with byte-correct HTTP/1.1 framing, so the end-to-end tests and
 * benchmarks can run sluice where there is no GPU.
 *
 * A request picks how the "model" misbehaves with directives (struct behavior),
 * gathered in this order, later wins:
 *   1. the default set by POST /_fake/behavior            k=v k=v
 *   2. the request header X-Fake-Behavior                  k=v;k=v
 *   3. the first "[[fake k=v k=v]]" in the raw request body, which reaches us
 *      through the gateway untouched because it sits inside the prompt.
 * GET /_fake/stats then tells the test what this upstream saw; GET /_fake/timeline
 * when each of the last 65536 data requests arrived, was answered and finished
 * (monotonic microseconds, fake_timeline.c), for bench/queue.py's handoff gaps.
 *
 * Prefix cache (prefix_cache=1, prefix_miss_ms=N default 150, prefix_hit_ms=N
 * default 10): chat requests answer faster when this replica has seen the
 * conversation so far, as an engine's prefix (KV) cache does. The prefix of a
 * request is its messages minus the last one; it hits if a bounded LRU set
 * (4096 hashes of role + raw content per message) holds it, and the first byte
 * waits prefix_hit_ms, else prefix_miss_ms (on top of ttfb_ms). Before
 * answering, the set takes the hash of the request's messages and of those plus
 * the assistant answer being sent, so a next turn that appends that answer and a
 * new user message hits (as does one that appends only a user message). A first
 * turn always misses. Stats: prefix_hits, prefix_misses; /_fake/reset empties it.
 *
 * Anthropic (fake_anthropic.c): POST /v1/messages and /v1/messages/count_tokens,
 * and GET /v1/models when anthropic-version is sent. They need x-api-key and
 * anthropic-version, refuse an Authorization header (a credential leak), and
 * validate the body as the real API does (unknown members, roles, tool ids, ranges).
 * The directives apply as to chat, in Anthropic terms: status=N answers with
 * that status's Anthropic error (429 with retry-after, 529 with x-should-retry);
 * role_chunks=N sends N pings after message_start; die_after, hang_after and
 * bad_json count content deltas; error_after=N sends an overloaded error event;
 * cache_read_tokens / cache_write_tokens fill the cache usage fields. The
 * answer, its tool calls and its token counts are described in that file.
 *
 * OpenAI Responses (fake_responses.c): POST /v1/responses, plain or streamed as
 * typed events (response.created ... response.completed, no [DONE]), and GET /
 * DELETE /v1/responses/{id}, POST .../{id}/cancel, GET .../{id}/input_items for
 * the responses this process made (ids resp_<name>_<n>: a test can tell which
 * replica made one; previous_response_id naming another is a 404). The directives
 * apply as to chat; reasoning_tokens=N fills output_tokens_details, and
 * cache_read_tokens the input's cached_tokens. GET /_fake/stats "last" is the last
 * data request as it arrived (method, path, query, lowercased headers, body).
 *
 * vLLM sleep mode (R-WAKE): POST /sleep puts the model to sleep; POST /wake_up
 * answers at once and the model is awake delay_ms later (POST /_fake/sleep-config
 * "delay_ms=N sleeping=0|1"); GET /is_sleeping says which. While asleep /health
 * and data requests answer 503. A DCGM exporter stand-in (R-HC-7): GET
 * /dcgm/metrics serves DCGM_FI_DEV_GPU_TEMP per GPU as set by POST /_fake/dcgm
 * "temps=64/90/blank" ("blank" is DCGM's int64 no-data sentinel).
 *
 * Request classes (they decide what is counted):
 *   data     /v1/..., /echo..., unknown paths: directives apply, counted in stats;
 *   probe    GET /health, GET /metrics: no directives, counted only as "probes",
 *            so a health daemon polling us does not disturb a test's counts;
 *   control  /_fake/...: never counted.
 *
 * Concurrency: all request handling is written as plain blocking code for one
 * connection on one thread.  A thread switch per request would make this server,
 * not the gateway, the bottleneck of a benchmark, so one epoll loop per CPU
 * answers the requests that need no waiting (complete in the buffer, no delays,
 * not a stream) inline, and hands any other connection to its own thread for
 * the rest of its life (fake_loop.c).
 *
 * Files: fake_upstream.c start-up (options, listener, signals); fake_loop.c the
 * event loops; fake_conn.c a connection's socket I/O and thread; fake_http.c
 * request parsing; fake_reply.c response writing; fake_route.c the route table
 * and request classes; fake_behavior.c the directives; fake_openai.c,
 * fake_anthropic.c (its request reader fake_anthropic_req.c), fake_responses.c
 * (fake_responses_req.c its reader, fake_responses_store.c the responses it keeps
 * and the routes reading them), fake_vllm.c, fake_prefix.c, fake_control.c and
 * fake_timeline.c the routes; fake_json.c and fake_buf.c JSON and buffers;
 * fake.h what they share.
 */
#include "fake.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* Process-wide state (fake.h): set up here, then read and changed by the routes. */
struct fake_state G = { .mu = PTHREAD_MUTEX_INITIALIZER, .running = -1 };

struct options {
    const char *host, *port, *name, *pidfile;
};

static void usage_exit(const char *why)
{
    if (why)
        fprintf(stderr, "sluice-fake-upstream: %s\n", why);
    fputs("usage: sluice-fake-upstream --port N [--host 127.0.0.1] [--name NAME] [--pidfile F]\n", stderr);
    exit(2);
}

static void options_parse(int argc, char **argv, struct options *o)
{
    *o = (struct options){ .host = "127.0.0.1", .name = "fake" };
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **dst = strcmp(a, "--port") == 0 ? &o->port
                         : strcmp(a, "--host") == 0 ? &o->host
                         : strcmp(a, "--name") == 0 ? &o->name
                         : strcmp(a, "--pidfile") == 0 ? &o->pidfile : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            usage_exit(NULL);
        if (!dst)
            usage_exit("unknown option");
        if (!v)
            usage_exit("option needs a value");
        *dst = v;
    }
    long port;
    if (!o->port || parse_long(o->port, strlen(o->port), &port) < 0 || port < 0 || port > 65535)
        usage_exit("--port must be 0..65535");
    static const char NAME_CHARS[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
    size_t n = strlen(o->name);
    if (n == 0 || n > NAME_MAX_LEN || strspn(o->name, NAME_CHARS) != n)
        usage_exit("--name must be 1-64 characters of [A-Za-z0-9._-] (it goes into headers and JSON)");
}

static int listen_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static int listen_open(const char *host, const char *port)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *res, *ai;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "sluice-fake-upstream: cannot resolve %s: %s\n", host, gai_strerror(rc));
        exit(1);
    }
    int fd = -1, one = 1;
    for (ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        fprintf(stderr, "sluice-fake-upstream: cannot listen on %s:%s: %s\n", host, port, strerror(errno));
        exit(1);
    }
    return fd;
}

static sigset_t stop_signals;

/* Waits for SIGTERM/SIGINT on its own thread, so no worker is interrupted mid-write. */
static void *signal_main(void *arg)
{
    (void)arg;
    int sig;
    sigwait(&stop_signals, &sig);
    if (G.pidfile)
        unlink(G.pidfile);
    _exit(0);
}

static void signals_setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);   /* inherited by every thread */
    pthread_t t;
    if (pthread_create(&t, NULL, signal_main, NULL) != 0) {
        fputs("sluice-fake-upstream: cannot start the signal thread\n", stderr);
        exit(1);
    }
}

static void pidfile_write(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0) {
        fprintf(stderr, "sluice-fake-upstream: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    struct options o;
    options_parse(argc, argv, &o);
    snprintf(G.name, sizeof G.name, "%s", o.name);
    snprintf(G.model, sizeof G.model, "%s-model", o.name);
    signals_setup();
    int lfd = listen_open(o.host, o.port);
    if (o.pidfile) {
        pidfile_write(o.pidfile);
        G.pidfile = o.pidfile;
    }
    printf("listening on %d\n", listen_port(lfd));
    fflush(stdout);
    loop_run(lfd);
    return 0;
}
