/* report.h: the three smells and the five-line report, drafted at ingest.
 *
 * Every threshold a smell uses is here, in one place, with its meaning. */
#ifndef FP_REPORT_H
#define FP_REPORT_H

#include <jansson.h>
#include <sqlite3.h>

/* The three smells of the seed, kept as ids in the API. They fire by the suspect list's
 * evidence (suspects.c), not by fixed cut-offs of their own:
 *   one_operator_owns_the_run    compute_bound_op, memory_bound_op or copies_casts fired (a
 *                                CPU-only trace: cpu_bound_op); not dominant_op: a GEMM owning
 *                                the GPU is the model's work, whose question the Next experiment asks
 *   cheap_operator_called_often  launch_bound or synchronous_launch fired
 *   gpu_idle_host_bound          a host-side suspect fired (data_loading, host_sync,
 *                                python_overhead, cpu_bound_op, startup, tail, allocator_churn,
 *                                compilation, tokenization, garbage_collection, host_work,
 *                                copy_on_critical_path, pageable_memcpy), in a trace with GPU activity
 * Their evidence stays what it was: the top operator's share, the cheapest busy operator,
 * the GPU idle fraction with the host's top ops and syncs. */
#define SMELL_CHEAP_CALLS 1000     /* evidence of smell 2: an op with this many calls ... */
#define SMELL_CHEAP_MEAN_US 20.0   /* ... under this mean time per call */

/* The five lines, in order, as stored and as edited through PUT /report. */
#define REPORT_LINES 5
extern const char *const report_line_keys[REPORT_LINES];   /* "workload", ... */
extern const char *const report_line_titles[REPORT_LINES]; /* "Workload", ... */

typedef struct report_input {
    sqlite3 *db;         /* wscratch.ops filled (grouping 0) */
    const json_t *gpu;   /* the GET /gpu document */
    const json_t *suspects; /* the suspect list (suspects.c) */
    const json_t *meta;  /* top-level trace keys */
    const char *name;    /* session name or NULL */
    const json_t *labels;/* {"k":"v"} or NULL */
    const char *hardware;/* "" when unknown */
    long long events;
    double wall_us;
    double self_cuda_total; /* the operator table's self CUDA of GPU activities, us (analyze.c, op_totals) */
    double self_cpu_total;  /* and its self CPU */
    const json_t *effic;    /* the efficiency document (effic.c): the top operator's bound; NULL: none */
} report_input;

/* {"draft":{workload,...},"smells":[{id,title,fired,summary,evidence}]} into *out (new
 * reference). 0, ERR_NOMEM, or ERR_DB (a query of wscratch.ops failed; *out is NULL). */
int report_draft(const report_input *in, json_t **out);

/* Operator family class by name, for smell 1 and the Top CUDA line where the efficiency
 * figures give no bound: "communication" (collectives), "memory" (copies, casts, gathers),
 * "compute" (matmul, convolution, attention) or "other". */
const char *report_op_class(const char *name);

#endif
