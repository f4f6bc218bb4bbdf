/* suspects.c: the suspect list: each category of waste named by its culprit and ranked by
 * the time at stake (issue 19; definitions: tests/triage/oracle.py, which labels the corpus
 * the server is tested against).
 *
 * Owns the per-op launch statistics the host walk feeds (an_op_host, an_op_launch) and
 * turns them, with the idle labels of idle.c and a few passes over the GPU rows, into the
 * "suspects" document (GET /api/v1/sessions/{id}/suspects). Reads scratch.ev, igap, ccorr;
 * writes nothing to scratch but ccorr.
 *
 * Categories (at stake: at most what removing the culprit could save, in wall time):
 *   data_loading     host-wait idle under a DataLoader range
 *   host_sync        host-wait idle of gaps that start as a blocking sync returns, up to the
 *                    time the host was blocked (idle.c's sync rule)
 *   python_overhead  host-wait idle under a python_function, a user_annotation's own time or nothing
 *   launch_bound     host-wait idle under a short-kernel op, and kernel-wait idle of launches from one
 *   cpu_bound_op     host-wait idle under one other cpu_op (the largest one only)
 *   communication    host-wait idle under a collective range, plus exposed collective kernels
 *   copies_casts     data movement by kind: suspects_waste.c's rule (copies_rule), not this file's
 *   pageable_memcpy  the union of copies to or from pageable host memory
 *   compute_bound_op one non-GEMM, non-copy, non-data-movement op holding > COMPUTE_SHARE of the GPU time
 *   startup          the lead-in (trace start to first GPU activity) but its DataLoader
 *                    instants (data_loading's), labelled on the first launch's thread
 *   tail             the tail (last GPU activity's end to trace end) but its DataLoader
 *                    instants, labelled on the thread that launched the last activity
 *   allocator_churn  host-wait idle under an allocator call (cudaMalloc, cudaFree, ...) or empty_cache
 *   compilation      host-wait idle under a compile range or frame (dynamo, inductor) or a module load
 *   tokenization     host-wait idle under a tokenizer
 *   garbage_collection host-wait idle under the garbage collector
 *   synchronous_launch host-wait idle of gaps that start as a blocking kernel launch returns,
 *                    where most launches of the trace block (CUDA_LAUNCH_BLOCKING=1)
 *   copy_on_critical_path the union of host<->device copies from pinned memory (pageable ones
 *                    are pageable_memcpy's) less the union of kernels: GPU time no kernel hides
 *   memory_bound_op  one data-movement op (gather, scatter, index, cat, embedding: names.h
 *                    NF_MEM_OP) holding > COMPUTE_SHARE of the GPU time
 *   step_outlier     the steps longer than OUTLIER_RATIO x the median step, each one's excess
 *                    over the median; culprit: what that step did longer than the median step
 *   host_work        host-wait idle under any other runtime or driver call (its own time)
 *   cpu_threads      cpu_bound_op on a CPU-only trace when its op is a matrix op whose steady,
 *                    parallelisable calls (>= PARALLEL_MIN_FLOPS) reach no more than one
 *                    core's FLOP/s (ONE_CORE_GFLOPS): one thread where the host has many
 *   dominant_op      a target, not waste: the op whose kernels hold > COMPUTE_SHARE of the GPU
 *                    time when no category above names it; at stake: its GPU time; listed last
 * A suspect fires at FIRE_FRACTION of the wall (step_outlier whenever one step reaches
 * OUTLIER_RATIO x the median: one slow step in fifty is a cause too); healthy = GPU busy >=
 * HEALTHY_BUSY of the wall and nothing fired. A CPU-only trace labels every host instant of
 * every thread; a category's at stake is then its largest thread's. suspects_idle.c (issue 48)
 * gives each suspect its members, names a spread category by the range holding it, adds the
 * ranges that hold idle on their own, and counts per step only the work inside the steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/advice.h"
#include "analysis/an.h"
#include "analysis/names.h"
#include "analysis/suspects.h"
#include "analysis/suspects_recompute.h"
#include "analysis/suspects_waste.h"
#include "lib/err.h"
#include "lib/flops.h"
#include "lib/vec.h"
#include "lib/utf8.h"

#define FIRE_FRACTION 0.05          /* a suspect fires at this share of the wall */
#define HEALTHY_BUSY 0.90           /* healthy: GPU busy this share of the wall, nothing fired */
#define COMPUTE_SHARE 0.50          /* compute_bound_op: one op's kernels hold more than this of the GPU time */
#define SHORT_MIN_CALLS 10          /* short-kernel op: at least this many calls, ... */
#define SHORT_MAX_MEAN_HOST_US 1000 /* ... at most this host time per call, and less kernel time than host time */
#define FIRST_CALL_SHARE 0.5        /* cpu_bound_op: its longest call holds this share of its time: first-call work */
#define OUTLIER_RATIO 1.5           /* step_outlier: a step this many times the median step */
#define OUTLIER_MIN_STEPS 5         /* ... among at least this many steps */
#define OUTLIER_MAX_EVENTS (1 << 20) /* the host events of a step compared at most (step_culprit) */
#define ONE_CORE_GFLOPS 200.0       /* cpu_threads: a GEMM at most this fast runs on about one core (a core's FP32 FMA
                                     * peak is ~100 GFLOP/s with AVX2, ~190 with AVX-512, at 3 GHz) ... */
#define PARALLEL_MIN_FLOPS 1e8      /* ... and its calls are big enough to be split across cores (>= 0.5 ms on one) */

static const char *const cat_ids[] = {"data_loading", "host_sync", "python_overhead", "launch_bound", "cpu_bound_op",
                                      "communication", "copies_casts", "pageable_memcpy", "compute_bound_op", "startup", "tail",
                                      "allocator_churn", "compilation", "tokenization", "garbage_collection", "synchronous_launch",
                                      "copy_on_critical_path", "memory_bound_op", "step_outlier", "host_work", "dominant_op",
                                      "cpu_threads"};
_Static_assert(sizeof cat_ids / sizeof cat_ids[0] == C_N, "one id per category");
const char *category_name(int c) { return cat_ids[c]; }

/* ---- the walk's statistics ---- */

static opstat *stat_of(A *a, long name) {
    suspect_state *s = a->sus;
    int fresh;
    long i = INTERN_SLOT(s->op_keys, &name, sizeof name, s->ops, s->nops, s->capops, 64, &fresh);
    if (i < 0) return NULL;
    if (fresh) s->ops[i].name = name;
    return &s->ops[i];
}

/* A popped host frame: a cpu_op's call, or a runtime call's (allocator_churn's and
 * host_work's premises read their calls too). */
int an_op_host(A *a, const frame *f) {
    an_sync_walk(a, f->cls == EV_HOST_RT && an_flags(a, f->name) & NF_SYNC, an_flags(a, f->name) & NF_STEP, 0);
    if ((f->cls != EV_HOST_OP && f->cls != EV_HOST_RT) || f->kind == a->ua_kind) return 0;
    if (f->cls == EV_HOST_RT && an_flags(a, f->name) & (NF_LAUNCH | NF_SYNC)) return 0; /* most calls: no label, no statistics */
    opstat *o = stat_of(a, f->name);
    if (!o) return ERR_NOMEM;
    o->calls++;
    o->host_us += f->dur;
    if (f->dur > o->max_us) o->max_us = f->dur;
    /* CPU-only: a matrix op's FLOPs from its shapes (cpu_threads' premise) */
    if (a->idle->cpu_only && f->cls == EV_HOST_OP && f->shapes >= 0 && an_flags(a, f->name) & NF_GEMM_OP) {
        if (o->flops_shapes != f->shapes + 1) {
            flops_out m;
            flops_model(an_str(a, f->name), an_str(a, f->shapes), NULL, NULL, &m);
            o->flops_shapes = f->shapes + 1;
            o->flops_call = m.flops;
        }
        if (o->flops_call > 0) {
            o->flops += o->flops_call;
            o->flops_us += f->dur;
        }
    }
    return 0;
}

/* A launch r (a runtime call with GPU work) under the open ranges stack[0..depth). */
int an_op_launch(A *a, const hrow *r, const frame *stack, int depth) {
    suspect_state *s = a->sus;
    int inner = -1, outer_copy = -1, plain = 1;
    unsigned rf = an_flags(a, r->name);
    if (rf & NF_GRAPH_LAUNCH) s->graph_launches++;
    if (r->gk > 0) an_sync_walk(a, 0, 0, 1);
    /* kernel launches, and those that returned after their kernels (synchronous_launch's premise) */
    if (rf & NF_LAUNCH && !(rf & NF_SYNC) && !r->gsync && an_launch_tells(r)) {
        s->launches++;
        if (an_launch_blocked(r)) s->blocking++;
    }
    for (int i = 0; i < depth; i++) {
        if (stack[i].cls != EV_HOST_OP) continue;
        unsigned f = an_flags(a, stack[i].name);
        if (f & NF_COPY_OP && outer_copy < 0) outer_copy = i;
        if (f & (NF_GEMM_OP | NF_COPY_OP | NF_COMM_RANGE)) plain = 0;
        if (stack[i].kind != a->ua_kind) inner = i;
    }
    if (r->gk > 0) {
        /* kernel time under each distinct op of the stack (short-kernel ops) */
        for (int i = 0; i < depth; i++) {
            if (stack[i].cls != EV_HOST_OP || stack[i].kind == a->ua_kind) continue;
            int seen = 0;
            for (int j = 0; j < i && !seen; j++) seen = stack[j].name == stack[i].name && stack[j].cls == EV_HOST_OP;
            opstat *o = seen ? NULL : stat_of(a, stack[i].name);
            if (!seen && !o) return ERR_NOMEM;
            if (o) o->kern_under += r->gk;
        }
        if (inner >= 0 && plain) {
            opstat *o = stat_of(a, stack[inner].name);
            if (!o) return ERR_NOMEM;
            o->kern_self += r->gk;
        } else if (inner < 0) {
            s->kern_no_op += r->gk;
        }
    }
    if (outer_copy >= 0 && r->corr >= 0) {
        if (!s->ccorr_ins && !(s->ccorr_ins = an_prep(a, "INSERT OR IGNORE INTO wscratch.ccorr VALUES (?, ?)"))) return ERR_DB;
        sqlite3_bind_int64(s->ccorr_ins, 1, r->corr);
        sqlite3_bind_int64(s->ccorr_ins, 2, stack[outer_copy].name);
        int rc = sqlite3_step(s->ccorr_ins) == SQLITE_DONE ? 0 : an_dberr(a);
        sqlite3_reset(s->ccorr_ins);
        return rc;
    }
    return 0;
}

