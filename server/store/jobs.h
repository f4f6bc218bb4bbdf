/* jobs.h: jobs of several ranks: the sessions that share a `job` label (issue 25).
 *
 * A multi-rank run (torchrun, tensor parallel) uploads one session per rank, each labelled
 * job:ID and rank:N (the Python package's trace_handler fills both from TORCHELASTIC_RUN_ID
 * and RANK). jobs.c reads what ingest stored for each (the suspect list in analysis.report,
 * sessions.summary, phases) and puts the ranks side by side; it writes nothing.
 *
 * A rank's steps: its ProfilerStep#N statistics (suspect list), else its most repeated
 * record_function range (two or more instances: train_step, decode_step). The straggler,
 * when two or more ranks have steps: the rank with the most time of its own per step (its
 * mean step less its collective wait: collectives make every rank's step as long as the
 * slowest one's); "slower_by" is that over the median of the others', and "differs" the
 * suspect categories (collectives aside) whose time at stake per step it has above the
 * others' mean. */
#ifndef FP_JOBS_H
#define FP_JOBS_H

#include <jansson.h>
#include "store/db.h"

#define JOBS_LIST_MAX 1000 /* jobs listed at most, newest first */
#define JOB_RANKS_MAX 4096 /* sessions of one job read at most */

/* {"jobs":[{"job","sessions","ranks","newest_session_id"}]}, newest first. 0 or ERR_DB. */
int jobs_list(db_conn *db, json_t **out);

/* {"job","ranks":[...],"straggler":{...}|null,"phases":[...]}; ERR_NOTFOUND when no session
 * carries job:<job>; ERR_DB. */
int jobs_get(db_conn *db, const char *job, json_t **out);

#endif
