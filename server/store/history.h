/* history.h: sessions over time: named baselines, regression checks against them, trends.
 *
 * Owns the baselines and baseline_labels tables (schema.sql, version 2) and every
 * statement on them; reads the per-session tables written at ingest (operators, kernels,
 * phases, sessions.summary) and never writes them. Prepared statements only; the SQL text
 * assembled at run time is made of constant fragments (one EXISTS per label filter, a
 * whitelisted column), never of request text. No HTTP here: routes.c maps the ERR_* codes.
 *
 * Regression rule (GET /api/v1/sessions/{id}/regressions): an item is reported when a
 * metric moved by MORE than the relative threshold AND by MORE than the absolute one:
 *   |head - base| > abs  and  |head - base| / base > rel  (base 0: only the absolute test).
 * A row missing on one side counts as 0 there (status appeared / disappeared). Higher is
 * worse for every metric, so delta > 0 is "regressed", delta < 0 "improved". Items:
 *   operator  operator table grouping 0, without the GPU rows (kernel, gpu_memcpy,
 *             gpu_memset: see kernel) and the annotation rows (user_annotation,
 *             gpu_user_annotation: see phase); cuda_time_total, cpu_time_total (us), calls
 *   kernel    kernel table: cuda_time_total (its total_us), calls
 *   phase     phases table: wall_time_total (total_us), gpu_busy_time (gpu_busy_us), calls
 *             (count)
 *   session   gpu_idle_fraction (share of wall time with no GPU activity, 0..1)
 * Thresholds: rel for all; abs_us for times, abs_calls for calls, abs_share for the idle
 * fraction.
 *
 * The gate ("regressed"): what users feel, the step, judged against the steps' own noise.
 * Steps are the step breakdown's (GET /steps: tb-profiler's steps, ProfilerStep#N extended to
 * their GPU work), their durations read from each session's stored breakdown. With n steps,
 * mean m and sample standard deviation s on each side, the noise floor is
 *   noise = max(abs_us, HIST_NOISE_Z * sqrt(s_base^2 / n_base + s_head^2 / n_head))
 * (a side with one step borrows the other side's s; both with one: abs_us alone). The step
 * verdict is "regressed" when m_head - m_base > noise, "improved" when m_base - m_head > noise,
 * else "unchanged". Each named phase (the phases table without ProfilerStep*), per step,
 * is judged against the same noise floor. regressed = the step or a phase regressed; the
 * items above are the explanation. Where not both sessions have steps, the gate is the items
 * (regressed = an item regressed). gate "operators" (hist_thresholds.strict, ?gate=operators)
 * is the stricter gate: the step, the phases AND every item. gate "memory" (hist_thresholds.memory,
 * ?gate=memory) is the steps gate and the memory peak: the largest allocated peak over the GPU
 * devices (GET /memory's peak_bytes, the "cpu" device aside) "regressed" when it rose by more
 * than rel AND by more than abs_bytes; a side without GPU memory events leaves it unjudged. */
#ifndef FP_HISTORY_H
#define FP_HISTORY_H

#include <jansson.h>
#include "store/db.h"
#include <stddef.h>

#define HIST_REL_DEFAULT 0.10      /* relative change, 10% */
#define HIST_ABS_US_DEFAULT 100.0  /* microseconds */
#define HIST_ABS_CALLS_DEFAULT 10.0
#define HIST_ABS_SHARE_DEFAULT 0.05 /* GPU idle fraction, 5 percentage points */
#define HIST_ABS_BYTES_DEFAULT (16.0 * 1024 * 1024) /* the memory gate's peak: 16 MiB */
#define HIST_LABELS_MAX 16
#define HIST_NAME_MAX 64

#define HIST_NOISE_Z 2.0          /* standard errors of the step means' difference */

typedef struct hist_thresholds {
    double rel, abs_us, abs_calls, abs_share;
    int strict;                   /* 1: gate "operators" (an item regressing fails too); 0: gate "steps" */
    int memory;                   /* 1: gate "memory" (the steps gate and the memory peak) */
    double abs_bytes;             /* the memory gate's absolute threshold */
} hist_thresholds;

/* key:value pairs that must all match (borrowed strings). */
typedef struct hist_labels {
    const char *keys[HIST_LABELS_MAX], *values[HIST_LABELS_MAX];
    int n;
} hist_labels;

typedef struct hist_trend_query {
    hist_labels labels;
    const char *metric;   /* one of history_trend_metrics() */
    const char *op;       /* operator name; required for operator metrics */
    const char *kind;     /* operator kind filter, or NULL */
    int limit;            /* newest sessions considered */
} hist_trend_query;

/* 1 when name is [A-Za-z0-9._-]{1,64}. */
int history_name_valid(const char *name);

/* Creates or replaces baseline `name` -> session_id. labels: a JSON object of strings
 * (borrowed), or NULL for the session's own labels. *created is 1 when the name is new.
 * *out: the baseline (new reference). 0, ERR_NOTFOUND (no such session), ERR_DB. */
int history_baseline_put(db_conn *db, const char *name, long long session_id, const json_t *labels, int *created, json_t **out);
/* 0 with *out (new reference), ERR_NOTFOUND, ERR_DB. */
int history_baseline_get(db_conn *db, const char *name, json_t **out);
/* {"baselines":[...]} newest first, those whose labels hold every pair of f. */
int history_baseline_list(db_conn *db, const hist_labels *f, json_t **out);
/* 0, ERR_NOTFOUND, ERR_DB. */
int history_baseline_delete(db_conn *db, const char *name);

/* Session id against baseline `name` (NULL: the newest baseline, other than the session
 * itself, whose labels are all among the session's). ERR_NOTFOUND with a sentence in msg
 * for an unknown session, an unknown baseline or no matching baseline. */
int history_regressions(db_conn *db, long long id, const char *name, const hist_thresholds *t, json_t **out, char *msg, size_t msglen);

/* The metric over the last q->limit sessions matching q->labels, oldest first:
 * {"metric","operator","kind","labels","points":[{"session_id","created_at","name","value"}]};
 * value null where the session lacks the operator (or the GPU facts). ERR_INVALID for an
 * unknown metric or an operator metric without q->op. */
int history_trends(db_conn *db, const hist_trend_query *q, json_t **out);
/* 1 for a known metric; *needs_op says whether it is an operator metric. */
int history_trend_metric(const char *metric, int *needs_op);
const char *history_trend_metrics(void); /* comma-separated, for error messages */

/* head against base, as GET /api/v1/compare's per_step: {"basis":"per_step"|"per_call",
 * "base_steps","head_steps","thresholds","regressions":[items regressed],"items":[all],
 * "verdict"} (items and verdict as in the regressions reply). 0 or ERR_DB. */
int history_diff(db_conn *db, long long base, long long head, const hist_thresholds *t, json_t **out);

#endif
