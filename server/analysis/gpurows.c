/* gpurows.c: the GPU rows of the kernel table (kscratch.kern) and of the operator table
 * (kscratch.gpu_ops), from the loader's sums (trace.h: gpu_agg), on a thread of their own.
 *
 * Owns the kscratch file's rows and the final order of t->gpu_aggs. Must not write scratch
 * (the upload's connection writes it meanwhile), nor intern a string, nor move a gpu_agg
 * before an_rows_job_finish: the analysis reads them in their first-event order until then.
 *
 * Why a thread and a file of its own: these rows are one per distinct GPU activity name, and
 * 100,000 templated kernel names made them 200,000 inserts (130 ms) and two sorts (30 ms) on
 * the request thread after the stream, while the second core idled through setup's index
 * builds (issue 24). They need nothing the analysis computes, so a job writes them from the
 * start. SQLite lets one connection write a file at a time: kscratch is a second scratch
 * file (load.c attaches it next to scratch), written by this job's connection only, read by
 * the upload's connection once the job is over (the report, the commit). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/mono.h"

/* A GPU sum's sort key: (cls, kind, name), the order GROUP BY gave these rows when SQL
 * summed them; no two sums share one (the loader keys them so). */
typedef struct {
    int32_t cls, kind, name, at; /* at: its index in t->gpu_aggs */
} agg_key;

static int agg_key_cmp(const void *x, const void *y) {
    const agg_key *p = x, *q = y;
    if (p->cls != q->cls) return p->cls < q->cls ? -1 : 1;
    if (p->kind != q->kind) return p->kind < q->kind ? -1 : 1;
    return p->name < q->name ? -1 : p->name > q->name;
}

/* A sum's place in the main database's indexes (kernels_session: total_us DESC): equal
 * ones in sorted order. Why write in that order: the commit copies the rows in rowid order,
 * and an index filled in random order costs a B-tree descent and a page split a row
 * (100,000 kernel names: 0.17 s into kernel_rows in gpu_aggs order, 0.11 s in its own;
 * the sqlite3 shell). */
typedef struct {
    double total;
    int32_t pos; /* in sorted order */
} by_total;

static int by_total_cmp(const void *x, const void *y) {
    const by_total *p = x, *q = y;
    if (p->total != q->total) return p->total > q->total ? -1 : 1;
    return p->pos < q->pos ? -1 : p->pos > q->pos;
}

static int job_fail(rows_job *j, sqlite3 *db, const char *what) {
    snprintf(j->err, sizeof j->err, "analysis failed: %s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
    return db ? ERR_DB : ERR_NOMEM;
}

/* Opens kscratch for this job's writes: no journal (the file dies with the upload), a
 * small cache (what it writes goes to the OS's cache: AN_JOB_CACHE_KIB). */
static int open_kscratch(rows_job *j, sqlite3 **out) {
    sqlite3 *db = NULL;
    int ok = sqlite3_open_v2(j->t->kscratch_path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) == SQLITE_OK &&
             sqlite3_busy_timeout(db, j->busy_ms) == SQLITE_OK &&
             sqlite3_exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-" AN_JOB_CACHE_KIB, NULL,
                          NULL, NULL) == SQLITE_OK;
    *out = db;
    return ok ? 0 : job_fail(j, db, "cannot open the kernel rows' scratch file");
}

/* The rows, in the indexes' order: a kernel row per kernel, copy and memset sum, an
 * operator row (grouping 2, store/schema.sql) per sum, gpu_user_annotation ones too. */
