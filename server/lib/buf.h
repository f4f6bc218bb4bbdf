/* buf.h: a growable byte buffer, always NUL-terminated, for the parser and the loader. */
#ifndef FP_BUF_H
#define FP_BUF_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

/* Makes room for n more bytes and the NUL; 0 or ERR_NOMEM (the buffer is then unchanged). */
static inline int buf_reserve(buf *b, size_t n) {
    if (b->len + n + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return ERR_NOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Appends n bytes; 0 or ERR_NOMEM (the buffer is then unchanged). */
static inline int buf_put(buf *b, const void *s, size_t n) {
    if (buf_reserve(b, n)) return ERR_NOMEM;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}
static inline int buf_puts(buf *b, const char *s) { return buf_put(b, s, strlen(s)); }

/* Appends printf output, however long: formats into the spare room and, only when it did
 * not fit, grows and formats once more. 0, ERR_NOMEM (the buffer is then unchanged) or
 * ERR_INTERNAL (vsnprintf refused the format). */
static inline int buf_vprintf(buf *b, const char *fmt, va_list ap) {
    size_t room = b->cap > b->len ? b->cap - b->len : 0; /* the NUL's byte included */
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    int rc = n < 0 ? ERR_INTERNAL : 0;
    if (!rc && (size_t)n >= room) {
        rc = buf_reserve(b, (size_t)n);
        if (!rc) vsnprintf(b->p + b->len, (size_t)n + 1, fmt, again);
    }
    va_end(again);
    if (rc) {
        if (b->p) b->p[b->len] = '\0'; /* a cut first attempt may have written there */
        return rc;
    }
    b->len += (size_t)n;
    return 0;
}
__attribute__((format(printf, 2, 3))) static inline int buf_printf(buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
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
