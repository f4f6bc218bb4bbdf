/* effic.c: the efficiency pass: is each operator compute-bound or memory-bound, how close to
 * the device's roofs it runs, the time above the best roof, and tb-profiler's GPU figures
 * (GET /sessions/{id}/efficiency).
 *
 * Owns effic_state (the sums below) and the "effic" document. Reads what the host walk
 * computes (host.c credits each launch's GPU work to its innermost op: an_effic_launch; an op
 * frame with launches pops into an_effic_pop), the loader's GPU sums (trace.h gpu_agg), the
 * trace's deviceProperties and, once the steps are known, the kernels of scratch.ev. Must not
 * write scratch, nor intern strings.
 *
 * Definitions (what every number means):
 *  - An op's GPU time: the union of the GPU activity (kernels, copies, memsets) of the
 *    launches whose innermost op it is (correlation id -> runtime call -> the op around it:
 *    the walk's own link, not External id). Each correlation's union is exact (its rows come
 *    by start); an op's launches are joined in launch order, which is exact when they run in
 *    that order (one stream) and may count an overlap between streams twice otherwise.
 *    Per row: its calls' GPU time, and the min / median / max of one call's.
 *  - Rows: cpu_ops with GPU time, by (name, Input Dims, Input type + Concrete Inputs) and
 *    what the model reads around the call: a weight gradient's parent shapes, a forward
 *    convolution's torch `flops` arg, the flash kernels' causal flag. FLOPs and bytes per
 *    call: lib/flops.h. A forward convolution whose output size its args do not give waits
 *    for the walk to find it (pending): in its backward's grad_output (the autograd
 *    sequence number links the two: the first EFFIC_SEQS_PER_ROW calls' numbers are kept)
 *    or, else, in the first input of the next op with GPU work on its thread that starts
 *    with [N, K, ...] (within EFFIC_CONSUMER_LOOKAHEAD ops); calls that disagree leave it
 *    unknown. At most EFFIC_ROWS_MAX distinct rows are kept; the calls past that go to one
 *    "(other shapes)" row with unknown FLOPs. The document lists the EFFIC_ROWS_OUT rows
 *    with the most GPU time; `operators_omitted` counts the rest.
 *  - Unit of a call: its kernel time by class (lib/flops.h: tensor / matrix core, SIMT,
 *    unclassified), the largest one; a call with copies and memsets only has none. A row's
 *    `unit` ("tensor", "simt") is that of most of its kernel time; null when unclassified.
 *  - The peak a call is held to: the tensor / matrix-core peak of its dtype (fp32: TF32 on
 *    NVIDIA, the FP32 matrix peak on AMD; bf16, fp16, fp8 their own) when its unit is tensor,
 *    or unclassified and the op is a matrix op (GEMM, attention, convolution); the FP32
 *    peak otherwise (SIMT, elementwise); unknown for fp64, integer ops, a precision the
 *    device lacks, or an unmatched device (lib/devices.h). `peak_used` names the peak of
 *    most of the row's time.
 *  - Per row (t: the GPU time of its calls with kernels): tflops = FLOPs / t, gbps = bytes
 *    / t, intensity = FLOPs / bytes; fc = sum over calls of FLOPs / peak(call) / t, fm =
 *    bytes / bandwidth / t. compute-bound when fc >= fm (intensity at or past the ridge),
 *    else memory-bound; peak_fraction = max(fc, fm). Not judged (`bound` null, `status`
 *    and `bound_reason` say why):
 *      copies and memsets only (status not_judged): their roof is the link they cross;
 *      FLOPs or bytes unknown, no device, no peak for the dtype (unknown);
 *      FLOPs an upper bound (causal attention not recorded: upper_bound);
 *      over 100% of a roof (impossible): on the compute side the FLOP count or the
 *        precision assumed is wrong; on the memory side the bytes did not all cross DRAM
 *        (a tensor resident in L2) or the kernel times are too coarse (1 us timestamps);
 *      faster than any GPU (over EFFIC_MAX_FLOPS FLOP/s or EFFIC_MAX_BYTES bytes/s: a
 *        duration that is not credible, hostile or broken): tflops and gbps null too.
 *    Under EFFIC_LATENCY_FRACTION of both roofs a row is "latency"-bound only with kernel
 *    evidence: its kernels short (kernel_us_mean < EFFIC_SHORT_KERNEL_US) and under one
 *    block per SM (blocks_per_sm < 1); otherwise the FLOP model or the peak is in doubt
 *    (status in_doubt, bound null).
 *  - The roofs (read by the suspects: spec48 "The roofs"): roof_us = sum over calls of
 *    max(FLOPs / peak(call), bytes / bandwidth): the time at the roofs of the unit the call
 *    ran on; best_unit / best_roof_us: the same at the best peak the device has for that
 *    precision (a matrix op: fp32 -> tf32_tensor or fp32_matrix, bf16 -> bf16_tensor, fp16
 *    -> fp16_tensor, fp8 -> fp8_tensor, falling back to fp32 where the device has no such
 *    unit; other ops: fp32); above_roof_us = t - best_roof_us (>= 0), best_peak_fraction =
 *    best_roof_us / t. Null unless the row is judged or in doubt. kernel_us_mean: the mean
 *    kernel duration; blocks_per_sm: the mean "blocks per SM" (grid blocks / SMs, Kineto's
 *    or nsys.c's) of the kernels of the row's first EFFIC_BPS_SAMPLES calls (its calls share
 *    their shapes, so their grids; read for the rows with the most GPU time first, at most
 *    EFFIC_BPS_LOOKUPS launches), null without it.
 *  - Session and phases: coverage = the GPU time of modelled calls (FLOPs and bytes known,
 *    not a copy) / all GPU activity time (the sum of every kernel, copy and memset's
 *    duration: launches outside any op, CUDA-graph replays and unmodelled kernels count as
 *    unknown); copies_us; `unmodelled`: the unknown time by reason. MFU and MBU are the
 *    conventional ones (PaLM's, vLLM's): one peak, the model dtype's (the dtype with the
 *    most matrix FLOPs, at its best unit: `mfu_peak`), and the DRAM bandwidth; numerators
 *    the FLOPs / bytes of the calls judged (impossible and upper-bound rows left out). The
 *    session's over its window (tb-profiler's steps, else the trace) x devices, counting
 *    the calls inside the step ranges when the window is the steps'; a phase's over its
 *    own GPU time. The roofs summed: judged_us, roof_us, best_roof_us, above_roof_us,
 *    best_peak_fraction.
 *  - Phases: each record_function range (ProfilerStep#N as ProfilerStep*) holds the op calls
 *    that pop inside it on its thread (at most EFFIC_PHASES_MAX names; per (row, phase) at
 *    most EFFIC_CELLS_MAX sums: past it a call is left out of that phase).
 *  - by_name: the rows of one op name together (the EFFIC_BY_NAME names with the most GPU
 *    time): what the suspects and the report quote (an_effic_verdict). Its verdict is the
 *    one of its judged rows together (fc, fm over their time) when they hold at least half
 *    its GPU time; else none, with the reason of most of the rest.
 *  - tb-profiler's figures (torch_tb_profiler/profiler/gpu_metrics_parser.py), per device,
 *    over the window [first step start, last step end] of the steps as GET /steps moves them
 *    (tb-profiler's steps; the whole trace when it has none):
 *      gpu_utilization    the union of kernel time in the window / the window;
 *      sm_efficiency      the integral over the window of min(1, sum of "blocks per SM" of the
 *                         kernels running) / the window;
 *      achieved_occupancy the mean "est. achieved occupancy %" of the kernels (those that
 *                         carry one), weighted by their time inside the window (as a fraction);
 *      tensor_core_fraction  kernel time of tensor-class kernels / all kernel time (the whole
 *                         trace, as tb-profiler's; its own name list misses sm80_xmma tf32).
 *    The session's: utilization and SM efficiency summed over devices / (devices x window),
 *    occupancy weighted by kernel time over all devices. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "lib/devices.h"
#include "lib/err.h"
#include "lib/flops.h"
#include "lib/vec.h"

#define EFFIC_ROWS_MAX 4096         /* distinct (op, shapes, types) rows kept */
#define EFFIC_ROWS_OUT 300          /* rows in the document */
#define EFFIC_PHASES_MAX 256        /* phase names kept */
#define EFFIC_CELLS_MAX (1 << 17)   /* (row, phase) sums kept */
#define EFFIC_DURS_MAX (1 << 22)    /* calls' GPU times kept for the rows' medians (4 bytes each) */
#define EFFIC_SEQ_MAX (1 << 18)     /* backward links (sequence number -> grad_output shape) kept */
#define EFFIC_SEQS_PER_ROW 64       /* a pending convolution row's calls whose sequence numbers are kept */
#define EFFIC_CONSUMER_LOOKAHEAD 8  /* ops after a pending convolution searched for its output */
#define EFFIC_BY_NAME 50            /* op names summed in by_name */
#define EFFIC_LATENCY_FRACTION 0.10 /* under this share of both roofs a row is far below them */
#define EFFIC_SHORT_KERNEL_US 10.0  /* "short kernels" for a latency verdict */
#define EFFIC_MAX_FLOPS 1e17        /* FLOP/s no device reaches (100 PFLOP/s; B200's dense FP8 is 4.5) */
#define EFFIC_MAX_BYTES 1e14        /* bytes/s no device reaches (100 TB/s; B200's HBM is 7.7) */
#define EFFIC_HEAP_MAX 65536        /* kernels running at once the SM-efficiency sweep follows */
#define EFFIC_BPS_SAMPLES 2         /* calls of a row whose kernels' blocks per SM are read */
#define EFFIC_BPS_LOOKUPS 2048      /* those reads in all (the rows with the most GPU time first) */

/* A call's unit: its kernel time's class, or none (copies and memsets only). */
enum { U_TENSOR = KC_TENSOR, U_SIMT = KC_SIMT, U_UNCL = KC_UNCLASSIFIED, U_NONE, U_N };

/* Sums over the calls of one row in one place (the whole trace, or one phase). */
typedef struct ecell {
    long long calls, n_u[U_N];
    double gpu_us, us_u[U_N], kc[3];
} ecell;

/* A forward convolution's output shape, as something after it says (backward, consumer). */
typedef struct eshape {
    long long d[FL_OUT_MAX];
    int n;          /* 0: none yet */
    int conflict;   /* two sayings disagreed */
} eshape;

