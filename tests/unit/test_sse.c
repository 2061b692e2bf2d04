/* test_sse.c: the incremental SSE splitter (fcgi/sse.h, REFERENCE §8), fed whole, byte by byte and split at every offset. */
#include "check.h"

#include "buf.h"
#include "sse.h"

#include <stdlib.h>
#include <string.h>

#define MAX_EV 4

struct want_event {
    const char *raw;
    const char *data;
    int has_data, comment_only;
};

struct sse_case {
    const char *name;
    const char *input;
    int exact;              /* no stray blank lines: the raw bytes concatenate to the input */
    int n_events;
    struct want_event ev[MAX_EV];
    const char *fin_raw;    /* sse_finish: NULL when nothing remains */
    const char *fin_data;
};

static const struct sse_case cases[] = {
    {"LF", "data: a\n\n", 1, 1, {{"data: a\n\n", "a", 1, 0}}, NULL, NULL},
    {"CRLF", "data: a\r\n\r\n", 1, 1, {{"data: a\r\n\r\n", "a", 1, 0}}, NULL, NULL},
    /* a lone CR ends a line; the next event's first byte shows it is not CRLF */
    {"lone CR", "data: a\r\rdata: b\n\n", 1, 2,
     {{"data: a\r\r", "a", 1, 0}, {"data: b\n\n", "b", 1, 0}}, NULL, NULL},
    {"lone CR lines", "data: a\rdata: b\r\r: x\n\n", 1, 2,
     {{"data: a\rdata: b\r\r", "a\nb", 1, 0}, {": x\n\n", "", 0, 1}}, NULL, NULL},
    /* CRLF split over feeds must stay one terminator, not CR + blank LF */
    {"CRLF then data", "data: a\r\ndata: b\r\n\r\n", 1, 1, {{"data: a\r\ndata: b\r\n\r\n", "a\nb", 1, 0}},
     NULL, NULL},
    {"mixed terminators", "data: a\r\ndata: b\n\r\n", 1, 1, {{"data: a\r\ndata: b\n\r\n", "a\nb", 1, 0}},
     NULL, NULL},
    {"CR then CRLF", "data: a\r\r\ndata: b\n\n", 1, 2,
     {{"data: a\r\r\n", "a", 1, 0}, {"data: b\n\n", "b", 1, 0}}, NULL, NULL},
    {"three data lines", "data: a\ndata: b\ndata: c\n\n", 1, 1,
     {{"data: a\ndata: b\ndata: c\n\n", "a\nb\nc", 1, 0}}, NULL, NULL},
    /* one leading space only is removed */
    {"two spaces", "data:  two\n\n", 1, 1, {{"data:  two\n\n", " two", 1, 0}}, NULL, NULL},
    {"no space", "data:x\n\n", 1, 1, {{"data:x\n\n", "x", 1, 0}}, NULL, NULL},
    {"trailing space kept", "data: x \n\n", 1, 1, {{"data: x \n\n", "x ", 1, 0}}, NULL, NULL},
    {"colon in value", "data: a:b: c\n\n", 1, 1, {{"data: a:b: c\n\n", "a:b: c", 1, 0}}, NULL, NULL},
    {"empty data", "data:\n\n", 1, 1, {{"data:\n\n", "", 1, 0}}, NULL, NULL},
    {"data without colon", "data\n\n", 1, 1, {{"data\n\n", "", 1, 0}}, NULL, NULL},
    {"empty data lines joined", "data\ndata\n\n", 1, 1, {{"data\ndata\n\n", "\n", 1, 0}}, NULL, NULL},
    {"keep-alive", ": keep-alive\n\n", 1, 1, {{": keep-alive\n\n", "", 0, 1}}, NULL, NULL},
    {"bare colon", ":\n\n", 1, 1, {{":\n\n", "", 0, 1}}, NULL, NULL},
    {"comment then data", ": c\ndata: x\n\n", 1, 1, {{": c\ndata: x\n\n", "x", 1, 0}}, NULL, NULL},
    {"event line", "event: message_start\ndata: {\"type\":\"message_start\"}\n\n", 1, 1,
     {{"event: message_start\ndata: {\"type\":\"message_start\"}\n\n", "{\"type\":\"message_start\"}", 1, 0}},
     NULL, NULL},
    {"event only", "event: ping\n\n", 1, 1, {{"event: ping\n\n", "", 0, 0}}, NULL, NULL},
    {"id retry unknown", "id: 7\nretry: 10\nfoo: bar\ndata: x\n\n", 1, 1,
     {{"id: 7\nretry: 10\nfoo: bar\ndata: x\n\n", "x", 1, 0}}, NULL, NULL},
    {"not data fields", "dat: x\ndatax: y\ndata : z\nDATA: w\n\n", 1, 1,
     {{"dat: x\ndatax: y\ndata : z\nDATA: w\n\n", "", 0, 0}}, NULL, NULL},
    {"OpenAI stream", "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n", 1, 3,
     {{"data: {\"a\":1}\n\n", "{\"a\":1}", 1, 0},
      {"data: {\"a\":2}\n\n", "{\"a\":2}", 1, 0},
      {"data: [DONE]\n\n", "[DONE]", 1, 0}},
     NULL, NULL},
    {"Anthropic stream",
     "event: ping\ndata: {}\r\n\r\n: c\r\n\r\nevent: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n", 1, 3,
     {{"event: ping\ndata: {}\r\n\r\n", "{}", 1, 0},
      {": c\r\n\r\n", "", 0, 1},
      {"event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n", "{\"type\":\"message_stop\"}", 1, 0}},
     NULL, NULL},
    {"utf-8", "data: h\xc3\xa9 \xe2\x82\xac\n\n", 1, 1, {{"data: h\xc3\xa9 \xe2\x82\xac\n\n", "h\xc3\xa9 \xe2\x82\xac", 1, 0}},
     NULL, NULL},
    /* stray blank lines are not events and are not relayed */
    {"stray blank lines", "\n\r\n\rdata: 1\n\n\n\r\ndata: 2\n\n\n", 0, 2,
     {{"data: 1\n\n", "1", 1, 0}, {"data: 2\n\n", "2", 1, 0}}, NULL, NULL},
    /* sse_finish hands back an event cut off before its blank line */
    {"unterminated", "data: partial", 1, 0, {{0}}, "data: partial", "partial"},
    {"unterminated line", "data: 1\n\ndata: 2\n", 1, 1, {{"data: 1\n\n", "1", 1, 0}}, "data: 2\n", "2"},
    {"unterminated two lines", "data: 1\ndata: 2", 1, 0, {{0}}, "data: 1\ndata: 2", "1\n2"},
    {"empty input", "", 1, 0, {{0}}, NULL, NULL},
    {"only blank lines", "\n\n\r\n", 0, 0, {{0}}, NULL, NULL},
};