static int write_rows(rows_job *j, sqlite3 *db, const by_total *order, size_t n) {
    const trace_ctx *t = j->t;
    sqlite3_stmt *kern = NULL, *ops = NULL;
    int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK &&
             sqlite3_prepare_v2(db, "INSERT INTO kern VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &kern, NULL) == SQLITE_OK &&
             sqlite3_prepare_v2(db, "INSERT INTO gpu_ops VALUES (" AN_OP_PARAMS ")", -1, &ops, NULL) == SQLITE_OK
                 ? 0 : ERR_DB;
    for (size_t i = 0; i < n && !rc; i++) {
        const gpu_agg *k = &t->gpu_aggs[j->perm[order[i].pos]];
        const char *kind = intern_str(t->strs, k->kind);
        agg row;
        an_gpu_agg_row(k, 2, &row);
        an_op_bind(ops, kind ? kind : "", &row, order[i].pos);
        rc = sqlite3_step(ops) == SQLITE_DONE ? 0 : ERR_DB;
        sqlite3_reset(ops);
        if (rc || k->cls != EV_GPU) continue;
        sqlite3_bind_int64(kern, 1, k->name); /* ids, not texts: scratch.sql */
        sqlite3_bind_text(kern, 2, kind ? kind : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(kern, 3, k->calls);
        sqlite3_bind_double(kern, 4, k->total);
        sqlite3_bind_double(kern, 5, k->min);
        sqlite3_bind_double(kern, 6, k->max);
        if (k->grid >= 0) sqlite3_bind_int64(kern, 7, k->grid);
        if (k->block >= 0) sqlite3_bind_int64(kern, 8, k->block);
        if (k->regs >= 0) sqlite3_bind_int64(kern, 9, k->regs);
        if (k->smem >= 0) sqlite3_bind_int64(kern, 10, k->smem);
        /* the launch columns as tb-profiler's kernel table has them: duration-weighted means
         * over every launch, one without the figure weighing in as 0 (trace.h: gpu_agg); a
         * kernel none of whose launches has it, or of no duration, has none */
        if (k->has_bps && k->total > 0) {
            sqlite3_bind_double(kern, 11, k->w_bps / k->total);
            sqlite3_bind_double(kern, 13, k->w_sme / k->total);
        }
        if (k->has_occ && k->total > 0) sqlite3_bind_double(kern, 12, k->w_occ / k->total);
        rc = sqlite3_step(kern) == SQLITE_DONE ? 0 : ERR_DB;
        sqlite3_reset(kern);
        sqlite3_clear_bindings(kern);
    }
    if (!rc && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) rc = ERR_DB;
    if (rc) job_fail(j, db, "cannot write the kernel rows");
    sqlite3_finalize(kern);
    sqlite3_finalize(ops);
    return rc;
}

static void *rows_job_run(void *arg) {
    rows_job *j = arg;
    double t0 = mono_ms();
    size_t n = j->t->ngpu_aggs;
    agg_key *keys = malloc(n * sizeof *keys);
    by_total *order = malloc(n * sizeof *order);
    sqlite3 *db = NULL;
    j->rc = !keys || !order ? job_fail(j, NULL, "the kernel rows") : open_kscratch(j, &db);
    if (!j->rc) {
        for (size_t i = 0; i < n; i++) {
            const gpu_agg *g = &j->t->gpu_aggs[i];
            keys[i] = (agg_key){g->cls, g->kind, g->name, (int32_t)i};
        }
        qsort(keys, n, sizeof *keys, agg_key_cmp);
        for (size_t i = 0; i < n; i++) {
            j->perm[i] = keys[i].at;
            order[i] = (by_total){j->t->gpu_aggs[keys[i].at].total, (int32_t)i};
        }
        qsort(order, n, sizeof *order, by_total_cmp);
        j->rc = write_rows(j, db, order, n);
    }
    sqlite3_close(db);
    free(keys);
    free(order);
    if (getenv("FIRSTPASS_TRACE_ANALYSIS")) log_line("debug", "analysis", "step=gpu_rows ms=%.1f", mono_ms() - t0);
    return NULL;
}

int an_rows_job_start(A *a, rows_job *j) {
    memset(j, 0, sizeof *j);
    j->t = a->t;
    size_t n = a->t->ngpu_aggs;
    if (!n) return 0; /* no rows: kscratch's tables stay empty */
    if (!a->t->kscratch_path) {
        snprintf(a->err, a->errlen, "analysis failed: no scratch file for the kernel rows");
        return ERR_DB;
    }
    if (!(j->perm = malloc(n * sizeof *j->perm))) return ERR_NOMEM;
    j->busy_ms = an_busy_ms(a);
    j->started = 1;
    j->threaded = pthread_create(&j->th, NULL, rows_job_run, j) == 0;
    if (!j->threaded) rows_job_run(j);
    return 0;
}

/* new[i] = old[perm[i]], in place, one cycle of the permutation at a time; perm is spent
 * (each entry set to -1 once moved). Why not a sorted copy: 7 MB at 100,000 names. */
static void permute(gpu_agg *g, int32_t *perm, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (perm[i] < 0) continue;
        gpu_agg first = g[i];
        size_t at = i;
        for (;;) {
            size_t from = (size_t)perm[at];
            perm[at] = -1;
            if (from == i) {
                g[at] = first;
                break;
            }
            g[at] = g[from];
            at = from;
        }
    }
}

int an_rows_job_finish(A *a, rows_job *j) {
    if (j->threaded) pthread_join(j->th, NULL);
    int rc = j->rc;
    if (rc && !a->err[0]) snprintf(a->err, a->errlen, "%s", j->err);
    if (!rc && j->started) permute(a->t->gpu_aggs, j->perm, a->t->ngpu_aggs);
    free(j->perm);
    memset(j, 0, sizeof *j);
    return rc;
}
