/* trace.h: what the loader knows about one upload while it is being stored.
 *
 * Shared by load.c (fills it while events stream in) and analyze.c (reads it when the
 * stream ended). The events themselves are in a temporary database file attached to the
 * loader's connection (and, read-only in effect, to the analysis's second one), so memory
 * stays bounded by SQLite's page cache whatever the trace size:
 *  - scratch.ev: one row per event that a query joins, groups or seeks: GPU activity,
 *    gpu_user_annotation, runtime calls (by correlation) and user_annotation ranges;
 *  - scratch.hblk(track, n, data): every host-class event (EV_HOST_OP, EV_HOST_RT,
 *    EV_MEMORY) as an hrec, n of them per row, each track's in file order. Why blocks:
 *    host events are most of a trace, and the host walk only reads them in order; a
 *    row each cost the loader 6,000 instructions an event and the analysis a sort. */
#ifndef FP_TRACE_H
#define FP_TRACE_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#include "lib/chunk.h"
#include "lib/intern.h"

/* The order analyze.c's host walk takes a thread's events in: ts ascending, the longer
 * first on a tie (te = ts + dur). 1 when (ts, te) comes before (ts2, te2). load.c marks an
 * event late with it (host_late), so the two must agree: one definition. */
static inline int host_before(double ts, double te, double ts2, double te2) {
    return ts < ts2 || (ts == ts2 && te > te2);
}

/* One host-class event in scratch.hblk.data: host byte order, the blob an array of them
 * (the database never leaves the machine: it is the upload's scratch file). */
typedef struct hrec {
    double ts, te, dur;   /* te = ts + dur; dur as in the trace */
    long long bytes;      /* EV_MEMORY: args Bytes; EV_HOST_OP: its Input type and Concrete Inputs,
                           * an id of trace_ctx.xargs (-1: none) */
    long long corr;       /* EV_HOST_RT: its correlation id, when has_corr; EV_MEMORY: its device (args Device Id) */
    long long seq;        /* the event's place among the analysed ones (scratch.ev.seq's numbering): file order across tracks */
    int32_t kind, name, shapes; /* string ids; shapes -1: none */
    uint8_t cls, devtype, has_corr, late; /* late: see host_late */
    long long total_alloc, total_reserved; /* EV_MEMORY: args "Total Allocated" / "Total Reserved" (the allocator's
                                            * totals after the event); EV_HOST_OP: args "Sequence number" (autograd's
                                            * link of a forward op to its backward) / "flops" (torch's with_flops
                                            * count, > 0); -1 when absent (and for the other classes) */
} hrec;
#define XARGS_BYTES_MAX (8u << 20) /* trace_ctx.xargs: all its strings together */
#define XARGS_ONE_MAX 4096         /* one of them */
#define HBLK_RECS 512 /* hrecs per scratch.hblk row at most (40 KiB) */
/* hrec.cls of a python_function range (scratch only: its chunk keeps EV_OTHER). The host
 * walk keeps these on a stack of their own to label GPU idle time (idle.c); key_averages
 * leaves them out, as torch does. */
#define HREC_PY 6

/* The i-th hrec of a scratch.hblk blob (copied out: the blob need not be aligned). */
static inline void hrec_at(const void *blob, size_t i, hrec *h) { memcpy(h, (const char *)blob + i * sizeof *h, sizeof *h); }

/* The GPU rows of the operator and kernel tables, summed by the loader as events come:
 * one per (cls, kind, name) of EV_GPU and EV_GPU_ANN events. Grid, block, regs and smem
 * are the longest call's (the first in file order on a tie); -1 when it had none. */
