/* effic.c: the efficiency pass: is each operator compute-bound or memory-bound, how close to
 * the device's roofs it runs, and tb-profiler's GPU figures (GET /sessions/{id}/efficiency).
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
 *  - Rows: cpu_ops with GPU time, by (name, Input Dims, Input type + Concrete Inputs). FLOPs
 *    and bytes per call: lib/flops.h. At most EFFIC_ROWS_MAX distinct rows are kept; the
 *    calls past that go to one "(other shapes)" row with unknown FLOPs. The document lists
 *    the EFFIC_ROWS_OUT rows with the most GPU time; `operators_omitted` counts the rest.
 *  - Precision class of an op: its kernel time by class (lib/flops.h: tensor / matrix core,
 *    SIMT, unclassified), the largest one; none for an op with copies and memsets only.
 *  - The peak an op is held to (peak_used): the tensor / matrix-core peak of its dtype (fp32:
 *    tf32, bf16/fp16: bf16, fp8: fp8) when its class is tensor, or unclassified and the op is
 *    a matrix op (GEMM, attention, convolution); the FP32 peak otherwise (SIMT, elementwise);
 *    unknown for fp64, integer ops, or an unmatched device (lib/devices.h).
 *  - Per row: tflops = FLOPs / GPU time, gbps = bytes / GPU time (10^9 bytes/s), intensity =
 *    FLOPs / bytes. The ridge = peak / bandwidth. Intensity at or over the ridge: "compute",
 *    peak_fraction = achieved FLOP/s / peak; under it: "memory", peak_fraction = achieved
 *    bytes/s / bandwidth (copies: always memory). A peak_fraction under EFFIC_LATENCY_FRACTION
 *    (far below both roofs) is "latency" (latency, launch or occupancy-limited). Over 1 the
 *    assumption is wrong (device, precision or FLOP count): bound and peak_fraction are null
 *    and peak_note says so. Null wherever an input is unknown.
 *  - MFU = sum over op calls of FLOPs / peak(call), over their GPU time, for the calls whose
 *    FLOPs and peak are known; MBU = sum of bytes / bandwidth over the GPU time of the calls
 *    whose bytes are known. coverage = the GPU time of calls with known FLOPs / all GPU
 *    activity time (the sum of every kernel, copy and memset's duration: launches outside
 *    any op, CUDA-graph replays and unmodelled kernels count as unknown).
 *  - Phases: each record_function range (ProfilerStep#N as ProfilerStep*) holds the op calls
 *    that pop inside it on its thread: the same sums per phase name (at most EFFIC_PHASES_MAX).
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
#define EFFIC_LATENCY_FRACTION 0.10 /* under this share of its roof an op is latency-bound */
#define EFFIC_HEAP_MAX 65536        /* kernels running at once the SM-efficiency sweep follows */

/* Sums over op calls (a row, a phase, the session). */
typedef struct esum {
    long long calls;
    double gpu_us;      /* union time */
    double kc[3];       /* kernel time by class */
    double flops, bytes;
    double flops_us;    /* GPU time of the calls with known FLOPs (coverage) */
    double peak_us, peak_s; /* GPU time of the calls with known FLOPs and peak; sum of FLOPs / peak (s) */
    double bytes_us, bw_s;  /* GPU time of the calls with known bytes; sum of bytes / bandwidth (s) */
    double bytes_known;     /* of bytes, the calls' with known bytes */
    double flops_known;     /* of flops, the calls' with known FLOPs */
} esum;

typedef struct erow {
    long name, shapes, xargs;  /* string ids (xargs: trace_ctx.xargs) */
    flops_out m;               /* per call */
    int other;                 /* the "(other shapes)" row */
    esum s;
} erow;

typedef struct ephase {
    long name;
    esum s;
} ephase;

typedef struct effic_state {
    const device_row *dev;
    const char *why;           /* no device: the reason */
    char dev_name[256];
    double bw;                 /* bytes/s: the table's, or the nsys export's */
    int bw_nsys;
    intern *keys;              /* (name, shapes, xargs) -> row */
    erow *rows;
    size_t nrows, caprows;
    erow other;
    intern *pkeys;
    ephase *ph;
    size_t nph, capph;
    esum all;
} effic_state;

/* ---- the device ---- */

