/* reanalysis.h: who re-analyses which session, and what went wrong (schema.sql's
 * reanalysis table; the work itself is ingest/reanalyse.h's).
 *
 * A claim says that one worker (a server's POST, --reanalyse or its background worker, on
 * any replica) is re-analysing a session, until a time it keeps moving on while it works
 * (reanalysis_renew). At most one worker holds a session's claim: taking it is one upsert
 * that succeeds only when nobody holds it or the holder's time ran out (a replica that
 * died mid-way). Times are the database's clock (SQLite's strftime('%s'), PostgreSQL's
 * clock_timestamp()), so replicas whose clocks disagree still agree on expiry. The commit
 * of a re-analysis checks its claim inside its own transaction (commit.h) and clears it. */
#ifndef FP_REANALYSIS_H
#define FP_REANALYSIS_H

#include <jansson.h>
#include <stddef.h>

#include "store/db.h"
#include "store/store.h"

#define REANALYSIS_ERROR_MAX 1000 /* bytes of a failure's message kept */

/* Takes session id's claim for claimer (unique to one attempt) until lease_s seconds from
 * now. 1 when taken; 0 when another holds it, with its holder in holder (hlen bytes) and
 * the seconds it has left in *left; ERR_NOTFOUND (no such session), ERR_DB, ERR_DBDOWN. */
int reanalysis_claim(store *s, long long id, const char *claimer, int lease_s, char *holder, size_t hlen, long long *left);
/* Moves claimer's claim on to lease_s seconds from now: 0, ERR_CONFLICT when claimer holds
 * it no more, ERR_DB. */
int reanalysis_renew(store *s, long long id, const char *claimer, int lease_s);
/* Gives claimer's claim back without a verdict (the work was given up, not failed). */
void reanalysis_release(store *s, long long id, const char *claimer);
/* Gives claimer's claim back and records the failure of version's re-analysis (its error
 * cut to REANALYSIS_ERROR_MAX bytes); the session's JSON shows it until one succeeds. 0 or
 * ERR_DB; nothing when claimer holds the claim no more. */
int reanalysis_fail(store *s, long long id, const char *claimer, int version, const char *error);

/* The next session to re-analyse, newest first: analysis_version below older_than, id below
 * before (0: any), nobody's claim on it (or an expired one), and with skip_failed set, not
 * one whose re-analysis by version failed already. 1 with *id, 0 when none, ERR_DB. */
int reanalysis_next(store *s, int older_than, int version, int skip_failed, long long before, long long *id);
/* How many sessions have analysis_version below older_than: 0 or ERR_DB. */
int reanalysis_pending(store *s, int older_than, long long *n);

/* On db (the caller's snapshot): {"base": VERSION, "head": VERSION} of two sessions (null
 * for one that is gone), for compare and regressions; NULL when out of memory or on error. */
json_t *reanalysis_versions(db_conn *db, long long base, long long head);
/* On db: {"error", "failed_at", "version"} of session id's last failed re-analysis, or
 * JSON null when none (a new reference either way; NULL on error). */
json_t *reanalysis_failure(db_conn *db, long long id);

#endif
