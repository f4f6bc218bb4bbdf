/* suspects_waste.h: the suspects of waste inside a busy GPU, by kind of work (issue 48 items
 * 1-2): copies_casts (data movement by kind, a group of ops), unfused_elementwise,
 * tiny_kernels and math_below_roof, each with the advice its evidence supports, and the GPU
 * time by kind.
 *
 * Owns each rule's premise (when it fires) next to its advice. Reads waste.c's pass and the
 * efficiency document's roofs (effic.c: operators[].best_roof_us, best_unit,
 * kernel_us_mean, blocks_per_sm); adds entries to the suspect list suspects.c assembled, in
 * its format and order. Must not touch the idle attribution nor the other categories but
 * copies_casts, which it replaces (by kind, not by op name). */
#ifndef FP_SUSPECTS_WASTE_H
#define FP_SUSPECTS_WASTE_H

#include <jansson.h>

typedef struct A A;

/* Adds the waste suspects that fire to list (ranked in, dominant_op last), counting them in
 * *nfired; *by_kind: the GPU time by kind ({kind: {us, fraction}}, new reference; NULL when
 * the trace has no GPU activity). The efficiency document (a->effic) gets the same, and the
 * GPU time by kind per phase (waste.h's phases): gpu_time_by_kind_by_phase (the 50 phases
 * with the most GPU time: [{phase, gpu_us, every kind's {us, fraction}}]) and
 * gpu_time_by_kind_by_phase_dropped ({rows, phases, gpu_us}: what is not listed). */
int an_waste_suspects(A *a, json_t *list, int *nfired, json_t **by_kind);

/* Sets the suspects document doc's gpu_time_by_kind_by_phase and ..._dropped, copies of the
 * efficiency document's, or null where doc's gpu_time_by_kind is null. Why apart: the
 * suspects document is assembled after an_waste_suspects returns (suspects.c). 0, or
 * ERR_NOMEM. */
int an_waste_phase_doc(A *a, json_t *doc);

#endif
