/* an.h: what the analysis's files share (analysis-internal: no other layer includes it).
 *
 * The context of one analyze_run (A), the accumulators it carries, and the functions one
 * file of analysis/ calls in another:
 *   host.c      the host walk: nesting, operator table, CPU phases, GPU rows (key_averages)
 *   busy.c      GPU busy unions (scratch.busy, kbusy) and lookups of busy time in a span
 *   gpu.c       GPU facts: idle gaps, launch delays, copies, per device (on a second core)
 *   timeline.c  timeline buckets per track and the timeline document
 *   cseg.c      a CPU-only trace's labelled pieces, stored by thread, read merged by start
 *   runs.c      runs of records stored as blocks under a key, read back in the order written
 *   hspill.c    the step breakdown's host ranges past its limit: sorted runs, merged back
 *   analyze.c   the conductor: the order of the passes (analyze_run), the summary
 *   an.c        the helpers at the bottom (errors, statements, strings, scratch readers):
 *               every pass calls down into it, it calls no pass
 * Definitions of every number are in analyze.c's header comment. */
#ifndef FP_AN_H
#define FP_AN_H

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>

#include "analysis/hspill.h"
#include "analysis/names.h"
#include "analysis/trace.h"
#include "lib/buf.h"
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
    /* effic.c: the GPU work of the launches whose innermost op this frame is */
    long xargs;                /* EV_HOST_OP: its Input type / Concrete Inputs (trace.h: hrec.bytes), -1 none */
    long long e_n;             /* launches with GPU work */
    double e_u, e_ue;          /* the union of their GPU time, in launch order; its end so far */
    double e_kc[3];            /* of it, kernel time by precision class (lib/flops.h KC_*) */
    long long e_kn;            /* their kernels */
    long long e_corr;          /* the correlation id of its first launch with kernels (effic.c's sample of its grid) */
    int e_causal;              /* their flash kernels' causal flag: 1, 0, -1 none says */
    long long seq;             /* EV_HOST_OP: args "Sequence number", -1 none (trace.h hrec) */
    double flops_arg;          /* EV_HOST_OP: args "flops" (torch's with_flops), -1 none */
    long track;                /* the thread it is on */
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

/* One host event as the walk takes it: its hrec (trace.h) and, for a runtime call, the GPU
 * work of its correlation (host.c's gcur). */
typedef struct hrow {
    int cls, devtype, has_g;
    int gsync;                     /* the work holds a pageable device-to-host copy: the call blocks */
    long kind, name, track, shapes;
    double ts, te, dur, gd, gk;    /* gd, gn: the GPU time and count of the correlation; gk: of kernels */
    double gu, gts, gte;           /* the union of the correlation's GPU time, its first start, its end */
    double gkc[3];                 /* its kernel time by precision class (lib/flops.h KC_*) */
    long long gkn;                 /* its kernels (effic.c) */
    int gcausal;                   /* its flash kernels' causal flag: 1, 0, -1 none says (effic.c) */
    long long bytes, gn, seq, corr; /* corr: -1 when none */
    long long total_alloc, total_reserved; /* EV_MEMORY: hrec's, -1 when absent */
} hrow;

/* One [memory] event as memory.c keeps it: dev is its Device Id (hrow.corr), idx its place
 * in the walk, the totals the allocator's after it (trace.h). */
typedef struct mrow {
    double ts;
    long long dev, bytes;
    long long total_alloc, total_reserved; /* -1 when the event has none */
    int devtype;
    unsigned idx;
} mrow;

/* ---- idle attribution (idle.c) ---- */

/* Gap classes (wscratch.igap.cls) and their names in the reply. */
enum { GAP_OTHER, GAP_HOST_WAIT, GAP_KERNEL_WAIT, GAP_NCLASSES };
extern const char *const gap_class_names[GAP_NCLASSES];
/* The lead-in [trace start, first GPU activity] (wscratch.igap.cls, one row at most): not idle
 * (it is outside the GPU window) and in no class above, but labelled like a host-wait gap on
 * the thread that launched the first activity, for the startup suspect. The tail [last GPU
 * activity's end, trace end] likewise, on the thread that launched the last activity to
 * end, for the tail suspect. */
#define GAP_LEAD_IN GAP_NCLASSES
#define GAP_TAIL (GAP_NCLASSES + 1)