typedef struct erow {
    long long key[6];          /* name, shapes, xargs, ctx shapes, ctx number, causal (row_key) */
    flops_out m;               /* per call */
    int special;               /* 0, ROW_RANGES (launches with no op around them), ROW_OTHER */
    int pending;               /* a forward convolution whose output size is still sought */
    ecell s;                   /* all its calls */
    long long kn, nbps;        /* kernels; of the sampled calls' kernels, those with blocks per SM */
    double bps, dmin, dmax;    /* their blocks per SM summed; one call's least and most GPU time */
    long long bcorr[EFFIC_BPS_SAMPLES]; /* correlation ids of its first calls' first kernel launches */
    int nbcorr;
    float *durs;               /* each call's GPU time (EFFIC_DURS_MAX over all rows) */
    size_t nd, capd;
    int durs_cut;              /* some call's time is not in durs */
    long long *seqs;           /* pending: its calls' sequence numbers (EFFIC_SEQS_PER_ROW) */
    int nseq;
    eshape cons;               /* pending: the output as the next op's input says */
    long cph[4], ccell[4];     /* the cells of its last phases (phase j at j % 4), -1 none: a lookup saved a call */
} erow;
enum { ROW_RANGES = 1, ROW_OTHER = 2 };

/* A thread's pending convolution whose consumer is sought. */
typedef struct ewatch {
    long row;                  /* -1: none */
    long long n, k;
    int rank, left;
} ewatch;

typedef struct effic_state {
    const device_row *dev;
    int dev_extra;             /* the row came from --devices */
    const char *why;           /* no device: the reason */
    char dev_name[256];
    double bw;                 /* bytes/s: the table's, or the nsys export's */
    int bw_nsys;
    intern *keys;              /* row_key -> row */
    erow *rows;
    size_t nrows, caprows, nreal; /* nreal: rows counted against EFFIC_ROWS_MAX */
    long ranges_row, other_row;   /* the special rows, -1 until needed */
    intern *pkeys;             /* phase name -> index */
    long *ph;                  /* phase names */
    size_t nph, capph;
    intern *ckeys;             /* (row, phase) -> cell */
    ecell *cells;
    size_t ncells, capcells;
    long long cells_dropped;
    size_t ndurs;              /* durations kept over all rows */
    intern *seqmap;            /* sequence number -> seqs[] */
    eshape *seqs;
    size_t nseqs, capseqs;
    ewatch *watch;             /* per track, allocated at the first pending convolution */
    size_t nwatch;
    unsigned char *conv;       /* per string id: 0 not looked at, CONV_* (conv_kind) */
    size_t nconv;
    /* for an_effic_window: the conventional MFU / MBU numerators and the peak */
    double mfu_flops, mbu_bytes, step_flops, step_bytes;
    int has_step_phase;
    double peak_model;
    const char *peak_model_unit;
    int model_dtype;
} effic_state;

/* ---- the device ---- */

