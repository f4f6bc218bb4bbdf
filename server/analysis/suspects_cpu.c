/* suspects_cpu.c: what only a CPU-only trace has: each category's wall time in priority
 * order over every thread (sus_cpu_priority), and cpu_threads, a cpu_bound_op whose matrix
 * op runs on one core, with its advice (issue 48 item 8; definitions: suspects.c's header,
 * tests/triage/oracle.py).
 *
 * Reads the labelled pieces of wscratch.cseg (cseg.c) and the walk's statistics
 * (suspects_host.c); owns cpu_threads' evidence. Must not touch scratch nor the list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/an.h"
#include "analysis/suspects.h"
#include "lib/err.h"
#include "lib/utf8.h"

#define ONE_CORE_GFLOPS 200.0       /* cpu_threads: a GEMM at most this fast runs on about one core (a core's FP32 FMA
                                     * peak is ~100 GFLOP/s with AVX2, ~190 with AVX-512, at 3 GHz) ... */
#define PARALLEL_MIN_FLOPS 1e8      /* ... and its calls are big enough to be split across cores (>= 0.5 ms on one) */

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

/* Wall-clock instants go to the first category, in priority order (collectives, data
 * loading, the one largest cpu_op, Python), that labels them on some thread: a main thread
 * waiting in its record_function while the gloo thread runs the collective gives that time
 * to the collective, not to Python. at[c]: each category's share, the union of its pieces
 * less the union of the pieces of the categories before it (the cpu_op category: its top
 * op's pieces only). A category with no piece is skipped (its share is 0, it takes nothing
 * from the ones after it). */
int sus_cpu_priority(A *a, const tally *t, double at[C_N]) {
    static const int order[CSEG_N] = {C_COMM, C_DATA, C_GC, C_TOKENIZE, C_COMPILE, C_CPU, C_PY};
    _Static_assert(CSEG_N == 7 && CSEG_CPU == 5, "order[k] is cseg category k's (an.h)");
    int before[CSEG_N], nbefore = 0, rc = 0;
    long names[CSEG_N];
    for (int k = 0; !rc && k < CSEG_N; k++) {
        int cat = order[k];
        long name = cat == C_CPU ? sus_top_name(t, C_CPU) : -1;
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

/* ---- cpu_threads ---- */

/* cpu_threads' premise: on a CPU-only trace, the cpu_bound_op culprit is a matrix op whose
 * calls (those whose shapes give their FLOPs, most of its time) are big enough to split across
 * cores, run steadily, and reach no more than one core's FLOP/s. *gflops: its rate. */
static int one_thread(const opstat *o, double *gflops) {
    *gflops = o && o->flops_us > 0 ? o->flops / o->flops_us / 1e3 : 0;
    return o && o->flops_us >= 0.5 * o->host_us && o->calls > 1 && o->max_us < FIRST_CALL_SHARE * o->host_us &&
           o->flops / (double)o->calls >= PARALLEL_MIN_FLOPS && *gflops > 0 && *gflops <= ONE_CORE_GFLOPS;
}

/* cpu_threads' rule on a CPU-only trace's cpu_bound_op suspect named culprit: C_THREADS
 * when its op's time is one core's work (its evidence then says so and the contributions of
 * cpu_bound_op become cpu_threads'), else C_CPU. */
int sus_cpu_threads(A *a, tally *t, long culprit) {
    double g;
    if (!one_thread(culprit >= 0 ? sus_find_stat(a, culprit) : NULL, &g)) return C_CPU;
    /* the op's time is one core's work: the category says why (its evidence, the rate) */
    json_decref(t->evidence[C_THREADS]);
    const opstat *o = sus_find_stat(a, culprit);
    t->evidence[C_THREADS] = json_pack("{s:f,s:f,s:f,s:I}", "gflops", g, "one_core_gflops", ONE_CORE_GFLOPS, "flops_per_call",
                                       o->flops / (double)o->calls, "calls", o->calls);
    /* its contributions are cpu_bound_op's: the evidence lists them as that op's */
    for (size_t i = 0; i < t->n; i++)
        if (t->c[i].cat == C_CPU) t->c[i].cat = C_THREADS;
    return C_THREADS;
}

/* cpu_threads' next experiment: the threads the op may use. */
void sus_threads_advice(const advice_in *in, char *out, size_t n) {
    utf8_snprintf(out, n, "%s runs at %.0f GFLOP/s, no more than one core's peak (a core does ~100-200 GFLOP/s in FP32), in steady "
             "calls of %.2g FLOPs that many cores could share: check torch.get_num_threads() and OMP_NUM_THREADS / MKL_NUM_THREADS "
             "(torch.set_num_threads(1) in the code, a launcher's default), and the CPUs the process may use (taskset, the cgroup's "
             "cpuset or CPU quota); re-profile and compare the time per step", in->culprit, ev_num(in->ev, "gflops"),
             ev_num(in->ev, "flops_per_call"));
}