/* What an instant of idle (or, CPU-only, of host time) is labelled with. */
enum {
    LB_NO_LAUNCH,    /* gap: the activity after it has no launch in the trace */
    LB_KWAIT_OP,     /* kernel wait: the innermost cpu_op around the launch */
    LB_KWAIT_RANGE,  /* kernel wait: no cpu_op, the innermost range around the launch */
    LB_KWAIT_RT,     /* kernel wait: no range, the launch call itself (name -1: not met) */
    LB_DATALOADER,   /* an enumerate(DataLoader)# range on the stack */
    LB_SYNC,         /* a gap that starts as a blocking sync returns: the op that made the sync */
    LB_PY,           /* a python_function range */
    LB_UA,           /* a user_annotation's own time */
    LB_STEP,         /* a ProfilerStep#N's own time (name: ProfilerStep*) */
    LB_UNTRACED,     /* no range open */
    LB_OP,           /* a cpu_op's own time */
    LB_RT,           /* a runtime/driver call's own time: no GPU work, not a launch, copy or sync (cudaMalloc, cuModuleLoadData) */
    LB_SYNC_LAUNCH,  /* a gap that starts as a blocking kernel launch returns: the op that launched it */
    LB_RANGE_HOST,   /* a record_function / NVTX range's own time where no launch with GPU work nests under it:
                      * named host work (issue 48; host_work in an Nsight export, else python_overhead) */
    LB_LEAD_DATA,    /* lead-in: a DataLoader range on the stack */
    LB_LEAD,         /* lead-in: the innermost range (name -1: none, or no launch found) */
    LB_TAIL_DATA,    /* tail: a DataLoader range on the stack */
    LB_TAIL,         /* tail: the innermost range (name -1: none, or no launch found) */
};

typedef struct idle_sum {
    int type;        /* LB_* */
    long name;       /* string id, -1 none */
    long track;      /* CPU-only: the thread; else -1 */
    double us;
    double in_us, known_us; /* of us, the part inside a step (a ProfilerStep range on the labelling stack, or
                             * the launch's), of the part where that is known (issue 48: per step) */
    double pend_us;         /* of us, outside a step on the thread being walked, known only once the
                             * thread is seen to open a step (idle.c settle_outside) */
} idle_sum;

/* Idle (host-wait and kernel-wait labels) under a record_function / NVTX range (not a step,
 * not a DataLoader): the innermost one on the thread at the instant, or the one around the
 * sync that took it (issue 48: the idle summed up the range tree, suspects_idle.c). */
typedef struct idle_rsum { int type; long name, range; double us; } idle_rsum;

/* CPU-only segment categories (wscratch.cseg.cat), in the order they take wall time. */
enum { CSEG_COMM, CSEG_DATA, CSEG_GC, CSEG_TOKENIZE, CSEG_COMPILE, CSEG_CPU, CSEG_PY, CSEG_N };

/* cseg.c: a CPU-only trace's labelled pieces, CSEG_BLOCK of them a wscratch.cseg row. Why
 * 40 (960 bytes): cseg is WITHOUT ROWID, an index b-tree, which keeps at most ~1,000 bytes of
 * a row on its page; 64 pieces (1,536 bytes) put each row's tail on an overflow page of its
 * own: 8,683 pages, 23.6 MB of them unused, for 11.8 MB of pieces (the CPU-only shape). */
#define CSEG_BLOCK 40
typedef struct cseg_piece { double s, e; long long name; } cseg_piece;
typedef struct cseg_run { int cat; long track; long long n; } cseg_run; /* a (category, thread) with pieces */
typedef struct cseg_writer {
    sqlite3_stmt *ins;
    long track;                         /* the thread whose pieces are buffered, -1 none */
    double last_s;                      /* its last piece's start */
    cseg_piece buf[CSEG_N][CSEG_BLOCK]; /* its pieces not yet written, per category */
    int n[CSEG_N];
    long long seq[CSEG_N];              /* its next block's number, per category */
    size_t run[CSEG_N];                 /* its runs' places in runs, per category (seq > 0) */
    cseg_run *runs;
    size_t nruns, capruns;
} cseg_writer;
/* A cursor over one (category, thread)'s blocks; name >= 0: that name's pieces only. */
typedef struct cseg_src {
    int cat;
    long track, name;
    long long seq;
    int n, pos, room;      /* pieces in blk, the next one's place, blk's size */
    cseg_piece *blk;
} cseg_src;
/* The pieces of some categories, every thread's, in start order (ties in any order). */
typedef struct cseg_stream {
    struct A *a;
    sqlite3_stmt *get;
    cseg_src *src;
    size_t nsrc;
    size_t *heap, nheap; /* indexes into src, a min-heap by the current piece's start */
    int rc;              /* an error met while reading */
} cseg_stream;

/* runs.c: runs of fixed-size records under a key, up to RUN_BLOCK_BYTES of them a row of one
 * of its tables (RUN_GSTREAM: one device's gaps, key 0; RUN_KWAIT: kernel-wait gaps, key the
 * thread). Why 992: four such rows fill a 4 KB page (runs.c). */