static double prop(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* A deviceProperties count as an int: 0 when absent, not a whole number, or out of int's
 * range (finding 14: 1e300 converted as sent was undefined behaviour). */
static int prop_int(const json_t *o, const char *k) {
    double v = prop(o, k);
    return isfinite(v) && v >= 0 && v <= INT_MAX && v == floor(v) ? (int)v : 0;
}

/* The first deviceProperties entry (Kineto; nsys.c writes the export's GPU table so too; the
 * tb_plugin's own test writes computeProperties): the GPUs of one trace are alike. */
static void match_device(A *a, effic_state *e) {
    json_t *meta = a->t->meta, *dp = json_object_get(meta, "deviceProperties");
    if (!json_array_size(dp)) dp = json_object_get(meta, "computeProperties");
    json_t *d = json_array_get(dp, 0);
    e->why = "the trace has no deviceProperties";
    if (!json_is_object(d)) return;
    const char *name = json_string_value(json_object_get(d, "name"));
    snprintf(e->dev_name, sizeof e->dev_name, "%s", name ? name : "");
    double mem = prop(d, "totalGlobalMem");
    device_info di = {name, isfinite(mem) && mem > 0 ? mem : 0, prop_int(d, "numSms") ? prop_int(d, "numSms") : prop_int(d, "multiProcessorCount"),
                      json_object_get(d, "computeMajor") ? prop_int(d, "computeMajor") : prop_int(d, "major"),
                      json_object_get(d, "computeMinor") ? prop_int(d, "computeMinor") : prop_int(d, "minor")};
    e->dev = devices_match(&di, &e->why, &e->dev_extra);
    if (e->dev) e->bw = e->dev->bw;
    /* an Nsight export measures its device's bandwidth: that one wins (nsys.c) */
    if (a->t->ngpu_bw > 0 && isfinite(a->t->gpu_bw[0].bw) && a->t->gpu_bw[0].bw > 0) {
        e->bw = a->t->gpu_bw[0].bw;
        e->bw_nsys = 1;
    }
}

int an_effic_begin(A *a) {
    effic_state *e = calloc(1, sizeof *e);
    if (!e) return ERR_NOMEM;
    e->keys = intern_new();
    e->pkeys = intern_new();
    e->ckeys = intern_new();
    e->seqmap = intern_new();
    e->ranges_row = e->other_row = -1;
    a->nkclass = intern_count(a->t->strs);
    a->kclass = a->nkclass ? calloc(a->nkclass, 1) : NULL;
    a->kcausal = a->nkclass ? malloc(a->nkclass) : NULL;
    e->nconv = a->nkclass;
    e->conv = e->nconv ? calloc(e->nconv, 1) : NULL;
    a->eff = e;
    if (!e->keys || !e->pkeys || !e->ckeys || !e->seqmap || (a->nkclass && (!a->kclass || !a->kcausal || !e->conv))) return ERR_NOMEM;
    if (a->nkclass) memset(a->kcausal, -1, a->nkclass);
    match_device(a, e);
    /* each kernel name's class and causal flag, once: the walk's launches read them by id
     * (host.c gcur) */
    for (size_t i = 0; i < a->t->ngpu_aggs; i++) {
        const gpu_agg *g = &a->t->gpu_aggs[i];
        if (g->cls != EV_GPU || g->kind != a->kernel_kind || g->name < 0 || (size_t)g->name >= a->nkclass) continue;
        const char *name = an_str(a, g->name);
        a->kclass[g->name] = (unsigned char)(flops_kernel_class(name) + 1);
        a->kcausal[g->name] = (signed char)flops_kernel_causal(name);
    }
    return 0;
}

void an_effic_free(A *a) {
    effic_state *e = a->eff;
    free(a->kclass);
    free(a->kcausal);
    a->kclass = NULL;
    a->kcausal = NULL;
    a->nkclass = 0;
    if (!e) return;
    intern_free(e->keys);
    intern_free(e->pkeys);
    intern_free(e->ckeys);
    intern_free(e->seqmap);
    for (size_t i = 0; i < e->nrows; i++) {
        free(e->rows[i].durs);
        free(e->rows[i].seqs);
    }
    free(e->rows);
    free(e->ph);
    free(e->cells);
    free(e->seqs);
    free(e->watch);
    free(e->conv);
    free(e);
    a->eff = NULL;
}

/* ---- the walk's calls ---- */

void an_effic_launch(frame *f, const hrow *r) {
    if (!(r->gu > 0) && !(r->gd > 0)) return;
    if (!f->e_n) {
        f->e_u = r->gu;
        f->e_ue = r->gte;
        f->e_causal = r->gcausal;
    } else if (r->gts >= f->e_ue) {
        f->e_u += r->gu;
        f->e_ue = r->gte;
    } else if (r->gte > f->e_ue) { /* overlaps what came before: its part past the end */
        double add = r->gte - f->e_ue;
        f->e_u += add < r->gu ? add : r->gu;
        f->e_ue = r->gte;
    }
    if (f->e_n && r->gcausal > f->e_causal) f->e_causal = r->gcausal;
    for (int i = 0; i < 3; i++) f->e_kc[i] += r->gkc[i];
    if (!f->e_kn && r->gkn > 0) f->e_corr = r->corr; /* its grid's sample (kernel_evidence) */
    f->e_kn += r->gkn;
    f->e_n++;
}

/* The class with the most kernel time, -1 when none. */
static int top_class(const double kc[3]) {
    int best = -1;
    for (int i = 0; i < 3; i++)
        if (kc[i] > 0 && (best < 0 || kc[i] > kc[best])) best = i;
    return best;
}

static void cell_add(ecell *c, const frame *f) {
    int u = top_class(f->e_kc);
    if (u < 0) u = U_NONE;
    c->calls++;
    c->gpu_us += f->e_u;
    c->n_u[u]++;
    c->us_u[u] += f->e_u;
    for (int i = 0; i < 3; i++) c->kc[i] += f->e_kc[i];
}

/* The nearest frame from f outward (f itself, then stack[depth-1] ...) for which pick says
 * yes, NULL when none. */
static const frame *nearest(A *a, const frame *f, const frame *stack, int depth, int (*pick)(A *, const frame *)) {
    if (pick(a, f)) return f;
    for (int i = depth - 1; i >= 0; i--)
        if (pick(a, &stack[i])) return &stack[i];
    return NULL;
}
/* What op name is for the convolution links, once per name (the name compares cost more
 * than the rest of a pop): CONV_NONE, CONV_FWD, or CONV_BWD + its grad_output's index. */
enum { CONV_NONE = 1, CONV_FWD, CONV_BWD };
static int conv_kind(A *a, long name, int *gy) {
    effic_state *e = a->eff;
    unsigned char k = name >= 0 && (size_t)name < e->nconv ? e->conv[name] : 0;
    if (!k) {
        int g = 0;
        const char *n = an_str(a, name);
        k = flops_conv_forward(n) ? CONV_FWD : flops_conv_backward(n, &g) ? (unsigned char)(CONV_BWD + g) : CONV_NONE;
        if (name >= 0 && (size_t)name < e->nconv) e->conv[name] = k;
    }
    if (gy) *gy = k >= CONV_BWD ? k - CONV_BWD : 0;
    return k >= CONV_BWD ? CONV_BWD : k;
}
static int has_seq(A *a, const frame *f) { return (void)a, f->cls == EV_HOST_OP && f->seq >= 0; }
static int conv_flops(A *a, const frame *f) { return f->cls == EV_HOST_OP && f->flops_arg > 0 && conv_kind(a, f->name, NULL) == CONV_FWD; }
static int conv_bwd_parent(A *a, const frame *f) { return f->cls == EV_HOST_OP && f->shapes >= 0 && conv_kind(a, f->name, NULL) == CONV_BWD; }

/* The row key of an op frame: what its FLOPs depend on besides its own args. */
static void row_key(A *a, const frame *f, const frame *stack, int depth, long long key[6]) {
    key[0] = f->name, key[1] = f->shapes, key[2] = f->xargs, key[3] = -1, key[4] = -1, key[5] = f->e_causal;
    int kind = conv_kind(a, f->name, NULL);
    if (kind == CONV_FWD) { /* torch's count sits on aten::conv2d, around the op that launches */
        const frame *c = nearest(a, f, stack, depth, conv_flops);
        if (c) key[4] = (long long)c->flops_arg;
    } else if (kind == CONV_BWD && depth > 0) { /* a gradient's weight: its parent's shapes */
        const frame *p = &stack[depth - 1];
        if (conv_bwd_parent(a, p)) key[3] = p->shapes;
    }
}

static long new_row(A *a, effic_state *e, const long long key[6], int special) {
    int fresh;
    long i = INTERN_SLOT(e->keys, key, 6 * sizeof *key, e->rows, e->nrows, e->caprows, 64, &fresh);
    if (i < 0 || !fresh) return i;
    erow *r = &e->rows[i];
    memcpy(r->key, key, sizeof r->key);
    r->special = special;
    r->dmin = INFINITY;
    r->dmax = -INFINITY;
    r->m = (flops_out){-1, -1, FL_DUNKNOWN, FL_NONE, 0, 0, 0, NULL};
    for (int k = 0; k < 4; k++) r->cph[k] = -1;
    if (special == ROW_OTHER) r->m.why = "past the distinct shapes kept (EFFIC_ROWS_MAX, 4,096)";
    if (special) return i;
    e->nreal++;
    /* the model, once per row */
    const char *x = key[2] >= 0 ? intern_str(a->t->xargs, (long)key[2]) : NULL;
    char types[XARGS_ONE_MAX + 1];
    const char *concrete = NULL;
    if (x) { /* "types\x1fconcrete" (load.c) */
        const char *sep = strchr(x, '\x1f');
        size_t nt = sep ? (size_t)(sep - x) : strlen(x);
        memcpy(types, x, nt);
        types[nt] = '\0';
        concrete = sep && sep[1] ? sep + 1 : NULL;
    }
    flops_in in = {an_str(a, (long)key[0]), key[1] >= 0 ? an_str(a, (long)key[1]) : NULL, x && types[0] ? types : NULL, concrete,
                   key[3] >= 0 ? an_str(a, (long)key[3]) : NULL, key[4] > 0 ? (double)key[4] : -1, (int)key[5], NULL, 0};
    flops_model_in(&in, &r->m);
    r->pending = r->m.need_out;
    return i;
}

/* The row index of op frame f; -1 out of memory. */
static long row_for(A *a, effic_state *e, const frame *f, const frame *stack, int depth) {
    long long key[6];
    if (f->cls != EV_HOST_OP || f->kind == a->ua_kind) { /* a range's own launches: no op around them */
        if (e->ranges_row < 0) {
            long long k[6] = {-2, -2, -2, -2, -2, -2};
            e->ranges_row = new_row(a, e, k, ROW_RANGES);
        }
        return e->ranges_row;
    }
    row_key(a, f, stack, depth, key);
    long i = intern_lookup(e->keys, (const char *)key, sizeof key);
    if (i >= 0) return i;
    if (e->nreal >= EFFIC_ROWS_MAX) {
        if (e->other_row < 0) {
            long long k[6] = {-3, -3, -3, -3, -3, -3};
            e->other_row = new_row(a, e, k, ROW_OTHER);
        }
        return e->other_row;
    }
    return new_row(a, e, key, 0);
}

/* A call of row r into its own sums: its time, kernel evidence, duration. */
static int row_call(effic_state *e, erow *r, const frame *f) {
    cell_add(&r->s, f);
    r->kn += f->e_kn;
    if (f->e_kn && r->nbcorr < EFFIC_BPS_SAMPLES) r->bcorr[r->nbcorr++] = f->e_corr;
    if (f->e_u < r->dmin) r->dmin = f->e_u;
    if (f->e_u > r->dmax) r->dmax = f->e_u;
    if (r->durs_cut) return 0;
    if (e->ndurs >= EFFIC_DURS_MAX || VEC_RESERVE(r->durs, r->capd, r->nd + 1, 16)) {
        /* past the bound (or out of memory for it) the median is unknown, nothing else */
        r->durs_cut = 1;
        return 0;
    }
    r->durs[r->nd++] = (float)f->e_u;
    e->ndurs++;
    return 0;
}

/* (row, phase) sums; NULL past EFFIC_CELLS_MAX (counted) or out of memory (*oom). */
static ecell *cell_for(effic_state *e, long row, long phase, int *oom) {
    erow *r = &e->rows[row];
    if (r->cph[phase % 4] == phase) return &e->cells[r->ccell[phase % 4]];
    long key[2] = {row, phase};
    long i = intern_lookup(e->ckeys, (const char *)key, sizeof key);
    if (i < 0 && e->ncells >= EFFIC_CELLS_MAX) {
        e->cells_dropped++;
        return NULL;
    }
    int fresh;
    if (i < 0) i = INTERN_SLOT(e->ckeys, key, sizeof key, e->cells, e->ncells, e->capcells, 64, &fresh);
    if (i < 0) {
        *oom = 1;
        return NULL;
    }
    r->cph[phase % 4] = phase;
    r->ccell[phase % 4] = i;
    return &e->cells[i];
}

/* Every record_function range around the call on its thread, each name once. */
static int phase_calls(A *a, effic_state *e, long row, const frame *f, const frame *stack, int depth) {
    long seen[16];
    int nseen = 0, oom = 0;
    for (int i = depth - 1; i >= 0; i--) {
        const frame *p = &stack[i];
        if (p->cls != EV_HOST_OP || p->kind != a->ua_kind) continue;
        long name = an_fold(a, p->name);
        int dup = 0;
        for (int k = 0; k < nseen; k++) dup |= seen[k] == name;
        if (dup) continue;
        if (nseen < 16) seen[nseen++] = name;
        long j = intern_lookup(e->pkeys, (const char *)&name, sizeof name);
        if (j < 0 && e->nph >= EFFIC_PHASES_MAX) continue;
        int fresh;
        if (j < 0) j = INTERN_SLOT(e->pkeys, &name, sizeof name, e->ph, e->nph, e->capph, 16, &fresh);
        if (j < 0) return ERR_NOMEM;
        e->ph[j] = name;
        ecell *c = cell_for(e, row, j, &oom);
        if (oom) return ERR_NOMEM;
        if (c) cell_add(c, f);
    }
    return 0;
}

/* A convolution backward's grad_output, under the sequence number of the autograd node
 * around it: the output of the forward call with that number. */
static int note_backward(A *a, effic_state *e, const frame *f, const frame *stack, int depth) {
    int gy;
    if (f->shapes < 0 || conv_kind(a, f->name, &gy) != CONV_BWD) return 0;
    const frame *s = nearest(a, f, stack, depth, has_seq);
    if (!s) return 0;
    eshape sh = {{0}, 0, 0};
    sh.n = flops_dims_at(an_str(a, f->shapes), gy, sh.d, FL_OUT_MAX);
    if (sh.n < 3) return 0;
    long i = intern_lookup(e->seqmap, (const char *)&s->seq, sizeof s->seq);
    if (i < 0 && e->nseqs >= EFFIC_SEQ_MAX) return 0;
    int fresh;
    if (i < 0) i = INTERN_SLOT(e->seqmap, &s->seq, sizeof s->seq, e->seqs, e->nseqs, e->capseqs, 64, &fresh);
    if (i < 0) return ERR_NOMEM;
    eshape *m = &e->seqs[i];
    if (!m->n) *m = sh;
    else if (m->n != sh.n || memcmp(m->d, sh.d, (size_t)sh.n * sizeof *sh.d)) m->conflict = 1;
    return 0;
}

/* A shape into what a pending row has heard of its output. */
static void shape_say(eshape *to, const long long *d, int n) {
    if (to->conflict) return;
    if (!to->n) {
        memcpy(to->d, d, (size_t)n * sizeof *d);
        to->n = n;
    } else if (to->n != n || memcmp(to->d, d, (size_t)n * sizeof *d)) {
        to->conflict = 1;
    }
}

/* The thread's watch for a pending convolution's consumer: f is the next op with GPU work
 * after it; a first input [N, K, ...] of the convolution's rank is its output. */
static void watch_consumer(A *a, effic_state *e, const frame *f) {
    if (!e->watch || f->track < 0 || (size_t)f->track >= e->nwatch) return;
    ewatch *w = &e->watch[f->track];
    if (w->row < 0 || f->cls != EV_HOST_OP || f->kind == a->ua_kind) return;
    long long d[FL_OUT_MAX];
    int n = f->shapes >= 0 ? flops_dims_at(an_str(a, f->shapes), 0, d, FL_OUT_MAX) : -1;
    if (n == w->rank && d[0] == w->n && d[1] == w->k) {
        shape_say(&e->rows[w->row].cons, d, n);
        w->row = -1;
    } else if (--w->left <= 0) {
        w->row = -1;
    }
}

/* A pending convolution's call: its sequence number kept, its consumer watched. */
static int note_pending(A *a, effic_state *e, long row, const frame *f, const frame *stack, int depth) {
    erow *r = &e->rows[row];
    const frame *s = nearest(a, f, stack, depth, has_seq);
    if (s && r->nseq < EFFIC_SEQS_PER_ROW) {
        if (!r->seqs && !(r->seqs = malloc(EFFIC_SEQS_PER_ROW * sizeof *r->seqs))) return ERR_NOMEM;
        r->seqs[r->nseq++] = s->seq;
    }
    long long x[FL_OUT_MAX], w[FL_OUT_MAX];
    int nx = flops_dims_at(an_str(a, f->shapes), 0, x, FL_OUT_MAX), nw = flops_dims_at(an_str(a, f->shapes), 1, w, FL_OUT_MAX);
    if (nx < 3 || nw != nx || f->track < 0 || (size_t)f->track >= a->t->ntracks) return 0;
    if (!e->watch) {
        e->nwatch = a->t->ntracks;
        if (!(e->watch = malloc(e->nwatch * sizeof *e->watch))) return ERR_NOMEM;
        for (size_t i = 0; i < e->nwatch; i++) e->watch[i].row = -1;
    }
    e->watch[f->track] = (ewatch){row, x[0], w[0], nx, EFFIC_CONSUMER_LOOKAHEAD};
    return 0;
}

int an_effic_pop(A *a, const frame *f, const frame *stack, int depth) {
    effic_state *e = a->eff;
    watch_consumer(a, e, f);
    long row = row_for(a, e, f, stack, depth);
    if (row < 0) return ERR_NOMEM;
    int rc = row_call(e, &e->rows[row], f);
    if (!rc) rc = phase_calls(a, e, row, f, stack, depth);
    if (!rc && f->cls == EV_HOST_OP && f->kind != a->ua_kind) rc = note_backward(a, e, f, stack, depth);
    if (!rc && e->rows[row].pending) rc = note_pending(a, e, row, f, stack, depth);
    return rc;
}

/* ---- pending convolutions ---- */

/* A pending row's output shape: its backward's (all of its kept calls' that have one
 * agree), else its consumer's; then its model again. */
static void resolve_pending(A *a, effic_state *e, erow *r) {
    eshape out = {{0}, 0, 0};
    for (int i = 0; i < r->nseq; i++) {
        long j = intern_lookup(e->seqmap, (const char *)&r->seqs[i], sizeof r->seqs[i]);
        if (j < 0) continue;
        const eshape *s = &e->seqs[j];
        if (s->conflict) out.conflict = 1;
        else shape_say(&out, s->d, s->n);
    }
    const eshape *use = out.n && !out.conflict ? &out : r->cons.n && !r->cons.conflict ? &r->cons : NULL;
    if (!use) {
        if (out.conflict || r->cons.conflict)
            r->m.why = "a convolution's calls of one input shape disagree on their output size (different strides or padding)";
        return;
    }
    const long long *k = r->key;
    const char *x = k[2] >= 0 ? intern_str(a->t->xargs, (long)k[2]) : NULL;
    char types[XARGS_ONE_MAX + 1];
    size_t nt = x ? strcspn(x, "\x1f") : 0;
    memcpy(types, x ? x : "", nt);
    types[nt] = '\0';
    flops_in in = {an_str(a, (long)k[0]), k[1] >= 0 ? an_str(a, (long)k[1]) : NULL, nt ? types : NULL, NULL, NULL, -1, (int)k[5], use->d,
                   use->n};
    flops_model_in(&in, &r->m);
    r->pending = 0;
}

/* ---- kernel evidence ---- */

/* The blocks per SM of the kernels of each row's first EFFIC_BPS_SAMPLES calls (a row's calls
 * share their shapes, so their grids), rows with the most GPU time first, at most
 * EFFIC_BPS_LOOKUPS correlations in all. Why sampled and read here, not summed by the walk:
 * the walk's cursor (GCUR_SQL) reads a covering index, and bps in it (a column more for
 * every runtime call and kernel) cost 11M of the 394M instructions a 20 MB bench/gen_trace
 * flat upload spends in its analysis. */
static int kernel_evidence(A *a, effic_state *e, const erow **order, size_t n) {
    sqlite3_stmt *q = an_prep(a, "SELECT bps FROM scratch.ev WHERE corr = ?1 AND cls = 2 AND kind = ?2");
    if (!q) return ERR_DB;
    int rc = 0, looked = 0;
    for (size_t i = 0; i < n && !rc && looked < EFFIC_BPS_LOOKUPS; i++) {
        erow *r = &e->rows[order[i] - e->rows];
        for (int k = 0; k < r->nbcorr && !rc; k++, looked++) {
            sqlite3_bind_int64(q, 1, r->bcorr[k]);
            sqlite3_bind_int64(q, 2, a->kernel_kind);
            int st;
            while ((st = sqlite3_step(q)) == SQLITE_ROW)
                if (sqlite3_column_type(q, 0) != SQLITE_NULL) {
                    r->bps += sqlite3_column_double(q, 0);
                    r->nbps++;
                }
            if (st != SQLITE_DONE) rc = an_dberr(a);
            sqlite3_reset(q);
        }
    }
    sqlite3_finalize(q);
    return rc;
}

/* ---- a row's verdict ---- */

enum { ST_JUDGED, ST_IN_DOUBT, ST_NOT_JUDGED, ST_UNKNOWN, ST_UPPER, ST_IMPOSSIBLE };
static const char *const status_names[] = {"judged", "in_doubt", "not_judged", "unknown", "upper_bound", "impossible"};

typedef struct everdict {
    int status;
    const char *bound;          /* compute, memory, latency; NULL */
    const char *reason;         /* why bound is null */
    char buf[320];              /* reason's text when it is composed */
    double t_us;                /* GPU time of the calls with kernels */
    double fc, fm, frac;
    double peak_u[U_N];         /* per unit, FLOP/s; 0 unknown */
    const char *peak_name_u[U_N];
    const char *peak_used;      /* of the unit with most time */
    double best_peak;
    const char *best_unit;
    int have_roofs;             /* roof_us and best_roof_us are known */
    int sane;                   /* tflops and gbps are figures a device can reach */
    double kernel_mean, bps_mean;
    int have_bps;
} everdict;

/* The peak (FLOP/s) of a call of m on unit u; 0 unknown; *name its name. */
static double peak_of(const effic_state *e, const flops_out *m, int u, const char **name) {
    *name = NULL;
    if (!e->dev || m->kind == FL_NONE || m->kind == FL_COPY || u == U_NONE) return 0;
    const device_row *d = e->dev;
    int tensor = u == U_TENSOR || (u == U_UNCL && m->kind == FL_MATRIX);
    if (!tensor) {
        if (m->dtype != FL_FP32 && m->dtype != FL_BF16 && m->dtype != FL_FP16) return 0;
        *name = "fp32";
        return d->fp32;
    }
    double p = 0;
    switch (m->dtype) {
    case FL_FP32: p = d->fp32m > 0 ? d->fp32m : d->tf32, *name = d->fp32m > 0 ? "fp32_matrix" : "tf32_tensor"; break;
    case FL_BF16: p = d->bf16, *name = "bf16_tensor"; break;
    case FL_FP16: p = d->fp16, *name = "fp16_tensor"; break;
    case FL_FP8: p = d->fp8, *name = "fp8_tensor"; break;
    default: break;
    }
    if (!(p > 0)) *name = NULL;
    return p > 0 ? p : 0;
}

/* The best peak the device has for m's precision (spec48 "The roofs"). */
static double best_of(const effic_state *e, const flops_out *m, const char **name) {
    *name = NULL;
    if (!e->dev || m->kind == FL_NONE || m->kind == FL_COPY) return 0;
    const device_row *d = e->dev;
    if (m->kind == FL_MATRIX) {
        double p = 0;
        const char *n = NULL;
        switch (m->dtype) {
        case FL_FP32:
            if (d->tf32 > p) p = d->tf32, n = "tf32_tensor";
            if (d->fp32m > p) p = d->fp32m, n = "fp32_matrix";
            break;
        case FL_BF16: p = d->bf16, n = "bf16_tensor"; break;
        case FL_FP16: p = d->fp16, n = "fp16_tensor"; break;
        case FL_FP8: p = d->fp8, n = "fp8_tensor"; break;
        default: return 0;
        }
        if (p > d->fp32) return *name = n, p;
        if (m->dtype == FL_FP8) return 0; /* no FP8 math on this device */
    }
    if (m->dtype != FL_FP32 && m->dtype != FL_BF16 && m->dtype != FL_FP16) return 0;
    *name = "fp32";
    return d->fp32;
}

static const char *over_roof_note(everdict *v, const flops_out *m, double fc, double fm) {
    if (fc >= fm && m->conv)
        snprintf(v->buf, sizeof v->buf, "achieved %.0f%% of the %s peak: over 100%% of a direct convolution's FLOP count, which "
                 "Winograd or FFT kernels (cuDNN's choice for 3x3 filters) beat by doing fewer multiplies, or the precision assumed is "
                 "wrong", 100 * fc, v->peak_used ? v->peak_used : "compute");
    else if (fc >= fm)
        snprintf(v->buf, sizeof v->buf, "achieved %.0f%% of the %s peak: over 100%%, so the FLOP count or the precision assumed is wrong "
                 "(the kernels' unit, a FLOP formula that overcounts)", 100 * fc, v->peak_used ? v->peak_used : "compute");
    else
        snprintf(v->buf, sizeof v->buf, "achieved %.0f%% of the DRAM bandwidth: over 100%%, so the bytes did not all cross DRAM "
                 "(a tensor resident in the L2 cache) or the kernel times are too coarse (1 us timestamps on short kernels)", 100 * fm);
    return v->buf;
}

/* fc, fm, frac and the bound of a row whose figures are known; status as it comes out. */
static void judge(const effic_state *e, const erow *r, everdict *v) {
    double F = r->m.flops, B = r->m.bytes, t = v->t_us * 1e-6, comp_s = 0;
    int comp_known = F == 0 || r->m.kind == FL_COPY;
    if (!comp_known) {
        comp_known = 1;
        for (int u = 0; u < U_NONE; u++)
            if (r->s.n_u[u]) {
                if (!(v->peak_u[u] > 0)) comp_known = 0;
                else comp_s += (double)r->s.n_u[u] * F / v->peak_u[u];
            }
    }
    long long nk = r->s.calls - r->s.n_u[U_NONE];
    if (!(e->bw > 0) || (!comp_known && F > 0)) {
        v->status = ST_UNKNOWN;
        v->reason = !e->dev && !(e->bw > 0) ? e->why
                  : !e->dev ? "the device is not in the table of peaks: FLOP/s has no roof"
                            : "the device has no peak for this precision and unit (fp64, integers, or a unit it lacks)";
        return;
    }
    v->fc = t > 0 ? comp_s / t : 0;
    v->fm = t > 0 ? (double)nk * B / e->bw / t : 0;
    if (r->m.upper) {
        v->status = ST_UPPER;
        v->reason = r->m.conv ? "its FLOPs are an upper bound: which gradients it computes is not recorded (output_mask)"
                              : "its FLOPs are an upper bound: whether the attention is causal is not recorded (no is_causal, no flash "
                                "kernel flag), so no verdict rests on them";
        return;
    }
    if (v->fc > 1.0 || v->fm > 1.0) {
        v->status = ST_IMPOSSIBLE;
        v->reason = over_roof_note(v, &r->m, v->fc, v->fm);
        return;
    }
    v->frac = v->fc > v->fm ? v->fc : v->fm;
    v->bound = v->fc >= v->fm && F > 0 ? "compute" : "memory";
    v->status = ST_JUDGED;
    if (v->frac >= EFFIC_LATENCY_FRACTION) return;
    /* far below both roofs: latency only with kernel evidence (short kernels, tiny grids) */
    if (v->kernel_mean < EFFIC_SHORT_KERNEL_US && v->have_bps && v->bps_mean < 1) {
        v->bound = "latency";
        return;
    }
    v->bound = NULL;
    v->status = ST_IN_DOUBT;
    if (!v->have_bps)
        snprintf(v->buf, sizeof v->buf, "%.1f%% of its roof with no kernel evidence of latency (the trace has no blocks per SM): "
                 "the FLOP model or the peak is in doubt", 100 * v->frac);
    else
        snprintf(v->buf, sizeof v->buf, "%.1f%% of its roof, yet its kernels are not short and tiny (%.0f us mean, %.1f blocks per SM): "
                 "the FLOP model or the peak is in doubt", 100 * v->frac, v->kernel_mean, v->bps_mean);
    v->reason = v->buf;
}

static void verdict_of(const effic_state *e, const erow *r, everdict *v) {
    memset(v, 0, sizeof *v);
    const ecell *s = &r->s;
    v->t_us = s->gpu_us - s->us_u[U_NONE];
    for (int u = 0; u < U_N; u++) v->peak_u[u] = peak_of(e, &r->m, u, &v->peak_name_u[u]);
    int top = -1;
    for (int u = 0; u < U_NONE; u++)
        if (s->n_u[u] && v->peak_name_u[u] && (top < 0 || s->us_u[u] > s->us_u[top])) top = u;
    v->peak_used = top >= 0 ? v->peak_name_u[top] : NULL;
    v->best_peak = best_of(e, &r->m, &v->best_unit);
    double kus = s->kc[0] + s->kc[1] + s->kc[2];
    v->kernel_mean = r->kn ? kus / (double)r->kn : 0;
    v->have_bps = r->nbps > 0;
    v->bps_mean = r->nbps ? r->bps / (double)r->nbps : 0;
    double t = v->t_us * 1e-6;
    v->sane = !(t > 0) || ((r->m.flops < 0 || r->m.flops * (double)s->calls / t <= EFFIC_MAX_FLOPS) &&
                           (r->m.bytes < 0 || r->m.bytes * (double)s->calls / t <= EFFIC_MAX_BYTES));
    if (r->special == ROW_RANGES) {
        v->status = ST_UNKNOWN;
        v->reason = "launched by a record_function range with no operator around the launch";
    } else if (s->calls == s->n_u[U_NONE]) {
        v->status = ST_NOT_JUDGED;
        v->reason = "copies and memsets only: their roof is the link they cross (PCIe or NVLink for a host copy), not judged";
    } else if (!v->sane) {
        v->status = ST_IMPOSSIBLE;
        snprintf(v->buf, sizeof v->buf, "faster than any GPU (%.3g us of GPU time for its FLOPs and bytes): its recorded kernel "
                 "durations are not credible", v->t_us);
        v->reason = v->buf;
    } else if (r->m.flops < 0 || r->m.bytes < 0) {
        v->status = ST_UNKNOWN;
        v->reason = r->m.why ? r->m.why : "its FLOPs or bytes are not known from its shapes";
    } else {
        judge(e, r, v);
    }
    /* the roofs: for the rows whose figures stand */
    if ((v->status == ST_JUDGED || v->status == ST_IN_DOUBT) && e->bw > 0 && (v->best_peak > 0 || r->m.flops == 0))
        v->have_roofs = 1;
}

/* ---- sums over cells ---- */

/* What calls add up to in the session's or a phase's figures. */
typedef struct efigs {
    double gpu_us, modelled_us, copies_us, flops, bytes;
    double judged_us, roof_us, best_roof_us, mfu_flops, mbu_bytes;
    int roof_unknown;           /* a judged call whose unit's peak is unknown */
} efigs;

/* The time at the roofs of c's calls of row r (per unit: max(FLOPs / peak, bytes / bw)). */
static double cell_roof(const effic_state *e, const erow *r, const everdict *v, const ecell *c, int best, int *unknown) {
    double F = r->m.flops, B = r->m.bytes, mem = B / e->bw, us = 0;
    for (int u = 0; u < U_NONE; u++) {
        if (!c->n_u[u]) continue;
        double p = best ? v->best_peak : v->peak_u[u], comp = F > 0 ? (p > 0 ? F / p : -1) : 0;
        if (comp < 0) {
            *unknown = 1;
            continue;
        }
        us += (double)c->n_u[u] * (comp > mem ? comp : mem) * 1e6;
    }
    return us;
}

static void figs_add(efigs *g, const effic_state *e, const erow *r, const everdict *v, const ecell *c) {
    g->gpu_us += c->gpu_us;
    if (r->m.kind == FL_COPY) g->copies_us += c->gpu_us;
    else g->copies_us += c->us_u[U_NONE];
    if (r->m.flops >= 0 && r->m.bytes >= 0 && r->m.kind != FL_COPY) g->modelled_us += c->gpu_us - c->us_u[U_NONE];
    if (r->m.flops >= 0 && v->sane) g->flops += r->m.flops * (double)c->calls;
    if (r->m.bytes >= 0 && v->sane) g->bytes += r->m.bytes * (double)c->calls;
    if (!v->have_roofs) return;
    double nk = (double)(c->calls - c->n_u[U_NONE]);
    g->judged_us += c->gpu_us - c->us_u[U_NONE];
    g->roof_us += cell_roof(e, r, v, c, 0, &g->roof_unknown);
    g->best_roof_us += cell_roof(e, r, v, c, 1, &g->roof_unknown);
    g->mfu_flops += r->m.flops * nk;
    g->mbu_bytes += r->m.bytes * nk;
}

static json_t *num_or_null(double v, int known) { return known && isfinite(v) ? json_real(v) : json_null(); }

/* The figures of g into o; total: the GPU time coverage divides (0: g's own). */
static void figs_json(json_t *o, const effic_state *e, const efigs *g, double total) {
    double den = total > 0 ? total : g->gpu_us;
    json_object_set_new(o, "gpu_us", json_real(g->gpu_us));
    json_object_set_new(o, "modelled_us", json_real(g->modelled_us));
    json_object_set_new(o, "coverage", num_or_null(g->modelled_us / den, den > 0));
    json_object_set_new(o, "copies_us", json_real(g->copies_us));
    json_object_set_new(o, "flops", num_or_null(g->flops, g->flops > 0));
    json_object_set_new(o, "bytes", num_or_null(g->bytes, g->bytes > 0));
    int roofs = g->judged_us > 0 && !g->roof_unknown;
    json_object_set_new(o, "judged_us", json_real(g->judged_us));
    json_object_set_new(o, "roof_us", num_or_null(g->roof_us, roofs));
    json_object_set_new(o, "best_roof_us", num_or_null(g->best_roof_us, roofs));
    double above = g->judged_us - g->best_roof_us;
    json_object_set_new(o, "above_roof_us", num_or_null(above > 0 ? above : 0, roofs));
    json_object_set_new(o, "best_peak_fraction", num_or_null(g->best_roof_us / g->judged_us, roofs));
    (void)e;
}

/* ---- the document ---- */

/* The k-th smallest of v[0..n) (Hoare's selection: v is reordered, linear on average). */
static float select_k(float *v, long n, long k) {
    long lo = 0, hi = n - 1;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        long i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                float t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return v[k];
    }
    return v[k];
}

