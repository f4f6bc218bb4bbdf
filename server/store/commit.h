/* commit.h: the one transaction that stores an analysed upload as a session.
 *
 * The loader (ingest/load.c) fills scratch databases (schema: analysis/scratch.sql)
 * attached to store_scratch_get's connection as "scratch" and "kscratch"; the analysis
 * leaves its result tables there. store_commit_session copies everything the session owns into the main database
 * in ONE transaction (BEGIN IMMEDIATE ... COMMIT): so a 201 means committed, and a failure
 * or a crash before the COMMIT leaves nothing behind.
 *
 * Reads wscratch.op_rows, kscratch.gpu_ops, kscratch.kern, wscratch.ph, scratch.chunks and
 * wscratch.tlb (analysis/scratch.sql) and the string table (through strtab.h); writes
 * sessions, labels, strings, operator_rows, kernel_rows, phase_rows (their texts are ids of
 * strings), event_chunks, timeline_buckets and analysis (store/schema.sql). */
#ifndef FP_COMMIT_H
#define FP_COMMIT_H

#include <jansson.h>
#include <stddef.h>

#include "lib/intern.h"
#include "session.h"
#include "store/store.h"

typedef struct store_session_in {
    const char *name;          /* NULL or "": named "session <id>" */
    const char *source;        /* kineto | legacy | firstpass | nsys */
    const char *hardware;      /* "" when unknown */
    double start_us, end_us;   /* the trace's span (0 when unknown) */
    long long events;
    unsigned long long bytes_in;
    const json_t *meta;        /* top-level keys of the trace */
    const json_t *summary;     /* sessions.summary */
    const json_t *gpu, *report, *timeline; /* the analysis documents */
    /* Labels in order; a later one wins on the same key (the collector's, then the query's). */
    const fp_label *labels[2];
    size_t nlabels[2];
    const intern *strings;     /* the session's string table: id -> text */
    const json_t *effic;       /* the efficiency document (analysis/effic.c), NULL: none */
    int analysis_version;      /* ANALYSIS_VERSION (analysis/analyze.h) of the documents */
    /* The replay row (schema.sql): the upload order of the events (lib/evorder.h; runs NULL:
     * no row), an nsys export's measured bandwidths as JSON text (NULL when none), and the
     * name and labels as the upload gave them. */
    const void *runs;
    size_t runs_len;
    unsigned long long runs_events;
    const char *gpu_bw;
    const char *identity;      /* JSON {"name", "labels"} as the upload gave them (schema.sql) */
    const json_t *steps;       /* the step breakdown (GET /steps), NULL: none */
    long long step_count;      /* the gate's numbers of its steps (analysis.h) */
    double step_mean_us, step_sd_us;
    /* The upload's Idempotency-Key (idem.h), NULL: none. Stored on the session, and its claim
     * (upload_claims) deleted, in the same transaction. */
    const char *idempotency_key;
} store_session_in;

/* scratch, hold: store_scratch_get's, with the scratch databases attached (above) and
 * no transaction open. On SQLite the copy runs inside SQLite (INSERT ... SELECT); on
 * PostgreSQL the scratch's rows are read here and sent with COPY on a pooled connection,
 * the session id taken from the sequence. 0 with *id set, or ERR_NOMEM / ERR_DB with a
 * message in err (then rolled back: nothing of the session is stored). */
int store_commit_session(store *st, struct sqlite3 *scratch, db_conn *hold, const store_session_in *in, long long *id, char *err,
                         size_t errlen);

/* A re-analysis (ingest/reanalyse.h): the same copy, into the existing session id instead of
 * a new one, in ONE transaction that first checks that the session is still there and that
 * claimer still holds its claim (reanalysis.h), then replaces everything the analysis and
 * the loader wrote (strings, operator, kernel and phase rows, event chunks, timeline
 * buckets, the analysis documents, the replay row) and the session's figures (span, event
 * count, hardware, summary, analysis_version), and clears the claim and any failure. The
 * session's id, name, source, labels, meta, bytes_in, created_at, report edits and the
 * baselines naming it stay. in->name, labels, meta, bytes_in and source are not read. The
 * new event chunks must have seqs above the old ones (download.c says why). 0, ERR_NOTFOUND
 * (the session was deleted), ERR_CONFLICT (the claim was lost), ERR_NOMEM, ERR_DB, ERR_FULL,
 * ERR_DBDOWN; nothing changed unless 0. The caller bumps no generation: this does. */
int store_replace_session(store *st, struct sqlite3 *scratch, db_conn *hold, const store_session_in *in, long long id,
                          const char *claimer, char *err, size_t errlen);

#endif