#define RUN_BLOCK_BYTES 992
#define RUN_KEYS_MAX (1u << 30)
#define RUN_SEQ_MAX 0xffffffffLL
enum { RUN_GSTREAM, RUN_KWAIT, RUN_NTABLES };
typedef struct run_buf { unsigned char *rec; int n; long long seq; } run_buf;
typedef struct run_writer {
    struct A *a;
    sqlite3_stmt *ins;
    size_t size, nkeys;  /* a record's bytes; keys 0 .. nkeys - 1 */
    int per;             /* records a block */
    run_buf *buf;        /* per key: its unwritten records, its next block's number */
} run_writer;
typedef struct run_reader {
    struct A *a;
    sqlite3_stmt *q;
    size_t size;
    int per;             /* records a block */
    int n, pos, rc;      /* records in blk, the next one's place; an error met while reading */
    unsigned char *blk;
} run_reader;
/* idle.c's records: a gap of the device stream (RUN_GSTREAM), a thread's kernel-wait gap
 * (RUN_KWAIT: lts, corr its launch's start and correlation). */
typedef struct gap_rec { double g0, g1; long long cls; } gap_rec;
typedef struct kw_rec { double lts; long long corr; double g0, g1; } kw_rec;
/* A record is written as its bytes: no padding, which would be uninitialised bytes in the
 * file (valgrind: an int cls left 4 of gap_rec's 24). */
_Static_assert(sizeof(gap_rec) == 3 * 8 && sizeof(kw_rec) == 4 * 8, "runs.c records have no padding");

typedef struct idle_state {
    int cpu_only;                  /* no GPU activity: every host instant is labelled */
    int stream;                    /* one device: its gaps are runs (gstream, kwruns), igap holds
                                    * only the host-wait, lead-in and tail rows (idle.c) */
    int kw_rows;                   /* the walk reads kernel-wait gaps from igap's rows by igap_kw */
    int ndevices;
    double w0, w1;                 /* the GPU window: first activity start, last end (all devices) */
    int ndevices_seen;             /* devices with activity so far (device_gaps) */
    json_t *devices;               /* per device: busy, window, idle, lead-in, tail, by class */
    double by_class[GAP_NCLASSES]; /* idle us per gap class, all devices */
    cseg_writer *cw;               /* CPU-only: wscratch.cseg's writer (cseg.c) */
    long long ncseg[CSEG_N];       /* CPU-only: the pieces per category */
    sqlite3_stmt *pinst_ins;       /* INSERT INTO wscratch.pinst (an_idle_phase_range) */
    intern *keys;                  /* (type, name, track) -> index into sums */
    idle_sum *sums;
    size_t nsums, capsums;
    json_t *sync_ev;               /* sync culprit name -> [what blocked: the call, the ops it ran under, the copy],
                                    * up to SYNC_EV_MAX each (idle.c: a sync's evidence, issue 48) */
    intern *rkeys;                 /* (type, name, range) -> index into rsums */
    idle_rsum *rsums;
    size_t nrsums, caprsums;
    size_t *pend;                  /* the sums with pend_us > 0 on the thread being walked */
    size_t npend, cappend;
} idle_state;

#define SYNC_CHAIN 6  /* the cpu_ops a sync's evidence quotes, outermost first */
#define SYNC_EV_MAX 5 /* the distinct blocking calls quoted per sync culprit */

/* One range of the labelling stack. */
typedef struct label_frame { double ts, te; long name; int type; } label_frame;
/* A host-wait gap being labelled; sync_name >= 0: it starts as a blocking call returns (a
 * sync, or a blocking launch: sync_launch), which explains at most sync_left more of it
 * (idle.c: the sync rule); edge GAP_LEAD_IN or GAP_TAIL for those (no sync rule), else 0. */
/* refill: the gap draws on the walk's carry (the lead a drain cost, idle.c); named: the named
 * host work in a sync's own gap (what the sync carries on is its lead less that). */
typedef struct open_gap { double g0, g1, lts, sync_left, named; long sync_name, sync_range; int edge, sync_launch, refill; } open_gap;