/* The median of r's calls' GPU time (reorders r->durs); NAN when some call's time is not kept. */
static double median_of(erow *r) {
    if (r->durs_cut || !r->nd) return NAN;
    long n = (long)r->nd;
    double hi = select_k(r->durs, n, n / 2);
    return n % 2 ? hi : ((double)select_k(r->durs, n, n / 2 - 1) + hi) / 2;
}

static const char *row_name(A *a, const erow *r) {
    return r->special == ROW_OTHER ? "(other shapes)" : r->special == ROW_RANGES ? "(launched by a range)" : an_str(a, (long)r->key[0]);
}

/* What kind of work the row is, for the advice a memory-bound verdict gives (the words fit
 * the op: no KV cache for a convolution). */
static const char *family_of(const char *name, const flops_out *m) {
    if (m->conv) return "convolution";
    if (strstr(name, "attention")) return "attention";
    if (m->kind == FL_MATRIX) return "gemm";
    if (m->kind == FL_VECTOR) return "elementwise";
    if (m->kind == FL_COPY) return "copy";
    return "other";
}

static const char *memory_advice(const char *family) {
    if (!strcmp(family, "attention"))
        return "Move fewer bytes per result: batch more requests per step (continuous batching), quantize the KV cache or the "
               "weights (int8, fp8), or decode speculatively; compare throughput per step";
    if (!strcmp(family, "gemm"))
        return "Move fewer bytes per result: give each call more rows (a batch of requests or of tokens: a GEMV-shaped GEMM reads "
               "every weight for few outputs), or quantize the weights (int8, fp8, int4); compare throughput per step";
    if (!strcmp(family, "convolution"))
        return "Move fewer bytes per result: run it in bf16 or fp16 (autocast) with channels_last (half the bytes, tensor-core "
               "kernels), a larger batch per call, and its batch norm and activation fused into it (torch.compile; folded at "
               "inference); compare GPU time per step";
    return "Move fewer bytes per result: fuse it with the ops around it so its data crosses memory once (torch.compile, a fused "
           "kernel), or keep its tensors in a lower precision (bf16); compare GPU time per step";
}

