/* runs.c: runs of fixed-size records, written in order under a key and read back in that
 * order, a key at a time, as blocks of up to RUN_BLOCK_BYTES a row of a scratch table
 * (scratch.sql: gstream, kwruns; a row's id is its key << 32 | its block's number).
 *
 * Owns those tables' rows, the writers (run_writer) and readers (run_reader). Must not know
 * what a record means: idle.c writes and reads them.
 *
 * Why blocks, not a row a record: idle.c's gaps were a row each, and each of their readers
 * sorted them again (an index, or ORDER BY), though they are found in the order the readers
 * want: one device's gaps by time, and each thread's kernel-wait gaps by launch when the
 * thread's kernels run in launch order. On the many-names shape (106,000 gaps, issue 24) the
 * rows were 60 ms of INSERTs and igap_kw 45 ms of sorting; as blocks, 1,700 INSERTs read back
 * by their primary key, in order.
 *
 * Why rowid tables of ~1 KB rows: a WITHOUT ROWID table keyed (key, seq) put each 1 KB
 * block's last bytes on an overflow page of its own (an index b-tree keeps at most ~1,000
 * bytes of a row on its page): 3,780 pages for 3.4 MB of records, which spilled the scratch
 * cache, took the file's exclusive lock and held the GPU job's reads for 240 ms. A rowid
 * table keeps four such rows a page, and key << 32 | seq reads a key's run as a range.
 *
 * Memory: a writer holds one block per key written so far (1 KB: one per launching thread
 * for idle.c's kernel-wait runs), a reader one block.
 *
 * Invariants (ERR_INTERNAL): a key is below the writer's nkeys (at most RUN_KEYS_MAX), a
 * key has at most RUN_SEQ_MAX blocks; readers open after run_flush. */
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "lib/err.h"

static const char *const ins_sql[RUN_NTABLES] = {
    "INSERT INTO wscratch.gstream(id, data) VALUES (?, ?)",
    "INSERT INTO wscratch.kwruns(id, data) VALUES (?, ?)",
};
static const char *const get_sql[RUN_NTABLES] = {
    "SELECT data FROM wscratch.gstream WHERE id >= ?1 AND id < ?2 ORDER BY id",
    "SELECT data FROM wscratch.kwruns WHERE id >= ?1 AND id < ?2 ORDER BY id",
};

/* Records of size bytes a block: 0 for a size no block holds. */
static int block_records(size_t size) { return size && size <= RUN_BLOCK_BYTES ? (int)(RUN_BLOCK_BYTES / size) : 0; }

int run_writer_open(A *a, run_writer *w, int table, size_t size, size_t nkeys) {
    memset(w, 0, sizeof *w);
    w->a = a;
    w->size = size;
    w->per = block_records(size);
    w->nkeys = nkeys;
    if (!w->per || nkeys > RUN_KEYS_MAX) return ERR_INTERNAL;
    if (!(w->buf = calloc(nkeys ? nkeys : 1, sizeof *w->buf))) return ERR_NOMEM;
    return (w->ins = an_prep(a, ins_sql[table])) ? 0 : ERR_DB;
}

static int flush_key(run_writer *w, size_t key) {
    run_buf *b = &w->buf[key];
    if (!b->n) return 0;
    if (b->seq > RUN_SEQ_MAX) return ERR_INTERNAL;
    sqlite3_bind_int64(w->ins, 1, (long long)key << 32 | b->seq++);
    sqlite3_bind_blob(w->ins, 2, b->rec, (int)((size_t)b->n * w->size), SQLITE_STATIC);
    int rc = sqlite3_step(w->ins) == SQLITE_DONE ? 0 : an_dberr(w->a);
    sqlite3_reset(w->ins);
    b->n = 0;
    return rc;
}

int run_add(run_writer *w, size_t key, const void *rec) {
    if (key >= w->nkeys) return ERR_INTERNAL;
    run_buf *b = &w->buf[key];
    if (!b->rec && !(b->rec = malloc((size_t)w->per * w->size))) return ERR_NOMEM;
    int rc = b->n == w->per ? flush_key(w, key) : 0;
    if (!rc) memcpy(b->rec + (size_t)b->n++ * w->size, rec, w->size);
    return rc;
}

int run_flush(run_writer *w) {
    int rc = 0;
    for (size_t k = 0; k < w->nkeys && !rc; k++) rc = flush_key(w, k);
    return rc;
}

void run_writer_free(run_writer *w) {
    for (size_t k = 0; w->buf && k < w->nkeys; k++) free(w->buf[k].rec);
    free(w->buf);
    sqlite3_finalize(w->ins);
    memset(w, 0, sizeof *w);
}

int run_open(A *a, run_reader *r, int table, size_t size) {
    memset(r, 0, sizeof *r);
    r->a = a;
    r->size = size;
    r->per = block_records(size);
    if (!r->per) return ERR_INTERNAL;
    if (!(r->blk = malloc((size_t)r->per * size))) return ERR_NOMEM;
    return (r->q = an_prep(a, get_sql[table])) ? 0 : ERR_DB;
}

void run_seek(run_reader *r, long long key) {
    sqlite3_reset(r->q);
    sqlite3_bind_int64(r->q, 1, key << 32);
    sqlite3_bind_int64(r->q, 2, (key + 1) << 32);
    r->n = r->pos = 0;
}

const void *run_next(run_reader *r) {
    while (r->pos == r->n) {
        int st = sqlite3_step(r->q);
        if (st != SQLITE_ROW) {
            if (st != SQLITE_DONE) r->rc = an_dberr(r->a);
            return NULL;
        }
        size_t n = (size_t)sqlite3_column_bytes(r->q, 0) / r->size;
        r->n = (int)(n < (size_t)r->per ? n : (size_t)r->per);
        if (r->n) memcpy(r->blk, sqlite3_column_blob(r->q, 0), (size_t)r->n * r->size);
        r->pos = 0;
    }
    return r->blk + (size_t)r->pos++ * r->size;
}

void run_close(run_reader *r) {
    sqlite3_finalize(r->q);
    free(r->blk);
    memset(r, 0, sizeof *r);
}
