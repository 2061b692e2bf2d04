/* fake.h: the structs and functions the stand-in upstream's files share (one program, not a library). */
#ifndef FAKE_H
#define FAKE_H

/* Every file includes this first, so the GNU extensions (memmem, accept4, POLLRDHUP) are seen everywhere. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

enum {
    HEAD_MAX = 64 * 1024,                        /* request line + headers */
    BODY_MAX = 64 * 1024 * 1024,                 /* decoded request body */
    IN_MAX = HEAD_MAX + BODY_MAX + 1024 * 1024,  /* raw input incl. chunk framing */
    HDRS_MAX = 128,
    CHUNK_LINE_MAX = 4096,                       /* chunk-size and trailer lines */
    JSON_DEPTH_MAX = 32,                         /* the scanner recurses on a small stack */
    THREAD_STACK = 256 * 1024,
    BUF_KEEP = 64 * 1024,                        /* buffer size a connection keeps between requests */
    LOOP_IN_MAX = 2 * HEAD_MAX,                  /* larger requests are read by a connection thread */
    LOOPS_MAX = 16,
    NAME_MAX_LEN = 64,
};

/* Literals rather than arrays so sizeof gives their length in every file. */
#define CT_JSON "application/json"
#define CONTINUE_100 "HTTP/1.1 100 Continue\r\n\r\n"

/* ---- fake_buf.c: growable buffers; allocation failure aborts (the test harness restarts us) ---- */

struct buf {
    char *p;
    size_t len, cap;
};

void *xrealloc(void *p, size_t n);
void buf_grow(struct buf *b, size_t more);
__attribute__((format(printf, 2, 3)))
void buf_printf(struct buf *b, const char *fmt, ...);
void buf_trim(struct buf *b);

/* Inline: every byte of every reply goes through these. */
static inline void buf_reserve(struct buf *b, size_t more)
{
    if (b->cap - b->len >= more)
        return;
    buf_grow(b, more);
}

