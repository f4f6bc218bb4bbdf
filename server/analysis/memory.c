/* memory.c: memory over time, per device, from the [memory] events (issue 20's memory view;
 * tb-profiler's memory curve is the model).
 *
 * A [memory] event carries an allocation (Bytes > 0) or a free (Bytes < 0) on a device
 * (Device Type 0 CPU, 1 CUDA; Device Id) and, in Kineto traces since 2021, the allocator's
 * state after it: "Total Allocated" and "Total Reserved" (issue 42, item 2). Per device:
 *  - allocated: Total Allocated where the device's events carry it ("allocated_from":
 *    "total_allocated"), what the allocator held, the window's own allocations and what was
 *    allocated before it; else the running sum of Bytes in time order from 0 at the window's
 *    start ("running_sum"), which misses what the window did not allocate itself;
 *  - reserved: Total Reserved, where the events carry it (null otherwise);
 * each as its peak and when (the first time it is reached), its value at the last event,
 * and its curve: at most MEM_SAMPLES points, the largest value of each slice of the wall (so
 * no peak is lost between samples). The operators that allocate are the operator table's
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
 * upload's critical path. Up to MEM_ROWS_MAX rows (48 bytes each: 6 MB, and as much
 * again for qsort's merge buffer) wait in a.mrows and are sorted in C; past that they all
 * go to wscratch.mem and the doc sorts there, as before. The order is the SQL one, ties
 * included: idx (the walk's order) is the last key, so the order is total, and it is the
 * order SQLite's sorter gives equal keys (insertion order: vdbesort.c merges the earlier
 * list first); the running sums, peaks and samples are the same. */
#define MEM_ROWS_MAX 131072
static long mem_rows_max = MEM_ROWS_MAX;
void analyze_set_mem_rows_max(long n) { mem_rows_max = n >= 0 ? n : MEM_ROWS_MAX; }

static int mem_insert(A *a, const mrow *m) {
    if (!a->mem_ins &&
        !(a->mem_ins = an_prep(a, "INSERT INTO wscratch.mem(devtype, dev, ts, bytes, total_alloc, total_reserved) VALUES (?, ?, ?, ?, ?, ?)")))
        return ERR_DB;
    sqlite3_bind_int(a->mem_ins, 1, m->devtype);
    sqlite3_bind_int64(a->mem_ins, 2, m->dev);
    sqlite3_bind_double(a->mem_ins, 3, m->ts);
    sqlite3_bind_int64(a->mem_ins, 4, m->bytes);
    sqlite3_bind_int64(a->mem_ins, 5, m->total_alloc);
    sqlite3_bind_int64(a->mem_ins, 6, m->total_reserved);
    int rc = sqlite3_step(a->mem_ins) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_reset(a->mem_ins);
    return rc;
}