static json_t *row_json(A *a, const effic_state *e, erow *r, const everdict *v) {
    const ecell *s = &r->s;
    json_t *o = json_object();
    const char *name = row_name(a, r);
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "shape", r->key[1] >= 0 && !r->special ? json_string(an_str(a, (long)r->key[1])) : json_null());
    json_object_set_new(o, "context_shape", r->key[3] >= 0 && !r->special ? json_string(an_str(a, (long)r->key[3])) : json_null());
    const char *dt = flops_dtype_name(r->m.dtype);
    json_object_set_new(o, "dtype", dt ? json_string(dt) : json_null());
    int c = top_class(s->kc);
    json_object_set_new(o, "precision_class", c >= 0 ? json_string(flops_kernel_class_name(c)) : json_null());
    json_object_set_new(o, "unit", c == KC_TENSOR || c == KC_SIMT ? json_string(flops_kernel_class_name(c)) : json_null());
    json_object_set_new(o, "family", json_string(family_of(name, &r->m)));
    json_object_set_new(o, "calls", json_integer(s->calls));
    json_object_set_new(o, "gpu_us", json_real(s->gpu_us));
    json_object_set_new(o, "gpu_us_min", num_or_null(r->dmin, s->calls > 0));
    json_object_set_new(o, "gpu_us_median", num_or_null(median_of(r), 1));
    json_object_set_new(o, "gpu_us_max", num_or_null(r->dmax, s->calls > 0));
    int fk = r->m.flops >= 0, bk = r->m.bytes >= 0;
    double calls = (double)s->calls, t = v->t_us * 1e-6;
    json_object_set_new(o, "flops", num_or_null(r->m.flops * calls, fk));
    json_object_set_new(o, "flops_upper_bound", json_boolean(r->m.upper));
    json_object_set_new(o, "bytes", num_or_null(r->m.bytes * calls, bk));
    json_object_set_new(o, "tflops", num_or_null(r->m.flops * calls / t / 1e12, fk && t > 0 && v->sane));
    json_object_set_new(o, "gbps", num_or_null(r->m.bytes * calls / t / 1e9, bk && t > 0 && v->sane));
    json_object_set_new(o, "intensity", num_or_null(r->m.flops / r->m.bytes, fk && bk && r->m.bytes > 0));
    int judged = v->status == ST_JUDGED;
    json_object_set_new(o, "status", json_string(status_names[v->status]));
    json_object_set_new(o, "bound", v->bound ? json_string(v->bound) : json_null());
    json_object_set_new(o, "bound_reason", v->bound ? json_null() : json_string(v->reason ? v->reason : "unknown"));
    json_object_set_new(o, "peak_fraction", num_or_null(v->frac, judged || v->status == ST_IN_DOUBT));
    json_object_set_new(o, "peak_used", v->peak_used && (judged || v->status == ST_IN_DOUBT) ? json_string(v->peak_used) : json_null());
    /* kept for the clients that read it: the over-100% note */
    json_object_set_new(o, "peak_note", v->status == ST_IMPOSSIBLE ? json_string(v->reason) : json_null());
    int unknown = 0;
    double roof = v->have_roofs ? cell_roof(e, r, v, s, 0, &unknown) : 0, best = v->have_roofs ? cell_roof(e, r, v, s, 1, &unknown) : 0;
    int roofs = v->have_roofs && !unknown;
    json_object_set_new(o, "roof_us", num_or_null(roof, roofs));
    json_object_set_new(o, "best_unit", v->best_unit && v->have_roofs ? json_string(v->best_unit) : json_null());
    json_object_set_new(o, "best_roof_us", num_or_null(best, roofs));
    double above = v->t_us - best;
    json_object_set_new(o, "above_roof_us", num_or_null(above > 0 ? above : 0, roofs));
    json_object_set_new(o, "best_peak_fraction", num_or_null(best / v->t_us, roofs && v->t_us > 0));
    json_object_set_new(o, "kernels", json_integer(r->kn));
    json_object_set_new(o, "kernel_us_mean", num_or_null(v->kernel_mean, r->kn > 0));
    json_object_set_new(o, "blocks_per_sm", num_or_null(v->bps_mean, v->have_bps));
    return o;
}

