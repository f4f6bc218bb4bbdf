/* suspects_entry.c: the recomputed_work entry (suspects_entry.h). */
#include "analysis/suspects_entry.h"

json_t *an_recomputed_entry(A *a, const char *culprit, double at, json_t *members, double members_us, json_t *ev, const char *next) {
    return json_pack("{s:s,s:s,s:n,s:f,s:f,s:o,s:o,s:f,s:o,s:s}", "category", "recomputed_work", "culprit", culprit, "smell", "at_stake_us",
                     at, "at_stake_fraction", a->wall > 0 ? at / a->wall : 0, "at_stake_per_step_us",
                     a->nsteps ? json_real(at / (double)a->nsteps) : json_null(), "members", members, "members_us", members_us,
                     "evidence", ev, "next_experiment", next);
}
