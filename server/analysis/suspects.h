/* suspects.h: what the suspect list's files share (suspects.c's header says which file holds
 * which family of rules). Internal to server/analysis: the API is an.h's an_suspects,
 * an_suspects_steps, an_op_host and an_op_launch. */
#ifndef ANALYSIS_SUSPECTS_H
#define ANALYSIS_SUSPECTS_H

#include "analysis/an.h"

enum {
    C_DATA, C_SYNC, C_PY, C_LAUNCH, C_CPU, C_COMM, C_COPY, C_PAGE, C_COMPUTE, C_START, C_TAIL,
    C_ALLOC, C_COMPILE, C_TOKENIZE, C_GC, C_SYNC_LAUNCH, C_COPY_CRIT, C_MEMBOUND, C_OUTLIER, C_HOST_WORK, C_DOMINANT, C_THREADS, C_N
};

#define FIRST_CALL_SHARE 0.5 /* cpu_bound_op, allocator_churn: an op's longest call holds this share of its time: first-call work */

/* One category's time from one label (name) on one thread (track; -1 but CPU-only). */
typedef struct contrib { int cat; long name; long track; double us; } contrib;

/* Every category's contributions and evidence. */
typedef struct tally {
    intern *keys;
    contrib *c;
    size_t n, cap;
    json_t *evidence[C_N];
} tally;

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

/* An evidence field: a number (0 when absent), a string ("" when absent). */
static inline double ev_num(const json_t *ev, const char *k) { return json_number_value(json_object_get(ev, k)); }
static inline const char *ev_str(const json_t *ev, const char *k) {
    const char *v = json_string_value(json_object_get(ev, k));
    return v ? v : "";
}

/* suspects.c: the tally and the list */
const char *category_name(int c);
int sus_credit(tally *t, int cat, long name, long track, double us);
long sus_top_name(const tally *t, int cat);
void sus_at_stake(const tally *t, int cat, const double *cpu_at, double *us, long *culprit);
int sus_fires(int c, double at, double wall);
void sus_next_experiment(const advice_in *in, char *out, size_t n);
json_t *suspect_entry(A *a, const tally *t, int c, double at, long culprit, int cpu_only, size_t nsteps);
int sus_sort_list(json_t *list);

/* suspects_host.c */
const opstat *sus_find_stat(const A *a, long name);
int sus_is_short(const A *a, long name);
int sus_launches_block(const A *a);
int category_of(const A *a, const idle_sum *s);
int sus_host_evidence(A *a, tally *t);
void sus_host_advice(const advice_in *in, char *out, size_t n);

/* suspects_gpu.c */
int sus_gpu_rules(A *a, tally *t, double gpu_busy);
void sus_gpu_advice(const advice_in *in, char *out, size_t n);

/* suspects_steps.c */
json_t *sus_steps_doc(A *a);
void sus_outlier_advice(const advice_in *in, char *out, size_t n);

/* suspects_cpu.c */
int sus_cpu_priority(A *a, const tally *t, double at[C_N]);
int sus_cpu_threads(A *a, tally *t, long culprit);
void sus_threads_advice(const advice_in *in, char *out, size_t n);

/* suspects_idle.c */
long sus_range_culprit(A *a, const tally *t, int cat, long culprit);
int sus_annotate(A *a, const tally *t, json_t *entry, int cat, double at, long culprit, int single);
int sus_range_suspects(A *a, const tally *t, json_t *list, double wall, const int *fired);
void sus_per_step(json_t *entry, size_t nsteps, double mean_step);

#endif
