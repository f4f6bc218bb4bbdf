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
 *   host_sync        host-wait idle of gaps that start as a blocking sync returns
 *   python_overhead  host-wait idle under a python_function, a user_annotation's own time or nothing
 *   launch_bound     host-wait idle under a short-kernel op, and kernel-wait idle of launches from one
 *   cpu_bound_op     host-wait idle under one other cpu_op (the largest one only)
 *   communication    host-wait idle under a collective range, plus exposed collective kernels
 *   copies_casts     the union of GPU work launched under a copy/cast op, and DtoD copies
 *   pageable_memcpy  the union of copies to or from pageable host memory
 *   compute_bound_op one non-GEMM, non-copy op holding > COMPUTE_SHARE of the GPU time
 *   startup          the lead-in (trace start to first GPU activity) but its DataLoader
 *                    instants (data_loading's), labelled on the first launch's thread
 *   tail             the tail (last GPU activity's end to trace end) but its DataLoader
 *                    instants, labelled on the thread that launched the last activity
 * A suspect fires at FIRE_FRACTION of the wall; healthy = GPU busy >= HEALTHY_BUSY of the
 * wall and nothing fired. A CPU-only trace labels every host instant of every thread; a
 * category's at stake is then its largest thread's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "analysis/names.h"
#include "lib/err.h"
#include "lib/vec.h"
#include "lib/utf8.h"

#define FIRE_FRACTION 0.05          /* a suspect fires at this share of the wall */
#define HEALTHY_BUSY 0.90           /* healthy: GPU busy this share of the wall, nothing fired */
#define COMPUTE_SHARE 0.50          /* compute_bound_op: one op's kernels hold more than this of the GPU time */
#define SHORT_MIN_CALLS 10          /* short-kernel op: at least this many calls, ... */
#define SHORT_MAX_MEAN_HOST_US 1000 /* ... at most this host time per call, and less kernel time than host time */

enum { C_DATA, C_SYNC, C_PY, C_LAUNCH, C_CPU, C_COMM, C_COPY, C_PAGE, C_COMPUTE, C_START, C_TAIL, C_N };
static const char *const cat_ids[] = {"data_loading", "host_sync", "python_overhead", "launch_bound", "cpu_bound_op",
                                      "communication", "copies_casts", "pageable_memcpy", "compute_bound_op", "startup", "tail"};
_Static_assert(sizeof cat_ids / sizeof cat_ids[0] == C_N, "one id per category");

/* ---- the walk's statistics ---- */

static opstat *stat_of(A *a, long name) {
    suspect_state *s = a->sus;
    int fresh;
    long i = INTERN_SLOT(s->op_keys, &name, sizeof name, s->ops, s->nops, s->capops, 64, &fresh);
    if (i < 0) return NULL;
    if (fresh) s->ops[i].name = name;
    return &s->ops[i];
}

int an_op_host(A *a, const frame *f) {
    if (f->cls != EV_HOST_OP || f->kind == a->ua_kind) return 0;
    opstat *o = stat_of(a, f->name);
    if (!o) return ERR_NOMEM;
    o->calls++;
    o->host_us += f->dur;
    return 0;
}

/* A launch r (a runtime call with GPU work) under the open ranges stack[0..depth). */
int an_op_launch(A *a, const hrow *r, const frame *stack, int depth) {
    suspect_state *s = a->sus;
    int inner = -1, outer_copy = -1, plain = 1;
    if (an_flags(a, r->name) & NF_GRAPH_LAUNCH) s->graph_launches++;
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

typedef struct contrib { int cat; long name; long track; double us; } contrib;

typedef struct tally {
    intern *keys;
    contrib *c;
    size_t n, cap;
    json_t *evidence[C_N];
} tally;

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

/* The category of an idle label, C_N for none. */
static int category_of(const A *a, const idle_sum *s) {
    unsigned f = an_flags(a, s->name);
    switch (s->type) {
    case LB_DATALOADER: case LB_LEAD_DATA: case LB_TAIL_DATA: return C_DATA;
    case LB_LEAD: return C_START;
    case LB_TAIL: return C_TAIL;
    case LB_SYNC: return C_SYNC;
    case LB_KWAIT_OP: return is_short(a, s->name) ? C_LAUNCH : C_N;
    case LB_NO_LAUNCH: case LB_KWAIT_RANGE: case LB_KWAIT_RT: return C_N;
    default: break;
    }
    if (f & NF_COMM_RANGE) return C_COMM;
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

/* Collective kernels not hidden behind other GPU work: union(comm) - union(rest), both
 * streamed in start order from one query. A trace with no collective kernel's name skips
 * the query: it sorted every GPU activity by start for nothing (130,000 of them in a
 * 150 MB many-names trace: the suspects step 235-241 -> 173-177 ms). */
static int comm_exposed(A *a, tally *t) {
    if (!an_any_flagged(a, NF_COMM_KERNEL)) return 0; /* no row could be comm: as !any below */
    sqlite3_stmt *q = an_prep(a, "SELECT ts, te, (fp_flags(name) & ?1) != 0, name FROM scratch.ev WHERE cls = 2 ORDER BY ts");
    if (!q) return ERR_DB;
    sqlite3_bind_int(q, 1, NF_COMM_KERNEL);
    /* Sweep: comm intervals merged (cs, ce); the other work's union so far reaches oe.
     * Exposed = the parts of comm past oe; other work starting later trims what follows. */
    double cs = 0, ce = -INFINITY, cover = -INFINITY, comm = 0, exposed = 0, best_us = -1;
    long best = -1;
    int any = 0;
    intern *k = intern_new();
    double *by = NULL;
    size_t nby = 0, capby = 0;
    int rc = k ? 0 : ERR_NOMEM;
    /* Pieces of [s, e) not covered by other work are only known once later other work is
     * seen, so comm intervals are closed when the next row starts past them. */
    typedef struct piece { double s, e; } piece;
    piece *open = NULL;
    size_t nopen = 0, capopen = 0;
    while (!rc && sqlite3_step(q) == SQLITE_ROW) {
        double ts = sqlite3_column_double(q, 0), te = sqlite3_column_double(q, 1);
        int is_comm = sqlite3_column_int(q, 2);
        if (is_comm) {
            long name = (long)sqlite3_column_int64(q, 3);
            int fresh;
            long i = INTERN_SLOT(k, &name, sizeof name, by, nby, capby, 16, &fresh);
            if (i < 0) { rc = ERR_NOMEM; break; }
            by[i] += te - ts;
            if (any && ts <= ce) {
                if (te > ce) ce = te;
            } else {
                if (any) comm += ce - cs;
                cs = ts;
                ce = te;
                any = 1;
            }
            /* the uncovered part of [ts, te) so far: past cover */
            double s0 = ts > cover ? ts : cover;
            if (te > s0) {
                if (VEC_RESERVE(open, capopen, nopen + 1, 16)) { rc = ERR_NOMEM; break; }
                open[nopen++] = (piece){s0, te};
            }
        } else {
            /* other work [ts, te) covers what of the open pieces lies inside it */
            size_t j = 0;
            for (size_t i = 0; i < nopen; i++) {
                piece p = open[i];
                if (p.e <= ts) { exposed += p.e - p.s; continue; } /* closed before this work: exposed for good */
                if (p.s < ts) { exposed += ts - p.s; p.s = ts; }
                if (p.e <= te) continue;                           /* covered */
                if (p.s < te) p.s = te;
                open[j++] = p;
            }
            nopen = j;
            if (te > cover) cover = te;
        }
    }
    for (size_t i = 0; i < nopen; i++) exposed += open[i].e - open[i].s;
    if (any) comm += ce - cs;
    free(open);
    sqlite3_finalize(q);
    /* pieces overlap one another when comm kernels overlap: cap at the union's length */
    if (exposed > comm) exposed = comm;
    for (size_t i = 0; !rc && i < nby; i++)
        if (by[i] > best_us) { best_us = by[i]; best = *(const long *)intern_str(k, (long)i); }
    intern_free(k);
    free(by);
    if (rc || !any) return rc;
    t->evidence[C_COMM] = json_pack("{s:f,s:f,s:f}", "comm_kernel_us", comm, "exposed_us", exposed, "overlap_us", comm - exposed);
    return credit(t, C_COMM, best, -1, exposed);
}

/* GPU work launched under a copy/cast op (not host<->device copies), and DtoD copies. A
 * trace with neither a launch under such an op (ccorr_ins is prepared at ccorr's first row)
 * nor a DtoD copy's name skips the query, whose every row would fail its WHERE: it joined
 * and sorted every GPU activity for nothing (106,000 in a 150 MB many-names trace: 30 ms). */
static int copies(A *a, tally *t, double busy) {
    if (!a->sus->ccorr_ins && !an_any_flagged(a, NF_DTOD)) return 0;
    sqlite3_stmt *q = an_prep(a,
        "SELECT g.ts, g.te, COALESCE(c.op, g.name) FROM scratch.ev g LEFT JOIN wscratch.ccorr c ON c.corr = g.corr"
        " WHERE g.cls = 2 AND ((c.op IS NOT NULL AND (fp_flags(g.name) & ?1) = 0) OR (g.kind = ?2 AND (fp_flags(g.name) & ?3) != 0))"
        " ORDER BY g.ts");
    if (!q) return ERR_DB;
    sqlite3_bind_int(q, 1, NF_HOST_COPY);
    sqlite3_bind_int64(q, 2, a->memcpy_kind);
    sqlite3_bind_int(q, 3, NF_DTOD);
    double len = 0;
    int rc = union_credit(t, q, C_COPY, &len);
    if (!rc && len > 0) t->evidence[C_COPY] = json_pack("{s:f,s:f}", "copy_gpu_us", len, "share_of_gpu_busy", busy > 0 ? len / busy : 0);
    return rc;
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
    return credit(t, C_COMPUTE, name, -1, top);
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
    static const int order[CSEG_N] = {C_COMM, C_DATA, C_CPU, C_PY};
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

static json_t *steps_doc(A *a) {
    if (!a->nsteps) return json_null();
    double *d = malloc(a->nsteps * sizeof *d), sum = 0;
    if (!d) return NULL;
    for (size_t i = 0; i < a->nsteps; i++) sum += d[i] = a->steps[i].dur;
    qsort(d, a->nsteps, sizeof *d, cmp_double);
    json_t *o = json_pack("{s:I,s:f,s:f,s:f,s:f,s:f}", "count", (json_int_t)a->nsteps, "mean_us", sum / (double)a->nsteps, "p50_us",
                          nearest_rank(d, a->nsteps, 0.5), "p90_us", nearest_rank(d, a->nsteps, 0.9), "min_us", d[0], "max_us",
                          d[a->nsteps - 1]);
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

/* The next experiment of a category, naming its culprit. graphs: "" or how many graph
 * launches the trace has ("640 launches, 32 a step"): where the launches are already
 * graphs, "capture it in a CUDA graph" is advice the team has taken. */
static void next_experiment(int cat, const char *culprit, int cpu_only, int rocm, const char *source, const char *graphs, char *out,
                            size_t n) {
    /* "(untraced)" names no place: the time is outside every traced range */
    int untraced = !strcmp(culprit, "(untraced)");
    const char *who = untraced ? "Host time outside any traced range (untraced)" : culprit, *runs = untraced ? " passes" : " runs";
    switch (cat) {
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
        utf8_snprintf(out, n, "Remove the per-step host sync in %s: keep the value on the GPU (no .item(), .cpu() or printing in the loop), "
                 "read it every N steps or with a non_blocking copy to pinned memory, so the host queues the next step while the GPU works",
                 culprit);
        return;
    case C_PY:
        /* CPU-only traces leave untraced time unlabelled (idle.c: cpu_piece): GPU traces only */
        if (untraced) culprit = "the host time outside any traced range (untraced; re-profile with with_stack=True to name it)";
        if (cpu_only)
            utf8_snprintf(out, n, "Cut the Python around %s: vectorize the per-item work, move it out of the loop, or torch.compile the step; "
                     "re-profile with with_stack=True to see which lines hold the time", culprit);
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
        utf8_snprintf(out, n, "%s holds the host: check its inputs (shapes, dtype, device), first-call work (lazy init, cudnn.benchmark "
                 "autotuning) and run it outside the measured window, or profile it with_stack=True", culprit);
        return;
    case C_COMM:
        utf8_snprintf(out, n, "Overlap %s with compute (DDP buckets, async collectives, gradient_as_bucket_view) or send less (larger, fewer "
                 "messages); check the interconnect's bandwidth against the message sizes", culprit);
        return;
    case C_COPY:
        utf8_snprintf(out, n, "Cut the copies and casts of %s: keep tensors in their final dtype and device, cast once at load, avoid "
                 ".to()/.contiguous() inside the loop; re-profile its GPU share", culprit);
        return;
    case C_PAGE:
        utf8_snprintf(out, n, "Copy from pinned memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then .to(device, non_blocking=True), "
                 "so %s overlaps compute instead of blocking the host", culprit);
        return;
    case C_START:
        utf8_snprintf(out, n, "%s%s before the GPU gets any work: if it is one-time start-up (%s context creation, lazy init, model load, "
                 "cudnn.benchmark autotuning), %s; if it recurs per request (tokenization, preprocessing), overlap it with the previous "
                 "step's GPU work", who, runs, rocm ? "HIP" : "CUDA", steady_window(source));
        return;
    case C_TAIL:
        utf8_snprintf(out, n, "%s%s after the GPU's last work: if it is post-processing of the results (decoding, .cpu() copies, metrics, "
                 "logging), overlap it with the next step's GPU work or move it out of the loop; if the capture runs past the work, %s",
                 who, runs, end_window(source));
        return;
    default:
        utf8_snprintf(out, n, "%s holds most of the GPU time: profile its kernels with %s for achieved FLOP/s and memory "
                 "throughput, try a fused or library kernel (SDPA / FlashAttention for attention), lower precision", culprit,
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
        if (cpu_only) json_object_set_new(row, "thread", json_string(a->t->tracks[t->c[best].track].tid));
        json_array_append_new(top, row);
    }
    json_object_set_new(ev, "top_contributors", top);
    return ev;
}

/* Each category's at stake and culprit: the sum of its contributions (a CPU-only trace:
 * its largest thread's), the largest contributor; cpu_bound_op and compute_bound_op: one op. */
static void at_stake_of(const tally *t, int cat, const double *cpu_at, double *us, long *culprit) {
    *us = 0;
    *culprit = top_name(t, cat);
    if (cpu_at) { /* CPU-only: cpu_priority's share */
        *us = cpu_at[cat];
        return;
    }
    double best = -1;
    int single = cat == C_CPU || cat == C_COMPUTE;
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

static json_t *suspect_list(A *a, const tally *t, double wall, const double *cpu_at, int *nfired) {
    int cpu_only = cpu_at != NULL;
    json_t *list = json_array();
    double at[C_N];
    long culprit[C_N];
    int order[C_N], n = 0;
    for (int c = 0; c < C_N; c++) {
        at_stake_of(t, c, cpu_at, &at[c], &culprit[c]);
        if (wall > 0 && at[c] >= FIRE_FRACTION * wall && culprit[c] >= -1 && at[c] > 0) order[n++] = c;
    }
    for (int i = 1; i < n; i++) /* by at stake, descending (insertion: n <= C_N) */
        for (int j = i; j > 0 && at[order[j]] > at[order[j - 1]]; j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    int rocm = rocm_trace(a);
    char graphs[96] = "";
    long long ng = a->sus->graph_launches;
    if (ng > 0 && a->nsteps)
        snprintf(graphs, sizeof graphs, "%lld launch%s, %.0f a step", ng, ng == 1 ? "" : "es", (double)ng / (double)a->nsteps);
    else if (ng > 0)
        snprintf(graphs, sizeof graphs, "%lld launch%s", ng, ng == 1 ? "" : "es");
    for (int i = 0; i < n; i++) {
        int c = order[i];
        const char *name = culprit[c] >= 0 ? an_str(a, culprit[c]) : "(untraced)";
        char next[1024];
        next_experiment(c, name, cpu_only, rocm, a->t->source ? a->t->source : "kineto", graphs, next, sizeof next);
        static const char *const smell[] = {"cpu_heavy", "cpu_heavy", "cpu_heavy", "many_small_calls", "cpu_heavy",
                                            NULL, "one_op_dominates", "cpu_heavy", "one_op_dominates", "cpu_heavy", "cpu_heavy"};
        _Static_assert(sizeof smell / sizeof smell[0] == C_N, "one smell (or NULL) per category");
        /* the lead-in and the tail happen once: a share per step would read as a cost of each */
        int per_step = a->nsteps && c != C_START && c != C_TAIL;
        json_array_append_new(list, json_pack("{s:s,s:s,s:o,s:f,s:f,s:o,s:o,s:s}", "category", cat_ids[c], "culprit", name, "smell",
                                              smell[c] ? json_string(smell[c]) : json_null(), "at_stake_us", at[c], "at_stake_fraction",
                                              at[c] / wall, "at_stake_per_step_us",
                                              per_step ? json_real(at[c] / (double)a->nsteps) : json_null(), "evidence",
                                              evidence_of(a, t, c, cpu_only), "next_experiment", next));
    }
    *nfired = n;
    return list;
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
                                        "python_function", "user_annotation", "step", "untraced", "cpu_op"};
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
    if (!rc && !cpu_only) rc = comm_exposed(a, &t);
    if (!rc && !cpu_only) rc = copies(a, &t, gpu_busy);
    if (!rc && !cpu_only) rc = pageable(a, &t);
    if (!rc && !cpu_only) rc = compute_bound(a, &t);
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
        json_t *list = suspect_list(a, &t, wall, cpu_only ? cpu_at : NULL, &nfired);
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
        if (!doc) rc = ERR_NOMEM;
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
