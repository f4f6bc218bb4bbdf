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
 * Owns wscratch.mem (the walk writes one row per [memory] event) and the "memory" document. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/an.h"
#include "lib/err.h"

#define MEM_SAMPLES 512

int an_mem_row(A *a, const hrow *r) {
    if (!a->mem_ins && !(a->mem_ins = an_prep(a, "INSERT INTO wscratch.mem(devtype, dev, ts, bytes) VALUES (?, ?, ?, ?)"))) return ERR_DB;
    sqlite3_bind_int(a->mem_ins, 1, r->devtype);
    sqlite3_bind_int64(a->mem_ins, 2, r->corr);
    sqlite3_bind_double(a->mem_ins, 3, r->ts);
    sqlite3_bind_int64(a->mem_ins, 4, r->bytes);
    int rc = sqlite3_step(a->mem_ins) == SQLITE_DONE ? 0 : an_dberr(a);
    sqlite3_reset(a->mem_ins);
    return rc;
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

int an_memory_doc(A *a, json_t **out) {
    *out = NULL;
    sqlite3_stmt *q = an_prep(a, "SELECT devtype, dev, ts, bytes FROM wscratch.mem ORDER BY devtype DESC, dev, ts");
    if (!q) return ERR_DB;
    json_t *devices = json_array();
    double t0 = a->t->start_us, w = a->wall > 0 ? a->wall / MEM_SAMPLES : 1;
    mdev d;
    int have = 0, src;
    while ((src = sqlite3_step(q)) == SQLITE_ROW) {
        int devtype = sqlite3_column_int(q, 0);
        long long dev = devtype == 1 ? sqlite3_column_int64(q, 1) : 0;
        if (have && (devtype != d.devtype || dev != d.dev)) {
            json_array_append_new(devices, device_json(&d, t0, w));
            have = 0;
        }
        if (!have) {
            memset(&d, 0, sizeof d);
            d.devtype = devtype;
            d.dev = dev;
            d.peak_ts = t0;
            have = 1;
        }
        double ts = sqlite3_column_double(q, 2);
        long long b = sqlite3_column_int64(q, 3);
        d.cur += b;
        if (b > 0) { d.allocs++; d.alloc_bytes += b; }
        else if (b < 0) d.frees++;
        if (d.cur > d.peak) { d.peak = d.cur; d.peak_ts = ts; }
        int k = (int)floor((ts - t0) / w);
        if (k < 0) k = 0;
        if (k >= MEM_SAMPLES) k = MEM_SAMPLES - 1;
        if (!d.slice_set[k] || d.cur > d.slice_max[k]) d.slice_max[k] = d.cur;
        d.slice_set[k] = 1;
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
