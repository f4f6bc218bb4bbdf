/* suspects_discard.h: recomputed_work's third family, GPU work whose result nobody uses,
 * read from the autograd machinery (suspects_discard.c has the mechanisms and why).
 *
 * Owns its tallies (discard_state); fed by suspects_recompute.c's host-walk hook and asked
 * for its suspects by an_recompute_suspect. Must not touch scratch nor other families. */
#ifndef FP_SUSPECTS_DISCARD_H
#define FP_SUSPECTS_DISCARD_H

#include <jansson.h>

#include "analysis/an.h"

typedef struct discard_state discard_state;

/* Every popped host frame (f at stack index depth): tallies autograd nodes, the forward run
 * again inside one, and the random training-only ops. Allocates *s on the first call.
 * 0, or ERR_NOMEM. */
int discard_pop(discard_state **s, A *a, const frame *f, const frame *stack, int depth);

/* Appends one recomputed_work suspect per mechanism whose time at stake reaches min_us,
 * counting each in *nfired. s NULL: nothing. 0, or ERR_NOMEM. */
int discard_suspects(discard_state *s, A *a, json_t *list, double min_us, int *nfired);

/* Whether the training-mode mechanism holds (random training-only ops with GPU time, no
 * autograd node at all, two steps or more), whatever its size: their work is thrown away. */
int discard_training_mode(const discard_state *s, const A *a);

/* Whether op name is one of the random training-only ops (dropout family). */
int discard_random_op(const char *name);

/* Frees s (NULL: nothing). */
void discard_free(discard_state *s);

#endif
