/* err.h: the one error convention of the server.
 *
 * A function that can fail returns int: 0 on success or a negative ERR_* below.
 * Results leave through pointer arguments. Only http_status_from_err() (http.c)
 * turns these into HTTP status codes, so the mapping lives in one place. */
#ifndef FP_ERR_H
#define FP_ERR_H

enum {
    ERR_OK = 0,
    ERR_NOMEM = -1,     /* allocation failed */
    ERR_IO = -2,        /* read/write/inflate of bytes failed */
    ERR_PARSE = -3,     /* body is not valid JSON / gzip: 400 */
    ERR_INVALID = -4,   /* valid JSON, wrong types or values: 400 */
    ERR_NOTTRACE = -5,  /* valid JSON but not a trace document: 422 */
    ERR_NOTFOUND = -6,  /* 404 */
    ERR_DB = -7,        /* SQLite failed: 500 */
    ERR_TOOBIG = -8,    /* a size or count limit was hit: 413 */
    ERR_FORMAT = -9,    /* unsupported encoding or file format: 415 */
    ERR_CONFLICT = -10, /* 409 */
    ERR_INTERNAL = -11  /* a bug: 500 */
};

#endif
