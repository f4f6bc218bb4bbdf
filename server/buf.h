/* buf.h: a growable byte buffer, always NUL-terminated, for the parser and the loader. */
#ifndef FP_BUF_H
#define FP_BUF_H

#include <stdlib.h>
#include <string.h>

#include "err.h"

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

/* Appends n bytes; 0 or ERR_NOMEM (the buffer is then unchanged). */
static inline int buf_put(buf *b, const void *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return ERR_NOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}
static inline void buf_reset(buf *b) {
    b->len = 0;
    if (b->p) b->p[0] = '\0';
}
static inline const char *buf_str(const buf *b) { return b->p ? b->p : ""; }
static inline void buf_free(buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

#endif