struct got {
    int n;
    struct buf raw[MAX_EV + 4], data[MAX_EV + 4];
    int has_data[MAX_EV + 4], comment_only[MAX_EV + 4];
    int fin;
    struct buf fin_raw, fin_data;
    struct buf all_raw;     /* every raw byte handed out, in order */
    int feed_rc;
};

static void got_init(struct got *g)
{
    memset(g, 0, sizeof *g);
    for (int i = 0; i < MAX_EV + 4; i++) {
        buf_init(&g->raw[i], 0);
        buf_init(&g->data[i], 0);
    }
    buf_init(&g->fin_raw, 0);
    buf_init(&g->fin_data, 0);
    buf_init(&g->all_raw, 0);
}

static void got_free(struct got *g)
{
    for (int i = 0; i < MAX_EV + 4; i++) {
        buf_free(&g->raw[i]);
        buf_free(&g->data[i]);
    }
    buf_free(&g->fin_raw);
    buf_free(&g->fin_data);
    buf_free(&g->all_raw);
}

static void drain(struct sse_parser *p, struct got *g)
{
    struct sse_event ev;
    while (sse_next(p, &ev) == 1) {
        if (g->n < MAX_EV + 4) {
            buf_append(&g->raw[g->n], ev.raw, ev.raw_len);
            buf_append(&g->data[g->n], ev.data, ev.data_len);
            g->has_data[g->n] = ev.has_data;
            g->comment_only[g->n] = ev.comment_only;
        }
        buf_append(&g->all_raw, ev.raw, ev.raw_len);
        g->n++;
    }
}