/* Why a lookup, not a scan: category_of asks once per idle label, and a trace of 100k
 * distinct op names has as many labels as names: a scan was 10^10 compares (issue 43: 100k
 * names in a 0.65 MB upload took 17-25 s of CPU). */
static const opstat *find_stat(const A *a, long name) {
    suspect_state *s = a->sus;
    long i = intern_lookup(s->op_keys, (const char *)&name, sizeof name);
    return i >= 0 && (size_t)i < s->nops ? &s->ops[i] : NULL;
}

/* A short-kernel op: its kernels are shorter than the op itself (launch overhead, not CPU work). */
static int is_short(const A *a, long name) {
    const opstat *o = find_stat(a, name);
    return o && o->calls >= SHORT_MIN_CALLS && o->kern_under > 0 && o->kern_under < o->host_us &&
           o->host_us / (double)o->calls <= SHORT_MAX_MEAN_HOST_US;
}

/* ---- contributions per category ---- */

static int credit(tally *t, int cat, long name, long track, double us) {
    if (us <= 0) return 0;
    long key[3] = {cat, name, track};
    int fresh;
    long i = INTERN_SLOT(t->keys, key, sizeof key, t->c, t->n, t->cap, 64, &fresh);
    if (i < 0) return ERR_NOMEM;
    if (fresh) t->c[i] = (contrib){cat, name, track, 0};
    t->c[i].us += us;
    return 0;
}

/* Whether the trace's kernel launches mostly block until their kernels end. */
static int launches_block(const A *a) { return a->sus->launches > 0 && 2 * a->sus->blocking >= a->sus->launches; }

/* The category of an idle label, C_N for none. Named host work comes before what kind of
 * range holds it: a tokenizer in a python_function is tokenization, not Python. */
int category_of(const A *a, const idle_sum *s) {
    unsigned f = an_flags(a, s->name);
    switch (s->type) {
    case LB_DATALOADER: case LB_LEAD_DATA: case LB_TAIL_DATA: return C_DATA;
    case LB_LEAD: return C_START;
    case LB_TAIL: return C_TAIL;
    case LB_SYNC: return C_SYNC;
    case LB_SYNC_LAUNCH: return launches_block(a) ? C_SYNC_LAUNCH : C_SYNC;
    case LB_KWAIT_OP: return is_short(a, s->name) ? C_LAUNCH : C_N;
    case LB_NO_LAUNCH: case LB_KWAIT_RANGE: case LB_KWAIT_RT: return C_N;
    default: break;
    }
    if (f & NF_COMM_RANGE) return C_COMM;
    if (f & NF_GC) return C_GC;
    if (f & NF_TOKENIZE) return C_TOKENIZE;
    if (f & NF_COMPILE) return C_COMPILE;
    if (a->idle->cpu_only && s->type != LB_OP) return C_PY; /* cseg's categories (idle.c cpu_piece) */
    if (f & NF_ALLOC) return C_ALLOC;
    if (s->type == LB_RT) return C_HOST_WORK;
    if (s->type == LB_RANGE_HOST) return a->t->source && !strcmp(a->t->source, "nsys") ? C_HOST_WORK : C_PY;
    if (s->type == LB_OP) return is_short(a, s->name) ? C_LAUNCH : C_CPU;
    return C_PY;
}

/* A union of intervals fed in start order; its length. */
typedef struct ivu { double s, e, len; int any; } ivu;
static void ivu_add(ivu *u, double s, double e) {
    if (u->any && s <= u->e) {
        if (e > u->e) u->e = e;
        return;
    }
    if (u->any) u->len += u->e - u->s;
    u->s = s;
    u->e = e;
    u->any = 1;
}
static double ivu_len(const ivu *u) { return u->len + (u->any ? u->e - u->s : 0); }

/* The union of what q returns (ts, te, culprit id, ordered by ts), credited to category cat:
 * the whole union goes to the culprit with the most summed time. */
static int union_credit(tally *t, sqlite3_stmt *q, int cat, double *len) {
    ivu u = {0, 0, 0, 0};
    intern *k = intern_new();
    double *by = NULL;
    size_t nby = 0, capby = 0;
    int rc = k ? 0 : ERR_NOMEM, src;
    while (!rc && (src = sqlite3_step(q)) == SQLITE_ROW) {
        double ts = sqlite3_column_double(q, 0), te = sqlite3_column_double(q, 1);
        long name = (long)sqlite3_column_int64(q, 2);
        ivu_add(&u, ts, te);
        int fresh;
        long i = INTERN_SLOT(k, &name, sizeof name, by, nby, capby, 16, &fresh);
        if (i < 0) rc = ERR_NOMEM;
        else by[i] += te - ts;
    }
    long best = -1;
    double bv = -1;
    for (size_t i = 0; !rc && i < nby; i++)
        if (by[i] > bv) { bv = by[i]; best = *(const long *)intern_str(k, (long)i); }
    *len = ivu_len(&u);
    if (!rc && best >= 0) rc = credit(t, cat, best, -1, *len);
    intern_free(k);
    free(by);
    sqlite3_finalize(q);
    return rc;
}

/* The union of a target set of GPU rows less the union of the others, both streamed in
 * start order from q (ts, te, is_target, culprit id). *len: the target union's length,
 * *exposed: its part no other row covers, *best: the culprit with the most target time. */
typedef struct exposure { double len, exposed; long best; int any; } exposure;

static int exposed_sweep(sqlite3_stmt *q, exposure *x) {
    /* Sweep: target intervals merged (cs, ce); the other work's union so far reaches cover.
     * Pieces of [s, e) not covered by other work are only known once later other work is
     * seen, so target intervals are closed when the next row starts past them. */
    double cs = 0, ce = -INFINITY, cover = -INFINITY, best_us = -1, tend = -INFINITY;
    intern *k = intern_new();
    double *by = NULL;
    size_t nby = 0, capby = 0;
    int rc = k ? 0 : ERR_NOMEM;
    typedef struct piece { double s, e; } piece;
    piece *open = NULL;
    size_t nopen = 0, capopen = 0;
    *x = (exposure){0, 0, -1, 0};
    while (!rc && sqlite3_step(q) == SQLITE_ROW) {
        double ts = sqlite3_column_double(q, 0), te = sqlite3_column_double(q, 1);
        if (sqlite3_column_int(q, 2)) {
            long name = (long)sqlite3_column_int64(q, 3);
            int fresh;
            long i = INTERN_SLOT(k, &name, sizeof name, by, nby, capby, 16, &fresh);
            if (i < 0) { rc = ERR_NOMEM; break; }
            by[i] += te - ts;
            if (x->any && ts <= ce) {
                if (te > ce) ce = te;
            } else {
                if (x->any) x->len += ce - cs;
                cs = ts;
                ce = te;
                x->any = 1;
            }
            /* the uncovered part of [ts, te) so far: past cover, and past the targets before it (collectives that overlap
             * each other are measured once: their union against the other work) */
            double s0 = ts > cover ? ts : cover;
            if (tend > s0) s0 = tend;
            if (te > tend) tend = te;
            if (te > s0) {
                if (VEC_RESERVE(open, capopen, nopen + 1, 16)) { rc = ERR_NOMEM; break; }
                open[nopen++] = (piece){s0, te};
            }
        } else {
            size_t j = 0; /* other work [ts, te) covers what of the open pieces lies inside it */
            for (size_t i = 0; i < nopen; i++) {
                piece p = open[i];
                if (p.e <= ts) { x->exposed += p.e - p.s; continue; } /* closed before this work: exposed for good */
                if (p.s < ts) { x->exposed += ts - p.s; p.s = ts; }
                if (p.e <= te) continue;                              /* covered */
                if (p.s < te) p.s = te;
                open[j++] = p;
            }
            nopen = j;
            if (te > cover) cover = te;
        }
    }
    for (size_t i = 0; i < nopen; i++) x->exposed += open[i].e - open[i].s;
    if (x->any) x->len += ce - cs;
    free(open);
    sqlite3_finalize(q);
    if (x->exposed > x->len) x->exposed = x->len; /* pieces overlap one another when targets overlap: cap at the union */
    for (size_t i = 0; !rc && i < nby; i++)
        if (by[i] > best_us) { best_us = by[i]; x->best = *(const long *)intern_str(k, (long)i); }
    intern_free(k);
    free(by);
    return rc;
}

/* Collective kernels not hidden behind other GPU work: union(comm) - union(rest). A trace
 * with no collective kernel's name skips the query: it sorted every GPU activity by start
 * for nothing (130,000 of them in a 150 MB many-names trace: the suspects step 235-241 ->
 * 173-177 ms). */
static int comm_exposed(A *a, tally *t, double gpu_busy) {
    if (!an_any_flagged(a, NF_COMM_KERNEL)) return 0; /* no row could be comm */
    sqlite3_stmt *q = an_prep(a, "SELECT ts, te, (fp_flags(name) & ?1) != 0, name FROM scratch.ev WHERE cls = 2 ORDER BY ts");
    if (!q) return ERR_DB;
    sqlite3_bind_int(q, 1, NF_COMM_KERNEL);
    exposure x;
    int rc = exposed_sweep(q, &x);
    if (rc || !x.any) return rc;
    t->evidence[C_COMM] = json_pack("{s:f,s:f,s:f}", "comm_kernel_us", x.len, "exposed_us", x.exposed, "overlap_us", x.len - x.exposed);
    if ((rc = an_comm_facts(a, t->evidence[C_COMM], x.len, gpu_busy - x.exposed))) return rc;
    return credit(t, C_COMM, x.best, -1, x.exposed);
}

/* Host<->device copies from pinned memory that no kernel hides (pageable ones are
 * pageable_memcpy's, device-to-device ones copies_casts'): on the GPU's critical path. The
 * culprit is the op that issued the copy (the outermost copy op: ccorr), else the copy.
 * Evidence: how much of it ran on a stream that also runs kernels (the compute stream),
 * which is the premise of "move it to a side stream". */
