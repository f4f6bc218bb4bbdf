/* suspects_recompute.h: the recomputed_work suspect (busy GPU time that need not run at all).
 *
 * Owns the rule, its evidence and its next experiment (suspects_recompute.c). The prefix
 * mechanism reads only the efficiency document's operator rows (a->effic: op name, Input
 * Dims, calls, GPU time); the rebuilt-constant mechanism reads what its one hook in the host
 * walk (an_const_pop) kept in a->cst. Must not touch scratch nor the tallies of suspects.c's
 * categories. */
#ifndef FP_SUSPECTS_RECOMPUTE_H
#define FP_SUSPECTS_RECOMPUTE_H

#include <jansson.h>

#include "analysis/an.h"

/* Appends the recomputed_work suspect to list when its time at stake reaches min_us (the
 * fire line, suspects.c's), counting it in *nfired; nothing without an efficiency document
 * or evidence. 0, or ERR_NOMEM (list unchanged). */
int an_recompute_suspect(A *a, json_t *list, double min_us, int *nfired);

/* The host walk's hook (host.c pop_frame, every frame popped; depth: f's index in stack):
 * follows the chains of factory-rooted ops among siblings and counts them per step in
 * a->cst (allocated on the first call of a trace with steps). 0, or ERR_NOMEM. */
int an_const_pop(A *a, const frame *f, const frame *stack, int depth);

/* suspects_discard.c's tallies, fed by an_const_pop; NULL before its first call. */
struct discard_state *an_discard_state(const A *a);

/* Frees a->cst (NULL: nothing); sets it to NULL. */
void an_const_free(A *a);

#endif