/* The walk's labelling state for the thread being walked. */
typedef struct idle_walk {
    int on;                        /* this thread is labelled */
    long track;
    double cur;                    /* labelled up to here */
    label_frame *frames;
    int nframes;
    size_t capframes;
    open_gap *open;
    int nopen;
    size_t capopen;
    sqlite3_stmt *hw, *kw;         /* the thread's host-wait gaps by g0, kernel-wait ones by launch */
    sqlite3_stmt *busyq;           /* idle.c busy_at's */
    run_reader *kr;                /* the kernel-wait ones from kwruns (idle_state.kw_rows 0) */
    int hw_row, kw_row;            /* the cursors are on a row */
    double kw_lts, kw_us;          /* the kernel-wait cursor's gap: its launch's start, its length */
    long long kw_corr;             /* and its launch's correlation */
    int sync_ok;                   /* a blocking call was seen: the latest one */
    double sync_ts, sync_te;
    long sync_name;                /* a sync: the outermost cpu_op around it; a launch: the innermost; else its own name */
    int sync_launch;               /* it was a kernel launch that returned after its kernels (not a sync call) */
    long long nlaunch, nblock;     /* the thread's kernel launches so far, and those that blocked */
    long sync_range;               /* the record_function / NVTX range around the blocking call, -1 none */
    long sync_call, wait_call;     /* the blocking call's name, and the waiting call's */
    long long sync_corr, wait_corr; /* their correlations (-1 none) */
    long sync_ops[SYNC_CHAIN], wait_ops[SYNC_CHAIN]; /* the cpu_ops they ran under, outermost first */
    int sync_nops, wait_nops;
    sqlite3_stmt *corrq;           /* idle.c sync_evidence's */
    double gpu_launch_ts;          /* the start of the thread's latest runtime call with GPU work (-inf none) */
    int wait_ok;                   /* a call that may have waited inside an operator (issue 48): the latest */
    double wait_ts, wait_te;
    long wait_name, wait_range;    /* its outermost cpu_op (else its name), the range around it */
    int carry_on;                  /* a drain's refill (issue 48): the lead it cost, not used up yet */
    double carry_left;
    long carry_name, carry_range;
    int carry_launch;
    int had_step;                  /* the thread opened a step's range: time outside one is known to be so */
} idle_walk;

/* ---- suspects (suspects_host.c: the walk's statistics; suspects.c: the list) ---- */

/* What the walk learns of one cpu_op name. */
typedef struct opstat {
    long name;
    long long calls;     /* its calls (before torch's same-name merge) */
    double host_us;      /* their host time */
    double max_us;       /* its longest call */
    double flops, flops_us; /* CPU-only: the FLOPs of its calls whose shapes give them (lib/flops.h), and their host time */
    long flops_shapes;   /* the shapes id of its last such call (+1; 0 none), and their FLOPs a call: */
    double flops_call;   /* most calls repeat a shape, so its dims are parsed once a run */
    double kern_under;   /* kernel time launched with it anywhere on the launch's stack */
    double kern_self;    /* kernel time where it is the innermost op and no GEMM/copy/collective op is around */
} opstat;

typedef struct suspect_state {
    intern *op_keys;     /* name id -> index into ops */
    opstat *ops;
    size_t nops, capops;
    double kern_no_op;   /* kernel time launched under no op at all */
    long long graph_launches; /* launches of a CUDA or HIP graph (NF_GRAPH_LAUNCH) */
    long long launches;  /* kernel launches (NF_LAUNCH calls with kernel work, no sync) */
    long long blocking;  /* of them, calls that returned after their kernels ended (sync_launch) */
    long long inner_syncs; /* sync calls (NF_SYNC) with kernel launches before and after them in the same step, on
                            * one thread: a graph of the step cannot hold them (suspects_sync.c) */
    long long pend_syncs;  /* the walk's syncs since the last launch of this step on this thread */
    int launched;          /* the walk launched a kernel in this step on this thread */
    long sync_track;       /* the thread those two are of */
    sqlite3_stmt *ccorr_ins;
} suspect_state;

/* One ProfilerStep#N range on the host (name: its own, ProfilerStep#5; track: its thread). */
typedef struct step { double ts, te, dur; long name, track; } step;


/* steps.c's walk state: the host ranges the walk records, role 0 DataLoader ranges, role 1
 * the outermost other ranges of each thread, role 2 the runtime calls, role 3 the host
 * collective ranges (NF_COMM_RANGE: gloo:, nccl:, mpi:, c10d::, record_param_comms), every
 * one; a range that overlaps or touches the one before it on the same role is merged into
 * it (the breakdown reads only their union). */
enum { SPAN_DATA, SPAN_CPU, SPAN_RUNTIME, SPAN_COMM, SPAN_ROLES };
_Static_assert(SPAN_ROLES == HSPILL_ROLES, "each role of steps_state has its runs in the spill file");
typedef struct steps_state {
    int on;              /* the trace has steps or record_function ranges: span is filled */
    hspan *span[SPAN_ROLES];
    size_t n[SPAN_ROLES], cap[SPAN_ROLES];
    hspill spill;        /* more ranges than steps.c keeps (spill.path set): every role is
                          * sorted runs there from the walk's end (hspill.h) */
} steps_state;

typedef struct tl_bucket { float busy; uint32_t count, top; float topdur; } tl_bucket;

/* A timeline track being bucketed (tl_add). */
typedef struct tlacc {
    tl_bucket *b;                  /* TL_BUCKETS */
    double ue;                     /* end of the busy union so far */
    long track;                    /* -1: none open */
} tlacc;

