/* waste.h: waste inside a busy GPU by kind of work (issue 48 items 1-2; definitions:
 * tests/triage/oracle.py's docstring, "GPU time by kind" and the GPU-set categories
 * copies_casts, unfused_elementwise, tiny_kernels).
 *
 * Owns waste_state: what the host walk tells it of each launch (an_waste_launch: the
 * innermost op, the innermost range, the outermost data-movement op, the step, a graph
 * launch, the phases around it), and the one pass over the GPU activity (an_waste_pass) that
 * gives the GPU time by kind, per session and per phase, and the estimates.
 *
 * Phases (issue 48 item 1, per phase): the record_function / NVTX ranges (user_annotation)
 * on the launching thread's stack, named as GET /phases names them (ProfilerStep#N folded
 * to ProfilerStep*). An activity counts in every phase whose range encloses its launch, once
 * per name (a range nested in a range of its own name adds nothing: /phases' kernel time
 * counts it twice). At most WASTE_PHASES_MAX names are kept, the first met; an activity
 * launched inside a name past it is counted in ph_untracked_us (once) and still in its kept
 * phases. A launch keeps one int for its phases: the node of its path (outermost name first,
 * each name once) in a tree of paths shared by every launch, at most WASTE_PHASE_NODES_MAX
 * nodes (past it a launch keeps the path's part already there, the rest untracked). Reads scratch.ev and the busy union (an_busy_in); writes nothing to
 * scratch and no document: suspects_waste.c turns the result into suspects and advice. Must
 * not touch the idle attribution (idle.c) or the suspects' tally (suspects.c). */
#ifndef FP_WASTE_H
#define FP_WASTE_H

#include <jansson.h>

#include "analysis/kinds.h"
#include "lib/intern.h"

#define WASTE_PHASES_MAX 256          /* phase names kept (effic.c's EFFIC_PHASES_MAX) */
#define WASTE_PHASE_NODES_MAX (1 << 16) /* distinct paths of phases (prefixes) kept */

typedef struct A A;
struct frame;
struct hrow;

/* A group a finding names: members by name with their own time. */
typedef struct wmembers {
    intern *keys;       /* member names (text) */
    double *us;
    size_t n, cap;
} wmembers;

/* One category's finding: at stake (us), its members, the time by range of its members
 * (ranges: the innermost record_function / NVTX range around the launches, "" none), and
 * its evidence (owned). */
typedef struct wfinding {
    double at;
    wmembers members, ranges;
    json_t *ev;
} wfinding;

typedef struct waste_out {
    double by_kind[WK_N];    /* GPU activity time (durations) by kind */
    double gpu_us;           /* their sum */
    wfinding copies;         /* data movement (but host transfers, addressing ops) */
    wfinding unfused;        /* chains of elementwise kernels: the time above one fused pass */
    wfinding tiny;           /* phases of many tiny kernels: their fixed cost */
    /* per phase (waste.h's head): nph of them, in the order met */
    size_t nph;
    long *ph_name;           /* the phase's name (string id, folded) */
    double *ph_us;           /* GPU activity time launched inside it */
    double (*ph_kind)[WK_N]; /* of it, by kind (sums to ph_us) */
    long long ph_untracked;  /* names met past WASTE_PHASES_MAX */
    double ph_untracked_us;  /* GPU activity time launched inside one of those (or past the nodes' cap), each once */
} waste_out;

/* The walk's hook: a launch r (a runtime call with GPU work) under stack[0..depth). */
int an_waste_launch(A *a, const struct hrow *r, const struct frame *stack, int depth);

/* The pass over the GPU activity; o is zeroed first; free it with an_waste_out_free. */
int an_waste_pass(A *a, waste_out *o);
void an_waste_out_free(waste_out *o);

/* Adds us to member name (len bytes) of m. */
int an_wm_add(wmembers *m, const char *name, size_t len, double us);

void an_waste_free(A *a);

#endif
