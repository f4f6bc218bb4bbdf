/* an.h: what the analysis's files share (analysis-internal: no other layer includes it).
 *
 * The context of one analyze_run (A), the accumulators it carries, and the functions one
 * file of analysis/ calls in another:
 *   host.c      the host walk: nesting, operator table, CPU phases, GPU rows (key_averages)
 *   busy.c      GPU busy unions (scratch.busy, kbusy) and lookups of busy time in a span
 *   gpu.c       GPU facts: idle gaps, launch delays, copies, per device (on a second core)
 *   timeline.c  timeline buckets per track and the timeline document
 *   analyze.c   the order of the steps (analyze_run), the summary, and these helpers
 * Definitions of every number are in analyze.c's header comment. */
#ifndef FP_AN_H
#define FP_AN_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>

#include "analysis/trace.h"
#include "lib/intern.h"

/* One call as key_averages() counts it: what pop_frame adds to its operator rows. */
typedef struct opcall {
    long name, kind, shapes;   /* name folded (an_fold: ProfilerStep#N -> ProfilerStep*) */
    double dur, child;         /* its duration; the durations of its direct children */
    double cuda_total, self_cuda;
    long long cpu_mem, self_cpu_mem, cuda_mem, self_cuda_mem;
} opcall;

typedef struct frame {
    int cls;
    long name, kind, shapes;
    double ts, te, dur, child; /* dur as in the trace: te - ts loses digits at epoch-us magnitudes */
    double cuda_total, self_cuda;
    long long cpu_mem, self_cpu_mem, cuda_mem, self_cuda_mem;
    long long kernels;
    double kernel_us;
    int nchild;                /* direct children popped so far */
    int pend;                  /* 1: pending holds the first child, same name: torch may merge it (pop_frame) */
    opcall pending;
} frame;

typedef struct agg {
    int grouping;
    long name, kind, shapes;
    long long calls;
    double cpu_total, self_cpu, cuda_total, self_cuda;
    long long cpu_mem, self_cpu_mem, cuda_mem, self_cuda_mem;
} agg;

typedef struct phase {
    long name;
    int gpu;
    long long count, kernels;
    double total, busy, kernel_us, first_ts;
} phase;

/* One ProfilerStep#N range on the host. */
typedef struct step { double ts, te, dur; } step;

typedef struct tl_bucket { float busy; uint32_t count, top; float topdur; } tl_bucket;

/* A timeline track being bucketed (tl_add). */
typedef struct tlacc {
    tl_bucket *b;                  /* TL_BUCKETS */
    double ue;                     /* end of the busy union so far */
    long track;                    /* -1: none open */
} tlacc;

typedef struct A {
    trace_ctx *t;
    sqlite3 *db;
    char *err;
    size_t errlen;
    intern *keys;           /* agg keys -> index */
    agg *aggs;
    size_t naggs, capaggs;
    intern *pkeys;          /* phase keys -> index */
    phase *phases;
    size_t nphases, capphases;
    sqlite3_stmt *busy_q, *kbusy_q;
    long ua_kind;           /* string id of "user_annotation", -1 if absent */
    long kernel_kind, memcpy_kind, memset_kind; /* of "kernel", "gpu_memcpy", "gpu_memset" (gpu_job) */
    double wall;
    sqlite3_stmt *tl_ins;          /* INSERT INTO scratch.tlb */
    unsigned char *tl_blob, *tl_packed; /* TL_BLOB_RAW each: a track's records, raw and packed */
    double tl_t0, tl_w;            /* session start, bucket width */
    tlacc tl;                      /* the accumulator of timeline_buckets and host_walk */
    long step_name;                /* string id of "ProfilerStep*" (interned by analyze_run) */
    unsigned char *is_step;        /* per string id at the start: 1 for a ProfilerStep#N name (an_fold) */
    size_t nstrs_step;             /* how many ids is_step covers */
    step *steps;                   /* the ProfilerStep#N ranges, in pop order */
    size_t nsteps, capsteps;
} A;

/* Why: after the stream, the analysis ran on one core while the other idled, and
 * gpu_facts (100 ms at 100 MB, 1.3 s at 1 GB) reads only what setup and merge_into have
 * written. So it runs on a thread of its own with a connection of its own that attaches
 * the same scratch file, while host_walk and the rest go on here. Its context is a copy
 * of the analysis's with its own connection, statements and error; the string table is
 * only read (the ids it needs were interned before it started). The scratch writes of this
 * side wait for its reads, if ever they must spill, through the busy timeout. */
typedef struct gpu_job {
    A b;
    char err[256];
    double gpu_busy;
    json_t *gpu, *gaps;
    pthread_t th;
    int started, threaded;
} gpu_job;

/* The merged GPU intervals of scratch.busy / kbusy: rows (s0, data), data BUSY_BLOCK
 * triples (s, e, cum = busy before s) at most, s0 the first s; s strictly increases
 * across the table. Why blocks: a row per interval was an INSERT per GPU activity (two
 * tables: 230k rows, 200 ms at 300 MB), and a lookup only needs the row holding t. */
#define BUSY_BLOCK 256

/* The row of table t (busy or kbusy) that holds time ?: busy_before's statement. */
#define BUSY_SQL(t) "SELECT data FROM scratch." t " WHERE s0 <= ? ORDER BY s0 DESC LIMIT 1"


/* FIRSTPASS_TRACE_ANALYSIS=1 logs each step's wall time: how bench/ finds hot steps. */
#define STEP_BEGIN() double t0_ = mono_ms()
#define STEP_END(name) \
    if (getenv("FIRSTPASS_TRACE_ANALYSIS")) log_line("debug", "analysis", "step=%s ms=%.1f", name, mono_ms() - t0_)

/* A name as key_averages() groups it: ProfilerStep#N -> ProfilerStep* (torch's
 * _rewrite_name with_wildcard), every other id as it is. */
static inline long an_fold(const A *a, long name) {
    return name >= 0 && (size_t)name < a->nstrs_step && a->is_step[name] ? a->step_name : name;
}

/* An analysis error: the SQLite message into a->err; returns ERR_DB. */
int an_dberr(A *a);
int an_run(A *a, const char *sql);
sqlite3_stmt *an_prep(A *a, const char *sql);
const char *an_str(A *a, long id);

/* host.c */
int an_host_walk(A *a);
int an_gpu_track_host_ops(A *a);
int an_gpu_rows(A *a);
int an_write_ops(A *a);
int an_gpu_phases(A *a);
int an_write_phases(A *a, json_t *tl_phases);

/* busy.c */
double an_busy_in(sqlite3_stmt *q, double ts, double te);
int an_busy_merges(A *a, int ndev, long long dev, long kernel_kind, double *total);

/* gpu.c */
int an_gpu_job_start(A *a, gpu_job *j, double gpu_busy);
int an_gpu_job_finish(A *a, gpu_job *j, json_t **gpu, json_t **gaps);

/* timeline.c */
int an_tl_open(A *a);
void an_tl_close(A *a);
int an_tl_flush(A *a, tlacc *t);
int an_tl_add(A *a, tlacc *t, long tr, double ts, double te, uint32_t name, double dur);
int an_timeline_buckets(A *a);
json_t *an_timeline_doc(A *a, json_t *phases, json_t *gaps);

#endif