static int copy_critical(A *a, tally *t) {
    if (!an_any_flagged(a, NF_HOST_COPY)) return 0;
    const char *sql =
        "SELECT g.ts, g.te, g.kind = ?2, COALESCE(c.op, g.name) FROM scratch.ev g LEFT JOIN wscratch.ccorr c ON c.corr = g.corr"
        " WHERE g.cls = 2 AND (g.kind = ?3 OR (g.kind = ?2 AND (fp_flags(g.name) & ?1) = ?4)) ORDER BY g.ts";
    sqlite3_stmt *q = an_prep(a, sql);
    if (!q) return ERR_DB;
    sqlite3_bind_int(q, 1, NF_HOST_COPY | NF_PAGEABLE);
    sqlite3_bind_int64(q, 2, a->memcpy_kind);
    sqlite3_bind_int64(q, 3, a->kernel_kind);
    sqlite3_bind_int(q, 4, NF_HOST_COPY);
    exposure x;
    int rc = exposed_sweep(q, &x);
    if (rc || !x.any || x.exposed <= 0) return rc;
    /* the copies' time on streams that run kernels too */
    double on_compute = 0;
    sqlite3_stmt *st = an_prep(a, "SELECT TOTAL(g.dur) FROM scratch.ev g WHERE g.cls = 2 AND g.kind = ?2 AND (fp_flags(g.name) & ?1) = ?3"
                                  " AND EXISTS (SELECT 1 FROM scratch.ev k WHERE k.cls = 2 AND k.dev = g.dev AND k.stream = g.stream"
                                  " AND k.kind = ?4 LIMIT 1)");
    if (!st) return ERR_DB;
    sqlite3_bind_int(st, 1, NF_HOST_COPY | NF_PAGEABLE);
    sqlite3_bind_int64(st, 2, a->memcpy_kind);
    sqlite3_bind_int(st, 3, NF_HOST_COPY);
    sqlite3_bind_int64(st, 4, a->kernel_kind);
    if (sqlite3_step(st) == SQLITE_ROW) on_compute = sqlite3_column_double(st, 0);
    else rc = an_dberr(a);
    sqlite3_finalize(st);
    if (rc) return rc;
    t->evidence[C_COPY_CRIT] = json_pack("{s:f,s:f,s:f}", "copy_us", x.len, "exposed_us", x.exposed, "on_compute_stream_us", on_compute);
    return credit(t, C_COPY_CRIT, x.best, -1, x.exposed);
}

/* Pageable host<->device copies; none to find where no name is a pageable copy's. */
static int pageable(A *a, tally *t) {
    if (!an_any_flagged(a, NF_PAGEABLE)) return 0;
    sqlite3_stmt *q = an_prep(a, "SELECT ts, te, name FROM scratch.ev WHERE cls = 2 AND kind = ?1 AND (fp_flags(name) & ?2) != 0 ORDER BY ts");
    if (!q) return ERR_DB;
    sqlite3_bind_int64(q, 1, a->memcpy_kind);
    sqlite3_bind_int(q, 2, NF_PAGEABLE);
    double len = 0;
    int rc = union_credit(t, q, C_PAGE, &len);
    if (!rc && len > 0) t->evidence[C_PAGE] = json_pack("{s:f}", "pageable_copy_us", len);
    return rc;
}

/* Merges op name's efficiency verdict (an_effic_verdict) into its evidence ev. */
static void add_verdict(const A *a, json_t *ev, const char *name) {
    json_t *v = an_effic_verdict(a->effic, name);
    if (v) json_object_update(ev, v);
    json_decref(v);
}

/* The one non-GEMM, non-copy, non-collective op whose kernels hold most GPU time; kernels
 * launched under no op at all count by their own name (a collector or nsys session). */
static int compute_bound(A *a, tally *t) {
    suspect_state *s = a->sus;
    double total = 0, top = 0;
    long name = -1;
    for (size_t i = 0; i < a->t->ngpu_aggs; i++)
        if (a->t->gpu_aggs[i].cls == EV_GPU) total += a->t->gpu_aggs[i].total;
    for (size_t i = 0; i < s->nops; i++)
        if (s->ops[i].kern_self > top) { top = s->ops[i].kern_self; name = s->ops[i].name; }
    if (s->kern_no_op > top) { /* kernels with no op around their launch: the largest kernel row */
        for (size_t i = 0; i < a->t->ngpu_aggs; i++) {
            const gpu_agg *g = &a->t->gpu_aggs[i];
            if (g->cls != EV_GPU || g->kind != a->kernel_kind || an_flags(a, g->name) & (NF_GEMM_KERNEL | NF_COMM_KERNEL)) continue;
            if (g->total > top) { top = g->total; name = g->name; }
        }
    }
    if (name < 0 || total <= 0) return 0;
    char cut[EVIDENCE_NAME_MAX + 4];
    t->evidence[C_COMPUTE] = json_pack("{s:s,s:f,s:f}", "op", utf8_clip(an_str(a, name), EVIDENCE_NAME_MAX, cut, sizeof cut), "gpu_us",
                                       top, "share_of_gpu_time", top / total);
    if (top / total <= COMPUTE_SHARE || is_short(a, name)) return 0;
    add_verdict(a, t->evidence[C_COMPUTE], an_str(a, name));
    /* a gather, scatter, index or cat owning the GPU moves memory, it computes nothing */
    int cat = an_flags(a, name) & NF_MEM_OP ? C_MEMBOUND : C_COMPUTE;
    if (cat == C_MEMBOUND) t->evidence[C_MEMBOUND] = json_incref(t->evidence[C_COMPUTE]);
    return credit(t, cat, name, -1, top);
}

/* ---- the target of a busy GPU ---- */

/* The op whose kernels hold > COMPUTE_SHARE of the GPU time (the cpu_op row with the most
 * self CUDA, as the report's Top CUDA line), when no category names it already: a copy or
 * cast (copies_casts), a collective (communication), or compute_bound_op / memory_bound_op.
 * "One operator owns the run. Good. You have a target": the next question is its bound. */
static int dominant(A *a, tally *t) {
    double total = 0;
    for (size_t i = 0; i < a->t->ngpu_aggs; i++)
        if (a->t->gpu_aggs[i].cls == EV_GPU) total += a->t->gpu_aggs[i].total;
    const agg *top = NULL, *second = NULL;
    for (size_t i = 0; i < a->naggs; i++) {
        const agg *g = &a->aggs[i];
        if (g->grouping || g->kind == a->ua_kind || strcmp(an_str(a, g->kind), "cpu_op") || g->self_cuda <= 0) continue;
        if (!top || g->self_cuda > top->self_cuda) second = top, top = g;
        else if (!second || g->self_cuda > second->self_cuda) second = g;
    }
    if (!top || total <= 0 || top->self_cuda / total <= COMPUTE_SHARE) return 0;
    unsigned f = an_flags(a, top->name);
    if (f & (NF_COPY_OP | NF_COMM_RANGE) || is_short(a, top->name)) return 0;
    for (size_t i = 0; i < t->n; i++)
        if ((t->c[i].cat == C_COMPUTE || t->c[i].cat == C_MEMBOUND) && t->c[i].name == top->name) return 0;
    char cut[EVIDENCE_NAME_MAX + 4];
    json_t *ev = json_pack("{s:s,s:f,s:f}", "op", utf8_clip(an_str(a, top->name), EVIDENCE_NAME_MAX, cut, sizeof cut), "gpu_us",
                           top->self_cuda, "share_of_gpu_time", top->self_cuda / total);
    if (!ev) return ERR_NOMEM;
    if (second) json_object_set_new(ev, "next_op", json_string(utf8_clip(an_str(a, second->name), EVIDENCE_NAME_MAX, cut, sizeof cut)));
    add_verdict(a, ev, an_str(a, top->name));
    t->evidence[C_DOMINANT] = ev;
    return credit(t, C_DOMINANT, top->name, -1, top->self_cuda);
}

/* ---- one-step outliers ---- */

/* A host event inside a compared step, clipped to it. */
typedef struct win_ev { double ts, te; long name; } win_ev;
typedef struct window { double ts, te; win_ev *ev; size_t n, cap; } window;
typedef struct step_pair { window w[2]; } step_pair; /* the outlier, the typical step */

static int keep_in_window(A *a, void *ctx, const hrec *h) {
    step_pair *p = ctx;
    if (h->cls != EV_HOST_OP && h->cls != EV_HOST_RT && h->cls != HREC_PY) return 0;
    for (int k = 0; k < 2; k++) {
        window *w = &p->w[k];
        if (h->te <= w->ts || h->ts >= w->te || w->n >= OUTLIER_MAX_EVENTS) continue;
        if (VEC_RESERVE(w->ev, w->cap, w->n + 1, 256)) return ERR_NOMEM;
        /* a step's own time reads as untraced (-1): every ProfilerStep#N has a name of its own */
        long name = an_flags(a, h->name) & NF_STEP ? -1 : h->name;
        w->ev[w->n++] = (win_ev){h->ts > w->ts ? h->ts : w->ts, h->te < w->te ? h->te : w->te, name};
    }
    return 0;
}

static int win_cmp(const void *x, const void *y) {
    const win_ev *p = x, *q = y;
    if (p->ts != q->ts) return p->ts < q->ts ? -1 : 1;
    return p->te > q->te ? -1 : p->te < q->te; /* the longer first: it holds the other */
}

/* Adds each name's innermost time in w (what the thread was doing, instant by instant, as
 * idle.c labels it) to col of by[] (keyed by name in keys); the step's instants under no
 * event go to -1 (untraced). */
