/* fuzz_sse.c: the SSE splitter (fcgi/sse.c) on upstream bytes.
 *
 * Invariants: how the bytes arrive (all at once, one at a time, or in uneven
 * pieces) never changes the events or what is left at the end; the events' raw
 * bytes tile the input in order, with only line ends (stray blank lines) between
 * them and after the last; each complete event ends with a line end; its data is
 * NUL-terminated and no longer than its raw bytes; its event field lies inside its
 * raw bytes, on one line; with a limit, no event returned
 * is longer than the limit. */
#include "fuzz.h"

#include "buf.h"
#include "sse.h"

/* Every event of one run, flattened: raw, then data, per event, with lengths. */
struct trace {
    struct buf out;
    int events;
    const uint8_t *in;
    size_t n, pos;          /* input consumed by the events so far */
};

static int line_end(uint8_t c) { return c == '\n' || c == '\r'; }

static void record(struct trace *t, const struct sse_event *ev, int final)
{
    const uint8_t *in = t->in;
    size_t n = t->n;
    FUZZ_CHECK(ev->raw_len > 0 && ev->raw_len <= n, "raw_len %zu of %zu", ev->raw_len, n);
    FUZZ_CHECK(ev->data && ev->data[ev->data_len] == '\0', "data not NUL-terminated");
    FUZZ_CHECK(ev->data_len <= ev->raw_len, "data %zu longer than raw %zu", ev->data_len, ev->raw_len);
    while (t->pos + ev->raw_len <= n && memcmp(in + t->pos, ev->raw, ev->raw_len) != 0 && line_end(in[t->pos]))
        t->pos++;
    FUZZ_CHECK(t->pos + ev->raw_len <= n && memcmp(in + t->pos, ev->raw, ev->raw_len) == 0,
               "event %d is not the input's next bytes (at %zu)", t->events, t->pos);
    t->pos += ev->raw_len;
    if (!final) {
        char last = ev->raw[ev->raw_len - 1];
        FUZZ_CHECK(last == '\n' || last == '\r', "event does not end with a line end");
    }
    if (!ev->has_data)
        FUZZ_CHECK(ev->data_len == 0, "data without a data field");
    FUZZ_CHECK(ev->event && (ev->event_len == 0 || (ev->event >= ev->raw &&
                                                    ev->event + ev->event_len <= ev->raw + ev->raw_len)),
               "the event field is not inside the event's bytes");
    for (size_t i = 0; i < ev->event_len; i++)
        FUZZ_CHECK(ev->event[i] != '\n' && ev->event[i] != '\r', "a line end in the event field");
    char head[64];
    int k = snprintf(head, sizeof head, "%c%zu:%zu:%d:%d|", final ? 'F' : 'E', ev->raw_len, ev->data_len,
                     ev->has_data, ev->comment_only);
    buf_append(&t->out, head, (size_t)k);
    buf_append(&t->out, ev->raw, ev->raw_len);
    buf_append(&t->out, ev->data, ev->data_len);
    buf_append(&t->out, "|", 1);
    buf_append(&t->out, ev->event, ev->event_len);
    t->events++;
}

/* Feeds in[0..n) in pieces: step(i) is the size of piece i (0: everything). */
static int run(const uint8_t *in, size_t n, size_t max_event, size_t (*step)(const uint8_t *, size_t, size_t),
               struct trace *t)
{
    struct sse_parser p;
    struct sse_event ev;
    sse_init(&p, max_event);
    buf_init(&t->out, 0);
    t->events = 0;
    t->in = in;
    t->n = n;
    t->pos = 0;
    int rc = 0;
    size_t off = 0;
    for (size_t piece = 0; off < n; piece++) {
        size_t k = step ? step(in, n, piece) : n;
        if (k > n - off)
            k = n - off;
        if (sse_feed(&p, (const char *)in + off, k) != 0) {
            rc = -1;
            goto out;
        }
        off += k;
        int r;
        while ((r = sse_next(&p, &ev)) == 1) {
            if (max_event)
                FUZZ_CHECK(ev.raw_len <= max_event, "event of %zu bytes over the limit %zu", ev.raw_len,
                           max_event);
            record(t, &ev, 0);
        }
        if (r < 0) {
            rc = -1;
            goto out;
        }
    }
    if (sse_finish(&p, &ev))
        record(t, &ev, 1);
    FUZZ_CHECK(sse_finish(&p, &ev) == 0, "a second finish returned an event");
    for (size_t i = t->pos; i < n; i++)
        FUZZ_CHECK(line_end(in[i]), "byte %zu (0x%02x) is in no event", i, in[i]);
out:
    sse_free(&p);
    return rc;
}

static int same(const struct trace *a, const struct trace *b)
{
    return a->out.len == b->out.len && (a->out.len == 0 || memcmp(a->out.data, b->out.data, a->out.len) == 0);
}

static size_t step_one(const uint8_t *in, size_t n, size_t piece) { return 1; }

/* Uneven pieces chosen by the input itself. */
static size_t step_input(const uint8_t *in, size_t n, size_t piece)
{
    return 1 + (in[(piece * 7) % n] % 13);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    struct trace whole, ones, uneven, capped;
    FUZZ_CHECK(run(data, size, 0, NULL, &whole) == 0, "no limit, yet the splitter refused");
    FUZZ_CHECK(run(data, size, 0, step_one, &ones) == 0, "no limit, yet the splitter refused");
    FUZZ_CHECK(run(data, size, 0, step_input, &uneven) == 0, "no limit, yet the splitter refused");
    FUZZ_CHECK(same(&whole, &ones),
               "byte-at-a-time events differ from all-at-once (%d vs %d events)", ones.events, whole.events);
    FUZZ_CHECK(same(&whole, &uneven),
               "uneven pieces give other events (%d vs %d events)", uneven.events, whole.events);
    /* A small limit: only that nothing over it comes out (checked in run). */
    run(data, size, 1 + (size ? data[0] % 64 : 0), step_input, &capped);
    buf_free(&whole.out);
    buf_free(&ones.out);
    buf_free(&uneven.out);
    buf_free(&capped.out);
    return 0;
}