/* Feeds input in pieces given by cuts (ascending offsets, 0-terminated list). */
static void run(const char *input, size_t len, const size_t *cuts, size_t n_cuts, struct got *g)
{
    struct sse_parser p;
    sse_init(&p, 0);
    size_t at = 0;
    for (size_t k = 0; k <= n_cuts; k++) {
        size_t end = k < n_cuts ? cuts[k] : len;
        if (sse_feed(&p, input + at, end - at) != 0)
            g->feed_rc = -1;
        at = end;
        drain(&p, g);
    }
    struct sse_event ev;
    g->fin = sse_finish(&p, &ev);
    if (g->fin) {
        buf_append(&g->fin_raw, ev.raw, ev.raw_len);
        buf_append(&g->fin_data, ev.data, ev.data_len);
        buf_append(&g->all_raw, ev.raw, ev.raw_len);
        /* the data pointer is NUL-terminated */
        if (ev.data[ev.data_len] != '\0')
            g->feed_rc = -2;
    }
    /* nothing further after finish */
    if (sse_next(&p, &ev) != 0 || sse_finish(&p, &ev) != 0)
        g->feed_rc = -3;
    sse_free(&p);
}

static int bufeq(const struct buf *b, const char *s)
{
    size_t n = strlen(s);
    return b->len == n && (n == 0 || memcmp(b->data, s, n) == 0);
}

/* One CHECK per (case, split): compares everything, names the first difference. */
static void compare(const struct sse_case *c, const struct got *g, const char *how)
{
    char why[200] = "";
    if (g->feed_rc)
        snprintf(why, sizeof why, "feed/finish rc %d", g->feed_rc);
    else if (g->n != c->n_events)
        snprintf(why, sizeof why, "%d events, want %d", g->n, c->n_events);
    for (int i = 0; !*why && i < c->n_events; i++) {
        if (!bufeq(&g->raw[i], c->ev[i].raw))
            snprintf(why, sizeof why, "event %d raw differs (len %zu)", i, g->raw[i].len);
        else if (!bufeq(&g->data[i], c->ev[i].data))
            snprintf(why, sizeof why, "event %d data \"%.80s\"", i,
                     g->data[i].data ? g->data[i].data : "");
        else if (g->has_data[i] != c->ev[i].has_data)
            snprintf(why, sizeof why, "event %d has_data %d", i, g->has_data[i]);
        else if (g->comment_only[i] != c->ev[i].comment_only)
            snprintf(why, sizeof why, "event %d comment_only %d", i, g->comment_only[i]);
    }
    if (!*why && g->fin != (c->fin_raw != NULL))
        snprintf(why, sizeof why, "sse_finish returned %d", g->fin);
    if (!*why && c->fin_raw && !bufeq(&g->fin_raw, c->fin_raw))
        snprintf(why, sizeof why, "finish raw differs");
    if (!*why && c->fin_raw && !bufeq(&g->fin_data, c->fin_data))
        snprintf(why, sizeof why, "finish data differs");
    /* byte exactness: what the relay forwards is what the upstream sent */
    if (!*why && c->exact && !bufeq(&g->all_raw, c->input))
        snprintf(why, sizeof why, "raw bytes do not concatenate to the input");
    CHECK(!*why, "%s fed %s: %s", c->name, how, why);
}