/* The rows kept so far to wscratch.mem, in walk order; from here on every row goes there. */
static int mem_spill(A *a) {
    int rc = 0;
    for (size_t i = 0; !rc && i < a->nmrows; i++) rc = mem_insert(a, &a->mrows[i]);
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
    mrow m = {r->ts, r->corr, r->bytes, r->total_alloc, r->total_reserved, r->devtype, (unsigned)a->nmrows};
    if (a->mem_sql) return mem_insert(a, &m);
    if (VEC_RESERVE(a->mrows, a->capmrows, a->nmrows + 1, 1024)) return ERR_NOMEM;
    a->mrows[a->nmrows++] = m;
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

/* One curve of a device: its peak and when, its last value, the largest value of each
 * slice of the wall. */
typedef struct mcurve {
    int set;                       /* a value was added */
    long long peak, last;
    double peak_ts;
    long long slice_max[MEM_SAMPLES];
    unsigned char slice_set[MEM_SAMPLES];
} mcurve;

static void curve_add(mcurve *c, double t0, double w, double ts, long long v) {
    if (!c->set || v > c->peak) { c->peak = v; c->peak_ts = ts; }
    c->set = 1;
    c->last = v;
    int k = (int)floor((ts - t0) / w);
    if (k < 0) k = 0;
    if (k >= MEM_SAMPLES) k = MEM_SAMPLES - 1;
    if (!c->slice_set[k] || v > c->slice_max[k]) c->slice_max[k] = v;
    c->slice_set[k] = 1;
}

static json_t *curve_samples(const mcurve *c, double t0, double w) {
    json_t *samples = json_array();
    for (int k = 0; k < MEM_SAMPLES; k++)
        if (c->slice_set[k]) json_array_append_new(samples, json_pack("[f,I]", t0 + (k + 0.5) * w, (json_int_t)c->slice_max[k]));
    return samples;
}

/* One device's curves and counts. sum: the running sum of Bytes (from 0, with the window's
 * start as its first point); alloc, reserved: the events' Total Allocated / Reserved. */
typedef struct mdev {
    int devtype;
    long long dev;
    long long allocs, frees, alloc_bytes;
    mcurve sum, alloc, reserved;
} mdev;

static json_t *device_json(const mdev *d, double t0, double w) {
    char name[48];
    if (d->devtype == 1) snprintf(name, sizeof name, "cuda:%lld", d->dev);
    else snprintf(name, sizeof name, "cpu");
    /* One allocated figure a device: the allocator's own total when the trace has it. */
    const mcurve *al = d->alloc.set ? &d->alloc : &d->sum, *rs = &d->reserved;
    json_t *o = json_pack("{s:s,s:s,s:I,s:f,s:I,s:I,s:I,s:I,s:o}", "device", name, "allocated_from",
                          d->alloc.set ? "total_allocated" : "running_sum", "peak_bytes", (json_int_t)al->peak, "peak_ts_us", al->peak_ts,
                          "end_bytes", (json_int_t)al->last, "allocations", (json_int_t)d->allocs, "frees", (json_int_t)d->frees,
                          "allocated_bytes", (json_int_t)d->alloc_bytes, "samples", curve_samples(al, t0, w));
    json_object_set_new(o, "reserved_peak_bytes", rs->set ? json_integer((json_int_t)rs->peak) : json_null());
    json_object_set_new(o, "reserved_peak_ts_us", rs->set ? json_real(rs->peak_ts) : json_null());
    json_object_set_new(o, "reserved_end_bytes", rs->set ? json_integer((json_int_t)rs->last) : json_null());
    json_object_set_new(o, "reserved_samples", rs->set ? curve_samples(rs, t0, w) : json_array());
    return o;
}

/* Adds row m to the curves of its device, d; a new device's first row appends the previous
 * device's JSON to devices. */
static void mem_step(mdev *d, int *have, json_t *devices, double t0, double w, const mrow *m) {
    long long dev = m->devtype != 1 ? 0 : m->dev; /* one CPU curve, whatever Device Id says */
    if (*have && (m->devtype != d->devtype || dev != d->dev)) {
        json_array_append_new(devices, device_json(d, t0, w));
        *have = 0;
    }
    if (!*have) {
        memset(d, 0, sizeof *d);
        d->devtype = m->devtype;
        d->dev = dev;
        /* the running sum starts at 0 with the window: its peak is at least that (no sample) */
        d->sum.set = 1;
        d->sum.peak_ts = t0;
        *have = 1;
    }
    long long b = m->bytes;
    if (b > 0) { d->allocs++; d->alloc_bytes += b; }
    else if (b < 0) d->frees++;
    curve_add(&d->sum, t0, w, m->ts, d->sum.last + b);
    if (m->total_alloc >= 0) curve_add(&d->alloc, t0, w, m->ts, m->total_alloc);
    if (m->total_reserved >= 0) curve_add(&d->reserved, t0, w, m->ts, m->total_reserved);
}

int an_memory_doc(A *a, json_t **out) {
    *out = NULL;
    sqlite3_stmt *q = NULL;
    if (a->mem_sql &&
        !(q = an_prep(a, "SELECT devtype, dev, ts, bytes, total_alloc, total_reserved FROM wscratch.mem ORDER BY devtype DESC, dev, ts")))
        return ERR_DB;
    json_t *devices = json_array();
    double t0 = a->t->start_us, w = a->wall > 0 ? a->wall / MEM_SAMPLES : 1;
    mdev *d = malloc(sizeof *d); /* 27 KiB of slices: off the stack */
    int have = 0, src = SQLITE_DONE;
    if (!d) {
        sqlite3_finalize(q);
        json_decref(devices);
        return ERR_NOMEM;
    }
    if (q) {
        while ((src = sqlite3_step(q)) == SQLITE_ROW) {
            mrow m = {sqlite3_column_double(q, 2), sqlite3_column_int64(q, 1), sqlite3_column_int64(q, 3), sqlite3_column_int64(q, 4),
                      sqlite3_column_int64(q, 5), sqlite3_column_int(q, 0), 0};
            mem_step(d, &have, devices, t0, w, &m);
        }
    } else {
        if (a->nmrows) qsort(a->mrows, a->nmrows, sizeof *a->mrows, mrow_cmp); /* NULL when none: UB for qsort */
        for (size_t i = 0; i < a->nmrows; i++) mem_step(d, &have, devices, t0, w, &a->mrows[i]);
    }
    if (have) json_array_append_new(devices, device_json(d, t0, w));
    free(d);
    sqlite3_finalize(q);
    if (src != SQLITE_DONE) {
        json_decref(devices);
        return an_dberr(a);
    }
    *out = json_pack("{s:o,s:i}", "devices", devices, "samples_max", MEM_SAMPLES);
    return *out ? 0 : ERR_NOMEM;
}