/* ---- the rows of one name together (by_name) ---- */

typedef struct ename {
    long name;
    long top_row;               /* its row with the most GPU time */
    long top_judged, top_unjudged; /* the judged / unjudged row with the most time, -1 none */
    double gpu_us, judged_us, comp_s, mem_s, flops, bytes, roof_us, best_roof_us, kus, kn, bps, nbps, unjudged_us;
    long long calls, rows;
    int roof_unknown, tensor_rows;
    double us_u[2];             /* kernel time on tensor, simt */
} ename;

static int ename_cmp(const void *x, const void *y) {
    const ename *p = x, *q = y;
    return p->gpu_us != q->gpu_us ? (p->gpu_us > q->gpu_us ? -1 : 1) : (p->name > q->name) - (p->name < q->name);
}

static void name_add(const effic_state *e, ename *n, const erow *r, const everdict *v, long idx) {
    if (!n->rows || r->s.gpu_us > e->rows[n->top_row].s.gpu_us) n->top_row = idx;
    n->rows++;
    n->calls += r->s.calls;
    n->gpu_us += r->s.gpu_us;
    n->us_u[0] += r->s.kc[KC_TENSOR];
    n->us_u[1] += r->s.kc[KC_SIMT];
    if (v->status != ST_JUDGED && v->status != ST_IN_DOUBT) {
        n->unjudged_us += r->s.gpu_us;
        if (n->top_unjudged < 0 || r->s.gpu_us > e->rows[n->top_unjudged].s.gpu_us) n->top_unjudged = idx;
        return;
    }
    if (n->top_judged < 0 || r->s.gpu_us > e->rows[n->top_judged].s.gpu_us) n->top_judged = idx;
    double nk = (double)(r->s.calls - r->s.n_u[U_NONE]);
    n->judged_us += v->t_us;
    n->comp_s += v->fc * v->t_us * 1e-6;
    n->mem_s += v->fm * v->t_us * 1e-6;
    n->flops += r->m.flops * nk;
    n->bytes += r->m.bytes * nk;
    n->kus += r->s.kc[0] + r->s.kc[1] + r->s.kc[2];
    n->kn += (double)r->kn;
    n->bps += r->bps;
    n->nbps += (double)r->nbps;
    if (v->have_roofs) {
        int unk = 0;
        n->roof_us += cell_roof(e, r, v, &r->s, 0, &unk);
        n->best_roof_us += cell_roof(e, r, v, &r->s, 1, &unk);
        n->roof_unknown |= unk;
    } else {
        n->roof_unknown = 1;
    }
}

static json_t *name_json(A *a, const effic_state *e, const ename *n, const everdict *verd) {
    json_t *o = json_object();
    const erow *top = &e->rows[n->top_row];
    const char *name = an_str(a, n->name);
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "rows", json_integer(n->rows));
    json_object_set_new(o, "calls", json_integer(n->calls));
    json_object_set_new(o, "gpu_us", json_real(n->gpu_us));
    json_object_set_new(o, "judged_us", json_real(n->judged_us));
    const char *dt = flops_dtype_name(top->m.dtype);
    json_object_set_new(o, "dtype", dt ? json_string(dt) : json_null());
    json_object_set_new(o, "unit", n->us_u[0] + n->us_u[1] > 0 ? json_string(n->us_u[0] >= n->us_u[1] ? "tensor" : "simt") : json_null());
    json_object_set_new(o, "precision_class", n->us_u[0] + n->us_u[1] > 0 ? json_string(n->us_u[0] >= n->us_u[1] ? "tensor" : "simt") : json_null());
    const char *fam = family_of(name, &top->m);
    json_object_set_new(o, "family", json_string(fam));
    json_object_set_new(o, "memory_advice", json_string(memory_advice(fam)));
    double t = n->judged_us * 1e-6;
    /* the verdict of its judged rows together, when they hold at least half its time */
    int have = n->judged_us > 0 && n->judged_us >= 0.5 * n->gpu_us;
    double fc = have ? n->comp_s / t : 0, fm = have ? n->mem_s / t : 0, frac = fc > fm ? fc : fm;
    const char *bound = NULL, *reason = NULL;
    char buf[400];
    if (have) {
        bound = fc >= fm && n->flops > 0 ? "compute" : "memory";
        double kmean = n->kn > 0 ? n->kus / n->kn : 0, bps = n->nbps > 0 ? n->bps / n->nbps : 0;
        if (frac < EFFIC_LATENCY_FRACTION) {
            if (kmean < EFFIC_SHORT_KERNEL_US && n->nbps > 0 && bps < 1) {
                bound = "latency";
            } else {
                bound = NULL;
                snprintf(buf, sizeof buf, "%.1f%% of its roofs without kernel evidence of latency (%.0f us kernels): the FLOP model or "
                         "the peak is in doubt", 100 * frac, kmean);
                reason = buf;
            }
        }
    } else if (n->top_unjudged >= 0) {
        const everdict *uv = &verd[n->top_unjudged];
        snprintf(buf, sizeof buf, "%s", uv->reason ? uv->reason : "its FLOPs or bytes are not known from its shapes");
        reason = buf;
    } else {
        reason = "its FLOPs or bytes are not known from its shapes";
    }
    json_object_set_new(o, "bound", bound ? json_string(bound) : json_null());
    json_object_set_new(o, "bound_reason", bound ? json_null() : json_string(reason));
    json_object_set_new(o, "peak_fraction", num_or_null(frac, have));
    json_object_set_new(o, "tflops", num_or_null(n->flops / t / 1e12, have));
    json_object_set_new(o, "gbps", num_or_null(n->bytes / t / 1e9, have));
    json_object_set_new(o, "intensity", num_or_null(n->flops / n->bytes, have && n->bytes > 0));
    const char *used = n->top_judged >= 0 ? verd[n->top_judged].peak_used : NULL;
    json_object_set_new(o, "peak_used", used && have && !strcmp(bound ? bound : "", "compute") ? json_string(used) : json_null());
    int roofs = have && !n->roof_unknown;
    json_object_set_new(o, "roof_us", num_or_null(n->roof_us, roofs));
    json_object_set_new(o, "best_unit", n->top_judged >= 0 && verd[n->top_judged].best_unit ? json_string(verd[n->top_judged].best_unit) : json_null());
    json_object_set_new(o, "best_roof_us", num_or_null(n->best_roof_us, roofs));
    double above = n->judged_us - n->best_roof_us;
    json_object_set_new(o, "above_roof_us", num_or_null(above > 0 ? above : 0, roofs));
    json_object_set_new(o, "best_peak_fraction", num_or_null(n->best_roof_us / n->judged_us, roofs));
    json_object_set_new(o, "kernel_us_mean", num_or_null(n->kus / n->kn, n->kn > 0));
    json_object_set_new(o, "blocks_per_sm", num_or_null(n->bps / n->nbps, n->nbps > 0));
    return o;
}

/* by_name: the EFFIC_BY_NAME names with the most GPU time. */
static json_t *by_name_json(A *a, const effic_state *e, const everdict *verd) {
    ename *ns = calloc(e->nrows ? e->nrows : 1, sizeof *ns);
    intern *idx = intern_new();
    json_t *out = json_array();
    size_t nn = 0, cap = e->nrows ? e->nrows : 1;
    if (!ns || !idx || !out) goto done;
    for (size_t i = 0; i < e->nrows; i++) {
        const erow *r = &e->rows[i];
        if (r->special) continue;
        long name = (long)r->key[0];
        int fresh;
        long j = intern_lookup(idx, (const char *)&name, sizeof name);
        if (j < 0) {
            j = INTERN_SLOT(idx, &name, sizeof name, ns, nn, cap, e->nrows, &fresh);
            if (j < 0) goto done;
            ns[j].name = name;
            ns[j].top_judged = ns[j].top_unjudged = -1;
        }
        name_add(e, &ns[j], r, &verd[i], (long)i);
    }
    qsort(ns, nn, sizeof *ns, ename_cmp);
    for (size_t i = 0; i < nn && i < EFFIC_BY_NAME; i++) json_array_append_new(out, name_json(a, e, &ns[i], verd));
done:
    free(ns);
    intern_free(idx);
    return out;
}

static int row_cmp(const void *x, const void *y) {
    const erow *p = *(const erow *const *)x, *q = *(const erow *const *)y;
    if (p->s.gpu_us != q->s.gpu_us) return p->s.gpu_us > q->s.gpu_us ? -1 : 1;
    return memcmp(p->key, q->key, sizeof p->key);
}

