/* memory.c: allocated memory over time, per device, from the [memory] events (issue 20's
 * memory view; tb-profiler's memory curve is the model).
 *
 * A [memory] event carries an allocation (Bytes > 0) or a free (Bytes < 0) on a device
 * (Device Type 0 CPU, 1 CUDA; Device Id). Allocated = the running sum of those deltas in
 * time order, from 0 at the window's start: what was allocated before the profile window is
 * not in the trace (Kineto's "Total Allocated" is not read). Per device: the peak and when,
 * and the curve at most MEM_SAMPLES points (the largest value of each slice of the wall,
 * so no peak is lost between samples). The operators that allocate are the operator table's
 * memory columns (key_averages' cpu/cuda_memory_usage), read with the reply.
 *
 * Owns A.mrows and wscratch.mem (the walk hands over one row per [memory] event) and the
 * "memory" document. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "lib/err.h"
#include "lib/vec.h"

#define MEM_SAMPLES 512

/* Why in memory: the walk inserted every [memory] event into wscratch.mem and the doc
 * read them back through SQLite's sorter, 113M of the request thread's 2,034M
 * instructions on the LLM shape at 30 MB (50,353 events at 100 MB), all of it on the
 * upload's critical path. Up to MEM_ROWS_MAX rows (32 bytes each: 4 MB, and as much
 * again for qsort's merge buffer) wait in a.mrows and are sorted in C; past that they all
 * go to wscratch.mem and the doc sorts there, as before. The order is the SQL one, ties
 * included: idx (the walk's order) is the last key, so the order is total, and it is the
 * order SQLite's sorter gives equal keys (insertion order: vdbesort.c merges the earlier
 * list first); the running sums, peaks and samples are the same. */
#define MEM_ROWS_MAX 131072
static long mem_rows_max = MEM_ROWS_MAX;
void analyze_set_mem_rows_max(long n) { mem_rows_max = n >= 0 ? n : MEM_ROWS_MAX; }

static int mem_insert(A *a, int devtype, long long dev, double ts, long long bytes) {
    if (!a->mem_ins && !(a->mem_ins = an_prep(a, "INSERT INTO wscratch.mem(devtype, dev, ts, bytes) VALUES (?, ?, ?, ?)"))) return ERR_DB;
    sqlite3_bind_int(a->mem_ins, 1, devtype);
    sqlite3_bind_int64(a->mem_ins, 2, dev);
    sqlite3_bind_double(a->mem_ins, 3, ts);
    sqlite3_bind_int64(a->mem_ins, 4, bytes);
    int rc = sqlite3_step(a->mem_ins) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_reset(a->mem_ins);
    return rc;
}

/* The rows kept so far to wscratch.mem, in walk order; from here on every row goes there. */
static int mem_spill(A *a) {
    int rc = 0;
    for (size_t i = 0; !rc && i < a->nmrows; i++) rc = mem_insert(a, a->mrows[i].devtype, a->mrows[i].dev, a->mrows[i].ts, a->mrows[i].bytes);
    free(a->mrows);
    a->mrows = NULL;
    a->nmrows = a->capmrows = 0;
    a->mem_sql = 1;
    return rc;
}

int an_mem_row(A *a, const hrow *r) {
    if (!a->mem_sql && a->nmrows >= (size_t)mem_rows_max) {
        int rc = mem_spill(a);
        if (rc) return rc;
    }
    if (a->mem_sql) return mem_insert(a, r->devtype, r->corr, r->ts, r->bytes);
    if (VEC_RESERVE(a->mrows, a->capmrows, a->nmrows + 1, 1024)) return ERR_NOMEM;
    a->mrows[a->nmrows] = (mrow){r->ts, r->corr, r->bytes, r->devtype, (unsigned)a->nmrows};
    a->nmrows++;
    return 0;
}

/* ORDER BY devtype DESC, dev, ts, then the walk's order (SQLite's ties). */
static int mrow_cmp(const void *x, const void *y) {
    const mrow *p = x, *q = y;
    if (p->devtype != q->devtype) return p->devtype > q->devtype ? -1 : 1;
    if (p->dev != q->dev) return p->dev < q->dev ? -1 : 1;
    if (p->ts != q->ts) return p->ts < q->ts ? -1 : 1;
    return p->idx < q->idx ? -1 : p->idx > q->idx;
}

