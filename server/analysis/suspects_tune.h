/* suspects_tune.h: recomputed_work's fifth family, autotuning run again step after step: an
 * op call that tries several kernels and syncs to time them, on input shapes the loop has not
 * seen before (suspects_tune.c has the mechanism and why).
 *
 * Owns its state (tune_state); fed by suspects_recompute.c's host-walk hook and asked for
 * its suspect by an_recompute_suspect. Must not touch scratch nor other families. */
#ifndef FP_SUSPECTS_TUNE_H
#define FP_SUSPECTS_TUNE_H

#include <jansson.h>

#include "analysis/an.h"

typedef struct tune_state tune_state;

/* Every popped host frame (f at stack index depth), in pop order: counts the launches and
 * syncs of each op call. Allocates *s on the first call. 0, or ERR_NOMEM. */
int tune_pop(tune_state **s, A *a, const frame *f, const frame *stack, int depth);

/* Appends one recomputed_work suspect when the tuning after the first tuned step holds
 * min_us or more, counting it in *nfired. s NULL: nothing. 0, or ERR_NOMEM. */
int tune_suspects(tune_state *s, A *a, json_t *list, double min_us, int *nfired);

/* Frees s (NULL: nothing). */
void tune_free(tune_state *s);

#endif
