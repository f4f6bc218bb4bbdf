/* query.h: every read of a stored session, as a new Jansson reference.
 *
 * Each function runs prepared statements on the connection it is given and returns 0
 * with *out set (caller owns it), ERR_NOTFOUND for an unknown session, or ERR_DB. */
#ifndef FP_QUERY_H
#define FP_QUERY_H

#include <jansson.h>

/* GET /compare's per_step thresholds: what moved more than this, per step (or per call),
 * is named in per_step.regressions. Lower than the regressions defaults (history.h): a
 * comparison shows what changed; a CI gate decides with its own thresholds. */
#define COMPARE_REL 0.10
#define COMPARE_ABS_US 1.0
#define COMPARE_ABS_CALLS 1.0
#include "store/db.h"

typedef struct list_filter {
    const char *label_keys[16], *label_values[16];
    int nlabels;
    const char *name;     /* exact name, or NULL */
    const char *q;        /* a substring of the name, any case (ASCII), or NULL */
    const char *source;   /* or NULL */
    long long since, until; /* created_at bounds, unix seconds; 0 = none */
    long long before_id;  /* cursor: ids below this; 0 = first page */
    int limit;
} list_filter;

int query_session(db_conn *db, long long id, json_t **out);
int query_list(db_conn *db, const list_filter *f, json_t **out);
/* sort: one of the key_averages fields (validated by the caller through query_sort_column). */
int query_operators(db_conn *db, long long id, const char *sort, int limit, const char *kind, int by_shape, json_t **out);
int query_kernels(db_conn *db, long long id, const char *sort, int limit, json_t **out);
int query_phases(db_conn *db, long long id, json_t **out);
int query_gpu(db_conn *db, long long id, json_t **out);
/* GET /efficiency: the stored efficiency document (analysis/effic.c); a session stored
 * before schema version 7 reads as a document of nulls that says so (device_reason). */
int query_efficiency(db_conn *db, long long id, json_t **out);
int query_report(db_conn *db, long long id, json_t **out);
/* The suspect list computed at ingest (analysis/suspects.c); a session stored before it
 * existed answers {"computed": false, "suspects": []}. */
int query_suspects(db_conn *db, long long id, json_t **out);
/* Where each step's (and each CPU phase's) time goes, by role (analysis/steps.c): empty
 * lists for a session without steps or record_function ranges. The steps from offset, at
 * most limit of them ("total": how many the breakdown holds); the mean and the phases are
 * of every step. Reads analysis.steps (schema version 10), or the report's "breakdown" of a
 * session stored before. */
int query_steps(db_conn *db, long long id, long long offset, long long limit, json_t **out);
/* Allocated memory over time per device (analysis/memory.c) and the operators that allocate. */
int query_memory(db_conn *db, long long id, json_t **out);
int query_compare(db_conn *db, long long base, long long head, json_t **out);
/* gone (may be NULL): polled between tracks; when it returns 1 the query stops with
 * ERR_CONFLICT (the client hung up). At most 200 tracks are drawn, those with the most
 * events in the window; the rest are one merged track ("other": how many). */
int query_timeline(db_conn *db, long long id, double start_us, double end_us, int buckets, int (*gone)(void *), void *gone_ctx,
                   json_t **out);

/* GET /events: one event with its args and launch flow. Exactly one way to name it:
 * ref ("TRACK:SEQ:I", from an earlier reply), or track (a timeline track id) and ts_us
 * (dur_us, when finite, picks among events starting together), or q: the next (dir 1) or
 * previous (dir -1) event whose name contains q (any case) after ref, else from ts_us.
 * ERR_NOTFOUND for an unknown session or event; a search without a match gives event null. */
typedef struct event_query {
    const char *ref, *track, *q;
    double ts_us, dur_us; /* NAN when absent */
    int dir;
    int exact; /* q is the whole name, case and all (match=exact), not a part of it */
} event_query;
int query_event(db_conn *db, long long id, const event_query *q, json_t **out);
/* GET /busy: the union of GPU work (kernels, copies, memsets) in [start_us, end_us) per
 * device and per stream, and with buckets > 0 each device's busy share per slice. */
int query_busy(db_conn *db, long long id, double start_us, double end_us, int buckets, json_t **out);

/* The SQL column for an operator sort field, or NULL if the field is unknown. */
const char *query_sort_column(const char *field);
/* Comma-separated list of the accepted sort fields, for error messages. */
const char *query_sort_fields(void);

#endif