static inline void buf_add(struct buf *b, const void *s, size_t n)
{
    if (n == 0)
        return;
    buf_reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static inline void buf_adds(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

static inline bool mem_is(const char *s, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n == l && memcmp(s, lit, l) == 0;
}

static inline bool mem_case_is(const char *s, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n == l && strncasecmp(s, lit, l) == 0;
}

/* ---- fake_behavior.c: behaviour directives ---- */

struct behavior {
    int status;            /* not 0/200: answer with this status and an OpenAI error body */
    int ttfb_ms;           /* delay before the response headers */
    int chunks;            /* content chunks in a stream, words in a reply */
    int gap_ms;            /* delay between stream events */
    int die_after;         /* >= 0: close abruptly after this many content chunks */
    int die_before;        /* close right after reading the request */
    int hang;              /* read the request, then never answer */
    int hang_after;        /* >= 0: stall after this many content chunks */
    int bad_json;          /* send malformed JSON */
    int role_chunks;       /* role-only chunks opening a chat stream */
    int prompt_tokens;     /* >= 0: override the reported usage */
    int completion_tokens;
    int retry_after;       /* >= 0: add Retry-After */
    int cors;              /* add CORS headers the gateway must strip */
    int info100;           /* send 100 Continue before the response */
    int prefix_cache;      /* chat: simulate a prefix cache (see fake_prefix.c) */
    int prefix_miss_ms;    /* prefix_cache: first-byte delay when the prefix is new here */
    int prefix_hit_ms;     /* prefix_cache: first-byte delay when it was seen */
    int error_after;       /* >= 0, a stream: an error event after this many content deltas (Anthropic: overloaded) */
    int cache_read_tokens; /* Anthropic usage: cache_read_input_tokens */
    int cache_write_tokens;/* Anthropic usage: cache_creation_input_tokens */
    int no_usage;          /* an old server: no usage in bodies, include_usage ignored */
    int client_error;      /* error_after on an OpenAI stream: the caller's error, not the server's */
    int reasoning_tokens;  /* Responses usage: output_tokens_details.reasoning_tokens (part of output_tokens) */
    int tokenize_count;    /* >= 0: the count POST /tokenize answers (else the prompt's words) */
    int tokenize_ms;       /* POST /tokenize only: delay before answering */
    int tokenize_status;   /* POST /tokenize only: not 0: answer this error status */
};

extern const struct behavior BEHAVIOR_DEFAULT;

struct request;
int parse_long(const char *s, size_t n, long *out);
int parse_double(const char *s, size_t n, double *out);
void kv_each(const char *s, size_t n, void (*fn)(void *, const char *, size_t, const char *, size_t), void *arg);
void behavior_parse(struct behavior *b, const char *s, size_t n);
void behavior_for(const struct request *r, struct behavior *b);

/* ---- process-wide state (defined in fake_upstream.c and fake_control.c) ---- */

/* Lives for the whole run; mu guards everything except the atomics. */
struct fake_state {
    char name[NAME_MAX_LEN + 1];
    char model[NAME_MAX_LEN + 8];
    const char *pidfile;
    pthread_mutex_t mu;
    struct behavior dflt;
    atomic_bool has_dflt;          /* lets requests skip mu when no default is set */
    atomic_bool health_off;
    int waiting, running;          /* running < 0: report the live in-flight count */
    double kv;
    bool legacy;
    bool has_last;
    struct buf last_head, last_body;   /* raw copy of the last data request */
    bool sleeping;                 /* vLLM sleep mode */
    long long wake_at_ms;          /* sleeping: awake from this monotonic time, 0 = not waking */
    int wake_delay_ms;             /* /wake_up takes this long */
    int n_gpus;
    long long gpu_temps[16];       /* DCGM stand-in readings; < 0 = blank sentinel */
};
extern struct fake_state G;

/* What GET /_fake/stats reports. */
struct fake_stats {
    atomic_long requests, inflight, max_inflight, completed, aborted, died, probes, wake_ups;
    atomic_long prefix_hits, prefix_misses;
    atomic_ulong seq;              /* completion ids */
};
extern struct fake_stats S;

/* ---- fake_http.c: HTTP requests ---- */

struct hdr {
    const char *name, *val;
    size_t nlen, vlen;
};

struct request {
    const char *method, *path, *query;
    size_t mlen, plen, qlen;
    int minor;                     /* HTTP/1.<minor> */
    bool keep_alive, is_head;
    struct hdr h[HDRS_MAX];
    int nh;
    size_t head_len;               /* request line + headers + blank line */
    size_t total_len;              /* bytes of input this request used */
    const char *body;
    size_t blen;
};

struct framing {
    long long clen;
    bool chunked, expect, close, keep;
};

/* One client connection; owned by the event loop or the thread serving it, freed by conn_drop(). */
struct conn {
    int fd;
    char *in;                      /* raw input; may hold the start of a pipelined request */
    size_t in_len, in_cap;
    size_t scanned;                /* where the search for the end of the head resumes */
    struct buf chunked;            /* decoded chunked body */
    struct buf rbody;              /* response body, or one SSE event */
    struct buf out;                /* bytes on their way to the socket */
    struct request req;
    /* Event-loop hand-over: a loop never blocks, so it parks what the socket won't take. */
    bool loop;                     /* served by an event loop: I/O must not block */
    bool served;                   /* handed over after answering: flush, then keep-alive or close */
    bool owed;                     /* that answer was a data request whose stats await the flush */
    bool counted;                  /* a data request is in the in-flight count (stats_begin) */
    bool settled;                  /* ... and left it before its last bytes (stats_settle) */
    bool keep_after;               /* that answer allowed keep-alive */
    struct buf pending;            /* bytes the loop could not send */
    char xhead[256];               /* extra response header lines for the next reply_head(), which empties it */
    size_t xhead_len;
    bool tl_open;                  /* a data request's span is open in the timeline (fake_timeline.c) */
    unsigned long tl_slot, tl_gen; /* its slot there, and the timeline's generation then */
};

const struct hdr *http_header(const struct request *r, const char *name);
int http_head_parse(struct request *r, const char *p, size_t n);
int http_framing_get(struct request *r, struct framing *f);
size_t http_head_find_end(const char *p, size_t n, size_t from);
void http_head_skip_blank(struct conn *c);
int http_read(struct conn *c);
void http_consume(struct conn *c);
void http_request_json(struct buf *o, const struct request *r, const char *body, size_t blen);

/* ---- fake_conn.c: connections, their blocking I/O and their threads ---- */

/* OUT_HANDOFF: an event loop declined the request before answering it (it would block). */
enum outcome { OUT_COMPLETE, OUT_ABORTED, OUT_DIED, OUT_HANDOFF };

extern pthread_attr_t conn_attr;   /* detached, small stack; set up once in loop_run() */

struct conn *conn_new(int fd);
void conn_drop(struct conn *c);
ssize_t conn_fill(struct conn *c, size_t limit);
int conn_send(struct conn *c, const char *p, size_t n);
int conn_wait(struct conn *c, int ms);
enum outcome conn_hang(struct conn *c);
void conn_linger(struct conn *c);
void conn_thread_start(struct conn *c);

/* ---- fake_loop.c: the event loops ---- */

void loop_run(int listen_fd);

/* ---- fake_reply.c: responses ---- */

const char *reply_reason(int status);
void reply_head(struct conn *c, const struct behavior *b, int status, const char *ctype, long long clen);
enum outcome reply_send(struct conn *c, const struct behavior *b, int status, const char *ctype);
enum outcome reply_error(struct conn *c, const struct behavior *b, int status, const char *msg);
enum outcome reply_ok(struct conn *c);
int reply_chunk(struct conn *c, const char *p, size_t n);
int reply_chunk_end(struct conn *c);

/* ---- fake_json.c: JSON string output and a minimal scanner ---- */

void json_put_chars(struct buf *b, const char *s, size_t n);
void json_put_str(struct buf *b, const char *s, size_t n);

enum jtype { JT_ERR, JT_OBJ, JT_ARR, JT_STR, JT_NUM, JT_TRUE, JT_FALSE, JT_NULL };
enum jctx { JC_NONE, JC_TEXT, JC_STREAM_OPTS };   /* JC_TEXT: strings here count as prompt words */

struct jscan {
    const char *p, *end;
    const char *model;             /* raw (still JSON-escaped) top-level "model" */
    size_t model_len;
    bool stream, include_usage;
    long words;                    /* prompt token estimate */
    long inputs;                   /* embeddings: number of inputs */
};

struct jval {
    enum jtype t;
    const char *s;
    size_t n;
    long elems;
    bool num_elems;                /* an array of numbers: token ids, i.e. one input */
};

long js_words(const char *s, size_t n);
void js_ws(struct jscan *j);
bool js_string(struct jscan *j, struct jval *v);
int js_next(struct jscan *j, char close);
enum jtype js_value(struct jscan *j, int depth, enum jctx ctx, const char *key, size_t kn, struct jval *v);
void json_scan(struct jscan *j, const char *body, size_t n);
char js_peek(struct jscan *j);
int js_open(struct jscan *j, char open);
int js_more(struct jscan *j, char close);
bool js_key(struct jscan *j, struct jval *k);
enum jtype js_read(struct jscan *j, struct jval *v);
bool js_is(const struct jval *v, const char *lit);

/* ---- routes: fake_route.c dispatches to the files below ---- */

enum outcome route_answer(struct conn *c);
int route_serve(struct conn *c);

/* fake_openai.c */
void openai_words(struct buf *o, int first, int last);
enum outcome openai_chat(struct conn *c, const struct behavior *b);
enum outcome openai_text(struct conn *c, const struct behavior *b);
enum outcome openai_embeddings(struct conn *c, const struct behavior *b);
enum outcome openai_models(struct conn *c, const struct behavior *b);

/* fake_anthropic_req.c: a Messages request, read as strictly as the real API; strings are raw views into the body */
enum { ANT_IDS_MAX = 16, ANT_STOPS_MAX = 8 };

struct anthropic_req {
    struct jval model;
    long max_tokens;
    bool has_max, has_messages, stream, count_only;
    long words;
    int ntools, choice;              /* choice: 0 auto, 1 a call is forced, -1 none */
    struct jval tool;                /* name the call uses: tool_choice's, else the first tool's */
    struct jval stops[ANT_STOPS_MAX];
    int nstops;
    bool user_turn, asks;            /* the last user turn (consecutive user messages), and its trigger */
    int nres, nuse;
    struct jval res_id[ANT_IDS_MAX], res[ANT_IDS_MAX];   /* its tool_result ids and contents (string or raw list) */
    struct jval use_id[ANT_IDS_MAX];   /* tool_use ids of the last assistant message */
    char err[256];
};

int anthropic_req_parse(struct anthropic_req *q, const char *body, size_t n);
void anthropic_req_result(struct buf *o, const struct jval *content);

/* fake_anthropic.c */
bool anthropic_wanted(const struct request *r);
enum outcome anthropic_error(struct conn *c, const struct behavior *b, int status, const char *msg);
enum outcome anthropic_messages(struct conn *c, const struct behavior *b);
enum outcome anthropic_count_tokens(struct conn *c, const struct behavior *b);
enum outcome anthropic_models(struct conn *c, const struct behavior *b);

/* fake_responses_req.c: a Responses request; strings are raw (still JSON-escaped, valid) views into the body */
struct responses_req {
    struct jval model, instructions, prev;   /* prev: previous_response_id; JT_STR when given */
    bool stream, store, has_input;
    long max_out;                    /* max_output_tokens, -1 when not given */
    long words;                      /* of instructions and the input's text: the input_tokens estimate */
    struct buf text;                 /* the input's text, JSON-escaped, pieces joined by spaces; caller frees */
    int status;                      /* of the error: 400 unless set */
    char param[80];                  /* the error's param ("" for null) and code (NULL for null) */
    const char *code;
    char err[256];
};

__attribute__((format(printf, 4, 5)))
int responses_req_fail(struct responses_req *q, const char *param, const char *code, const char *fmt, ...);
int responses_req_parse(struct responses_req *q, const char *body, size_t n);

/* fake_responses.c */
enum outcome responses_create(struct conn *c, const struct behavior *b);

/* fake_responses_store.c */
enum { RESP_ID_MAX = NAME_MAX_LEN + 32 };   /* resp_<name>_<n>, msg_<name>_<n> */
bool responses_stored(const char *id, size_t n);
void responses_store(const char *id, const char *input_id, const char *json, size_t jlen, const char *input,
                     size_t ilen);
enum outcome responses_item(struct conn *c, const struct behavior *b);
void responses_clear(void);

/* fake_prefix.c */
int prefix_prefill(struct conn *c, const struct behavior *b);
void prefix_clear(void);

/* fake_vllm.c */
bool vllm_sleeping(void);
bool vllm_asleep_locked(void);
enum outcome vllm_health(struct conn *c, const struct behavior *b);
enum outcome vllm_metrics(struct conn *c, const struct behavior *b);
enum outcome vllm_sleep(struct conn *c, const struct behavior *b);
enum outcome vllm_wake_up(struct conn *c, const struct behavior *b);
enum outcome vllm_is_sleeping(struct conn *c, const struct behavior *b);
enum outcome vllm_tokenize(struct conn *c, const struct behavior *b);
enum outcome vllm_dcgm(struct conn *c, const struct behavior *b);

/* fake_timeline.c */
void timeline_begin(struct conn *c);
void timeline_send(struct conn *c);
void timeline_end(struct conn *c);
void timeline_clear(void);
enum outcome ctl_timeline(struct conn *c, const struct behavior *b);

/* fake_control.c */
void stats_begin(struct conn *c);
/* The answer's last bytes are about to go: the request leaves the in-flight count now,
 * before the client can have them and send its next request (a gateway's cap measured
 * here must never look exceeded by our own bookkeeping). */
void stats_settle(struct conn *c);
void stats_end(struct conn *c, enum outcome o);
enum outcome ctl_behavior(struct conn *c, const struct behavior *b);
enum outcome ctl_reset(struct conn *c, const struct behavior *b);
enum outcome ctl_stats(struct conn *c, const struct behavior *b);
enum outcome ctl_health(struct conn *c, const struct behavior *b);
enum outcome ctl_metrics(struct conn *c, const struct behavior *b);
enum outcome ctl_sleep_config(struct conn *c, const struct behavior *b);
enum outcome ctl_dcgm(struct conn *c, const struct behavior *b);

#endif