static int window_times(window *w, intern *keys, double (**by)[2], size_t *n, size_t *cap, int col) {
    qsort(w->ev, w->n, sizeof *w->ev, win_cmp);
    win_ev *stack = malloc((w->n + 1) * sizeof *stack);
    if (!stack) return ERR_NOMEM;
    int depth = 0, rc = 0;
    double cur = w->ts;
    /* label [cur, t) with the innermost open event, popping what ended */
#define WIN_LABEL(t)                                                                                  \
    while (!rc && cur < (t)) {                                                                        \
        while (depth && stack[depth - 1].te <= cur) depth--;                                          \
        double nx = depth && stack[depth - 1].te < (t) ? stack[depth - 1].te : (t);                  \
        long nm = depth ? stack[depth - 1].name : -1;                                                 \
        int fresh;                                                                                    \
        long i = INTERN_SLOT(keys, &nm, sizeof nm, *by, *n, *cap, 64, &fresh);                        \
        if (i < 0) rc = ERR_NOMEM;                                                                    \
        else (*by)[i][col] += nx - cur;                                                               \
        cur = nx;                                                                                     \
    }
    for (size_t i = 0; i < w->n && !rc; i++) {
        WIN_LABEL(w->ev[i].ts);
        while (depth && (w->ev[i].ts >= stack[depth - 1].te || w->ev[i].te > stack[depth - 1].te)) depth--;
        stack[depth++] = w->ev[i];
    }
    WIN_LABEL(w->te);
#undef WIN_LABEL
    free(stack);
    return rc;
}

/* What step o did longer than step typ: the name whose time (innermost, on the step's
 * thread) grew the most, -1 for untraced time. *grew: by how much. */
static int step_culprit(A *a, const step *o, const step *typ, long *culprit, double *grew) {
    step_pair p;
    memset(&p, 0, sizeof p);
    p.w[0].ts = o->ts, p.w[0].te = o->te;
    p.w[1].ts = typ->ts, p.w[1].te = typ->te;
    intern *keys = intern_new();
    double (*by)[2] = NULL;
    size_t n = 0, cap = 0;
    int rc = keys ? an_track_recs(a, o->track, keep_in_window, &p) : ERR_NOMEM;
    if (!rc && typ->track != o->track) rc = ERR_INTERNAL; /* both are the steps' thread's */
    for (int k = 0; k < 2 && !rc; k++) rc = window_times(&p.w[k], keys, &by, &n, &cap, k);
    *culprit = -1;
    *grew = -INFINITY;
    for (size_t i = 0; !rc && i < n; i++)
        if (by[i][0] - by[i][1] > *grew) { *grew = by[i][0] - by[i][1]; *culprit = *(const long *)intern_str(keys, (long)i); }
    free(p.w[0].ev);
    free(p.w[1].ev);
    free(by);
    intern_free(keys);
    return rc;
}

static int cmp_step_ts(const void *x, const void *y) {
    double p = ((const step *)x)->ts, q = ((const step *)y)->ts;
    return p < q ? -1 : p > q;
}

/* By duration, ties by start: the median step is one step, whatever qsort's order of equals. */
static int cmp_step_dur(const void *x, const void *y) {
    const step *p = x, *q = y;
    if (p->dur != q->dur) return p->dur < q->dur ? -1 : 1;
    return p->ts < q->ts ? -1 : p->ts > q->ts;
}

/* Steps of OUTLIER_RATIO x the median step or more: each one's excess over the median goes
 * to what it did longer than the typical step (the step nearest the median). The five
 * longest are compared event by event; the excess of any others goes to the longest's
 * culprit. */
static int step_outliers(A *a, tally *t, const step *steps, size_t n) {
    if (n < OUTLIER_MIN_STEPS) return 0;
    step *v = malloc(n * sizeof *v);
    if (!v) return ERR_NOMEM;
    memcpy(v, steps, n * sizeof *v);
    /* With a GPU, steps count inside its window: the time before its first work and after
     * its last is startup's and tail's (a capture that ends 80 ms after the last step's
     * work made that step an "outlier" of its own tail). */
    if (!a->idle->cpu_only)
        for (size_t i = 0; i < n; i++) {
            if (v[i].ts < a->idle->w0) v[i].ts = a->idle->w0;
            if (v[i].te > a->idle->w1) v[i].te = a->idle->w1;
            v[i].dur = v[i].te > v[i].ts ? v[i].te - v[i].ts : 0;
        }
    qsort(v, n, sizeof *v, cmp_step_dur);
    const step *typ = &v[(size_t)ceil(0.5 * (double)n) - 1]; /* the median by nearest rank */
    double med = typ->dur;
    int rc = 0, k = 0;
    long first = -1;
    json_t *rows = json_array();
    for (size_t i = n; i-- > 0 && !rc && med > 0 && v[i].dur >= OUTLIER_RATIO * med; k++) {
        long culprit = first;
        double grew = 0;
        if (k < 5) rc = step_culprit(a, &v[i], typ, &culprit, &grew);
        if (rc) break;
        if (k == 0) first = culprit;
        rc = credit(t, C_OUTLIER, culprit, -1, v[i].dur - med);
        char cut[EVIDENCE_NAME_MAX + 4];
        if (!rc && k < 5)
            json_array_append_new(rows, json_pack("{s:s,s:f,s:f,s:s,s:f}", "step", an_str(a, v[i].name), "dur_us", v[i].dur, "excess_us",
                                                  v[i].dur - med, "culprit", culprit >= 0 ? utf8_clip(an_str(a, culprit), EVIDENCE_NAME_MAX, cut, sizeof cut)
                                                                                          : "(untraced)", "culprit_grew_us", grew));
    }
    if (!rc && k > 0)
        t->evidence[C_OUTLIER] = json_pack("{s:f,s:s,s:I,s:o}", "median_step_in_gpu_window_us", med, "typical_step", an_str(a, typ->name),
                                           "outlier_steps", (json_int_t)k, "steps", rows);
    else
        json_decref(rows);
    free(v);
    return rc;
}

/* ---- CPU-only: wall time in priority order ---- */

/* A stream's pieces (cseg.c, by start) read merged: one union interval at a time. */
typedef struct mstream { cseg_stream *q; int has; double ps, pe; } mstream;

static void ms_start(mstream *m, cseg_stream *q) {
    m->q = q;
    m->has = cseg_next(q, &m->ps, &m->pe);
}

static int ms_next(mstream *m, double *s, double *e) {
    if (!m->has) return 0;
    *s = m->ps;
    *e = m->pe;
    double ns, ne;
    while ((m->has = cseg_next(m->q, &ns, &ne))) {
        if (ns > *e) { m->ps = ns; m->pe = ne; return 1; }
        if (ne > *e) *e = ne;
    }
    return 1;
}

/* length(union(A) - union(T)), both streamed in start order. */
static double minus_len(mstream *A, mstream *T) {
    double len = 0, as, ae, ts = 0, te = 0;
    int t = ms_next(T, &ts, &te);
    while (ms_next(A, &as, &ae)) {
        double cur = as;
        while (t && te <= cur) t = ms_next(T, &ts, &te);
        while (t && ts < ae) {
            if (ts > cur) len += ts - cur;
            if (te > cur) cur = te;
            if (te > ae) break;
            t = ms_next(T, &ts, &te);
        }
        if (cur < ae) len += ae - cur;
    }
    return len;
}

static int cmp_contrib_name(const void *x, const void *y) {
    const contrib *a = *(const contrib *const *)x, *b = *(const contrib *const *)y;
    if (a->name != b->name) return a->name < b->name ? -1 : 1;
    return a < b ? -1 : a > b; /* t's order within a name: the sums add up as they did */
}

/* The name of category cat with the most labelled time, over all threads (ties: the first
 * name met in t). Why sorted runs, not a sum per contribution: a CPU-only trace of 100k
 * names on a few threads has 100k contributions a category, and the nested sums were
 * quadratic (issue 43). On no memory, the largest single contribution. */
static long top_name(const tally *t, int cat) {
    const contrib **v = malloc((t->n ? t->n : 1) * sizeof *v);
    size_t n = 0;
    long best = -1;
    double bv = -1;
    for (size_t i = 0; i < t->n; i++) {
        if (t->c[i].cat != cat) continue;
        if (v) v[n++] = &t->c[i];
        else if (t->c[i].us > bv) { bv = t->c[i].us; best = t->c[i].name; }
    }
    if (!v) return best;
    qsort(v, n, sizeof *v, cmp_contrib_name);
    const contrib *first = NULL; /* the earliest contribution of the best name, for ties */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double sum = 0;
        const contrib *f = v[i]; /* the name's earliest contribution: v is in t's order within it */
        for (; j < n && v[j]->name == v[i]->name; j++) sum += v[j]->us;
        if (sum > bv || (sum == bv && first && f < first)) { bv = sum; best = v[i]->name; first = f; }
        i = j;
    }
    free(v);
    return best;
}

/* Wall-clock instants go to the first category, in priority order (collectives, data
 * loading, the one largest cpu_op, Python), that labels them on some thread: a main thread
 * waiting in its record_function while the gloo thread runs the collective gives that time
 * to the collective, not to Python. at[c]: each category's share, the union of its pieces
 * less the union of the pieces of the categories before it (the cpu_op category: its top
 * op's pieces only). A category with no piece is skipped (its share is 0, it takes nothing
 * from the ones after it). */
static int cpu_priority(A *a, const tally *t, double at[C_N]) {
    static const int order[CSEG_N] = {C_COMM, C_DATA, C_GC, C_TOKENIZE, C_COMPILE, C_CPU, C_PY};
    _Static_assert(CSEG_N == 7 && CSEG_CPU == 5, "order[k] is cseg category k's (an.h)");
    int before[CSEG_N], nbefore = 0, rc = 0;
    long names[CSEG_N];
    for (int k = 0; !rc && k < CSEG_N; k++) {
        int cat = order[k];
        long name = cat == C_CPU ? top_name(t, C_CPU) : -1;
        if ((cat == C_CPU && name < 0) || !a->idle->ncseg[k]) continue;
        cseg_stream qa, qt = {0};
        rc = cseg_open(a, &qa, &k, &name, 1);
        if (!rc) rc = cseg_open(a, &qt, before, names, nbefore);
        if (!rc) {
            mstream A, T;
            ms_start(&A, &qa);
            ms_start(&T, &qt);
            at[cat] = minus_len(&A, &T);
            rc = qa.rc ? qa.rc : qt.rc;
        }
        cseg_close(&qa);
        cseg_close(&qt);
        before[nbefore] = k;
        names[nbefore++] = name;
    }
    return rc;
}

/* ---- the document ---- */

