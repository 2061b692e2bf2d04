/* buf.h: a growable byte buffer with a hard maximum (STYLE: every buffer is capped). */
#ifndef SLUICE_BUF_H
#define SLUICE_BUF_H

#include <stddef.h>

/* Owned by whoever declares it; buf_free releases the heap memory. */
struct buf {
    char *data;     /* always NUL-terminated when len > 0 or after buf_reserve */
    size_t len, cap, max;
};

void buf_init(struct buf *b, size_t max);        /* max 0 = unlimited */
int buf_append(struct buf *b, const void *p, size_t n); /* -1 when max would be exceeded */
int buf_puts(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal with quotes and escapes. */
/* Length of the well-formed UTF-8 sequence at p (1 for ASCII), 0 if none. */
size_t utf8_sequence(const unsigned char *p, size_t left);
int buf_json_str(struct buf *b, const char *s, size_t n);
void buf_reset(struct buf *b);                   /* len = 0, memory kept */
void buf_free(struct buf *b);

#endif
