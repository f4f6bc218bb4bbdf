/* suspects_recompute.h: the recomputed_work suspect (busy GPU time that need not run at all).
 *
 * Owns the rule, its evidence and its next experiment (suspects_recompute.c). Reads only the
 * efficiency document's operator rows (a->effic: op name, Input Dims, calls, GPU time); must
 * not touch scratch, the host walk, nor the tallies of suspects.c's categories. */
#ifndef FP_SUSPECTS_RECOMPUTE_H
#define FP_SUSPECTS_RECOMPUTE_H

#include <jansson.h>

#include "analysis/an.h"

/* Appends the recomputed_work suspect to list when its time at stake reaches min_us (the
 * fire line, suspects.c's), counting it in *nfired; nothing without an efficiency document
 * or evidence. 0, or ERR_NOMEM (list unchanged). */
int an_recompute_suspect(A *a, json_t *list, double min_us, int *nfired);

#endif
