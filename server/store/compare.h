/* compare.h: what GET /api/v1/compare leads with (issue 51, item 2), beside query.c's
 * operator and phase rows: the mean step and its roles on each side, the memory peaks, whether
 * the two runs had the same hardware, and the family that pairs a renamed phase of one kind.
 *
 * Pure JSON over documents query.c has read (the sessions' summaries, their GET /steps and
 * GET /memory replies): no SQL here, no HTTP. Every returned object is a new reference. */
#ifndef FP_COMPARE_H
#define FP_COMPARE_H

#include <jansson.h>
#include <stddef.h>

/* {"roles":[...],"base":{"count","mean"}|null,"head":...,"delta":{"<role>_us",...,"dur_us"}|null}:
 * each side's mean step (GET /steps' mean, tb-profiler's steps) and head - base role by role.
 * A side without steps is null, and so is delta then. */
json_t *compare_steps(const json_t *base_steps, const json_t *head_steps);

/* [{"device","base":{"peak_bytes","reserved_peak_bytes","allocated_from"}|null,"head":...,
 *   "delta_peak_bytes"|null}]: one row per device of either side (the base's order, then the
 * head's others), from GET /memory's devices. */
json_t *compare_memory(const json_t *base_mem, const json_t *head_mem);

/* {"base","head","same"}: the sessions' hardware strings; same is false when both are known and
 * differ in the GPU model or in the GPUs the run used (the node's count aside: "x1 (of 4 on
 * the node)" and "x1 (of 8 on the node)" are the same hardware for the run), null when one is
 * unknown (""). */
json_t *compare_hardware(const char *base, const char *head);

/* The family of a record_function name of the form PREFIX#CLASS.METHOD (torch's DataLoader
 * and optimizer ranges: enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__,
 * Optimizer.step#SGD.step): "PREFIX#*.METHOD" in out, and 1; 0 (out "") for any other name.
 * Two phases of one family, one only in base and one only in head, are one phase renamed. */
int compare_family(const char *name, char *out, size_t n);

#endif
