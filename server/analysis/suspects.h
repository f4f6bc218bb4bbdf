/* suspects.h: what the suspect list's files share (suspects.c: the categories and the list;
 * suspects_idle.c: idle attribution's members, range tree and per-step figures). Internal to
 * server/analysis: the API is an.h's an_suspects / an_suspects_steps. */
#ifndef ANALYSIS_SUSPECTS_H
#define ANALYSIS_SUSPECTS_H

#include "analysis/an.h"

enum {
    C_DATA, C_SYNC, C_PY, C_LAUNCH, C_CPU, C_COMM, C_COPY, C_PAGE, C_COMPUTE, C_START, C_TAIL,
    C_ALLOC, C_COMPILE, C_TOKENIZE, C_GC, C_SYNC_LAUNCH, C_COPY_CRIT, C_MEMBOUND, C_OUTLIER, C_HOST_WORK, C_DOMINANT, C_THREADS, C_N
};

/* One category's time from one label (name) on one thread (track; -1 but CPU-only). */
typedef struct contrib { int cat; long name; long track; double us; } contrib;

/* Every category's contributions and evidence. */
typedef struct tally {
    intern *keys;
    contrib *c;
    size_t n, cap;
    json_t *evidence[C_N];
} tally;

/* suspects.c */
int category_of(const A *a, const idle_sum *s);
const char *category_name(int c);
json_t *suspect_entry(A *a, const tally *t, int c, double at, long culprit, int cpu_only, size_t nsteps);

/* suspects_idle.c */
long sus_range_culprit(A *a, const tally *t, int cat, long culprit);
int sus_annotate(A *a, const tally *t, json_t *entry, int cat, double at, long culprit, int single);
int sus_range_suspects(A *a, const tally *t, json_t *list, double wall, const int *fired);
void sus_per_step(json_t *entry, size_t nsteps, double mean_step);

#endif
