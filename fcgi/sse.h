/* sse.h: an incremental Server-Sent Events splitter (WHATWG rules, REFERENCE §8).
 * It keeps each event's raw bytes, so events are relayed byte for byte, and
 * its joined data, so usage and guards can read it. */
#ifndef SLUICE_SSE_H
#define SLUICE_SSE_H

#include "buf.h"

#include <stddef.h>

struct sse_event {
    const char *raw;        /* the event's bytes including its blank line */
    size_t raw_len;
    const char *data;       /* data: lines joined by \n, NUL-terminated */
    size_t data_len;
    int has_data;           /* at least one data field */
    int comment_only;       /* only comment lines (": keep-alive") */
    const char *event;      /* the event field's value in raw (the last one), "" if none */
    size_t event_len;
};

/* Owned by one relay; sse_free releases it. */
struct sse_parser {
    struct buf in;          /* unconsumed input */
    size_t start;           /* first byte of the current event in `in` */
    size_t scan;            /* next byte to examine */
    int blank_run;          /* at a line start: a blank line ends the event */
    struct buf data;
    size_t max_event;
};

void sse_init(struct sse_parser *p, size_t max_event);
/* Appends input; -1 when the pending event would exceed max_event. */
int sse_feed(struct sse_parser *p, const char *bytes, size_t n);
/* 1: *ev holds the next complete event (valid until the next call); 0: need more;
 * -1: the pending event is over max_event. */
int sse_next(struct sse_parser *p, struct sse_event *ev);
/* At end of stream: 1 if an unterminated event remains (it is discarded per spec,
 * but its raw bytes are returned so a relay can decide); 0 otherwise. */
int sse_finish(struct sse_parser *p, struct sse_event *ev);
void sse_free(struct sse_parser *p);

#endif