static double prop(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
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
    device_info di = {name, prop(d, "totalGlobalMem"), (int)(prop(d, "numSms") ? prop(d, "numSms") : prop(d, "multiProcessorCount")),
                      (int)(json_object_get(d, "computeMajor") ? prop(d, "computeMajor") : prop(d, "major")),
                      (int)(json_object_get(d, "computeMinor") ? prop(d, "computeMinor") : prop(d, "minor"))};
    e->dev = devices_match(&di, &e->why);
    if (e->dev) e->bw = e->dev->bw;
    /* an Nsight export measures its device's bandwidth: that one wins (nsys.c) */
    if (a->t->ngpu_bw > 0) {
        e->bw = a->t->gpu_bw[0].bw;
        e->bw_nsys = 1;
    }
}

int an_effic_begin(A *a) {
    effic_state *e = calloc(1, sizeof *e);
    if (!e) return ERR_NOMEM;
    e->keys = intern_new();
    e->pkeys = intern_new();
    a->nkclass = intern_count(a->t->strs);
    a->kclass = a->nkclass ? calloc(a->nkclass, 1) : NULL;
    a->eff = e;
    if (!e->keys || !e->pkeys || (a->nkclass && !a->kclass)) return ERR_NOMEM;
    e->other.other = 1;
    e->other.m = (flops_out){-1, -1, FL_DUNKNOWN, FL_NONE};
    match_device(a, e);
    /* each kernel name's class, once: the walk's launches read it by id (host.c gcur) */
    for (size_t i = 0; i < a->t->ngpu_aggs; i++) {
        const gpu_agg *g = &a->t->gpu_aggs[i];
        if (g->cls != EV_GPU || g->kind != a->kernel_kind || g->name < 0 || (size_t)g->name >= a->nkclass) continue;
        a->kclass[g->name] = (unsigned char)(flops_kernel_class(an_str(a, g->name)) + 1);
    }
    return 0;
}

void an_effic_free(A *a) {
    effic_state *e = a->eff;
    free(a->kclass);
    a->kclass = NULL;
    a->nkclass = 0;
    if (!e) return;
    intern_free(e->keys);
    intern_free(e->pkeys);
    free(e->rows);
    free(e->ph);
    free(e);
    a->eff = NULL;
}

/* ---- the walk's calls ---- */

void an_effic_launch(frame *f, const hrow *r) {
    if (!(r->gu > 0) && !(r->gd > 0)) return;
    if (!f->e_n) {
        f->e_u = r->gu;
        f->e_ue = r->gte;
    } else if (r->gts >= f->e_ue) {
        f->e_u += r->gu;
        f->e_ue = r->gte;
    } else if (r->gte > f->e_ue) { /* overlaps what came before: its part past the end */
        double add = r->gte - f->e_ue;
        f->e_u += add < r->gu ? add : r->gu;
        f->e_ue = r->gte;
    }
    for (int i = 0; i < 3; i++) f->e_kc[i] += r->gkc[i];
    f->e_n++;
}

/* The class with the most kernel time, -1 when none. */
static int top_class(const double kc[3]) {
    int best = -1;
    for (int i = 0; i < 3; i++)
        if (kc[i] > 0 && (best < 0 || kc[i] > kc[best])) best = i;
    return best;
}

/* The peak (FLOP/s) a call of m with kernel classes kc is held to; 0 unknown; *used its name. */
static double peak_for(const effic_state *e, const flops_out *m, const double kc[3], const char **used) {
    *used = NULL;
    if (!e->dev || m->kind == FL_NONE || m->kind == FL_COPY) return 0;
    int c = top_class(kc);
    int tensor = c == KC_TENSOR || (c != KC_SIMT && m->kind == FL_MATRIX);
    if (!tensor) {
        if (m->dtype != FL_FP32 && m->dtype != FL_HALF) return 0;
        *used = "fp32";
        return e->dev->fp32;
    }
    switch (m->dtype) {
    case FL_FP32: *used = "tf32_tensor"; return e->dev->tf32;
    case FL_HALF: *used = "bf16_tensor"; return e->dev->bf16;
    case FL_FP8: *used = "fp8_tensor"; return e->dev->fp8;
    default: return 0;
    }
}