#define AGG_CACHE 256 /* a power of two */
typedef struct waste_state waste_state;

typedef struct A {
    trace_ctx *t;
    sqlite3 *db;
    char *err;
    size_t errlen;
    intern *keys;           /* agg keys -> index */
    struct { long key[4], i; } aggc[AGG_CACHE]; /* host.c agg_for: recent keys -> index (i -1: empty) */
    agg *aggs;
    size_t naggs, capaggs;
    intern *pkeys;          /* phase keys -> index */
    phase *phases;
    size_t nphases, capphases;
    sqlite3_stmt *busy_q, *kbusy_q;
    long ua_kind;           /* string id of "user_annotation", -1 if absent */
    long kernel_kind, memcpy_kind, memset_kind; /* of "kernel", "gpu_memcpy", "gpu_memset" (gpu_job) */
    double wall;
    sqlite3_stmt *tl_ins;          /* INSERT INTO wscratch.tlb */
    unsigned char *tl_blob, *tl_packed; /* TL_BLOB_RAW each: a track's records, raw and packed */
    void *tl_cctx;                 /* the ZSTD_CCtx that packs them (tlblob.h) */
    double tl_t0, tl_w;            /* session start, bucket width */
    buf *tl_mem;                   /* non-NULL (gpu_job's): an_tl_flush appends {i64 track, u32 len, blob} here */
    tlacc tl;                      /* the accumulator of timeline_buckets and host_walk */
    long step_name;                /* string id of "ProfilerStep*" when the trace has steps, else -1 */
    nflags_t *nflags;              /* per string id at the start: NF_* (names.h) */
    size_t nnflags;                /* how many ids nflags covers */
    idle_state *idle;              /* idle.c */
    int ndev;                      /* devices with GPU activity, counted up to 2 (gpu_devices) */
    long long dev0;                /* the first one's id: with ndev 1, ev_gpu's (dev, ts) order is
                                    * ts order (busy.c's merges, steps.c's roles) */
    suspect_state *sus;            /* suspects_host.c */
    steps_state *steps_st;         /* steps.c */
    sqlite3_stmt *mem_ins;         /* memory.c: INSERT INTO wscratch.mem */
    mrow *mrows;                   /* memory.c: the [memory] rows, in walk order, until mem_sql */
    size_t nmrows, capmrows;
    int mem_sql;                   /* memory.c: the rows are in wscratch.mem */
    step *steps;                   /* the ProfilerStep#N ranges, in pop order; at most
                                    * t->max_steps, the earliest by start (host.c: a max-heap by
                                    * start once more came) */
    long walk_track;               /* host.c: the thread the walk is on */
    size_t nsteps, capsteps;
    size_t steps_over;             /* ranges past t->max_steps: counted, not kept */
    double steps_over_us;          /* their host durations, summed */
    struct effic_state *eff;       /* effic.c: the efficiency pass's sums, NULL when it is off */
    struct waste_state *waste;     /* waste.c: what the walk saw around each launch (waste.h) */
    unsigned char *kclass;         /* per string id: a kernel name's precision class (KC_*) + 1, 0 none */
    signed char *kcausal;          /* per string id: a flash kernel's causal flag (flops_kernel_causal), -1 none */
    size_t nkclass;
    struct const_state *cst;       /* suspects_recompute.c: the chains an_const_pop follows, NULL until its first call */
    json_t *effic;                 /* the efficiency document (effic.c), from before an_suspects on;
                                    * owned by analyze_run (borrowed here): suspects.c reads verdicts */
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
    int timeline, tl_rc;   /* also timeline_buckets' pass (GPU_JOB_TL_TRACKS), its blobs in tl_mem */
    buf tl_mem;
    pthread_t th;
    int started, threaded;
} gpu_job;

/* Why the timeline's GPU tracks are the job's too: its pass reads only what the job's
 * connection sees, and gpu_facts is the shorter side of the job's window (it runs while the
 * idle gaps and the host walk run here: 100 MB flat 109 against 207 ms, 150 MB names 190
 * against 370). The job may not write scratch (this side holds the write lock), so its
 * blobs wait in memory until an_gpu_job_finish inserts them: at most this many tracks, up
 * to 48 KiB each; a trace with more GPU tracks has them done here (an_timeline_buckets). */
#define GPU_JOB_TL_TRACKS 64

/* Why: the step breakdown (100-600 ms at 100 MB) came after the host walk, on this thread,
 * while the second core had finished gpu_facts and idled. It reads only what was committed
 * before gpu_job started (scratch.ev and its indexes) and what the walk
 * left in memory (the steps, the host phases, the host ranges: steps_state), so it runs on
 * a thread and connection of its own from the end of the walk, while suspects, the
 * operator rows and the timeline go on here; it holds copies of the walk's arrays, which
 * this side may still grow. */
