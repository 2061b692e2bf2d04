/* sse.c: split a byte stream into SSE events without copying them twice. */
#include "sse.h"

#include <string.h>

void sse_init(struct sse_parser *p, size_t max_event)
{
    buf_init(&p->in, 0);
    buf_init(&p->data, 0);
    p->start = p->scan = 0;
    p->blank_run = 1;
    p->max_event = max_event;
}

void sse_free(struct sse_parser *p)
{
    buf_free(&p->in);
    buf_free(&p->data);
}

int sse_feed(struct sse_parser *p, const char *bytes, size_t n)
{
    if (p->start > 0 && p->start >= p->in.len / 2) {
        /* Drop consumed events so the buffer holds at most one pending event. */
        memmove(p->in.data, p->in.data + p->start, p->in.len - p->start);
        p->in.len -= p->start;
        p->scan -= p->start;
        p->start = 0;
    }
    /* The limit is on one event: only the unfinished event already held counts
     * here; sse_next checks it again as it scans. */
    if (p->max_event && p->in.len - p->start > p->max_event)
        return -1;
    return buf_append(&p->in, bytes, n);
}

/* Parses the fields of raw[0..len) into p->data. */
static void sse_parse_fields(struct sse_parser *p, const char *raw, size_t len, struct sse_event *ev)
{
    buf_reset(&p->data);
    ev->has_data = 0;
    ev->comment_only = 1;
    ev->event = "";
    ev->event_len = 0;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && raw[j] != '\n' && raw[j] != '\r')
            j++;
        const char *line = raw + i;
        size_t n = j - i;
        if (n > 0 && line[0] != ':') {
            ev->comment_only = 0;
            const char *colon = memchr(line, ':', n);
            size_t name_len = colon ? (size_t)(colon - line) : n;
            if (name_len == 4 && memcmp(line, "data", 4) == 0) {
                const char *v = colon ? colon + 1 : line + n;
                size_t vn = (size_t)(line + n - v);
                if (vn > 0 && v[0] == ' ') {
                    v++;
                    vn--;
                }
                if (ev->has_data)
                    buf_append(&p->data, "\n", 1);
                buf_append(&p->data, v, vn);
                ev->has_data = 1;
            } else if (name_len == 5 && memcmp(line, "event", 5) == 0) {
                const char *v = colon ? colon + 1 : line + n;
                size_t vn = (size_t)(line + n - v);
                if (vn > 0 && v[0] == ' ') {
                    v++;
                    vn--;
                }
                ev->event = v;
                ev->event_len = vn;
            }
        }
        /* Step over one line terminator: CRLF, LF or CR. */
        if (j < len && raw[j] == '\r' && j + 1 < len && raw[j + 1] == '\n')
            j++;
        i = j + 1;
    }
    if (!p->data.data)
        buf_append(&p->data, "", 0);
    ev->data = p->data.data;
    ev->data_len = p->data.len;
}

int sse_next(struct sse_parser *p, struct sse_event *ev)
{
    const char *s = p->in.data;
    size_t len = p->in.len;
    while (p->scan < len) {
        if (p->max_event && p->scan - p->start > p->max_event)
            return -1;
        char c = s[p->scan];
        if (c != '\n' && c != '\r') {
            p->blank_run = 0;
            p->scan++;
            continue;
        }
        size_t term = 1;
        if (c == '\r') {
            if (p->scan + 1 >= len)
                return 0;               /* wait: CR may be the first half of CRLF */
            if (s[p->scan + 1] == '\n')
                term = 2;
        }
        p->scan += term;
        if (!p->blank_run) {
            p->blank_run = 1;           /* end of a non-empty line */
            continue;
        }
        /* A blank line: the event [start, scan) is complete. */
        size_t ev_start = p->start;
        p->start = p->scan;
        if (p->scan - ev_start == term)
            continue;                   /* a stray blank line with no event before it */
        if (p->max_event && p->scan - ev_start > p->max_event)
            return -1;
        ev->raw = s + ev_start;
        ev->raw_len = p->scan - ev_start;
        sse_parse_fields(p, ev->raw, ev->raw_len, ev);
        return 1;
    }
    return 0;
}

int sse_finish(struct sse_parser *p, struct sse_event *ev)
{
    if (p->start >= p->in.len)
        return 0;
    ev->raw = p->in.data + p->start;
    ev->raw_len = p->in.len - p->start;
    sse_parse_fields(p, ev->raw, ev->raw_len, ev);
    p->start = p->scan = p->in.len;
    return 1;
}
