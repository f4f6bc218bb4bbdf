/* analyze.h: the first profiler pass, computed once at ingest over the scratch events (trace.h).
 *
 * Writes the tables wscratch.op_rows (operator table; read through the view wscratch.ops),
 * kscratch.kern (kernel table), wscratch.ph (phases), their names by string id, and
 * wscratch.tlb (timeline buckets), which store_commit_session copies into the
 * session, and returns the JSON documents below. Definitions live in analyze.c's
 * header comment; thresholds of the smells in report.h. */
#ifndef FP_ANALYZE_H
#define FP_ANALYZE_H

#include <jansson.h>
#include <stddef.h>

#include "analysis/trace.h"

/* The version of the rules and figures a session's stored analysis comes from (its report,
 * smells, suspects, steps, efficiency, operator, kernel and phase tables, timeline): stored
 * with each session (sessions.analysis_version; 0 for sessions stored before versions
 * existed), so that a re-analysis (ingest/reanalyse.h) knows which are older, and compare
 * and regressions say when their two sides differ. Bump it with any change to what is
 * stored: a figure, a verdict, a threshold, a row or a field of any of those documents (a
 * change only in how a reply is rendered from stored rows needs none). Never lower it.
 *   1  the first versioned analysis (issue 52)
 *   2  issue 48: GPU time by kind and waste inside a busy GPU (copies_casts by kind,
 *      unfused_elementwise, tiny_kernels, math_below_roof), recomputed_work, idle charged to
 *      what emptied the queue and summed up the range tree, members and per-step figures of
 *      the work inside the steps, advice chosen from the evidence, the report's Top lines
 *   3  recomputed_work's second mechanism: a per-step constant rebuilt every layer
 *   4  issue 48 item 1 per phase: gpu_time_by_kind_by_phase (and _dropped) on the suspects
 *      and efficiency documents; recomputed_work's work nobody uses (suspects_discard.c:
 *      gradients with no optimizer, dropout in a loop that never trains, the forward again
 *      inside a backward), which unfused_elementwise's chains leave out; rows computed that
 *      nobody reads (suspects_unread.c), autotuning repeated on new shapes every step
 *      (suspects_tune.c), gradient reductions repeated within a step (suspects_comm.c);
 *      dominant_op's advice for fp64, uploads repeated every step (pageable_memcpy /
 *      copy_on_critical_path's repeated_uploads), eager attention in unfused_elementwise,
 *      communication without a backward (no accumulation, no DDP advice), a synchronize of its
 *      own between a step's launches (instrumentation), fills told apart from fusable chains,
 *      a rooted reduce in a training loop (nn.DataParallel) */
#define ANALYSIS_VERSION 4

#define GAP_MIN_US 5.0          /* a GPU idle gap shorter than this is not counted */
#define SHORT_KERNEL_US 10.0    /* kernels under this are "short" (launch-bound) */

typedef struct analysis {
    json_t *gpu;      /* GET /gpu reply */
    json_t *report;   /* {"draft":{...},"smells":[...]} */
    json_t *timeline; /* {"tracks":[...],"phases":[...],"gaps":[...],"start_us","end_us"} */
    json_t *summary;  /* sessions.summary */
    json_t *effic;    /* GET /efficiency reply (effic.c) */
    json_t *steps;    /* GET /steps (steps.c: the step breakdown), NULL when the trace has none */
    /* The regression gate's numbers of the breakdown's steps (history.h), stored beside it so
     * that no read parses the breakdown for them: how many, their mean and sample standard
     * deviation (lib/meansd.h), us; 0, 0, 0 without steps. */
    long long step_count;
    double step_mean_us, step_sd_us;
} analysis;

int analyze_run(trace_ctx *t, analysis *out, char *err, size_t errlen);
/* Tests: a thread with more than n late host events (trace.h: host_late) is walked sorted
 * by SQLite, not merged in memory; n < 0 restores the default (65,536). */
void analyze_set_late_max(long n);
/* Tests: more than n launch delays (gpu.c) are sorted by SQLite in a temp table, not in
 * memory; n < 0 restores the default (262,144). */
void analyze_set_delays_max(long n);
/* Tests: past n [memory] events (memory.c) the rows go to wscratch.mem and SQLite sorts
 * them, not C; n < 0 restores the default (131,072). */
void analyze_set_mem_rows_max(long n);
/* Tests: on, the step breakdown splits the steps and each CPU phase in a pass of its own over
 * the roles (steps.c), as it did before one pass split them all; 0 restores that pass. */
void analyze_set_sweep_apart(int on);
/* Tests: past n held ranges (DataLoader, outermost and runtime calls, together) the walk
 * writes them to a spill file as sorted runs the step breakdown merges (steps.c); n < 0
 * restores the default (1,048,576). */
void analyze_set_host_spans_max(long n);
void analysis_free(analysis *a);

#endif