typedef struct steps_job {
    A b;
    char err[256];
    steps_state st;
    json_t *out;
    int rc;
    pthread_t th;
    int started, threaded;
} steps_job;

/* gpurows.c's job: the kernel rows and the operator table's GPU rows into kscratch, from
 * the start of the analysis (gpurows.c says why). It reads t->gpu_aggs and the string
 * table only; an_rows_job_finish, always called after start, puts t->gpu_aggs in (cls,
 * kind, name) order, which the operator table's totals and summary read them in. */
typedef struct rows_job {
    const trace_ctx *t;
    int32_t *perm;       /* t->gpu_aggs' indexes in (cls, kind, name) order */
    int busy_ms;         /* its connection's busy timeout: the upload's (an_busy_ms) */
    int rc;
    char err[256];
    pthread_t th;
    int started, threaded;
} rows_job;

/* A job's page cache of a scratch file, in KiB (PRAGMA cache_size=-N). Why small: a job
 * reads pages the upload's own connection has just written (the file is in the OS's cache)
 * or writes pages the OS caches, and two jobs per upload at SQLite's default 2 MB each were
 * ~4 MB of a many-names upload's peak, twice that for two uploads at once (two 150 MB names
 * uploads: VmHWM 107.8-108.2 -> 103.2-106.2 MB; flat's time unchanged, 1.12 -> 1.10 s best
 * of three). */
#define AN_JOB_CACHE_KIB "1024"

/* A gap that starts this soon after a blocking call returned is the call's (idle.c's sync
 * rule); a launch call that ends this soon before its kernels' end blocked on them. */
#define SYNC_SLACK_US 2.0

/* A kernel launch tells whether launches block only when its kernels run longer than any
 * launch call lasts when it does not (an asynchronous call returns in a few us; a kernel of
 * 1 us ends before it, blocking or not): of those, one that returned after its kernels
 * ended blocked. */
#define BLOCKING_MIN_KERNEL_US 10.0
static inline int an_launch_tells(const hrow *r) { return r->has_g && r->gk >= BLOCKING_MIN_KERNEL_US; }
static inline int an_launch_blocked(const hrow *r) { return an_launch_tells(r) && r->te >= r->gte; }

/* A name quoted as evidence (suspects' top contributors, compute_bound_op's op, the idle
 * labels and phases) is cut to this many bytes and an ellipsis (utf8_clip): the suspect's
 * culprit and /phases keep the whole name, and a 1 MiB name quoted whole in each place made
 * one suspect 2.6 MB (SECURITY.md). */
#define EVIDENCE_NAME_MAX 1024

/* The merged GPU intervals of scratch.busy / kbusy: rows (s0, data), data BUSY_BLOCK
 * triples (s, e, cum = busy before s) at most, s0 the first s; s strictly increases
 * across the table. Why blocks: a row per interval was an INSERT per GPU activity (two
 * tables: 230k rows, 200 ms at 300 MB), and a lookup only needs the row holding t. */
#define BUSY_BLOCK 256

/* The row of table t (busy or kbusy) that holds time ?: busy_before's statement. */
#define BUSY_SQL(t) "SELECT data FROM scratch." t " WHERE s0 <= ? ORDER BY s0 DESC LIMIT 1"


/* FIRSTPASS_TRACE_ANALYSIS=1 logs each step's wall time and its thread's CPU time: how
 * bench/ finds hot steps (on two cores the jobs make a step's wall time noisy). */
#define STEP_BEGIN() double t0_ = mono_ms(), c0_ = thread_cpu_ms()
#define STEP_END(name)                                                                                        \
    if (getenv("FIRSTPASS_TRACE_ANALYSIS"))                                                                   \
    log_line("debug", "analysis", "step=%s ms=%.1f cpu_ms=%.1f", name, mono_ms() - t0_, thread_cpu_ms() - c0_)

/* A name as key_averages() groups it: ProfilerStep#N -> ProfilerStep* (torch's
 * _rewrite_name with_wildcard), every other id as it is. */
static inline unsigned an_flags(const A *a, long name) {
    return name >= 0 && (size_t)name < a->nnflags ? a->nflags[name] : 0;
}
/* Whether any name of the trace has flag f (names.h); the names at the analysis's start are
 * every event's. */
static inline int an_any_flagged(const A *a, unsigned f) {
    for (size_t i = 0; i < a->nnflags; i++)
        if (a->nflags[i] & f) return 1;
    return 0;
}
static inline long an_fold(const A *a, long name) { return an_flags(a, name) & NF_STEP ? a->step_name : name; }

/* ---- an.c: the helpers every pass calls (nothing there calls a pass) ---- */

