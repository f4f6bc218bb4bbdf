/* suspects_entry.h: the recomputed_work entry every mechanism of it builds (suspects_recompute.c's
 * prefix and constants, suspects_discard.c, suspects_unread.c, suspects_tune.c): one shape, one
 * builder. Owns nothing; must not read the trace. */
#ifndef FP_SUSPECTS_ENTRY_H
#define FP_SUSPECTS_ENTRY_H

#include <jansson.h>

#include "analysis/an.h"

/* One recomputed_work entry (every mechanism's has this shape): culprit, at stake (us), its
 * share of the wall and per step, members (stolen) and their time, evidence (stolen), the next
 * experiment. NULL on no memory. */
json_t *an_recomputed_entry(A *a, const char *culprit, double at, json_t *members, double members_us, json_t *ev, const char *next);

#endif