/* One device's curve, peak and totals. */
typedef struct mdev {
    int devtype;
    long long dev;
    long long cur, peak, allocs, frees, alloc_bytes;
    double peak_ts;
    long long slice_max[MEM_SAMPLES];
    int slice_set[MEM_SAMPLES];
} mdev;

static json_t *device_json(const mdev *d, double t0, double w) {
    char name[48];
    if (d->devtype == 1) snprintf(name, sizeof name, "cuda:%lld", d->dev);
    else snprintf(name, sizeof name, "cpu");
    json_t *samples = json_array();
    long long last = 0;
    for (int k = 0; k < MEM_SAMPLES; k++) {
        if (!d->slice_set[k]) continue;
        last = d->slice_max[k];
        json_array_append_new(samples, json_pack("[f,I]", t0 + (k + 0.5) * w, (json_int_t)last));
    }
    return json_pack("{s:s,s:I,s:f,s:I,s:I,s:I,s:I,s:o}", "device", name, "peak_bytes", (json_int_t)d->peak, "peak_ts_us", d->peak_ts,
                     "end_bytes", (json_int_t)d->cur, "allocations", (json_int_t)d->allocs, "frees", (json_int_t)d->frees,
                     "allocated_bytes", (json_int_t)d->alloc_bytes, "samples", samples);
}

/* Adds row (devtype, dev, ts, bytes) to the curve of its device, d; a new device's first
 * row appends the previous device's JSON to devices. */
static void mem_step(mdev *d, int *have, json_t *devices, double t0, double w, int devtype, long long dev, double ts, long long b) {
    if (devtype != 1) dev = 0; /* one CPU curve, whatever Device Id says */
    if (*have && (devtype != d->devtype || dev != d->dev)) {
        json_array_append_new(devices, device_json(d, t0, w));
        *have = 0;
    }
    if (!*have) {
        memset(d, 0, sizeof *d);
        d->devtype = devtype;
        d->dev = dev;
        d->peak_ts = t0;
        *have = 1;
    }
    d->cur += b;
    if (b > 0) { d->allocs++; d->alloc_bytes += b; }
    else if (b < 0) d->frees++;
    if (d->cur > d->peak) { d->peak = d->cur; d->peak_ts = ts; }
    int k = (int)floor((ts - t0) / w);
    if (k < 0) k = 0;
    if (k >= MEM_SAMPLES) k = MEM_SAMPLES - 1;
    if (!d->slice_set[k] || d->cur > d->slice_max[k]) d->slice_max[k] = d->cur;
    d->slice_set[k] = 1;
}

int an_memory_doc(A *a, json_t **out) {
    *out = NULL;
    sqlite3_stmt *q = NULL;
    if (a->mem_sql && !(q = an_prep(a, "SELECT devtype, dev, ts, bytes FROM wscratch.mem ORDER BY devtype DESC, dev, ts"))) return ERR_DB;
    json_t *devices = json_array();
    double t0 = a->t->start_us, w = a->wall > 0 ? a->wall / MEM_SAMPLES : 1;
    mdev d;
    int have = 0, src = SQLITE_DONE;
    if (q) {
        while ((src = sqlite3_step(q)) == SQLITE_ROW)
            mem_step(&d, &have, devices, t0, w, sqlite3_column_int(q, 0), sqlite3_column_int64(q, 1), sqlite3_column_double(q, 2),
                     sqlite3_column_int64(q, 3));
    } else {
        if (a->nmrows) qsort(a->mrows, a->nmrows, sizeof *a->mrows, mrow_cmp); /* NULL when none: UB for qsort */
        for (size_t i = 0; i < a->nmrows; i++)
            mem_step(&d, &have, devices, t0, w, a->mrows[i].devtype, a->mrows[i].dev, a->mrows[i].ts, a->mrows[i].bytes);
    }
    if (have) json_array_append_new(devices, device_json(&d, t0, w));
    sqlite3_finalize(q);
    if (src != SQLITE_DONE) {
        json_decref(devices);
        return an_dberr(a);
    }
    *out = json_pack("{s:o,s:i}", "devices", devices, "samples_max", MEM_SAMPLES);
    return *out ? 0 : ERR_NOMEM;
}
