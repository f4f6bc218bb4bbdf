/* retention.h: pruning of old sessions (--retain-days, --max-db-bytes) off the hot path.
 *
 * A background thread runs one pass at start-up and then every interval. A pass deletes,
 * oldest first (created_at, then id), every session older than retain_days, then more of
 * the oldest while the pages in use exceed max_db_bytes (store_usage). Never pruned:
 * a session labelled pin:true (label key "pin", value "true", exactly), and a session a
 * baseline names (deleting it would delete the baseline: CI checks would lose their
 * reference). Each deletion is store_delete_session (ON DELETE CASCADE) and one logfmt
 * line. */
#ifndef FP_RETENTION_H
#define FP_RETENTION_H

#include <stdatomic.h>

#include "store/store.h"

typedef struct retention_cfg {
    unsigned long long retain_days;      /* 0: no age limit */
    unsigned long long max_db_bytes;     /* 0: no size limit */
    unsigned interval_s;                 /* seconds between passes (>= 1) */
    unsigned long long vacuum_min_bytes; /* VACUUM when this much is free (and 1/4 of the file); 0: never */
    /* Hold uploads off for a VACUUM: 0 when none runs and none may start until resume;
     * non-zero when uploads are in flight (the VACUUM waits for the next pass). */
    int (*pause_uploads)(void *ctx);
    void (*resume_uploads)(void *ctx);
    /* Told of each pruned session (reason "age" or "size"), for the metrics; may be NULL. */
    void (*pruned)(const char *reason);
    void *ctx;                           /* passed to pause_uploads and resume_uploads */
} retention_cfg;

typedef struct retention retention;

/* What one pass did. */
typedef struct retention_pass {
    long long pruned_age, pruned_size; /* sessions deleted */
    int vacuumed;                      /* 1: a VACUUM ran */
} retention_pass;

/* Starts the thread (the first pass runs at once, on it). NULL when neither limit is set,
 * or when out of memory / the thread cannot start (then a logfmt error line is written). */
retention *retention_start(store *st, const retention_cfg *cfg);
/* Stops the thread after its current deletion and joins it; accepts NULL. */
void retention_stop(retention *r);

/* One pass, on the caller's thread; stop (may be NULL) is polled between deletions.
 * 0 or ERR_DB (the pass stops at the first failure; the next one retries). */
int retention_pass_run(store *st, const retention_cfg *cfg, const atomic_int *stop, retention_pass *out);

#endif
