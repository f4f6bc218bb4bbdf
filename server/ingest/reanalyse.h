/* reanalyse.h: a stored session analysed again by today's analysis (issue 52).
 *
 * Why: a session keeps the figures of the analysis that stored it (its ANALYSIS_VERSION,
 * analysis/analyze.h); when the rules change, its suspects, steps and efficiency no longer
 * compare with a new upload's. A re-analysis is an upload of the session's own stored
 * events (store/replay.h) through the importer's door (import.h: the same parser, loader,
 * limits and analysis as any upload; no second implementation), whose commit replaces the
 * session's analysis and events in one transaction (store_replace_session) and keeps its
 * id, name, labels, report edits and the baselines naming it. The reply cache follows the
 * write generation the commit bumps.
 *
 * What equals what: the events are fed back in their upload's order (the replay row) for
 * sessions stored since schema version 9, so every figure equals a fresh upload's of the
 * same trace, to the byte. Older sessions have no record of how their tracks interleaved;
 * their events come a track at a time, and their figures equal a fresh upload's up to the
 * order of floating-point sums (last digits) and of rows that tie (docs/operations.md).
 * An nsys export stored before version 7 kept no measured DRAM bandwidth: its efficiency
 * uses the device table's.
 *
 * One worker at a time per session, across replicas: a claim in the database
 * (store/reanalysis.h) with a lease renewed every lease_s / 3 while the work runs. A
 * re-analysis that fails leaves the old analysis and records why (the session's JSON
 * shows it); one that is given up (an upload took its slot, the server stops, the claim
 * was lost, the session was deleted) records nothing. A worker that dies leaves its claim
 * to expire and the old analysis in place. */
#ifndef FP_REANALYSE_H
#define FP_REANALYSE_H

#include <stdatomic.h>

#include "ingest/import.h"
#include "store/store.h"

typedef struct reanalyse_result {
    int before;              /* the session's analysis_version before */
    int version;             /* after: ANALYSIS_VERSION */
    long long events;        /* events fed back */
    int exact;               /* 1: in the upload's own order; 0: a track at a time */
    double ms;               /* wall time */
} reanalyse_result;

/* Re-analyses session id now. background: import_replay_opts.background. stop (may be
 * NULL): when it turns non-zero the work is given up at the next feed (ERR_BUSY). 0 with
 * *res; or ERR_NOTFOUND (no such session, or deleted meanwhile), ERR_CONFLICT (another
 * worker holds its claim: the message names it), ERR_BUSY (no upload slot, or given up),
 * ERR_DBDOWN, or the error that made it fail (recorded on the session), with a message in
 * err. Never leaves a half-written analysis: the old one stays unless it returns 0. */
int reanalyse_session(import_pool *p, store *st, long long id, int background, int lease_s, atomic_int *stop, reanalyse_result *res,
                      char *err, size_t errlen);

/* --reanalyse: every session whose analysis_version is below older_than, newest first, one
 * at a time, each once (one claimed by another worker is left to it). Logs a line a
 * session and one at the end. 0 when every one that was tried succeeded, 1 when some
 * failed (recorded on them), 2 when the database failed. */
int reanalyse_batch(import_pool *p, store *st, int older_than, int lease_s);

/* --reanalyse-on-start: a thread (nice 19) that re-analyses the sessions older than
 * ANALYSIS_VERSION one at a time in background slots (import_replay_opts), newest first,
 * skipping those whose re-analysis at this version failed already, and looks again every
 * REANALYSE_IDLE_S once none is left. NULL when the thread cannot start. */
#define REANALYSE_IDLE_S 60
typedef struct reanalyse_worker reanalyse_worker;
reanalyse_worker *reanalyse_worker_start(import_pool *p, store *st, int lease_s);
/* Stops it: the session in progress is given up at its next feed (an analysis already
 * running finishes first). Accepts NULL. */
void reanalyse_worker_stop(reanalyse_worker *w);

#endif