/* p in [0, 1] of sorted v (nearest rank: v[ceil(p n) - 1]). */
static double nearest_rank(const double *v, size_t n, double p) {
    size_t k = (size_t)ceil(p * (double)n);
    return v[k > 0 ? k - 1 : 0];
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The step figures of n > 0 durations d (sorted here) whose sum, in their order, is sum. */
static json_t *dur_stats(double *d, size_t n, double sum) {
    qsort(d, n, sizeof *d, cmp_double);
    return json_pack("{s:I,s:f,s:f,s:f,s:f,s:f}", "count", (json_int_t)n, "mean_us", sum / (double)n, "p50_us", nearest_rank(d, n, 0.5),
                     "p90_us", nearest_rank(d, n, 0.9), "min_us", d[0], "max_us", d[n - 1]);
}

static json_t *steps_doc(A *a) {
    if (!a->nsteps) return json_null();
    double *d = malloc(a->nsteps * sizeof *d), sum = 0;
    if (!d) return NULL;
    for (size_t i = 0; i < a->nsteps; i++) sum += d[i] = a->steps[i].dur;
    json_t *o = dur_stats(d, a->nsteps, sum);
    free(d);
    return o;
}

/* How to leave one-time start-up out of the next capture, by who made the trace. */
static const char *steady_window(const char *source) {
    if (!strcmp(source, "nsys")) return "capture a steady-state window (nsys profile --capture-range=cudaProfilerApi around the loop, or --delay)";
    if (!strcmp(source, "firstpass"))
        return "record a longer run (the collector records the whole process) with the loop in an NVTX range, and compare that phase";
    return "profile a steady-state window after warm-up steps (torch.profiler.schedule(wait=1, warmup=1, active=3))";
}

/* How to end the next capture with the work, by who made the trace. */
static const char *end_window(const char *source) {
    if (!strcmp(source, "nsys")) return "end the capture with the loop (cudaProfilerStop() with nsys profile --capture-range=cudaProfilerApi, or --duration)";
    if (!strcmp(source, "firstpass"))
        return "put the loop in an NVTX range and compare that phase (the collector records until the process exits)";
    return "end it with the last step's GPU work (call prof.step() right after each step and stop the profiler there)";
}

/* What a suspect's advice is written from: its category, culprit and evidence, and what the
 * trace says of its premises. graphs: "" or how many graph launches the trace has ("640
 * launches, 32 a step"): where the launches are already graphs, "capture it in a CUDA graph"
 * is advice the team has taken. */
typedef struct advice_in {
    int cat;
    const char *culprit;
    const json_t *ev;        /* the category's evidence (t->evidence[cat]), NULL for none */
    const opstat *op;        /* the culprit's walk statistics, NULL for none */
    int cpu_only, rocm, blocking_launches;
    const char *source, *graphs;
    unsigned flags;          /* the culprit's name flags (names.h) */
    int compiled;            /* the trace runs a torch.compile'd model (NF_COMPILED names) */
    int sync_origin;         /* host_sync: where the sync comes from (advice.h) */
    const char *blocker;     /* what keeps the loop out of a graph, "" nothing (advice.h: an_graph_blocker) */
} advice_in;

static double ev_num(const json_t *ev, const char *k) { return json_number_value(json_object_get(ev, k)); }
static const char *ev_str(const json_t *ev, const char *k) {
    const char *v = json_string_value(json_object_get(ev, k));
    return v ? v : "";
}

/* " It is <bound>-bound: <figure>, <share> of the <peak>." of an op's evidence, "" without a bound. */
static void bound_phrase(const json_t *ev, char *out, size_t n) {
    char p[256];
    an_effic_phrase(ev, p, sizeof p);
    if (*p) utf8_snprintf(out, n, " It is %s.", p);
    else *out = '\0';
}

/* The next experiment of a suspect, naming its culprit; each premise checked before its
 * advice is given (issue 41). */
static void next_experiment(const advice_in *in, char *out, size_t n) {
    const char *culprit = in->culprit, *graphs = in->graphs;
    int cpu_only = in->cpu_only, rocm = in->rocm;
    /* "(untraced)" names no place: the time is outside every traced range */
    int untraced = !strcmp(culprit, "(untraced)");
    const char *who = untraced ? "Host time outside any traced range (untraced)" : culprit, *runs = untraced ? " passes" : " runs";
    char b[320] = "";
    switch (in->cat) {
    case C_DATA:
        /* a CPU-only trace has no GPU to overlap nor pinned copies to make */
        if (cpu_only)
            utf8_snprintf(out, n, "Load data in worker processes: DataLoader(num_workers=4 or more, persistent_workers=True), so that %s "
                     "overlaps the model's own work; re-profile and compare the time per step", culprit);
        else
            utf8_snprintf(out, n, "Load data in worker processes: DataLoader(num_workers=4 or more, pin_memory=True, persistent_workers=True), "
                     "so that %s overlaps the GPU; re-profile and compare GPU idle per step", culprit);
        return;
    case C_SYNC:
        an_sync_advice(in->sync_origin, culprit, rocm, out, n);
        return;
    case C_SYNC_LAUNCH:
        utf8_snprintf(out, n, "Kernel launches block until their kernels finish (%.0f of %.0f launches, %s among them): unset "
                 "CUDA_LAUNCH_BLOCKING (or %s), take any stream synchronize out of the launch path and launch on a non-blocking stream, so "
                 "the host queues work ahead of the GPU; compare GPU idle per step", ev_num(in->ev, "blocking_launches"), ev_num(in->ev, "launches"),
                 culprit, rocm ? "AMD_SERIALIZE_KERNEL, HIP_LAUNCH_BLOCKING" : "a debugging wrapper that synchronizes");
        return;
    case C_PY:
        /* CPU-only traces leave untraced time unlabelled (idle.c: cpu_piece): GPU traces only */
        if (untraced) culprit = "the host time outside any traced range (untraced; re-profile with with_stack=True to name it)";
        if (cpu_only)
            utf8_snprintf(out, n, "Cut the Python around %s: vectorize the per-item work, move it out of the loop, or torch.compile the step; "
                     "re-profile with with_stack=True to see which lines hold the time", culprit);
        else if (in->blocker && *in->blocker)
            utf8_snprintf(out, n, "Take Python out of the launch path in %s: vectorize the per-token work and fuse the small ops with "
                     "torch.compile; a %s cannot hold this loop with %s inside it: remove that sync first (static shapes, the "
                     "value kept on the GPU); compare GPU idle per step", culprit, rocm ? "HIP graph" : "CUDA graph", in->blocker);
        else if (in->compiled && !*graphs)
            utf8_snprintf(out, n, "Take Python out of the launch path in %s: the step already runs compiled (torch.compile), so replay it "
                     "as a %s (torch.compile mode=\"reduce-overhead\"), remove the graph breaks that leave Python between the compiled "
                     "regions (TORCH_LOGS=graph_breaks) and move the per-token Python out of the loop; compare GPU idle per step", culprit,
                     rocm ? "HIP graph" : "CUDA graph");
        else if (*graphs)
            utf8_snprintf(out, n, "Take Python out of the launch path in %s: the loop already replays %s graphs (%s), so capture more of "
                     "the step in each (the whole step in one graph: torch.compile mode=\"reduce-overhead\" or a larger capture) and move the "
                     "Python between replays out of the loop, so launches queue ahead of the GPU; compare GPU idle per step", culprit,
                     rocm ? "HIP" : "CUDA", graphs);
        else
            utf8_snprintf(out, n, "Take Python out of the launch path in %s: torch.compile the step or capture it in a %s, vectorize the "
                     "per-token work, so launches queue ahead of the GPU; compare GPU idle per step", culprit, rocm ? "HIP graph" : "CUDA graph");
        return;
    case C_LAUNCH:
        /* the premise of a graph: launches that cost more than their kernels because each one
         * is host overhead, not because each waits for its kernel */
        if (in->blocking_launches) {
            utf8_snprintf(out, n, "Launches of %s cost more than their kernels, but the launches block until their kernels end: unset "
                     "CUDA_LAUNCH_BLOCKING (or take the synchronize out of the launch path) first, then re-profile; capture the loop in a %s "
                     "only if launches still dominate", culprit, rocm ? "HIP graph" : "CUDA graph");
            return;
        }
        if (in->blocker && *in->blocker) {
            utf8_snprintf(out, n, "Launches of %s cost more than their kernels, but a %s cannot hold this loop with %s inside "
                     "it: remove that sync first (static shapes: a fixed capacity instead of the data-dependent size, the value kept on "
                     "the GPU), and fuse the small ops with torch.compile meanwhile; compare launches and GPU idle per step", culprit,
                     rocm ? "HIP graph" : "CUDA graph", in->blocker);
            return;
        }
        if (*graphs) {
            utf8_snprintf(out, n, "Launches of %s cost more than their kernels, though the loop already replays %s graphs (%s): capture "
                     "more of the loop in each graph (fewer, larger graphs) or fuse the small ops with torch.compile; compare launches and GPU "
                     "idle per step", culprit, rocm ? "HIP" : "CUDA", graphs);
            return;
        }
        utf8_snprintf(out, n, "Launches of %s cost more than their kernels: capture the loop in a %s (torch.compile mode=\"reduce-overhead\") "
                 "or fuse the small ops with torch.compile; compare launches and GPU idle per step", culprit, rocm ? "HIP graph" : "CUDA graph");
        return;
    case C_CPU:
        /* first-call work only where one call holds most of the op's time */
        if (in->op && in->op->calls > 1 && in->op->max_us >= FIRST_CALL_SHARE * in->op->host_us)
            utf8_snprintf(out, n, "%s holds the host, most of it in one call of %lld (%.0f us of %.0f): first-call work (lazy init, "
                     "cudnn.benchmark autotuning, a compile); warm it up and keep it outside the measured window", culprit, in->op->calls,
                     in->op->max_us, in->op->host_us);
        else if (in->op && in->op->calls > 1)
            utf8_snprintf(out, n, "%s holds the host in steady calls (%lld, %.0f us each): make each call cheaper: check its inputs' "
                     "shapes, dtype and device, %s, move it out of the loop, or profile it with_stack=True", culprit, in->op->calls,
                     in->op->host_us / (double)in->op->calls,
                     cpu_only ? "the threads it may use (torch.get_num_threads(), OMP_NUM_THREADS, the CPUs the process may run on)"
                              : "whether it belongs on the GPU");
        else
            utf8_snprintf(out, n, "%s holds the host: check its inputs (shapes, dtype, device), first-call work (lazy init, cudnn.benchmark "
                     "autotuning) and run it outside the measured window, or profile it with_stack=True", culprit);
        return;
    case C_COMM:
        if (!cpu_only) {
            an_comm_advice(in->ev, culprit, strcmp(in->source, "nsys") != 0, rocm, out, n);
            return;
        }
        utf8_snprintf(out, n, "Overlap %s with compute (DDP buckets, async collectives, gradient_as_bucket_view) or send less (larger, fewer "
                 "messages); check the interconnect's bandwidth against the message sizes", culprit);
        return;
    case C_PAGE:
        utf8_snprintf(out, n, "Copy from pinned memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then .to(device, non_blocking=True), "
                 "so %s overlaps compute instead of blocking the host", culprit);
        return;
    case C_COPY_CRIT:
        if (ev_num(in->ev, "on_compute_stream_us") >= 0.5 * ev_num(in->ev, "copy_us"))
            utf8_snprintf(out, n, "Take the copies of %s off the compute stream: issue them on a side stream (torch.cuda.Stream) from pinned "
                     "memory with non_blocking=True one step ahead (prefetch), and wait on an event before use, so they overlap the kernels "
                     "instead of running between them; compare GPU time per step", culprit);
        else
            utf8_snprintf(out, n, "Start the copies of %s earlier (prefetch the next batch while this step computes) so that kernels run "
                     "while they do, or copy less (keep the tensors on the GPU); compare GPU time per step", culprit);
        return;
    case C_START:
        utf8_snprintf(out, n, "%s%s before the GPU gets any work: if it is one-time start-up (%s context creation, lazy init, model load, "
                 "cudnn.benchmark autotuning), %s; if it recurs per request (tokenization, preprocessing), overlap it with the previous "
                 "step's GPU work", who, runs, rocm ? "HIP" : "CUDA", steady_window(in->source));
        return;
    case C_TAIL:
        utf8_snprintf(out, n, "%s%s after the GPU's last work: if it is post-processing of the results (decoding, .cpu() copies, metrics, "
                 "logging), overlap it with the next step's GPU work or move it out of the loop; if the capture runs past the work, %s",
                 who, runs, end_window(in->source));
        return;
    case C_ALLOC:
        /* churn recurs: one call holding most of the time is a one-time allocation */
        if (in->op && (in->op->calls < 2 || in->op->max_us >= FIRST_CALL_SHARE * in->op->host_us)) {
            utf8_snprintf(out, n, "%s blocks the host in one call (%.0f us of %.0f in %lld): a one-time allocation (a workspace, the "
                     "first batch, the cache growing to its peak), not churn; warm up before the measured window, or reserve the memory "
                     "up front (one large first batch); compare GPU idle per step", culprit, in->op->max_us, in->op->host_us, in->op->calls);
            return;
        }
        utf8_snprintf(out, n, "Stop the allocator churn in %s: the loop returns memory to the driver and asks for it again; take "
                 "torch.cuda.empty_cache() out of the loop, keep shapes steady (pad to a few bucket sizes) so cached blocks are reused, "
                 "try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; compare GPU idle per step", culprit);
        return;
    case C_COMPILE:
        utf8_snprintf(out, n, "Stop compiling in the loop: %s recompiles as the inputs change; mark the varying dimensions dynamic "
                 "(torch._dynamo.mark_dynamic or torch.compile(dynamic=True)), pad inputs to a few bucket sizes, warm every shape up "
                 "before the measured window; TORCH_LOGS=recompiles says which guard failed", culprit);
        return;
    case C_TOKENIZE:
        utf8_snprintf(out, n, "Take %s out of the token loop: keep the new token ids on the GPU and detokenize every N tokens, after "
                 "generation or in another thread or process (as vLLM and SGLang do), with a fast (Rust) tokenizer; compare GPU idle "
                 "per step", culprit);
        return;
    case C_GC:
        utf8_snprintf(out, n, "Keep the garbage collector out of the loop: %s pauses the host; call gc.freeze() after warm-up, "
                 "gc.disable() around the loop with gc.collect() between requests or epochs, or raise gc.set_threshold(); "
                 "compare the slowest steps", culprit);
        return;
    case C_OUTLIER: {
        double med = ev_num(in->ev, "median_step_in_gpu_window_us"), k = ev_num(in->ev, "outlier_steps");
        const json_t *worst = json_array_get(json_object_get(in->ev, "steps"), 0);
        int o = utf8_snprintf(out, n, "%s made %.0f step%s take up to %.1fx the median step (%s: %.0f us against %.0f inside the GPU "
                              "window): ", who, k, k == 1 ? "" : "s", med > 0 ? ev_num(worst, "dur_us") / med : 0, ev_str(worst, "step"),
                              ev_num(worst, "dur_us"), med);
        /* named work says what to do about it; untraced time first needs a name */
        int sub = in->flags & NF_GC ? C_GC : in->flags & NF_COMPILE ? C_COMPILE : in->flags & NF_TOKENIZE ? C_TOKENIZE
                : in->flags & NF_ALLOC ? C_ALLOC : C_N;
        if (sub < C_N && o < (int)n) {
            advice_in s2 = *in;
            s2.cat = sub;
            s2.ev = NULL;
            next_experiment(&s2, out + o, n - (size_t)o);
        } else if (untraced && o < (int)n)
            utf8_snprintf(out + o, n - (size_t)o, "the time is outside every traced range: re-profile with with_stack=True, or put "
                          "record_function ranges around the loop's parts, to name what runs in %s; a pause of the whole process (the "
                          "garbage collector, swapping, another process on the CPU) also shows this way", ev_str(worst, "step"));
        else if (o < (int)n)
            utf8_snprintf(out + o, n - (size_t)o, "find what %s does in %s that the others do not (a collection, a recompile, a "
                          "reallocation, I/O) and take it out of the loop or do it between steps; then compare the p90 step", culprit,
                          k == 1 ? "that step" : "those steps");
        return;
    }
    case C_THREADS:
        utf8_snprintf(out, n, "%s runs at %.0f GFLOP/s, no more than one core's peak (a core does ~100-200 GFLOP/s in FP32), in steady "
                 "calls of %.2g FLOPs that many cores could share: check torch.get_num_threads() and OMP_NUM_THREADS / MKL_NUM_THREADS "
                 "(torch.set_num_threads(1) in the code, a launcher's default), and the CPUs the process may use (taskset, the cgroup's "
                 "cpuset or CPU quota); re-profile and compare the time per step", culprit, ev_num(in->ev, "gflops"),
                 ev_num(in->ev, "flops_per_call"));
        return;
    case C_HOST_WORK:
        utf8_snprintf(out, n, "%s is host work in the loop while the GPU waits: move it out of the step, do it less often (once, or "
                 "every N steps), or overlap it with the GPU's work; compare GPU idle per step", culprit);
        return;
    case C_MEMBOUND:
        bound_phrase(in->ev, b, sizeof b);
        utf8_snprintf(out, n, "%s holds most of the GPU time moving memory, not computing (memory traffic pretending to be model work).%s "
                 "Remove or fuse the traffic: index in place (a paged KV cache instead of gathering it every step), reorder once "
                 "outside the loop, fuse the gather into its consumer (torch.compile); compare GPU time per step", culprit, b);
        return;
    case C_DOMINANT: {
        const char *bound = ev_str(in->ev, "bound");
        double frac = ev_num(in->ev, "peak_fraction"), share = ev_num(in->ev, "share_of_gpu_time") * 100;
        int known = json_is_number(json_object_get(in->ev, "peak_fraction"));
        bound_phrase(in->ev, b, sizeof b);
        if (!strcmp(bound, "memory")) /* the words fit the op: /efficiency's memory_advice (no KV cache for a convolution) */
            utf8_snprintf(out, n, "%s owns the GPU (%.0f%% of its time).%s %s", culprit, share, b,
                          ev_str(in->ev, "memory_advice")[0] ? ev_str(in->ev, "memory_advice")
                                                             : "Move fewer bytes per result: fuse it with the ops around it, use a lower "
                                                               "precision, or batch more work per call; compare GPU time per step");
        else if (!strcmp(bound, "compute") && known && frac >= 0.6)
            utf8_snprintf(out, n, "%s owns the GPU (%.0f%% of its time).%s Little is left in that kernel: look at the next operator (%s) "
                     "or at the algorithm (fewer FLOPs)", culprit, share, b, ev_str(in->ev, "next_op")[0] ? ev_str(in->ev, "next_op") : "none");
        else if (!strcmp(bound, "compute"))
            utf8_snprintf(out, n, "%s owns the GPU (%.0f%% of its time).%s It is below the roof: use a lower precision on tensor cores (bf16, "
                     "fp8), tile-aligned shapes (multiples of 64 or 128) and a fused library kernel; check with %s", culprit, share, b,
                     rocm ? "rocprof (Omniperf)" : "Nsight Compute (ncu)");
        else if (!strcmp(bound, "latency")) /* short kernels under one block per SM (/efficiency): a graph cannot fill the GPU */
            utf8_snprintf(out, n, "%s owns the GPU (%.0f%% of its time).%s Its kernels are short and fill under one block per SM: give "
                     "each more work (batch more, larger tiles) or fuse it with its neighbours", culprit, share, b);
        else
            utf8_snprintf(out, n, "%s owns the GPU (%.0f%% of its time): the next question is whether it is compute-bound or memory-bound, "
                     "which this trace cannot tell (%s); record with record_shapes=True on a known device, or measure its kernels' FLOP/s and "
                     "bandwidth with %s", culprit, share, ev_str(in->ev, "bound_unknown_reason")[0] ? ev_str(in->ev, "bound_unknown_reason")
                                                                                                      : "no shapes or no device peak",
                     rocm ? "rocprof (Omniperf)" : "Nsight Compute (ncu)");
        return;
    }
    default: /* C_COMPUTE */
        bound_phrase(in->ev, b, sizeof b);
        if (!strcmp(ev_str(in->ev, "bound"), "memory"))
            utf8_snprintf(out, n, "%s holds most of the GPU time.%s Fuse it with the ops around it (torch.compile, a fused library kernel: "
                     "SDPA / FlashAttention for attention) so its data crosses memory once; compare GPU time per step", culprit, b);
        else
            utf8_snprintf(out, n, "%s holds most of the GPU time.%s Profile its kernels with %s for achieved FLOP/s and memory "
                     "throughput, try a fused or library kernel (SDPA / FlashAttention for attention), lower precision", culprit, b,
                     rocm ? "rocprof (Omniperf)" : "Nsight Compute (ncu)");
        return;
    }
}

/* Name id as evidence quotes it (EVIDENCE_NAME_MAX); "(untraced)" for none. */
static const char *evidence_name(A *a, long name, char *buf, size_t n) {
    return name >= 0 ? utf8_clip(an_str(a, name), EVIDENCE_NAME_MAX, buf, n) : "(untraced)";
}

/* The evidence of one suspect: the category's evidence plus its top contributors. */
static json_t *evidence_of(A *a, const tally *t, int cat, int cpu_only) {
    json_t *ev = t->evidence[cat] ? json_deep_copy(t->evidence[cat]) : json_object();
    json_t *top = json_array();
    /* the five largest contributors: selection, n is small */
    int used[5] = {-1, -1, -1, -1, -1};
    for (int k = 0; k < 5; k++) {
        int best = -1;
        for (size_t i = 0; i < t->n; i++) {
            if (t->c[i].cat != cat) continue;
            int dup = 0;
            for (int j = 0; j < k; j++) dup |= used[j] == (int)i;
            if (!dup && (best < 0 || t->c[i].us > t->c[best].us)) best = (int)i;
        }
        if (best < 0) break;
        used[k] = best;
        char cut[EVIDENCE_NAME_MAX + 4];
        json_t *row = json_pack("{s:s,s:f}", "name", evidence_name(a, t->c[best].name, cut, sizeof cut), "us", t->c[best].us);
        long tr = t->c[best].track; /* step_outlier's contributions have none (-1) */
        if (cpu_only && tr >= 0 && (size_t)tr < a->t->ntracks) json_object_set_new(row, "thread", json_string(a->t->tracks[tr].tid));
        json_array_append_new(top, row);
    }
    json_object_set_new(ev, "top_contributors", top);
    return ev;
}

/* Whether a CPU-only trace gives category cat wall time in cpu_priority's order. */
static int cpu_ranked(int cat) {
    return cat == C_COMM || cat == C_DATA || cat == C_GC || cat == C_TOKENIZE || cat == C_COMPILE || cat == C_CPU || cat == C_PY;
}

/* Each category's at stake and culprit: the sum of its contributions (a CPU-only trace:
 * its largest thread's), the largest contributor; cpu_bound_op and compute_bound_op: one op. */
static void at_stake_of(const tally *t, int cat, const double *cpu_at, double *us, long *culprit) {
    *us = 0;
    *culprit = top_name(t, cat);
    if (cpu_at && cpu_ranked(cat)) { /* CPU-only: cpu_priority's share */
        *us = cpu_at[cat];
        return;
    }
    double best = -1;
    int single = cat == C_CPU || cat == C_COMPUTE || cat == C_MEMBOUND || cat == C_DOMINANT;
    for (size_t i = 0; i < t->n; i++) {
        const contrib *c = &t->c[i];
        if (c->cat != cat) continue;
        if (c->us > best) best = c->us;
        if (!single) *us += c->us;
    }
    if (single) *us = best > 0 ? best : 0;
}

static int rocm_trace(const A *a) {
    json_t *dp = json_object_get(a->t->meta, "deviceProperties");
    const char *n = json_string_value(json_object_get(json_array_get(dp, 0), "name"));
    return n && (strstr(n, "AMD") || strstr(n, "Radeon") || strstr(n, "Instinct"));
}

/* Whether category c fires: FIRE_FRACTION of the wall, or, for step_outlier, any step of
 * OUTLIER_RATIO x the median (its at stake is positive only then). */
static int fires(int c, double at, double wall) {
    if (wall <= 0 || at <= 0) return 0;
    return c == C_OUTLIER || at >= FIRE_FRACTION * wall;
}

/* How many graph launches the trace has, for the advice ("640 launches, 32 a step"), "" none. */
static void graph_note(const A *a, char *out, size_t n) {
    long long ng = a->sus->graph_launches;
    *out = '\0';
    if (ng > 0 && a->nsteps)
        snprintf(out, n, "%lld launch%s, %.0f a step", ng, ng == 1 ? "" : "es", (double)ng / (double)a->nsteps);
    else if (ng > 0)
        snprintf(out, n, "%lld launch%s", ng, ng == 1 ? "" : "es");
}

/* One suspect of category c: its culprit, at stake (wall: the trace's), evidence and next
 * experiment. nsteps: the steps a per-step share divides by (0: none). */
json_t *suspect_entry(A *a, const tally *t, int c, double at, long culprit, int cpu_only, size_t nsteps) {
    static const char *const smell[] = {"cpu_heavy", "cpu_heavy", "cpu_heavy", "many_small_calls", "cpu_heavy", NULL, "one_op_dominates",
                                        "cpu_heavy", "one_op_dominates", "cpu_heavy", "cpu_heavy", "cpu_heavy", "cpu_heavy", "cpu_heavy",
                                        "cpu_heavy", "cpu_heavy", "cpu_heavy", "one_op_dominates", NULL, "cpu_heavy", "one_op_dominates",
                                        "cpu_heavy"};
    _Static_assert(sizeof smell / sizeof smell[0] == C_N, "one smell (or NULL) per category");
    const char *name = culprit >= 0 ? an_str(a, culprit) : "(untraced)";
    char next[1024], graphs[96];
    graph_note(a, graphs, sizeof graphs);
    advice_in in = {c, name, t->evidence[c], culprit >= 0 ? find_stat(a, culprit) : NULL, cpu_only, rocm_trace(a), launches_block(a),
                    a->t->source ? a->t->source : "kineto", graphs, an_flags(a, culprit), an_any_flagged(a, NF_COMPILED), SYNC_PYTHON, ""};
    char blocker[256] = "";
    if (c == C_LAUNCH || c == C_PY) an_graph_blocker(a, blocker, sizeof blocker);
    in.blocker = blocker;
    if (c == C_SYNC) in.sync_origin = an_sync_origin(a, name, in.flags);
    next_experiment(&in, next, sizeof next);
    if (c == C_PY || c == C_CPU || c == C_HOST_WORK || c == C_COMPILE || c == C_ALLOC || c == C_GC || c == C_TOKENIZE)
        an_once_advice(a, culprit, next, sizeof next);
    /* the lead-in, the tail and the outlier steps happen once: a share per step would read as a cost of each */
    int per_step = nsteps && c != C_START && c != C_TAIL && c != C_OUTLIER;
    return json_pack("{s:s,s:s,s:o,s:f,s:f,s:o,s:o,s:s}", "category", cat_ids[c], "culprit", name, "smell",
                     smell[c] ? json_string(smell[c]) : json_null(), "at_stake_us", at, "at_stake_fraction", at / a->wall,
                     "at_stake_per_step_us", per_step ? json_real(at / (double)nsteps) : json_null(), "evidence",
                     evidence_of(a, t, c, cpu_only), "next_experiment", next);
}

/* The order of a suspect list: by at stake, descending; dominant_op last (a target, not waste). */
static int entry_cmp(const void *x, const void *y) {
    const json_t *p = *(json_t *const *)x, *q = *(json_t *const *)y;
    int dp = !strcmp(json_string_value(json_object_get(p, "category")), cat_ids[C_DOMINANT]);
    int dq = !strcmp(json_string_value(json_object_get(q, "category")), cat_ids[C_DOMINANT]);
    if (dp != dq) return dp - dq;
    double ap = json_number_value(json_object_get(p, "at_stake_us")), aq = json_number_value(json_object_get(q, "at_stake_us"));
    return ap > aq ? -1 : ap < aq;
}

static int sort_list(json_t *list) {
    size_t n = json_array_size(list);
    json_t **v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return ERR_NOMEM;
    for (size_t i = 0; i < n; i++) v[i] = json_incref(json_array_get(list, i));
    /* stable for equal keys: the entries come in category order, as before */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && entry_cmp(&v[j], &v[j - 1]) < 0; j--) {
            json_t *x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    json_array_clear(list);
    for (size_t i = 0; i < n; i++) json_array_append_new(list, v[i]);
    free(v);
    return 0;
}

/* cpu_threads' premise: on a CPU-only trace, the cpu_bound_op culprit is a matrix op whose
 * calls (those whose shapes give their FLOPs, most of its time) are big enough to split across
 * cores, run steadily, and reach no more than one core's FLOP/s. *gflops: its rate. */
static int one_thread(const opstat *o, double *gflops) {
    *gflops = o && o->flops_us > 0 ? o->flops / o->flops_us / 1e3 : 0;
    return o && o->flops_us >= 0.5 * o->host_us && o->calls > 1 && o->max_us < FIRST_CALL_SHARE * o->host_us &&
           o->flops / (double)o->calls >= PARALLEL_MIN_FLOPS && *gflops > 0 && *gflops <= ONE_CORE_GFLOPS;
}

static json_t *suspect_list(A *a, tally *t, double wall, const double *cpu_at, int *nfired) {
    int cpu_only = cpu_at != NULL;
    json_t *list = json_array();
    int fired[C_N] = {0};
    *nfired = 0;
    for (int c = 0; c < C_N; c++) {
        double at, g;
        long culprit;
        if (c == C_THREADS) continue; /* only ever cpu_bound_op's, named for its cause below */
        at_stake_of(t, c, cpu_at, &at, &culprit);
        if (!fires(c, at, wall) || culprit < -1) continue;
        fired[c] = 1;
        culprit = sus_range_culprit(a, t, c, culprit); /* a range holding most of a spread category */
        int cat = c;
        if (c == C_CPU && cpu_only && one_thread(culprit >= 0 ? find_stat(a, culprit) : NULL, &g)) {
            /* the op's time is one core's work: the category says why (its evidence, the rate) */
            cat = C_THREADS;
            json_decref(t->evidence[C_THREADS]);
            const opstat *o = find_stat(a, culprit);
            t->evidence[C_THREADS] = json_pack("{s:f,s:f,s:f,s:I}", "gflops", g, "one_core_gflops", ONE_CORE_GFLOPS, "flops_per_call",
                                               o->flops / (double)o->calls, "calls", o->calls);
            /* its contributions are cpu_bound_op's: the evidence lists them as that op's */
            for (size_t i = 0; i < t->n; i++)
                if (t->c[i].cat == C_CPU) t->c[i].cat = C_THREADS;
        }
        json_t *e = suspect_entry(a, t, cat, at, culprit, cpu_only, a->nsteps);
        int single = cat == C_CPU || cat == C_THREADS || cat == C_COMPUTE || cat == C_MEMBOUND || cat == C_DOMINANT;
        if (sus_annotate(a, t, e, cat, at, culprit, single) || json_array_append_new(list, e)) {
            json_decref(list);
            return NULL;
        }
        ++*nfired;
    }
    size_t nlisted = json_array_size(list);
    if (sus_range_suspects(a, t, list, wall, fired)) {
        json_decref(list);
        return NULL;
    }
    *nfired += (int)(json_array_size(list) - nlisted);
    if (sort_list(list)) {
        json_decref(list);
        return NULL;
    }
    return list;
}

/* ---- the steps, once tb-profiler's are known ---- */

/* The step figures of doc from the step breakdown (steps.c: tb-profiler's steps, each
 * ProfilerStep range extended to the end of the GPU work it launched, trailing steps without
 * GPU work dropped): one step definition on every surface (issue 42). Then the outlier steps
 * among them, and every per-step share divided by their count. */
int an_suspects_steps(A *a, json_t *doc, const json_t *breakdown) {
    const json_t *bs = json_object_get(breakdown, "steps");
    size_t n = json_array_size(bs);
    if (!n || n > a->nsteps) return 0; /* no steps, or not the walk's: the host ranges stand */
    step *v = malloc(n * sizeof *v);
    double *d = malloc(n * sizeof *d), sum = 0;
    int rc = v && d ? 0 : ERR_NOMEM;
    if (!rc) { /* the breakdown's steps are the walk's in start order, the first n */
        memcpy(v, a->steps, n * sizeof *v);
        step *all = malloc(a->nsteps * sizeof *all);
        if (!all) rc = ERR_NOMEM;
        else {
            memcpy(all, a->steps, a->nsteps * sizeof *all);
            qsort(all, a->nsteps, sizeof *all, cmp_step_ts);
            memcpy(v, all, n * sizeof *v);
            free(all);
        }
    }
    for (size_t i = 0; !rc && i < n; i++) {
        const json_t *r = json_array_get(bs, i);
        v[i].ts = json_number_value(json_object_get(r, "start_us"));
        v[i].dur = json_number_value(json_object_get(r, "dur_us"));
        v[i].te = v[i].ts + v[i].dur;
        sum += d[i] = v[i].dur;
    }
    if (!rc) {
        json_t *st = dur_stats(d, n, sum);
        if (!st || json_object_set_new(st, "definition", json_string("tb-profiler's: each ProfilerStep range extended to the end of the GPU "
                                                                      "work it launched")) ||
            json_object_set_new(doc, "steps", st))
            rc = ERR_NOMEM;
    }
    tally t;
    memset(&t, 0, sizeof t);
    if (!rc && !(t.keys = intern_new())) rc = ERR_NOMEM;
    if (!rc) rc = step_outliers(a, &t, v, n);
    json_t *list = json_object_get(doc, "suspects");
    double at;
    long culprit;
    if (!rc) at_stake_of(&t, C_OUTLIER, NULL, &at, &culprit);
    if (!rc && fires(C_OUTLIER, at, a->wall)) {
        json_t *e = suspect_entry(a, &t, C_OUTLIER, at, culprit, a->idle->cpu_only, n);
        rc = sus_annotate(a, &t, e, C_OUTLIER, at, culprit, 0);
        if (!rc) json_array_append_new(list, e);
        else json_decref(e);
        json_object_set_new(doc, "healthy", json_false());
    }
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x) /* per step: of the steps counted now, inside them (suspects_idle.c) */
        sus_per_step(x, n, sum / (double)n);
    if (!rc) rc = sort_list(list);
    for (int c = 0; c < C_N; c++) json_decref(t.evidence[c]);
    intern_free(t.keys);
    free(t.c);
    free(v);
    free(d);
    return rc;
}

