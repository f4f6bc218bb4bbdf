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
int query_report(db_conn *db, long long id, json_t **out);
/* The suspect list computed at ingest (analysis/suspects.c); a session stored before it
 * existed answers {"computed": false, "suspects": []}. */
int query_suspects(db_conn *db, long long id, json_t **out);
/* Where each step's (and each CPU phase's) time goes, by role (analysis/steps.c): empty
 * lists for a session without steps or record_function ranges. */
int query_steps(db_conn *db, long long id, json_t **out);
/* Allocated memory over time per device (analysis/memory.c) and the operators that allocate. */
int query_memory(db_conn *db, long long id, json_t **out);
int query_compare(db_conn *db, long long base, long long head, json_t **out);
int query_timeline(db_conn *db, long long id, double start_us, double end_us, int buckets, json_t **out);

/* The SQL column for an operator sort field, or NULL if the field is unknown. */
const char *query_sort_column(const char *field);
/* Comma-separated list of the accepted sort fields, for error messages. */
const char *query_sort_fields(void);

#endif
