/* membuf.c -- growable byte buffer (doubling), the sink for JSON and gzip output.
 *
 * Owns only its own bytes; knows nothing about what is written into it. */
#include "membuf.h"

#include <stdlib.h>
#include <string.h>

int fp_membuf_write(void *membuf, const char *p, size_t n)
{
    fp_membuf *b = membuf;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        char *q;
        while (cap < b->len + n + 1)
            cap *= 2;
        q = realloc(b->p, cap);
        if (q == NULL)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    if (n > 0)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

void fp_membuf_free(fp_membuf *b)
{
    if (b == NULL)
        return;
    free(b->p);
    memset(b, 0, sizeof *b);
}
