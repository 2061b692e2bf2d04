/* arena.h: per-request memory; everything allocated here dies with arena_clear. */
#ifndef SLUICE_ARENA_H
#define SLUICE_ARENA_H

#include <stddef.h>

struct arena_block;

/* Owned by one request (one worker thread); reused across requests. */
struct arena {
    struct arena_block *head;
    size_t used_total;
};

void arena_init(struct arena *a);
void *arena_alloc(struct arena *a, size_t n);       /* 16-byte aligned, zeroed */
char *arena_strndup(struct arena *a, const char *s, size_t n);
char *arena_strdup(struct arena *a, const char *s);
char *arena_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The strings up to a NULL, joined: arena_printf("%s%s") for the hot paths. */
char *arena_cat(struct arena *a, ...) __attribute__((sentinel));
/* Frees every block but the first, which is kept for the next request. */
void arena_clear(struct arena *a);
void arena_free(struct arena *a);

/* Allocation failure aborts the process: the web server restarts it. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

#endif