/* An analysis error: the SQLite message into a->err; returns ERR_DB. */
int an_dberr(A *a);
int an_run(A *a, const char *sql);
sqlite3_stmt *an_prep(A *a, const char *sql);
/* One (key, ts, te) row through *ins, prepared from sql on first use (the caller finalizes). */
int an_span_insert(A *a, sqlite3_stmt **ins, const char *sql, long long key, double ts, double te);
/* The devices of the GPU activity (dev of the cls 2 rows), in order, into *devs (free it):
 * 0, ERR_NOMEM or ERR_DB. Unlike A.ndev (the tracks', counted up to 2) it reads ev. */
int an_gpu_devs(A *a, long long **devs, size_t *n);
/* Whether the trace has a GPU row of class cls (EV_GPU, EV_GPU_ANN) and kind (-1: any):
 * each (cls, kind, name) that occurs has a gpu_agg, so no scan of ev. */
int an_has_gpu_rows(const A *a, int cls, long kind);
const char *an_str(A *a, long id);
/* A second connection to the upload's scratch file, for a job on another thread (gpu_job,
 * steps_job): it sees what this connection committed. 0 or ERR_DB (message in a->err). */
int an_job_db(A *a, sqlite3 **db);
/* The upload's connection's busy timeout in ms, 0 when it has none: a job's connection
 * waits for the scratch files' locks as long. */
int an_busy_ms(A *a);
/* A thread's host records: scratch.hblk's rows of track ?, in file order. */
#define AN_TRACK_BLOCKS_SQL "SELECT data FROM scratch.hblk WHERE track = ? ORDER BY rowid"
/* Calls fn(a, ctx, &h) for each host record of track tr in file order; tb is
 * AN_TRACK_BLOCKS_SQL prepared (an_track_recs prepares its own). The first non-zero return
 * stops it and is returned. */
int an_track_recs_stmt(A *a, sqlite3_stmt *tb, long tr, int (*fn)(A *, void *, const hrec *), void *ctx);
int an_track_recs(A *a, long tr, int (*fn)(A *, void *, const hrec *), void *ctx);

/* host.c */
int an_host_walk(A *a);

int an_gpu_track_host_ops(A *a);
/* The operator-table row (grouping g) of the GPU sums k: the GPU rows are not in a->aggs. */
void an_gpu_agg_row(const gpu_agg *k, int g, agg *r);
/* The parameters of an operator row's INSERT (wscratch.op_rows, kscratch.gpu_ops), which
 * an_op_bind binds: its columns, walk last. */
#define AN_OP_PARAMS "?,?,?,?,?,?,?,?,?,?,?,?,?,?"
void an_op_bind(sqlite3_stmt *ins, const char *kind, const agg *g, long long walk);
int an_write_ops(A *a);
int an_gpu_phases(A *a);
int an_write_phases(A *a, json_t *tl_phases);
/* The step phase's row as tb-profiler's steps (the breakdown's), after an_write_phases. */
int an_step_phase(A *a, const json_t *breakdown);

/* busy.c */
double an_busy_in(sqlite3_stmt *q, double ts, double te);
int an_busy_merges(A *a, long kernel_kind, double *total); /* by a->ndev, a->dev0 */

/* gpu.c */
int an_gpu_job_start(A *a, gpu_job *j, double gpu_busy);
/* Also inserts the job's timeline tracks (gpu_job.timeline) into wscratch.tlb. */
int an_gpu_job_finish(A *a, gpu_job *j, json_t **gpu, json_t **gaps);

/* gpurows.c */
int an_rows_job_start(A *a, rows_job *j);
int an_rows_job_finish(A *a, rows_job *j);

/* idle.c */
int an_idle_gaps(A *a);
int an_idle_thread(A *a, idle_walk *w, long track);
int an_idle_advance(A *a, idle_walk *w, double t);
int an_idle_row(A *a, idle_walk *w, const hrow *r, const frame *stack, int depth);
int an_idle_thread_end(A *a, idle_walk *w);
void an_idle_walk_free(idle_walk *w);
int an_idle_phase_range(A *a, long pid, double ts, double te);
int an_idle_by_phase(A *a, json_t **out);

/* cseg.c: a thread's pieces in start order (cseg_add), its last blocks written at its end
 * (cseg_thread_end); then streams of some categories' pieces, names[k] >= 0 keeping only that
 * name's pieces of cats[k]. cseg_next: 1 with a piece, 0 at the end or on an error (m->rc);
 * cseg_close after every cseg_open, whatever it returned. */
/* runs.c: run_add in order, run_flush after the last; then readers, run_seek before the
 * first run_next of a key. run_next: the next record, NULL at the key's end or on an error
 * (r->rc). run_*_free and run_close after every open, whatever it returned. */
