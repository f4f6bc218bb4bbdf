/* cseg.c: a CPU-only trace's labelled pieces (wscratch.cseg): idle.c's walk writes them one
 * thread at a time, suspects_cpu.c reads them back across threads in start order.
 *
 * Owns wscratch.cseg and A.idle->cw (the writer). Must not read the walk's state: a piece is
 * (category, name, start, end) of the thread being walked, nothing more.
 *
 * Why blocks, not a row a piece: a row a piece was 490,000 INSERTs on a 100 MB CPU-only
 * trace (190 of the walk's 310 ms), and reading a category in start order sorted it
 * (ORDER BY s, no index: building one sorted every piece). But the walk labels each thread
 * from its start to its end, so one thread's pieces already come in start order, one after
 * the other: stored as blocks of CSEG_BLOCK pieces a (category, thread), start order across
 * threads is a merge of those sorted runs (a heap of one cursor per thread). A cursor reads
 * a block by its key, (cat, track, seq).
 *
 * Memory: the writer holds the thread's unwritten blocks (CSEG_N x CSEG_BLOCK pieces, 3.8 KB)
 * and a list of its runs (24 bytes a (category, thread)); a stream holds one block per run
 * it merges, as many pieces as the run has up to CSEG_BLOCK (24 bytes a piece, 960 bytes at
 * most): at most ~2.9 KB a thread (the Python pieces' pass merges three categories), the
 * order of what a thread costs through the load (load.c: --max-tracks).
 *
 * Invariants (checked: ERR_INTERNAL, the upload fails and the server goes on): a thread's
 * pieces arrive with non-decreasing starts (idle.c's walk moves its cursor forward only);
 * every block of a thread is written before the next thread's first piece (cseg_thread_end,
 * or the next thread's first cseg_add); reading starts after the last thread ended. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "lib/err.h"
#include "lib/vec.h"

/* ---- writing ---- */

static int flush_block(A *a, cseg_writer *w, int cat) {
    if (!w->n[cat]) return 0;
    sqlite3_bind_int(w->ins, 1, cat);
    sqlite3_bind_int64(w->ins, 2, w->track);
    sqlite3_bind_int64(w->ins, 3, w->seq[cat]);
    sqlite3_bind_blob(w->ins, 4, w->buf[cat], (int)((size_t)w->n[cat] * sizeof(cseg_piece)), SQLITE_STATIC);
    int rc = sqlite3_step(w->ins) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_reset(w->ins);
    if (rc) return rc;
    /* a (category, thread)'s first block: the readers' list of runs */
    if (!w->seq[cat]) {
        if (VEC_RESERVE(w->runs, w->capruns, w->nruns + 1, 16)) return ERR_NOMEM;
        w->run[cat] = w->nruns;
        w->runs[w->nruns++] = (cseg_run){cat, w->track, 0};
    }
    w->runs[w->run[cat]].n += w->n[cat];
    w->seq[cat]++;
    w->n[cat] = 0;
    return 0;
}

int cseg_thread_end(A *a) {
    cseg_writer *w = a->idle->cw;
    int rc = 0;
    if (!w || w->track < 0) return 0;
    for (int c = 0; c < CSEG_N && !rc; c++) rc = flush_block(a, w, c);
    w->track = -1;
    return rc;
}

int cseg_add(A *a, long track, int cat, long name, double s, double e) {
    idle_state *is = a->idle;
    if (!is->cw) {
        if (!(is->cw = calloc(1, sizeof *is->cw))) return ERR_NOMEM;
        is->cw->track = -1;
        if (!(is->cw->ins = an_prep(a, "INSERT INTO wscratch.cseg(cat, track, seq, data) VALUES (?, ?, ?, ?)"))) return ERR_DB;
    }
    cseg_writer *w = is->cw;
    int rc = 0;
    if (w->track != track) {
        if ((rc = cseg_thread_end(a))) return rc;
        w->track = track;
        memset(w->seq, 0, sizeof w->seq);
        w->last_s = -INFINITY;
    }
    if (!(s >= w->last_s)) return ERR_INTERNAL; /* the readers merge on each thread's order */
    w->last_s = s;
    if (w->n[cat] == CSEG_BLOCK && (rc = flush_block(a, w, cat))) return rc;
    w->buf[cat][w->n[cat]++] = (cseg_piece){s, e, name};
    is->ncseg[cat]++;
    return 0;
}

void cseg_free(idle_state *is) {
    if (!is->cw) return;
    sqlite3_finalize(is->cw->ins);
    free(is->cw->runs);
    free(is->cw);
    is->cw = NULL;
}