static void test_cases(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct sse_case *c = &cases[i];
        size_t len = strlen(c->input);
        struct got g;

        got_init(&g);
        run(c->input, len, NULL, 0, &g);
        compare(c, &g, "whole");
        got_free(&g);

        /* one byte at a time */
        size_t *cuts = calloc(len + 1, sizeof *cuts);
        for (size_t k = 1; k < len; k++)
            cuts[k - 1] = k;
        got_init(&g);
        run(c->input, len, cuts, len ? len - 1 : 0, &g);
        compare(c, &g, "byte by byte");
        got_free(&g);
        free(cuts);

        /* in two pieces, cut at every offset (a CR at the end of a feed, its LF next) */
        int bad = 0;
        for (size_t k = 1; k < len && !bad; k++) {
            got_init(&g);
            run(c->input, len, &k, 1, &g);
            char how[40];
            snprintf(how, sizeof how, "split at %zu", k);
            int before = check_failed;
            compare(c, &g, how);
            bad = check_failed != before;   /* report only the first bad split */
            got_free(&g);
        }
    }
}

/* A CR at the end of one feed followed by LF at the start of the next is one CRLF. */
static void test_cr_lf_across_feeds(void)
{
    struct sse_parser p;
    struct sse_event ev;
    sse_init(&p, 0);
    CHECK_INT(sse_feed(&p, "data: a\r", 8), 0, "feed 1");
    CHECK_INT(sse_next(&p, &ev), 0, "no event after data: a CR");
    CHECK_INT(sse_feed(&p, "\ndata: b\r", 9), 0, "feed 2");
    CHECK_INT(sse_next(&p, &ev), 0, "CRLF is not a blank line");
    CHECK_INT(sse_feed(&p, "\n\r", 2), 0, "feed 3");
    CHECK_INT(sse_next(&p, &ev), 0, "final CR may still be half of CRLF");
    CHECK_INT(sse_feed(&p, "\n", 1), 0, "feed 4");
    CHECK_INT(sse_next(&p, &ev), 1, "event after the blank CRLF");
    CHECK(ev.raw_len == 20 && memcmp(ev.raw, "data: a\r\ndata: b\r\n\r\n", 20) == 0, "raw %.*s",
          (int)ev.raw_len, ev.raw);
    CHECK_STR(ev.data, "a\nb", "data over four feeds");
    CHECK_INT(ev.data_len, 3, "data_len");
    CHECK_INT(sse_next(&p, &ev), 0, "nothing more");
    CHECK_INT(sse_finish(&p, &ev), 0, "nothing pending");
    sse_free(&p);
}

/* max_event caps one pending event; complete events already taken do not count. */
static const struct {
    const char *name;
    size_t max_event;
    const char *feeds[6];   /* NULL-terminated */
    int want_rc[6];         /* -1 where sse_feed or sse_next refuses after that feed */
    int drain;              /* call sse_next until 0 after each feed */
} max_cases[] = {
    {"exactly max", 16, {"data: 0123", "4567\n\n"}, {0, 0}, 1},
    {"one over max", 16, {"data: 0123", "45678\n\n"}, {0, -1}, 1},
    {"one feed over max", 8, {"data: 012\n\n"}, {-1}, 1},
    {"consumed events are dropped", 18,
     {"data: 0123456789\n\n", "data: 0123456789\n\n", "data: 0123456789\n\n", "data: 0123456789\n\n"},
     {0, 0, 0, 0}, 1},
    {"pending partial grows over max", 20, {"data: 0", "123456789", "0123", "45"}, {0, 0, 0, -1}, 1},
    {"unlimited", 0, {"data: 0123456789012345678901234567890123456789\n\n"}, {0}, 1},
    /* Several complete small events in one feed (one curl write callback holds up
     * to 16 KiB): no single event is over max, so the feed must be accepted. */
    {"many small events in one feed", 32,
     {"data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\ndata: 5\n\ndata: 6\n\n"}, {0}, 1},
};