int run_writer_open(A *a, run_writer *w, int table, size_t size, size_t nkeys);
int run_add(run_writer *w, size_t key, const void *rec);
int run_flush(run_writer *w);
void run_writer_free(run_writer *w);
int run_open(A *a, run_reader *r, int table, size_t size);
void run_seek(run_reader *r, long long key);
const void *run_next(run_reader *r);
void run_close(run_reader *r);
int cseg_add(A *a, long track, int cat, long name, double s, double e);
int cseg_thread_end(A *a);
void cseg_free(idle_state *is);
int cseg_open(A *a, cseg_stream *m, const int *cats, const long *names, int ncats);
int cseg_next(cseg_stream *m, double *s, double *e);
void cseg_close(cseg_stream *m);

/* suspects_host.c (an_op_host, an_op_launch, an_suspects_free), suspects.c (an_suspects),
 * suspects_steps.c (an_suspects_steps) */
int an_op_host(A *a, const frame *f);
int an_op_launch(A *a, const hrow *r, const frame *stack, int depth);
int an_suspects(A *a, double gpu_busy, json_t **out);
/* Once the step breakdown is known: the suspects document's steps become tb-profiler's (its
 * steps), the outlier steps among them join the list, per-step shares divide by their count. */
int an_suspects_steps(A *a, json_t *doc, const json_t *breakdown);
void an_suspects_free(A *a);

/* steps.c: a host range of role SPAN_* */
int an_step_span(A *a, int role, double ts, double te);
int an_steps_doc(A *a, json_t **out);
/* an_steps_doc on a steps_job, started once the walk is over; finish always after start. */
int an_steps_job_start(A *a, steps_job *j);
int an_steps_job_finish(A *a, steps_job *j, json_t **out);
void an_steps_free(A *a);

/* idcur.c: rows of a statement in correlation-id order (column 0 the id, ?1 the first id
 * wanted), read an id at a time: fold takes each row of the id (first: its first) into
 * what the caller keeps beside the cursor. Invariant: no row has an id in [from, id) (to
 * the end when !row), so an id there is answered without moving. */
typedef struct idcur idcur;
struct idcur {
    sqlite3_stmt *s;
    void (*fold)(idcur *c, int first);
    int pend;            /* s is on a row not yet folded: the next id's first */
    int row;             /* id is an id's, folded */
    long long from, id;
};
/* Reads from the first id >= id. 0 or an error. */
int idcur_seek(A *a, idcur *c, long long id);
/* Moves to id, stepping or seeking; found when c->row && c->id == id. 0 or an error. */
int idcur_get(A *a, idcur *c, long long id);

/* memory.c */
int an_mem_row(A *a, const hrow *r);
int an_memory_doc(A *a, json_t **out);

/* effic.c: the efficiency pass (definitions in effic.c's header comment). begin before the
 * walk (the device, the kernel classes); launch for each launch the walk credits to frame f
 * as its innermost op; pop when a frame with launches pops (stack[0..depth-1] its
 * ancestors); doc after the walk: the document (a->effic, operators, phases, the device,
 * MFU, MBU, coverage); window once the steps are known (breakdown: the steps document, NULL
 * when none): tb-profiler's GPU utilization, SM efficiency, occupancy into the document. */
int an_effic_begin(A *a);
void an_effic_launch(frame *f, const hrow *r);
int an_effic_pop(A *a, const frame *f, const frame *stack, int depth);
int an_effic_doc(A *a, json_t **out);
int an_effic_window(A *a, const json_t *breakdown, json_t *doc);
void an_effic_free(A *a);
/* The verdict of op name in the efficiency document doc (NULL: none), from its row with the
 * most GPU time: a new object {bound, tflops, gbps, intensity, peak_fraction, peak_used,
 * precision_class, dtype, peak: the roof in words ("NVIDIA H100 SXM5 80GB memory bandwidth
 * (3350 GB/s)")}, or {bound: null, bound_unknown_reason} when it has none. NULL: no memory. */
json_t *an_effic_verdict(const json_t *doc, const char *name);
/* A verdict in words: "memory-bound: 1200 GB/s, 36% of the <peak>"; "" without a bound. */
void an_effic_phrase(const json_t *verdict, char *out, size_t n);

/* questions.c */
json_t *an_questions(A *a, const json_t *suspects, const json_t *gpu);

/* timeline.c */
int an_tl_open(A *a, buf *mem);
void an_tl_close(A *a);
int an_tl_flush(A *a, tlacc *t);
/* Inserts the tracks an_tl_flush kept in m (gpu_job's) into wscratch.tlb. */
int an_tl_insert_mem(A *a, const buf *m);
int an_tl_add(A *a, tlacc *t, long tr, double ts, double te, uint32_t name, double dur);
int an_timeline_buckets(A *a);
/* The stored timeline document; takes phases and gaps. NULL when out of memory. */
json_t *an_timeline_doc(A *a, json_t *phases, json_t *gaps);

#endif