static json_t *device_json(const effic_state *e) {
    if (!e->dev && !(e->bw > 0)) return json_null();
    const device_row *d = e->dev;
    json_t *o = json_object(), *pk = json_object();
    json_object_set_new(o, "name", json_string(e->dev_name));
    json_object_set_new(o, "row", d ? json_string(d->id) : json_null());
    json_object_set_new(o, "label", d ? json_string(d->label) : json_null());
    json_object_set_new(o, "table", d ? json_string(e->dev_extra ? "devices_file" : "built_in") : json_null());
    json_object_set_new(o, "source", d && d->source ? json_string(d->source) : json_null());
    json_object_set_new(pk, "fp32", d ? json_real(d->fp32) : json_null());
    json_object_set_new(pk, "tf32_tensor", d && d->tf32 > 0 ? json_real(d->tf32) : json_null());
    json_object_set_new(pk, "fp32_matrix", d && d->fp32m > 0 ? json_real(d->fp32m) : json_null());
    json_object_set_new(pk, "fp16_tensor", d && d->fp16 > 0 ? json_real(d->fp16) : json_null());
    json_object_set_new(pk, "bf16_tensor", d && d->bf16 > 0 ? json_real(d->bf16) : json_null());
    json_object_set_new(pk, "fp8_tensor", d && d->fp8 > 0 ? json_real(d->fp8) : json_null());
    json_object_set_new(o, "peaks", pk);
    json_object_set_new(o, "bandwidth", json_real(e->bw));
    json_object_set_new(o, "bandwidth_source", json_string(e->bw_nsys ? "nsys" : "table"));
    return o;
}

/* The unmodelled GPU time by reason, the largest first (at most 6). */
typedef struct ereason { const char *reason, *top; double us, top_us; } ereason;

static int reason_cmp(const void *x, const void *y) {
    const ereason *p = x, *q = y;
    return p->us != q->us ? (p->us > q->us ? -1 : 1) : strcmp(p->reason, q->reason);
}

static void reason_add(ereason *rs, size_t *n, size_t cap, const char *reason, const char *who, double us) {
    if (!(us > 0)) return;
    size_t i = 0;
    while (i < *n && strcmp(rs[i].reason, reason)) i++;
    if (i == *n) {
        if (*n == cap) return;
        rs[(*n)++] = (ereason){reason, who, 0, 0};
    }
    rs[i].us += us;
    if (us > rs[i].top_us) rs[i].top_us = us, rs[i].top = who;
}

static json_t *unmodelled_json(A *a, const effic_state *e, const everdict *verd, double total, double rows_us) {
    enum { CAP = 64 };
    ereason rs[CAP];
    size_t n = 0;
    for (size_t i = 0; i < e->nrows; i++) {
        const erow *r = &e->rows[i];
        int modelled = r->m.flops >= 0 && r->m.bytes >= 0;
        if (r->m.kind == FL_COPY || verd[i].status == ST_NOT_JUDGED || (modelled && r->special != ROW_RANGES)) continue;
        reason_add(rs, &n, CAP, verd[i].reason ? verd[i].reason : "unknown", row_name(a, r), r->s.gpu_us - r->s.us_u[U_NONE]);
    }
    reason_add(rs, &n, CAP, "GPU work no operator launched (graph replays, launches outside every operator and range), or launches "
               "of one operator overlapping on several streams", "(none)", total - rows_us);
    qsort(rs, n, sizeof *rs, reason_cmp);
    json_t *out = json_array();
    for (size_t i = 0; i < n && i < 6; i++)
        json_array_append_new(out, json_pack("{s:s,s:f,s:o,s:s}", "reason", rs[i].reason, "gpu_us", rs[i].us, "fraction",
                                             num_or_null(rs[i].us / total, total > 0), "top", rs[i].top));
    return out;
}

/* The model dtype (the dtype with the most matrix FLOPs, judged rows first) and its peak. */
static void model_peak(effic_state *e, const everdict *verd) {
    double by[FL_OTHER + 1] = {0}, all[FL_OTHER + 1] = {0};
    for (size_t i = 0; i < e->nrows; i++) {
        const erow *r = &e->rows[i];
        if (r->m.kind != FL_MATRIX || r->m.flops <= 0 || r->m.dtype <= FL_DUNKNOWN || r->m.dtype > FL_OTHER) continue;
        double f = r->m.flops * (double)r->s.calls;
        all[r->m.dtype] += f;
        if (verd[i].have_roofs) by[r->m.dtype] += f;
    }
    int best = 0;
    for (int d = 1; d <= FL_OTHER; d++)
        if (by[d] > by[best] || (by[best] == 0 && all[d] > all[best])) best = d;
    e->model_dtype = best;
    flops_out m = {0, 0, best, FL_MATRIX, 0, 0, 0, NULL};
    e->peak_model = best ? best_of(e, &m, &e->peak_model_unit) : 0;
}

static void phases_json(A *a, effic_state *e, const everdict *verd, json_t *phases) {
    efigs *pf = calloc(e->nph ? e->nph : 1, sizeof *pf);
    if (!pf) return;
    for (size_t i = 0; i < e->ncells; i++) {
        long key[2];
        memcpy(key, intern_str(e->ckeys, (long)i), sizeof key);
        figs_add(&pf[key[1]], e, &e->rows[key[0]], &verd[key[0]], &e->cells[i]);
    }
    for (size_t i = 0; i < e->nph; i++) {
        json_t *p = json_object();
        const efigs *g = &pf[i];
        json_object_set_new(p, "name", json_string(an_str(a, e->ph[i])));
        figs_json(p, e, g, 0);
        double w = g->gpu_us * 1e-6;
        json_object_set_new(p, "mfu", num_or_null(g->mfu_flops / (w * e->peak_model), w > 0 && e->peak_model > 0 && g->mfu_flops > 0));
        json_object_set_new(p, "mbu", num_or_null(g->mbu_bytes / (w * e->bw), w > 0 && e->bw > 0 && g->mbu_bytes > 0));
        json_object_set_new(p, "window_us", json_real(g->gpu_us));
        json_array_append_new(phases, p);
        if (a->step_name >= 0 && e->ph[i] == a->step_name) {
            e->has_step_phase = 1;
            e->step_flops = g->mfu_flops;
            e->step_bytes = g->mbu_bytes;
        }
    }
    free(pf);
}

int an_effic_doc(A *a, json_t **out) {
    effic_state *e = a->eff;
    *out = NULL;
    for (size_t i = 0; i < e->nrows; i++)
        if (e->rows[i].pending) resolve_pending(a, e, &e->rows[i]);
    /* all GPU activity time, and kernel time by class (tb-profiler's tensor-core share) */
    double total = 0, kc[3] = {0, 0, 0}, ktotal = 0;
    for (size_t i = 0; i < a->t->ngpu_aggs; i++) {
        const gpu_agg *g = &a->t->gpu_aggs[i];
        if (g->cls != EV_GPU) continue;
        total += g->total;
        if (g->kind != a->kernel_kind) continue;
        unsigned k = g->name >= 0 && (size_t)g->name < a->nkclass ? a->kclass[g->name] : 0;
        kc[k ? k - 1 : KC_UNCLASSIFIED] += g->total;
        ktotal += g->total;
    }
    everdict *verd = calloc(e->nrows ? e->nrows : 1, sizeof *verd);
    const erow **order = calloc(e->nrows ? e->nrows : 1, sizeof *order);
    json_t *doc = json_object(), *session = json_object(), *ops = json_array(), *phases = json_array();
    if (!verd || !order || !doc || !session || !ops || !phases) {
        free(verd), free(order);
        json_decref(doc), json_decref(session), json_decref(ops), json_decref(phases);
        return ERR_NOMEM;
    }
    efigs all = {0};
    double rows_us = 0;
    size_t n = 0;
    for (size_t i = 0; i < e->nrows; i++)
        if (e->rows[i].special != ROW_RANGES) order[n++] = &e->rows[i];
    if (n) qsort(order, n, sizeof *order, row_cmp);
    int rc = kernel_evidence(a, e, order, n);
    if (rc) {
        free(verd), free(order);
        json_decref(doc), json_decref(session), json_decref(ops), json_decref(phases);
        return rc;
    }
    for (size_t i = 0; i < e->nrows; i++) {
        verdict_of(e, &e->rows[i], &verd[i]);
        figs_add(&all, e, &e->rows[i], &verd[i], &e->rows[i].s);
        rows_us += e->rows[i].s.gpu_us;
    }
    model_peak(e, verd);
    e->mfu_flops = all.mfu_flops;
    e->mbu_bytes = all.mbu_bytes;
    json_object_set_new(doc, "device", device_json(e));
    json_object_set_new(doc, "device_reason", e->dev ? json_null() : json_string(e->why));
    figs_json(session, e, &all, total);
    json_object_set_new(session, "gpu_us", json_real(total));
    json_object_set_new(session, "unmodelled", unmodelled_json(a, e, verd, total, rows_us));
    json_object_set_new(session, "tensor_core_fraction", num_or_null(kc[KC_TENSOR] / ktotal, ktotal > 0));
    json_t *pu = json_object();
    for (int i = 0; i < KC_N; i++) json_object_set_new(pu, flops_kernel_class_name(i), json_real(kc[i]));
    json_object_set_new(session, "kernel_us_by_class", pu);
    const char *md = flops_dtype_name(e->model_dtype);
    json_object_set_new(session, "mfu_peak",
                        e->peak_model > 0 ? json_pack("{s:s,s:s,s:f}", "dtype", md, "unit", e->peak_model_unit, "flops_per_s", e->peak_model)
                                          : json_null());
    /* the window figures come with an_effic_window; null until then */
    static const char *const later[] = {"mfu", "mbu", "gpu_utilization", "sm_efficiency", "achieved_occupancy", NULL};
    for (int i = 0; later[i]; i++) json_object_set_new(session, later[i], json_null());
    json_object_set_new(doc, "session", session);
    /* rows by GPU time, the EFFIC_ROWS_OUT longest */
    double omitted_us = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = (size_t)(order[i] - e->rows);
        if (i < EFFIC_ROWS_OUT) json_array_append_new(ops, row_json(a, e, &e->rows[k], &verd[k]));
        else omitted_us += order[i]->s.gpu_us;
    }
    json_object_set_new(doc, "operators", ops);
    json_object_set_new(doc, "operators_omitted",
                        json_pack("{s:I,s:f}", "rows", (json_int_t)(n > EFFIC_ROWS_OUT ? n - EFFIC_ROWS_OUT : 0), "gpu_us", omitted_us));
    json_object_set_new(doc, "by_name", by_name_json(a, e, verd));
    phases_json(a, e, verd, phases);
    json_object_set_new(doc, "phases", phases);
    json_object_set_new(doc, "limits",
                        json_pack("{s:i,s:i,s:i,s:i,s:I,s:i,s:f,s:f}", "rows_kept", EFFIC_ROWS_MAX, "rows_listed", EFFIC_ROWS_OUT, "phases_kept",
                                  EFFIC_PHASES_MAX, "cells_kept", EFFIC_CELLS_MAX, "cells_dropped", (json_int_t)e->cells_dropped,
                                  "durations_kept", EFFIC_DURS_MAX, "latency_fraction", EFFIC_LATENCY_FRACTION, "short_kernel_us",
                                  EFFIC_SHORT_KERNEL_US));
    free(verd);
    free(order);
    *out = doc;
    return 0;
}
/* ---- tb-profiler's window figures ---- */

typedef struct hend { double te, v; } hend;

