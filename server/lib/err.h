/* err.h: the one error type of the server (curl's CURLcode, restated).
 *
 * A function that can fail returns int: 0 on success or a negative ERR_* below. Results
 * leave through pointer arguments; constructors return NULL. Only http/reply.c turns an
 * ERR_* into an HTTP status and an error code string, in one table (reply_errors), so
 * every error reply the API sends is a row there; tests/unit/test_reply.c checks that
 * each value below has its row. The comment after each value says what it means and the
 * reply it becomes. */
#ifndef FP_ERR_H
#define FP_ERR_H

enum {
    ERR_OK = 0,
    ERR_NOMEM = -1,     /* allocation failed: 500 out_of_memory */
    ERR_IO = -2,        /* read/write/inflate of bytes failed: 500 internal_error */
    ERR_PARSE = -3,     /* a body is not valid JSON / gzip: 400 invalid_json */
    ERR_INVALID = -4,   /* valid JSON, wrong types or values in a trace: 400 invalid_trace */
    ERR_NOTTRACE = -5,  /* valid JSON but not a trace document: 422 not_a_trace */
    ERR_NOTFOUND = -6,  /* no such session, baseline, route or file: 404 not_found */
    ERR_DB = -7,        /* SQLite failed: 500 database_error */
    ERR_TOOBIG = -8,    /* a size or count limit was hit: 413 too_large */
    ERR_FORMAT = -9,    /* unsupported encoding or file format: 415 unsupported_media_type */
    ERR_CONFLICT = -10, /* the state forbids it now: 409 conflict */
    ERR_INTERNAL = -11, /* a bug: 500 internal_error */
    ERR_PARAM = -12,    /* a query parameter or path segment is invalid: 400 invalid_parameter */
    ERR_AUTH = -13,     /* no usable credentials: 401 unauthorized */
    ERR_DENIED = -14,   /* credentials not accepted here: 403 forbidden */
    ERR_METHOD = -15,   /* the path exists, not with this method: 405 method_not_allowed */
    ERR_BUSY = -16,     /* no upload slot free, or uploads paused: 503 too_many_uploads */
    ERR_BAD_REPORT = -17,   /* a report edit of the wrong shape: 422 invalid_report */
    ERR_BAD_BASELINE = -18, /* a baseline body of the wrong shape: 422 invalid_baseline */
    ERR_NOSESSION = -19,    /* a body names a session that does not exist: 422 unknown_session */
    ERR_OFF = -20,          /* the feature is switched off here (backups): 403 backups_disabled */
    ERR_RUNNING = -21,      /* the same job runs already (a backup): 409 backup_running */
    ERR_BACKUP = -22,       /* a backup could not be written: 500 backup_failed */
    ERR_REQUEST = -23,      /* the request's framing is ambiguous or unsupported: 400 bad_request */
    ERR_FULL = -24,         /* the disk (or the database's limit) is full: 507 insufficient_storage */
    ERR_DBDOWN = -25,       /* the database does not answer (GET /healthz; PostgreSQL gone under a request, store_fail): 503 database_unreachable */
    ERR_RATE = -26,         /* a rate bound was reached (captures of a target per hour): 429 rate_limited */
    ERR_LAST = -26          /* the lowest value: tests walk ERR_LAST..-1 */
};

#endif