static void sum_add(esum *s, const effic_state *e, const flops_out *m, const frame *f) {
    s->calls++;
    s->gpu_us += f->e_u;
    for (int i = 0; i < 3; i++) s->kc[i] += f->e_kc[i];
    const char *used;
    double peak = peak_for(e, m, f->e_kc, &used);
    if (m->flops >= 0) {
        s->flops += m->flops;
        s->flops_known += m->flops;
        s->flops_us += f->e_u;
        if (peak > 0) {
            s->peak_us += f->e_u;
            s->peak_s += m->flops / peak;
        }
    }
    /* a call with copies and memsets only: its roof is the link it crosses (PCIe, NVLink for
     * a host copy), not the DRAM bandwidth: not in MBU (row_json says so) */
    int copies_only = f->e_kc[0] + f->e_kc[1] + f->e_kc[2] <= 0;
    if (m->bytes >= 0) {
        s->bytes += m->bytes;
        s->bytes_known += m->bytes;
        if (e->bw > 0 && !copies_only) {
            s->bytes_us += f->e_u;
            s->bw_s += m->bytes / e->bw;
        }
    }
}

static erow *row_for(A *a, effic_state *e, const frame *f) {
    long key[3] = {f->name, f->shapes, f->xargs};
    long i = intern_lookup(e->keys, (const char *)key, sizeof key);
    if (i < 0 && e->nrows >= EFFIC_ROWS_MAX) return &e->other;
    int fresh;
    if (i < 0) i = INTERN_SLOT(e->keys, key, sizeof key, e->rows, e->nrows, e->caprows, 64, &fresh);
    else fresh = 0;
    if (i < 0) return NULL;
    erow *r = &e->rows[i];
    if (fresh) {
        r->name = f->name;
        r->shapes = f->shapes;
        r->xargs = f->xargs;
        const char *x = f->xargs >= 0 ? intern_str(a->t->xargs, f->xargs) : NULL;
        char types[XARGS_ONE_MAX + 1];
        const char *concrete = NULL;
        if (x) { /* "types\x1fconcrete" (load.c) */
            const char *sep = strchr(x, '\x1f');
            size_t nt = sep ? (size_t)(sep - x) : strlen(x);
            memcpy(types, x, nt);
            types[nt] = '\0';
            concrete = sep && sep[1] ? sep + 1 : NULL;
        }
        flops_model(an_str(a, f->name), f->shapes >= 0 ? an_str(a, f->shapes) : NULL, x && types[0] ? types : NULL, concrete, &r->m);
    }
    return r;
}

int an_effic_pop(A *a, const frame *f, const frame *stack, int depth) {
    effic_state *e = a->eff;
    /* an op's own launches make a row; a range's (no op inside around the launch) count as
     * unmodelled GPU time */
    static const flops_out unknown = {-1, -1, FL_DUNKNOWN, FL_NONE};
    const flops_out *m = &unknown;
    if (f->cls == EV_HOST_OP && f->kind != a->ua_kind) {
        erow *r = row_for(a, e, f);
        if (!r) return ERR_NOMEM;
        m = &r->m;
        sum_add(&r->s, e, m, f);
    }
    sum_add(&e->all, e, m, f);
    /* every record_function range around it on its thread, each name once */
    long seen[16];
    int nseen = 0;
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
        e->ph[j].name = name;
        sum_add(&e->ph[j].s, e, m, f);
    }
    return 0;
}

/* ---- the document ---- */

static json_t *num_or_null(double v, int known) { return known && isfinite(v) ? json_real(v) : json_null(); }

/* MFU, MBU, coverage of s into o; total: the GPU time coverage divides (0: s's own). */
static void sum_figures(json_t *o, const esum *s, double total) {
    double den = total > 0 ? total : s->gpu_us;
    json_object_set_new(o, "gpu_us", json_real(s->gpu_us));
    json_object_set_new(o, "modelled_us", json_real(s->flops_us));
    json_object_set_new(o, "flops", num_or_null(s->flops_known, s->flops_us > 0));
    json_object_set_new(o, "bytes", num_or_null(s->bytes_known, s->bytes_known > 0));
    json_object_set_new(o, "mfu", num_or_null(s->peak_s * 1e6 / s->peak_us, s->peak_us > 0));
    json_object_set_new(o, "mbu", num_or_null(s->bw_s * 1e6 / s->bytes_us, s->bytes_us > 0));
    json_object_set_new(o, "coverage", num_or_null(s->flops_us / den, den > 0));
}

static int row_cmp(const void *x, const void *y) {
    const erow *p = *(const erow *const *)x, *q = *(const erow *const *)y;
    if (p->s.gpu_us != q->s.gpu_us) return p->s.gpu_us > q->s.gpu_us ? -1 : 1;
    return p->name < q->name ? -1 : p->name > q->name;
}