/* ---- reading: one cursor per (category, thread), merged by start ---- */

/* The cursor's next block into its buffer: 1 read, 0 none left (or an error: m->rc). */
static int src_fill(cseg_stream *m, cseg_src *c) {
    c->n = c->pos = 0;
    sqlite3_bind_int(m->get, 1, c->cat);
    sqlite3_bind_int64(m->get, 2, c->track);
    sqlite3_bind_int64(m->get, 3, c->seq);
    int st = sqlite3_step(m->get);
    if (st == SQLITE_ROW) {
        size_t bytes = (size_t)sqlite3_column_bytes(m->get, 0);
        c->n = (int)(bytes / sizeof(cseg_piece));
        if (c->n > c->room) c->n = c->room;
        if (c->n) memcpy(c->blk, sqlite3_column_blob(m->get, 0), (size_t)c->n * sizeof(cseg_piece));
        c->seq++;
    } else if (st != SQLITE_DONE) {
        m->rc = an_dberr(m->a);
    }
    sqlite3_reset(m->get);
    return c->n > 0;
}

/* The cursor at its next piece that passes its name filter: 1, or 0 at its end. */
static int src_settle(cseg_stream *m, cseg_src *c) {
    for (;;) {
        while (c->pos < c->n) {
            if (c->name < 0 || c->blk[c->pos].name == c->name) return 1;
            c->pos++;
        }
        if (!src_fill(m, c)) return 0;
    }
}

static double src_key(const cseg_stream *m, size_t i) {
    const cseg_src *c = &m->src[m->heap[i]];
    return c->blk[c->pos].s;
}

static void heap_down(cseg_stream *m, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, min = i;
        if (l < m->nheap && src_key(m, l) < src_key(m, min)) min = l;
        if (r < m->nheap && src_key(m, r) < src_key(m, min)) min = r;
        if (min == i) return;
        size_t t = m->heap[i];
        m->heap[i] = m->heap[min];
        m->heap[min] = t;
        i = min;
    }
}

int cseg_open(A *a, cseg_stream *m, const int *cats, const long *names, int ncats) {
    memset(m, 0, sizeof *m);
    m->a = a;
    const cseg_writer *w = a->idle->cw;
    if (!w || !ncats) return 0;
    if (w->track >= 0) return ERR_INTERNAL; /* a thread's last blocks not written */
    if (!(m->get = an_prep(a, "SELECT data FROM wscratch.cseg WHERE cat = ?1 AND track = ?2 AND seq = ?3"))) return ERR_DB;
    m->src = calloc(w->nruns ? w->nruns : 1, sizeof *m->src);
    m->heap = calloc(w->nruns ? w->nruns : 1, sizeof *m->heap);
    if (!m->src || !m->heap) return ERR_NOMEM;
    for (size_t r = 0; r < w->nruns; r++)
        for (int k = 0; k < ncats; k++) {
            if (w->runs[r].cat != cats[k]) continue;
            /* its buffer holds one block: CSEG_BLOCK pieces, fewer for a run as short */
            const cseg_run *run = &w->runs[r];
            size_t room = run->n < CSEG_BLOCK ? (size_t)run->n : CSEG_BLOCK;
            cseg_src *c = &m->src[m->nsrc];
            *c = (cseg_src){run->cat, run->track, names[k], 0, 0, 0, (int)room, malloc(room * sizeof(cseg_piece))};
            if (!c->blk) return ERR_NOMEM;
            m->nsrc++;
            if (src_settle(m, c)) m->heap[m->nheap++] = m->nsrc - 1;
            if (m->rc) return m->rc;
        }
    for (size_t i = m->nheap / 2; i-- > 0;) heap_down(m, i);
    return 0;
}

int cseg_next(cseg_stream *m, double *s, double *e) {
    if (!m->nheap || m->rc) return 0;
    cseg_src *c = &m->src[m->heap[0]];
    *s = c->blk[c->pos].s;
    *e = c->blk[c->pos].e;
    c->pos++;
    if (!src_settle(m, c)) m->heap[0] = m->heap[--m->nheap];
    if (m->nheap) heap_down(m, 0);
    return 1;
}

void cseg_close(cseg_stream *m) {
    for (size_t i = 0; i < m->nsrc; i++) free(m->src[i].blk);
    free(m->src);
    free(m->heap);
    sqlite3_finalize(m->get);
    memset(m, 0, sizeof *m);
}
