/* membuf.h -- a growable byte buffer usable as an fp_write_fn sink. */
#ifndef FP_COLLECTOR_MEMBUF_H
#define FP_COLLECTOR_MEMBUF_H

#include <stddef.h>

typedef struct fp_membuf {
    char *p;     /* NUL-terminated after the first write (the NUL is not counted in len) */
    size_t len, cap;
} fp_membuf;

/* Appends n bytes to the fp_membuf at membuf (signature of fp_write_fn). 0, or -1 on OOM
 * with the buffer unchanged. */
int fp_membuf_write(void *membuf, const char *p, size_t n);
/* Frees the bytes and zeroes the struct. Accepts NULL. */
void fp_membuf_free(fp_membuf *b);

#endif