typedef struct gpu_agg {
    int cls;
    int32_t next;         /* the next gpu_agg of the same name, -1 none (trace_ctx.gpu_agg_first) */
    int32_t kind, name, grid, block; /* string ids (intern ids are < INT32_MAX), -1 none */
    long long calls, regs, smem;
    double total, min, max; /* total summed in file order */
    /* Kernels: the sums, over the launches that carry them, of duration x "blocks per SM",
     * x "est. achieved occupancy %" and x min(1, blocks per SM) (Kineto's args, or nsys.c's
     * estimate from the export's GPU table): the kernel table's duration-weighted means, as
     * tb-profiler's (a launch without them weighs in as 0). has_*: some launch had them. */
    double w_bps, w_occ, w_sme;
    int32_t has_bps, has_occ;
} gpu_agg;

typedef struct track_info {
    char *pid, *tid;      /* as in the trace */
    long long events;     /* events on the track */
    int gpu;              /* holds GPU activity (a device/stream track) */
    long long device;     /* for GPU tracks: args.device or pid */
    long long stream;     /* for GPU tracks: args.stream or tid */
    int shown;            /* has an event a viewer draws (ph other than M, s, t, f) */
    int thread_named;     /* a ph M thread_name event is on the track */
    int process_named;    /* a ph M process_name event is on the track (names its pid) */
    int host_seen;        /* has host-class events (EV_HOST_OP, EV_HOST_RT, EV_MEMORY) */
    double host_ts, host_te; /* the greatest of them so far in host_walk's order (see host_late) */
    long long host_late;  /* of them, how many came before the greatest one of the track so far
                           * in (ts, longer first) order: hrec.late = 1. The others are in that
                           * order as they came, so analyze.c's host walk reads them unsorted and
                           * merges the late ones in */
} track_info;

typedef struct trace_ctx {
    sqlite3 *db;          /* main + scratch attached */
    const char *scratch_path; /* the scratch database's file, for a second connection (analyze.c) */
    const char *kscratch_path; /* the kernel rows' scratch file, for gpurows.c's connection */
    intern *strs;         /* names, kinds, shapes: scratch.ev refers to their ids */
    track_info *tracks;
    size_t ntracks, captracks;
    json_t *meta;         /* top-level keys other than traceEvents (owned) */
    const char *source;   /* kineto | legacy | firstpass | nsys */
    double start_us, end_us;
    long long events;     /* all events */
    long long analysed;   /* events of classes 0..4 */
    const char *name;     /* (owned) the session's name, when given (for the report) */
    json_t *labels;       /* {"k":"v"} (owned), for the report */
    char *hardware;       /* "NVIDIA A100 x8" or "" (owned) */
    int has_launch_flows; /* the upload has ac2g / async_cpu_to_gpu flow events (synth.h) */
    gpu_agg *gpu_aggs;    /* (owned) see gpu_agg; ngpu_aggs of them, in order of first event */
    size_t ngpu_aggs, capgpu_aggs;
    int32_t *gpu_agg_first; /* (owned) name id -> its first gpu_agg (then .next), -1 none;
                             * capgpu_agg_first entries. Why not an intern of (cls, kind,
                             * name): a copy and a slot a row, 6 MB at 100,000 kernel names. */
    size_t capgpu_agg_first;
    /* (owned) The cpu_ops' "Input type" and "Concrete Inputs", "types\x1fconcrete", for the
     * efficiency pass only (hrec.bytes names one): not the session's string table, so
     * nothing of them is stored. At most XARGS_BYTES_MAX bytes in all and XARGS_ONE_MAX
     * each (load.c); an op past them has none (its dtype reads unknown). */
    intern *xargs;
    size_t xargs_bytes;
    /* The export's DRAM bandwidth per device (nsys TARGET_INFO_GPU memoryBandwidth, bytes/s),
     * for the efficiency pass; not in meta, so downloads and replies stay as they were. */
    struct { long long dev; double bw; } gpu_bw[16];
    int ngpu_bw;
    /* The steps (ProfilerStep#N ranges) the analysis holds and splits at most, the earliest by
     * start (--max-steps, host.c); 0: no limit. */
    unsigned long long max_steps;
} trace_ctx;

#endif
