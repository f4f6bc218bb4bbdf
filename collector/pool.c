/* pool.c -- the buffers the collector lends to CUPTI (pool.h).
 *
 * Owns every activity buffer and the record of which are lent and since when. Must not call
 * CUPTI or take any other lock: it runs inside CUPTI's buffer callbacks, possibly under
 * CUPTI's internal lock. Knowing which buffers are still lent is how inject.c tells that a
 * second CUPTI client (torch.profiler) re-registered the buffer callbacks: after a forced
 * flush, a buffer lent before it and never returned went to that client. */
#include "pool.h"

#include <stdlib.h>
#include <string.h>

int fp_pool_init(fp_pool *p, size_t buf_size, size_t align, size_t max)
{
    memset(p, 0, sizeof *p);
    if (pthread_mutex_init(&p->lock, NULL) != 0)
        return -1;
    p->bufs = calloc(max ? max : 1, sizeof *p->bufs);
    if (p->bufs == NULL) {
        pthread_mutex_destroy(&p->lock);
        return -1;
    }
    p->buf_size = buf_size;
    p->align = align;
    p->max = max;
    return 0;
}

void *fp_pool_get(fp_pool *p)
{
    void *b = NULL;
    size_t i;
    pthread_mutex_lock(&p->lock);
    for (i = 0; i < p->n; i++)
        if (!p->bufs[i].out)
            break;
    if (i == p->n && p->n < p->max) {
        /* aligned_alloc wants a size that is a multiple of the alignment */
        size_t sz = (p->buf_size + p->align - 1) / p->align * p->align;
        p->bufs[i].p = aligned_alloc(p->align, sz);
        if (p->bufs[i].p != NULL)
            p->n++;
    }
    if (i < p->n) {
        p->bufs[i].out = 1;
        p->bufs[i].seq = p->seq++;
        b = p->bufs[i].p;
    } else {
        p->refused++;
    }
    pthread_mutex_unlock(&p->lock);
    return b;
}

int fp_pool_put(fp_pool *p, void *buf)
{
    size_t i;
    int rc = -1;
    if (buf == NULL)
        return -1;
    pthread_mutex_lock(&p->lock);
    for (i = 0; i < p->n; i++) {
        if (p->bufs[i].p == buf && p->bufs[i].out) {
            p->bufs[i].out = 0;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

uint64_t fp_pool_seq(fp_pool *p)
{
    uint64_t s;
    pthread_mutex_lock(&p->lock);
    s = p->seq;
    pthread_mutex_unlock(&p->lock);
    return s;
}

size_t fp_pool_out_before(fp_pool *p, uint64_t mark)
{
    size_t i, n = 0;
    pthread_mutex_lock(&p->lock);
    for (i = 0; i < p->n; i++)
        if (p->bufs[i].out && p->bufs[i].seq < mark)
            n++;
    pthread_mutex_unlock(&p->lock);
    return n;
}

unsigned long long fp_pool_take_refused(fp_pool *p)
{
    unsigned long long r;
    pthread_mutex_lock(&p->lock);
    r = p->refused;
    p->refused = 0;
    pthread_mutex_unlock(&p->lock);
    return r;
}

void fp_pool_destroy(fp_pool *p)
{
    size_t i;
    if (p->bufs == NULL)
        return;
    for (i = 0; i < p->n; i++)
        if (!p->bufs[i].out)
            free(p->bufs[i].p);
    free(p->bufs);
    p->bufs = NULL;
    pthread_mutex_destroy(&p->lock);
}