static json_t *row_json(A *a, const effic_state *e, const erow *r) {
    const esum *s = &r->s;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(r->other ? "(other shapes)" : an_str(a, r->name)));
    json_object_set_new(o, "shape", r->shapes >= 0 && !r->other ? json_string(an_str(a, r->shapes)) : json_null());
    const char *dt = flops_dtype_name(r->m.dtype);
    json_object_set_new(o, "dtype", dt ? json_string(dt) : json_null());
    int c = top_class(s->kc);
    json_object_set_new(o, "precision_class", c >= 0 ? json_string(flops_kernel_class_name(c)) : json_null());
    json_object_set_new(o, "calls", json_integer(s->calls));
    json_object_set_new(o, "gpu_us", json_real(s->gpu_us));
    int fk = r->m.flops >= 0, bk = r->m.bytes >= 0;
    json_object_set_new(o, "flops", num_or_null(s->flops, fk));
    json_object_set_new(o, "bytes", num_or_null(s->bytes, bk));
    double t = s->gpu_us * 1e-6;
    json_object_set_new(o, "tflops", num_or_null(s->flops / t / 1e12, fk && t > 0));
    json_object_set_new(o, "gbps", num_or_null(s->bytes / t / 1e9, bk && t > 0));
    json_object_set_new(o, "intensity", num_or_null(s->flops / s->bytes, fk && bk && s->bytes > 0));
    const char *used;
    peak_for(e, &r->m, s->kc, &used);
    /* the roofs: fc, fm the achieved shares of the compute and memory roofs */
    int have_c = fk && s->peak_us > 0 && t > 0, have_m = bk && e->bw > 0 && t > 0;
    double fc = have_c ? s->peak_s / t : 0, fm = have_m ? s->bytes / e->bw / t : 0;
    const char *bound = NULL, *note = NULL;
    double frac = 0;
    int known = 0;
    char buf[320];
    int copies_only = s->kc[0] + s->kc[1] + s->kc[2] <= 0;
    if (copies_only) {
        note = "copies and memsets only: their roof is the link they cross (PCIe or NVLink for a host copy), not judged";
    } else if (have_m && fk && (r->m.flops == 0 || r->m.kind == FL_COPY)) {
        bound = "memory", frac = fm, known = 1, used = NULL;
    } else if (have_c && have_m && s->bytes > 0) {
        double peak = s->flops / s->peak_s, ridge = peak / e->bw, I = s->flops / s->bytes;
        bound = I >= ridge ? "compute" : "memory";
        frac = I >= ridge ? fc : fm;
        known = 1;
    }
    if (known && (fc > 1.0 || fm > 1.0)) {
        snprintf(buf, sizeof buf, "achieved %.0f%% of the assumed %s roof: over 100%%, so the assumption (device, precision or FLOP count) is wrong",
                 100 * (fc > fm ? fc : fm), fc > fm ? (used ? used : "compute") : "memory bandwidth");
        note = buf;
        bound = NULL;
        known = 0;
    } else if (known && frac < EFFIC_LATENCY_FRACTION) {
        bound = "latency";
    }
    json_object_set_new(o, "bound", bound ? json_string(bound) : json_null());
    json_object_set_new(o, "peak_fraction", num_or_null(frac, known));
    json_object_set_new(o, "peak_used", used && have_c ? json_string(used) : json_null());
    json_object_set_new(o, "peak_note", note ? json_string(note) : json_null());
    return o;
}

static json_t *device_json(const effic_state *e) {
    if (!e->dev && !(e->bw > 0)) return json_null();
    json_t *o = json_object(), *pk = json_object();
    json_object_set_new(o, "name", json_string(e->dev_name));
    json_object_set_new(o, "row", e->dev ? json_string(e->dev->id) : json_null());
    json_object_set_new(o, "label", e->dev ? json_string(e->dev->label) : json_null());
    json_object_set_new(pk, "fp32", e->dev ? json_real(e->dev->fp32) : json_null());
    json_object_set_new(pk, "tf32_tensor", e->dev && e->dev->tf32 > 0 ? json_real(e->dev->tf32) : json_null());
    json_object_set_new(pk, "bf16_tensor", e->dev && e->dev->bf16 > 0 ? json_real(e->dev->bf16) : json_null());
    json_object_set_new(pk, "fp8_tensor", e->dev && e->dev->fp8 > 0 ? json_real(e->dev->fp8) : json_null());
    json_object_set_new(o, "peaks", pk);
    json_object_set_new(o, "bandwidth", json_real(e->bw));
    json_object_set_new(o, "bandwidth_source", json_string(e->bw_nsys ? "nsys" : "table"));
    return o;
}

