/* evq.c: the request thread -> loader thread event queue (evq.h). No SQL, no HTTP. */
#include "ingest/evq.h"

#include <pthread.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/mono.h"

/* A packed event: the ingest_event struct as bytes, then its eleven strings, each a
 * uint32 length (NO_STR for NULL), the bytes and a NUL. Unpacking points the struct's
 * strings into the block, which lives until every event in it was consumed. */
#define NO_STR UINT32_MAX
#define NSTR 11

struct evq {
    evq_consume_fn consume;
    void *ctx;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t nonempty, nonfull;
    buf full[EVQ_BLOCKS]; /* ring: head, count */
    int head, count;
    buf pool[EVQ_BLOCKS + 2]; /* emptied blocks, for reuse */
    int npool;
    buf cur;              /* the block being filled (request thread only) */
    int done, stop, rc, joined;
    double wait_full_ms, wait_empty_ms; /* evq_waits */
};

static const char **str_slot(ingest_event *e, int i) {
    const char **s[NSTR] = {&e->name, &e->cat, &e->ph, &e->pid, &e->tid, &e->shapes, &e->grid, &e->block, &e->types, &e->concrete, &e->json};
    return s[i];
}

/* Why one reserve and raw copies: pack runs once per event on the request thread, which
 * the parser keeps busy; nineteen buf_puts, each with its own room check and NUL, were
 * 8 % of that thread's samples on a flat trace (perf, issue 24). */
static int pack(buf *b, const ingest_event *e) {
    ingest_event tmp = *e; /* str_slot names the strings' order once, for both sides */
    const char *s[NSTR];
    uint32_t n[NSTR];
    size_t need = sizeof *e;
    for (int i = 0; i < NSTR; i++) {
        s[i] = *str_slot(&tmp, i);
        n[i] = !s[i] ? NO_STR : i == NSTR - 1 ? (uint32_t)e->json_len : (uint32_t)strlen(s[i]);
        need += sizeof n[i] + (s[i] ? (size_t)n[i] + 1 : 0);
    }
    if (buf_reserve(b, need)) return ERR_NOMEM;
    char *p = b->p + b->len;
    memcpy(p, e, sizeof *e);
    p += sizeof *e;
    for (int i = 0; i < NSTR; i++) {
        memcpy(p, &n[i], sizeof n[i]);
        p += sizeof n[i];
        if (!s[i]) continue;
        memcpy(p, s[i], n[i]);
        p[n[i]] = '\0';
        p += (size_t)n[i] + 1;
    }
    b->len += need;
    b->p[b->len] = '\0'; /* buf.h: always NUL-terminated */
    return 0;
}

/* Consumes every event of block b in order; the first error stops it. */
static int consume_block(evq *q, buf *b) {
    size_t off = 0;
    while (off < b->len) {
        ingest_event e;
        memcpy(&e, b->p + off, sizeof e);
        off += sizeof e;
        for (int i = 0; i < NSTR; i++) {
            uint32_t n;
            memcpy(&n, b->p + off, sizeof n);
            off += sizeof n;
            *str_slot(&e, i) = n == NO_STR ? NULL : b->p + off;
            if (n != NO_STR) off += (size_t)n + 1;
        }
        int rc = q->consume(q->ctx, &e);
        if (rc) return rc;
    }
    return 0;
}

static void *run(void *arg) {
    evq *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        if (!q->count && !q->done) {
            double t0 = mono_ms();
            while (!q->count && !q->done) pthread_cond_wait(&q->nonempty, &q->mu);
            q->wait_empty_ms += mono_ms() - t0;
        }
        if (!q->count) break;
        buf b = q->full[q->head];
        q->head = (q->head + 1) % EVQ_BLOCKS;
        q->count--;
        pthread_cond_signal(&q->nonfull);
        int skip = q->rc || q->stop;
        pthread_mutex_unlock(&q->mu);
        int rc = skip ? 0 : consume_block(q, &b);
        buf_reset(&b);
        pthread_mutex_lock(&q->mu);
        if (rc && !q->rc) q->rc = rc;
        if (q->npool < EVQ_BLOCKS + 2) q->pool[q->npool++] = b;
        else buf_free(&b);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

evq *evq_new(evq_consume_fn consume, void *ctx) {
    evq *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->consume = consume;
    q->ctx = ctx;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->nonempty, NULL);
    pthread_cond_init(&q->nonfull, NULL);
    if (pthread_create(&q->th, NULL, run, q)) {
        q->joined = 1;
        evq_free(q);
        return NULL;
    }
    return q;
}

/* Queues the current block (waiting while the queue is full) and takes an empty one. */
static int hand_over(evq *q) {
    pthread_mutex_lock(&q->mu);
    if (q->count == EVQ_BLOCKS && !q->rc) {
        double t0 = mono_ms();
        while (q->count == EVQ_BLOCKS && !q->rc) pthread_cond_wait(&q->nonfull, &q->mu);
        q->wait_full_ms += mono_ms() - t0;
    }
    int rc = q->rc;
    if (!rc) {
        q->full[(q->head + q->count) % EVQ_BLOCKS] = q->cur;
        q->count++;
        memset(&q->cur, 0, sizeof q->cur);
        if (q->npool) q->cur = q->pool[--q->npool];
        pthread_cond_signal(&q->nonempty);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int evq_push(evq *q, const ingest_event *e) {
    if (pack(&q->cur, e)) return ERR_NOMEM;
    return q->cur.len >= EVQ_BLOCK_BYTES ? hand_over(q) : 0;
}

static void end_thread(evq *q, int stop) {
    if (q->joined) return;
    pthread_mutex_lock(&q->mu);
    q->done = 1;
    q->stop |= stop;
    pthread_cond_signal(&q->nonempty);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    q->joined = 1;
}

/* Frees the emptied blocks kept for reuse. Why at evq_finish: no block is filled after
 * it, and the loader's analysis runs before evq_free; the pool (up to EVQ_BLOCKS + 2
 * blocks, each grown past EVQ_BLOCK_BYTES by its last event) was ~4.7 MB of a many-names
 * upload's peak, which comes in the analysis (two uploads at once: twice that). */
static void free_pool(evq *q) {
    for (int i = 0; i < q->npool; i++) buf_free(&q->pool[i]);
    q->npool = 0;
    buf_free(&q->cur);
}

int evq_finish(evq *q) {
    int rc = q->cur.len ? hand_over(q) : 0;
    end_thread(q, 0);
    free_pool(q);
    return rc ? rc : q->rc;
}

void evq_waits(const evq *q, double *full_ms, double *empty_ms) {
    *full_ms = q->wait_full_ms;
    *empty_ms = q->wait_empty_ms;
}

void evq_free(evq *q) {
    if (!q) return;
    end_thread(q, 1);
    for (int i = 0; i < q->count; i++) buf_free(&q->full[(q->head + i) % EVQ_BLOCKS]);
    free_pool(q);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->nonempty);
    pthread_cond_destroy(&q->nonfull);
    free(q);
}
