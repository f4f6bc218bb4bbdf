/* pool.h -- the activity buffers the collector lends to CUPTI, and who still holds them. */
#ifndef FP_COLLECTOR_POOL_H
#define FP_COLLECTOR_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* One buffer the pool allocated. */
typedef struct fp_pool_buf {
    void *p;
    uint64_t seq;   /* which grant it was (fp_pool_seq() at the time), valid while out */
    int out;        /* 1 while lent to CUPTI */
} fp_pool_buf;

/* A bounded set of equal buffers, reused, never freed while the process runs. Thread-safe:
 * every function takes the pool's own lock and calls nothing else while holding it. */
typedef struct fp_pool {
    pthread_mutex_t lock;
    size_t buf_size, align;       /* bytes per buffer; alignment (CUPTI wants 8) */
    fp_pool_buf *bufs;            /* every buffer allocated so far, up to max */
    size_t n, max;
    uint64_t seq;                 /* grants so far */
    unsigned long long refused;   /* requests refused since the last fp_pool_take_refused */
} fp_pool;

/* Sets the pool up for at most max buffers of buf_size bytes (nothing is allocated yet).
 * 0, or -1 on OOM. */
int fp_pool_init(fp_pool *p, size_t buf_size, size_t align, size_t max);
/* Lends a free buffer, allocating one while fewer than max exist. NULL when all max are lent
 * or allocation fails: the refusal is counted. */
void *fp_pool_get(fp_pool *p);
/* Takes a lent buffer back. 0, or -1 if buf is not one this pool lent (left untouched: it
 * belongs to someone else). Accepts NULL (returns -1). */
int fp_pool_put(fp_pool *p, void *buf);
/* Grants so far: a mark for fp_pool_out_before. */
uint64_t fp_pool_seq(fp_pool *p);
/* Buffers lent before the mark and not returned. */
size_t fp_pool_out_before(fp_pool *p, uint64_t mark);
/* Refused requests since the last call; resets the count. */
unsigned long long fp_pool_take_refused(fp_pool *p);
/* Frees the buffers that are not lent (lent ones may still be written by CUPTI and are left
 * alone) and the table. The pool must not be used afterwards. */
void fp_pool_destroy(fp_pool *p);

#endif