int an_effic_doc(A *a, json_t **out) {
    effic_state *e = a->eff;
    *out = NULL;
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
    json_t *doc = json_object(), *session = json_object(), *ops = json_array(), *phases = json_array();
    if (!doc || !session || !ops || !phases) {
        json_decref(doc), json_decref(session), json_decref(ops), json_decref(phases);
        return ERR_NOMEM;
    }
    json_object_set_new(doc, "device", device_json(e));
    json_object_set_new(doc, "device_reason", e->dev ? json_null() : json_string(e->why));
    sum_figures(session, &e->all, total);
    json_object_set_new(session, "gpu_us", json_real(total));
    json_object_set_new(session, "tensor_core_fraction", num_or_null(kc[KC_TENSOR] / ktotal, ktotal > 0));
    json_t *pu = json_object();
    for (int i = 0; i < KC_N; i++) json_object_set_new(pu, flops_kernel_class_name(i), json_real(kc[i]));
    json_object_set_new(session, "kernel_us_by_class", pu);
    /* the window figures come with an_effic_window; null until then */
    json_object_set_new(session, "gpu_utilization", json_null());
    json_object_set_new(session, "sm_efficiency", json_null());
    json_object_set_new(session, "achieved_occupancy", json_null());
    json_object_set_new(doc, "session", session);
    /* rows by GPU time, the EFFIC_ROWS_OUT longest */
    size_t n = e->nrows + (e->other.s.calls ? 1 : 0);
    const erow **order = n ? malloc(n * sizeof *order) : NULL;
    if (n && !order) {
        json_decref(doc), json_decref(ops), json_decref(phases);
        return ERR_NOMEM;
    }
    for (size_t i = 0; i < e->nrows; i++) order[i] = &e->rows[i];
    if (e->other.s.calls) order[e->nrows] = &e->other;
    if (n) qsort(order, n, sizeof *order, row_cmp);
    double omitted_us = 0;
    for (size_t i = 0; i < n; i++) {
        if (i < EFFIC_ROWS_OUT) json_array_append_new(ops, row_json(a, e, order[i]));
        else omitted_us += order[i]->s.gpu_us;
    }
    free(order);
    json_object_set_new(doc, "operators", ops);
    json_object_set_new(doc, "operators_omitted",
                        json_pack("{s:I,s:f}", "rows", (json_int_t)(n > EFFIC_ROWS_OUT ? n - EFFIC_ROWS_OUT : 0), "gpu_us", omitted_us));
    for (size_t i = 0; i < e->nph; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "name", json_string(an_str(a, e->ph[i].name)));
        sum_figures(p, &e->ph[i].s, 0);
        json_array_append_new(phases, p);
    }
    json_object_set_new(doc, "phases", phases);
    json_object_set_new(doc, "limits", json_pack("{s:i,s:i,s:i,s:f}", "rows_kept", EFFIC_ROWS_MAX, "rows_listed", EFFIC_ROWS_OUT,
                                                 "phases_kept", EFFIC_PHASES_MAX, "latency_fraction", EFFIC_LATENCY_FRACTION));
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
    return 0;
}

/* ---- verdicts, as the suspect list and the report quote them ---- */

/* The row of op name with the most GPU time, NULL when there is none. */
static const json_t *row_of(const json_t *doc, const char *name) {
    const json_t *best = NULL, *r;
    size_t i;
    json_array_foreach(json_object_get(doc, "operators"), i, r) {
        const char *n = json_string_value(json_object_get(r, "name"));
        if (n && !strcmp(n, name) &&
            (!best || json_number_value(json_object_get(r, "gpu_us")) > json_number_value(json_object_get(best, "gpu_us"))))
            best = r;
    }
    return best;
}

json_t *an_effic_verdict(const json_t *doc, const char *name) {
    const json_t *r = row_of(doc, name), *dev = json_object_get(doc, "device");
    const char *bound = r ? json_string_value(json_object_get(r, "bound")) : NULL;
    static const char *const keys[] = {"tflops", "gbps", "intensity", "peak_fraction", "peak_used", "precision_class", "dtype", NULL};
    json_t *v = json_object();
    if (!v) return NULL;
    for (int k = 0; r && keys[k]; k++) {
        json_t *x = json_object_get(r, keys[k]);
        if (x) json_object_set(v, keys[k], x);
    }
    json_object_set_new(v, "bound", bound ? json_string(bound) : json_null());
    if (!bound) {
        const char *note = r ? json_string_value(json_object_get(r, "peak_note")) : NULL;
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
