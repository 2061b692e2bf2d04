/* fake_buf.c: growable byte buffers for the stand-in upstream; allocation failure aborts (the harness restarts us). */
#include "fake.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fputs("sluice-fake-upstream: out of memory\n", stderr);
        abort();
    }
    return q;
}

/* The slow half of buf_reserve(): doubles the capacity until more bytes fit. */
void buf_grow(struct buf *b, size_t more)
{
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more)
        cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

__attribute__((format(printf, 2, 3)))
void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    buf_reserve(b, 128);
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= b->cap - b->len) {
        buf_reserve(b, (size_t)n + 1);
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

/* Gives back memory a big request grew, so idle keep-alive connections stay small. */
void buf_trim(struct buf *b)
{
    if (b->cap <= BUF_KEEP)
        return;
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    buf_reserve(b, 4096);
}
