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
 * the trace has no GPU activity). */
int an_waste_suspects(A *a, json_t *list, int *nfired, json_t **by_kind);

#endif
