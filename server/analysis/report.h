/* report.h: the three smells and the five-line report, drafted at ingest.
 *
 * Every threshold a smell uses is here, in one place, with its meaning. */
#ifndef FP_REPORT_H
#define FP_REPORT_H

#include <jansson.h>
#include <sqlite3.h>

/* Smell 1, "one operator owns the run": one operator's self CUDA time is at least this
 * share of all self CUDA time (or, in a trace without GPU work, of self CPU time). */
#define SMELL_OWNS_SHARE 0.50
/* Smell 2, "a cheap operator called thousands of times": at least this many calls, ... */
#define SMELL_CHEAP_CALLS 1000
/* ... a mean time per call under this (self CPU for ops, duration for kernels), ... */
#define SMELL_CHEAP_MEAN_US 20.0
/* ... and together at least this share of self CPU (ops) or CUDA (kernels) time. */
#define SMELL_CHEAP_SHARE 0.10
/* Smell 3, "CPU time large while CUDA time is sparse": the GPU is idle at least this
 * share of the wall time, in a trace that has GPU activity. */
#define SMELL_IDLE_SHARE 0.50

/* The five lines, in order, as stored and as edited through PUT /report. */
#define REPORT_LINES 5
extern const char *const report_line_keys[REPORT_LINES];   /* "workload", ... */
extern const char *const report_line_titles[REPORT_LINES]; /* "Workload", ... */

typedef struct report_input {
    sqlite3 *db;         /* scratch.ops filled (grouping 0) */
    const json_t *gpu;   /* the GET /gpu document */
    const json_t *meta;  /* top-level trace keys */
    const char *name;    /* session name or NULL */
    const json_t *labels;/* {"k":"v"} or NULL */
    const char *hardware;/* "" when unknown */
    long long events;
    double wall_us;
} report_input;

/* New reference: {"draft":{workload,...},"smells":[{id,title,fired,summary,evidence}]}.
 * NULL on allocation failure. */
json_t *report_draft(const report_input *in);

/* Operator family class for smell 1: "compute", "memory" or "other". */
const char *report_op_class(const char *name);

#endif