/* The idle document: by class, and the largest labels. */
static json_t *idle_doc(A *a, json_t *phases) {
    idle_state *s = a->idle;
    json_t *cls = json_object(), *rows = json_array();
    double total = 0;
    for (int c = 0; c < GAP_NCLASSES; c++) {
        json_object_set_new(cls, gap_class_names[c], json_real(s->by_class[c]));
        total += s->by_class[c];
    }
    static const char *const types[] = {"no_launch", "kernel_wait_op", "kernel_wait_range", "kernel_wait_launch", "dataloader", "sync",
                                        "python_function", "user_annotation", "step", "untraced", "cpu_op", "runtime_call", "sync_launch",
                                        "range_host"};
    _Static_assert(sizeof types / sizeof types[0] == LB_LEAD_DATA, "a name per idle label type");
    int used[25];
    int nused = 0;
    for (; nused < 25; nused++) { /* the 25 largest labels */
        int best = -1;
        for (size_t i = 0; i < s->nsums; i++) {
            if (s->sums[i].type >= LB_LEAD_DATA) continue; /* the lead-in and the tail are not idle */
            int dup = 0;
            for (int j = 0; j < nused; j++) dup |= used[j] == (int)i;
            if (!dup && (best < 0 || s->sums[i].us > s->sums[best].us)) best = (int)i;
        }
        if (best < 0) break;
        used[nused] = best;
        const idle_sum *x = &s->sums[best];
        char cut[EVIDENCE_NAME_MAX + 4];
        json_array_append_new(rows, json_pack("{s:s,s:s,s:f,s:f}", "label", types[x->type], "culprit",
                                              evidence_name(a, x->name, cut, sizeof cut), "idle_us", x->us, "share_of_idle",
                                              total > 0 ? x->us / total : 0));
    }
    return json_pack("{s:o,s:o,s:o}", "by_class_us", cls, "by_culprit", rows, "by_phase", phases);
}