static void heap_push(hend *h, size_t *n, hend x) {
    size_t i = (*n)++;
    while (i && h[(i - 1) / 2].te > x.te) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}
static hend heap_pop(hend *h, size_t *n) {
    hend top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1].te < h[c].te) c++;
        if (h[c].te >= x.te) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

/* The length of [s, e] inside [w0, w1]. */
static double clip(double s, double e, double w0, double w1) {
    if (s < w0) s = w0;
    if (e > w1) e = w1;
    return e > s ? e - s : 0;
}

typedef struct devfig {
    double busy, sme, occ_w, occ_t;
    long long dropped, nbps;   /* kernels past EFFIC_HEAP_MAX; kernels with blocks per SM */
} devfig;

/* One device's kernels in start order (q's rows: ts, te, bps, occ). */
static int sweep_device(A *a, sqlite3_stmt *q, double w0, double w1, hend *h, devfig *f) {
    size_t nh = 0;
    double cur = -INFINITY, val = 0, ue = -INFINITY;
    int st;
    memset(f, 0, sizeof *f);
    while ((st = sqlite3_step(q)) == SQLITE_ROW) {
        double ts = sqlite3_column_double(q, 0), te = sqlite3_column_double(q, 1);
        /* the union of kernel time (merge_ranges) */
        if (ts >= ue) f->busy += clip(ts, te, w0, w1);
        else if (te > ue) f->busy += clip(ue, te, w0, w1);
        if (te > ue) ue = te;
        /* min(1, running sum of blocks per SM) up to ts (merge_ranges_with_value) */
        while (nh && h[0].te <= ts) {
            hend x = heap_pop(h, &nh);
            if (val > 1e-12) f->sme += (val < 1 ? val : 1) * clip(cur, x.te, w0, w1);
            cur = x.te;
            val -= x.v;
        }
        if (val > 1e-12 && cur > -INFINITY) f->sme += (val < 1 ? val : 1) * clip(cur, ts, w0, w1);
        cur = ts;
        if (sqlite3_column_type(q, 2) != SQLITE_NULL) {
            double v = sqlite3_column_double(q, 2);
            f->nbps++;
            if (nh < EFFIC_HEAP_MAX) {
                heap_push(h, &nh, (hend){te, v});
                val += v;
            } else {
                f->dropped++;
            }
        }
        if (sqlite3_column_type(q, 3) != SQLITE_NULL) {
            double c = clip(ts, te, w0, w1);
            f->occ_w += sqlite3_column_double(q, 3) * c;
            f->occ_t += c;
        }
    }
    while (nh) {
        hend x = heap_pop(h, &nh);
        if (val > 1e-12) f->sme += (val < 1 ? val : 1) * clip(cur, x.te, w0, w1);
        cur = x.te;
        val -= x.v;
    }
    return st == SQLITE_DONE ? 0 : an_dberr(a);
}


/* The conventional MFU and MBU (effic.c's header): over the window x devices, the calls
 * inside the step ranges when the window is the steps'. */
static void mfu_figures(A *a, json_t *session, const char *src, double win_us, size_t nk) {
    effic_state *e = a->eff;
    int steps = !strcmp(src, "steps") && e->has_step_phase;
    double flops = steps ? e->step_flops : e->mfu_flops, bytes = steps ? e->step_bytes : e->mbu_bytes;
    double den = win_us * 1e-6 * (double)nk;
    int ok = den > 0;
    json_object_set_new(session, "mfu", num_or_null(flops / (den * e->peak_model), ok && e->peak_model > 0 && flops > 0));
    json_object_set_new(session, "mbu", num_or_null(bytes / (den * e->bw), ok && e->bw > 0 && bytes > 0));
    json_object_set_new(session, "mfu_window",
                        json_pack("{s:f,s:I,s:s}", "seconds", win_us * 1e-6, "devices", (json_int_t)nk, "calls",
                                  steps ? "inside the step ranges" : "every call"));
    const char *why = !e->peak_model ? (e->dev ? "no matrix operator with known FLOPs, or no peak for its precision" : e->why)
                    : !(flops > 0) ? "no judged operator: no FLOPs to count" : !ok ? "the window holds no kernels" : NULL;
    json_object_set_new(session, "mfu_reason", why ? json_string(why) : json_null());
}

int an_effic_window(A *a, const json_t *breakdown, json_t *doc) {
    json_t *steps = json_object_get(breakdown, "steps"), *session = json_object_get(doc, "session");
    double w0 = a->t->start_us, w1 = a->t->end_us;
    const char *src = "trace";
    size_t ns = json_array_size(steps);
    if (ns) {
        json_t *f = json_array_get(steps, 0), *l = json_array_get(steps, ns - 1);
        w0 = json_number_value(json_object_get(f, "start_us"));
        w1 = json_number_value(json_object_get(l, "start_us")) + json_number_value(json_object_get(l, "dur_us"));
        src = "steps";
    }
    long long *devs = NULL;
    size_t nd = 0;
    int rc = an_gpu_devs(a, &devs, &nd);
    sqlite3_stmt *q = rc ? NULL : an_prep(a, "SELECT ts, te, bps, occ FROM scratch.ev WHERE cls = 2 AND dev = ?1 AND kind = ?2 ORDER BY ts");
    hend *h = rc ? NULL : malloc(EFFIC_HEAP_MAX * sizeof *h);
    if (!rc && (!q || !h)) rc = q ? ERR_NOMEM : ERR_DB;
    json_t *list = json_array();
    double busy = 0, sme = 0, ow = 0, ot = 0, win = w1 - w0;
    size_t nk = 0;
    long long nbps = 0;
    for (size_t i = 0; !rc && i < nd; i++) {
        devfig f;
        sqlite3_bind_int64(q, 1, devs[i]);
        sqlite3_bind_int64(q, 2, a->kernel_kind);
        rc = sweep_device(a, q, w0, w1, h, &f);
        sqlite3_reset(q);
        if (rc || (f.busy <= 0 && f.occ_t <= 0 && f.sme <= 0)) continue; /* copies only */
        nk++;
        busy += f.busy;
        sme += f.sme;
        ow += f.occ_w;
        ot += f.occ_t;
        nbps += f.nbps;
        json_array_append_new(list, json_pack("{s:I,s:o,s:o,s:o,s:I}", "device", (json_int_t)devs[i], "gpu_utilization",
                                              num_or_null(f.busy / win, win > 0), "sm_efficiency",
                                              num_or_null(f.sme / win, win > 0 && f.nbps),
                                              "achieved_occupancy", num_or_null(f.occ_w / f.occ_t / 100, f.occ_t > 0),
                                              "sm_sweep_dropped", (json_int_t)f.dropped));
    }
    sqlite3_finalize(q);
    free(h);
    free(devs);
    if (rc) {
        json_decref(list);
        return rc;
    }
    json_object_set_new(session, "gpu_utilization", num_or_null(busy / (win * (double)nk), win > 0 && nk));
    json_object_set_new(session, "sm_efficiency", num_or_null(sme / (win * (double)nk), win > 0 && nk && nbps));
    json_object_set_new(session, "achieved_occupancy", num_or_null(ow / ot / 100, ot > 0));
    json_object_set_new(session, "window", json_pack("{s:f,s:f,s:s}", "start_us", w0, "end_us", w1, "source", src));
    json_object_set_new(doc, "devices", list);
    mfu_figures(a, session, src, win, nk);
    return 0;
}


/* ---- verdicts, as the suspect list and the report quote them ---- */

/* Op name's entry of by_name, NULL when there is none. */
static const json_t *name_of(const json_t *doc, const char *name) {
    const json_t *r;
    size_t i;
    json_array_foreach(json_object_get(doc, "by_name"), i, r) {
        const char *n = json_string_value(json_object_get(r, "name"));
        if (n && !strcmp(n, name)) return r;
    }
    return NULL;
}

json_t *an_effic_verdict(const json_t *doc, const char *name) {
    const json_t *r = name_of(doc, name), *dev = json_object_get(doc, "device");
    const char *bound = r ? json_string_value(json_object_get(r, "bound")) : NULL;
    static const char *const keys[] = {"tflops", "gbps", "intensity", "peak_fraction", "peak_used", "precision_class", "unit", "dtype",
                                       "family", "memory_advice", "roof_us", "best_unit", "best_roof_us", "above_roof_us",
                                       "best_peak_fraction", "kernel_us_mean", "blocks_per_sm", NULL};
    json_t *v = json_object();
    if (!v) return NULL;
    for (int k = 0; r && keys[k]; k++) {
        json_t *x = json_object_get(r, keys[k]);
        if (x) json_object_set(v, keys[k], x);
    }
    json_object_set_new(v, "bound", bound ? json_string(bound) : json_null());
    if (!bound) {
        const char *note = r ? json_string_value(json_object_get(r, "bound_reason")) : NULL;
        const char *why = !doc ? "no efficiency figures" : !r ? "no shapes recorded for it" : note ? note
                        : !json_is_object(dev) ? "the device is not in the table of peaks" : "its FLOPs or bytes are not known from its shapes";
        json_object_set_new(v, "bound_unknown_reason", json_string(why));
        return v;
    }
    const char *label = json_string_value(json_object_get(dev, "label")), *used = json_string_value(json_object_get(r, "peak_used"));
    char peak[192];
    if (!strcmp(bound, "memory") || !used)
        snprintf(peak, sizeof peak, "%s memory bandwidth (%.0f GB/s)", label ? label : "device",
                 json_number_value(json_object_get(dev, "bandwidth")) / 1e9);
    else
        snprintf(peak, sizeof peak, "%s %s peak (%.0f TFLOP/s)", label ? label : "device", used,
                 json_number_value(json_object_get(json_object_get(dev, "peaks"), used)) / 1e12);
    json_object_set_new(v, "peak", json_string(peak));
    return v;
}

void an_effic_phrase(const json_t *v, char *out, size_t n) {
    const char *bound = json_string_value(json_object_get(v, "bound")), *peak = json_string_value(json_object_get(v, "peak"));
    double gbps = json_number_value(json_object_get(v, "gbps")), tflops = json_number_value(json_object_get(v, "tflops"));
    const json_t *frac = json_object_get(v, "peak_fraction");
    char fig[64] = "";
    *out = '\0';
    if (!bound) return;
    if (!strcmp(bound, "memory") && gbps > 0) snprintf(fig, sizeof fig, "%.0f GB/s", gbps);
    else if (tflops > 0) snprintf(fig, sizeof fig, "%.1f TFLOP/s", tflops);
    if (*fig && peak && json_is_number(frac))
        snprintf(out, n, "%s-bound: %s, %.0f%% of the %s", bound, fig, json_number_value(frac) * 100, peak);
    else if (*fig)
        snprintf(out, n, "%s-bound: %s", bound, fig);
    else
        snprintf(out, n, "%s-bound", bound);
}
