/* suspects_unread.h: recomputed_work's fourth family, rows computed that nobody reads: a
 * GEMM's whole output sliced down to one of its rows right after (suspects_unread.c has the
 * mechanism and why).
 *
 * Owns its state (unread_state); fed by suspects_recompute.c's host-walk hook and asked for
 * its suspect by an_recompute_suspect. Must not touch scratch nor other families. */
#ifndef FP_SUSPECTS_UNREAD_H
#define FP_SUSPECTS_UNREAD_H

#include <jansson.h>

#include "analysis/an.h"

typedef struct unread_state unread_state;

/* Every popped host frame, in pop order: follows each GEMM's output through the ops after
 * it. Allocates *s on the first call. 0, or ERR_NOMEM. */
int unread_pop(unread_state **s, A *a, const frame *f);

/* Appends one recomputed_work suspect when the rows nobody read hold min_us or more,
 * counting it in *nfired. s NULL: nothing. 0, or ERR_NOMEM. */
int unread_suspects(unread_state *s, A *a, json_t *list, double min_us, int *nfired);

/* Frees s (NULL: nothing). */
void unread_free(unread_state *s);

#endif
