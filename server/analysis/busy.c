/* busy.c: GPU busy time: the unions of GPU activity (scratch.busy: all of it, scratch.kbusy:
 * kernels only), merged in one pass over the GPU rows in time order, and the lookups of busy
 * time before a point or inside a span that the host walk, phases and facts use. */

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "analysis/analyze.h"
#include "analysis/report.h"
#include "lib/buf.h"
#include "lib/cuda.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/mono.h"
#include "lib/tlblob.h"
#include "lib/vec.h"

/* GPU busy time in [-inf, t] from q (a BUSY_SQL statement). */
static double busy_before(sqlite3_stmt *q, double t) {
    double v = 0, iv[BUSY_BLOCK * 3];
    sqlite3_bind_double(q, 1, t);
    if (sqlite3_step(q) == SQLITE_ROW) {
        size_t bytes = (size_t)sqlite3_column_bytes(q, 0), n = bytes / sizeof(double[3]);
        if (n > BUSY_BLOCK) n = BUSY_BLOCK;
        if (n) memcpy(iv, sqlite3_column_blob(q, 0), n * sizeof(double[3])); /* NULL for an empty blob */
        size_t lo = 0, hi = n; /* the last interval with s <= t: iv[0] has it (s0 <= t) */
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (iv[3 * mid] <= t) lo = mid;
            else hi = mid;
        }
        if (n) {
            double s = iv[3 * lo], e = iv[3 * lo + 1], cum = iv[3 * lo + 2];
            v = cum + (t < e ? t - s : e - s);
        }
    }
    sqlite3_reset(q);
    return v;
}
double an_busy_in(sqlite3_stmt *q, double ts, double te) {
    double b = busy_before(q, te) - busy_before(q, ts);
    return b > 0 ? b : 0;
}

/* The GPU activity in ts order. One device's (dev = ?1) reads the ev_gpu index; several
 * devices need ev_gpu_ts, which setup builds only then (a sort of every GPU row: 75 ms at
 * 300 MB). */
#define GPU_BY_TS_ONE "SELECT ts, te, kind FROM scratch.ev WHERE cls = 2 AND dev = ?1 ORDER BY ts"
#define GPU_BY_TS_ALL "SELECT ts, te, kind FROM scratch.ev WHERE cls = 2 ORDER BY ts"

/* A union of intervals fed in start order, written as BUSY_BLOCK blocks (busy_before):
 * s strictly increases, so the tables are keyed by s0 and fill by appending. */
typedef struct merger {
    sqlite3_stmt *ins;
    double cs, ce, cum;
    int have, n;
    double blk[BUSY_BLOCK * 3];
} merger;

static int merger_flush(A *a, merger *m) {
    if (!m->n) return 0;
    sqlite3_bind_double(m->ins, 1, m->blk[0]);
    sqlite3_bind_blob(m->ins, 2, m->blk, (int)((size_t)m->n * sizeof(double[3])), SQLITE_STATIC);
    int rc = sqlite3_step(m->ins) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_reset(m->ins);
    m->n = 0;
    return rc;
}

/* The interval held in m (cs, ce) into the block. */
static int merger_put(A *a, merger *m) {
    double *p = &m->blk[3 * m->n++];
    p[0] = m->cs;
    p[1] = m->ce;
    p[2] = m->cum;
    m->cum += m->ce - m->cs;
    return m->n == BUSY_BLOCK ? merger_flush(a, m) : 0;
}

static int merger_add(A *a, merger *m, double ts, double te) {
    if (m->have && ts <= m->ce) {
        if (te > m->ce) m->ce = te;
        return 0;
    }
    int rc = m->have ? merger_put(a, m) : 0;
    m->cs = ts;
    m->ce = te;
    m->have = 1;
    return rc;
}

/* One pass over the GPU activity by ts: the union of all of it into scratch.busy (*total:
 * its busy time) and of the kernels (kind kernel_kind) into scratch.kbusy. Why one pass:
 * two, one per table, read every GPU row twice (the second 40-60 ms at 300 MB). */
int an_busy_merges(A *a, long kernel_kind, double *total) {
    sqlite3_stmt *s = an_prep(a, a->ndev > 1 ? GPU_BY_TS_ALL : GPU_BY_TS_ONE);
    merger *all = calloc(2, sizeof *all), *k = all + 1; /* 12 KiB each */
    if (!all) { sqlite3_finalize(s); return ERR_NOMEM; }
    all->ins = an_prep(a, "INSERT INTO scratch.busy VALUES (?, ?)");
    k->ins = an_prep(a, "INSERT INTO scratch.kbusy VALUES (?, ?)");
    int rc = s && all->ins && k->ins ? 0 : ERR_DB, src = SQLITE_DONE;
    if (!rc && a->ndev <= 1) sqlite3_bind_int64(s, 1, a->dev0);
    while (!rc && (src = sqlite3_step(s)) == SQLITE_ROW) {
        double ts = sqlite3_column_double(s, 0), te = sqlite3_column_double(s, 1);
        rc = merger_add(a, all, ts, te);
        if (!rc && sqlite3_column_int64(s, 2) == kernel_kind) rc = merger_add(a, k, ts, te);
    }
    if (!rc && src != SQLITE_DONE) rc = an_dberr(a);
    for (merger *m = all; !rc && m <= k; m++)
        if (m->have && !(rc = merger_put(a, m))) rc = merger_flush(a, m);
    *total = all->cum;
    sqlite3_finalize(s);
    sqlite3_finalize(all->ins);
    sqlite3_finalize(k->ins);
    free(all);
    return rc;
}