static void test_max_event(void)
{
    for (size_t i = 0; i < sizeof max_cases / sizeof max_cases[0]; i++) {
        struct sse_parser p;
        struct sse_event ev;
        sse_init(&p, max_cases[i].max_event);
        for (int k = 0; max_cases[i].feeds[k]; k++) {
            const char *f = max_cases[i].feeds[k];
            int rc = sse_feed(&p, f, strlen(f));
            /* The refusal may come from sse_feed or from sse_next while it scans. */
            if (rc == 0 && max_cases[i].drain) {
                int got;
                while ((got = sse_next(&p, &ev)) == 1)
                    ;
                if (got < 0)
                    rc = -1;
            }
            CHECK(rc == max_cases[i].want_rc[k], "%s: feed %d returned %d, want %d", max_cases[i].name,
                  k, rc, max_cases[i].want_rc[k]);
            if (rc != 0)
                break;
        }
        sse_free(&p);
    }
}

/* A long stream of events through one parser: buffers are compacted and the
 * byte count handed out equals the bytes fed. */
static void test_long_stream(void)
{
    struct sse_parser p;
    struct sse_event ev;
    sse_init(&p, 64);
    size_t fed = 0, out = 0;
    int events = 0, ok = 1;
    char line[64];
    for (int i = 0; i < 2000 && ok; i++) {
        int n = snprintf(line, sizeof line, "data: {\"i\":%d}\n\n", i);
        /* feed in two pieces to leave a partial event pending */
        int half = n / 2;
        ok = sse_feed(&p, line, (size_t)half) == 0;
        while (ok && sse_next(&p, &ev) == 1) {
            out += ev.raw_len;
            events++;
        }
        ok = ok && sse_feed(&p, line + half, (size_t)(n - half)) == 0;
        fed += (size_t)n;
        while (ok && sse_next(&p, &ev) == 1) {
            char want[32];
            snprintf(want, sizeof want, "{\"i\":%d}", events);
            if (strcmp(ev.data, want) != 0)
                ok = 0;
            out += ev.raw_len;
            events++;
        }
    }
    CHECK(ok, "long stream broke at event %d", events);
    CHECK_INT(events, 2000, "events in long stream");
    CHECK_INT(out, fed, "raw bytes out == bytes in");
    CHECK(p.in.len <= 64, "input buffer not compacted: %zu bytes kept", p.in.len);
    sse_free(&p);
}

/* The event field (Anthropic's event names), the last one winning (WHATWG). */
static void test_event_field(void)
{
    static const struct { const char *in, *event; } fields[] = {
        {"event: message_start\ndata: {}\n\n", "message_start"},
        {"event:ping\ndata: {}\n\n", "ping"},
        {"event: a\r\nevent: b\r\ndata: z\r\n\r\n", "b"},
        {"data: y\n\n", ""},
        {"event\ndata: y\n\n", ""},
        {"data: y\nevent: error\n\n", "error"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        struct sse_parser p;
        struct sse_event ev;
        sse_init(&p, 4096);
        sse_feed(&p, fields[i].in, strlen(fields[i].in));
        int got = sse_next(&p, &ev);
        CHECK(got == 1, "event field %zu: an event", i);
        if (got == 1)
            CHECK(ev.event_len == strlen(fields[i].event) && memcmp(ev.event, fields[i].event, ev.event_len) == 0,
                  "event field %zu: \"%.*s\"", i, (int)ev.event_len, ev.event);
        sse_free(&p);
    }
}

int main(void)
{
    test_cases();
    test_event_field();
    test_cr_lf_across_feeds();
    test_max_event();
    test_long_stream();
    return check_done();
}