int an_suspects(A *a, double gpu_busy, json_t **out) {
    idle_state *is = a->idle;
    int cpu_only = is->cpu_only;
    tally t;
    memset(&t, 0, sizeof t);
    t.keys = intern_new();
    int rc = t.keys ? 0 : ERR_NOMEM;
    for (size_t i = 0; !rc && i < is->nsums; i++) {
        int c = category_of(a, &is->sums[i]);
        if (c < C_N) rc = credit(&t, c, is->sums[i].name, is->sums[i].track, is->sums[i].us);
    }
    if (!rc && !cpu_only) rc = comm_exposed(a, &t, gpu_busy);
    if (!rc && !cpu_only) rc = pageable(a, &t);
    if (!rc && !cpu_only) rc = copy_critical(a, &t);
    if (!rc && !cpu_only) rc = compute_bound(a, &t);
    if (!rc && !cpu_only) rc = dominant(a, &t); /* after compute_bound: it leaves that op to it */
    if (!rc && !cpu_only && a->sus->launches > 0 &&
        !(t.evidence[C_SYNC_LAUNCH] = json_pack("{s:I,s:I}", "launches", a->sus->launches, "blocking_launches", a->sus->blocking)))
        rc = ERR_NOMEM;
    if (!rc && !cpu_only && is->w0 > a->t->start_us && !(t.evidence[C_START] = json_pack("{s:f}", "lead_in_us", is->w0 - a->t->start_us)))
        rc = ERR_NOMEM;
    if (!rc && !cpu_only && is->w1 < a->t->end_us && !(t.evidence[C_TAIL] = json_pack("{s:f}", "tail_us", a->t->end_us - is->w1)))
        rc = ERR_NOMEM;
    double cpu_at[C_N] = {0};
    if (!rc && cpu_only) rc = cpu_priority(a, &t, cpu_at);
    json_t *by_phase = NULL;
    if (!rc && !cpu_only) rc = an_idle_by_phase(a, &by_phase);
    double wall = a->wall;
    json_t *doc = NULL;
    if (!rc) {
        int nfired = 0;
        json_t *list = suspect_list(a, &t, wall, cpu_only ? cpu_at : NULL, &nfired), *kinds = NULL;
        /* waste inside a busy GPU, by kind of work (suspects_waste.c): ranked into the list */
        if (list && !cpu_only) rc = an_waste_suspects(a, list, &nfired, &kinds);
        /* recomputed_work: its rule is suspects_recompute.c's; its entry joins the ranked list */
        if (!rc && list && !cpu_only && (an_recompute_suspect(a, list, FIRE_FRACTION * wall, &nfired) || sort_list(list)))
            json_decref(list), list = NULL;
        double window = is->w1 - is->w0;
        json_t *gpu = cpu_only ? json_null()
                               : json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:o}", "busy_fraction", window > 0 ? gpu_busy / window : 1.0,
                                           "busy_us", gpu_busy, "window_us", window, "idle_us", window - gpu_busy, "lead_in_us",
                                           is->w0 - a->t->start_us, "tail_us", a->t->end_us - is->w1, "utilization_of_wall",
                                           wall > 0 ? gpu_busy / wall : 0, "devices", json_incref(is->devices));
        int healthy = !cpu_only && wall > 0 && gpu_busy / wall >= HEALTHY_BUSY && !nfired;
        doc = json_pack("{s:f,s:b,s:o,s:o,s:o,s:o}", "wall_us", wall, "healthy", healthy, "gpu", gpu, "steps", steps_doc(a), "suspects",
                        list, "idle", cpu_only ? json_null() : idle_doc(a, by_phase));
        by_phase = NULL;
        if (!doc) rc = rc ? rc : ERR_NOMEM;
        else json_object_set_new(doc, "gpu_time_by_kind", kinds ? kinds : json_null());
    }
    json_decref(by_phase);
    for (int c = 0; c < C_N; c++) json_decref(t.evidence[c]);
    intern_free(t.keys);
    free(t.c);
    *out = doc;
    return rc;
}

void an_suspects_free(A *a) {
    suspect_state *s = a->sus;
    if (!s) return;
    sqlite3_finalize(s->ccorr_ins);
    intern_free(s->op_keys);
    free(s->ops);
}
