/* ingest.h: streaming Chrome-trace / Kineto parser.
 *
 * Bytes go in (plain or gzip, in chunks of any size, straight from the HTTP body);
 * one ingest_event per element of "traceEvents" (or of a bare top-level array, the
 * legacy autograd format) comes out through a callback, together with every other
 * top-level key as compact JSON text. Nothing holds the whole document: memory is
 * bounded by the largest single event (capped by INGEST_MAX_EVENT_BYTES). */
#ifndef FP_INGEST_H
#define FP_INGEST_H

#include <stddef.h>

#define INGEST_MAX_EVENT_BYTES (4u << 20) /* one event's JSON, args included */
#define INGEST_MAX_META_BYTES (16u << 20) /* the top-level non-event values together, as compact JSON */
#define INGEST_MAX_KEY_BYTES 1024         /* one top-level key */
#define INGEST_MAX_TOP_KEYS 1024          /* top-level keys (traceEvents included) */
#define INGEST_MAX_META_NODES 100000      /* keys, scalars and containers in those values */
#define INGEST_MAX_DEPTH 64               /* JSON nesting, anywhere */

/* One trace event. Strings are NUL-terminated and borrowed: valid only during
 * the callback. has_* say whether the key was present with the right type. */
typedef struct ingest_event {
    const char *name, *cat, *ph; /* "" when absent */
    const char *pid, *tid;       /* as text: ints print as ints, strings verbatim */
    double ts, dur;              /* microseconds, as in the file */
    int has_ts, has_dur;
    long long corr;              /* args.correlation */
    long long ext;               /* args["External id"] (or "external id", 2021 schema) */
    long long device, stream;    /* args.device / args.stream */
    long long bytes;             /* args.Bytes ([memory]) or args.bytes (copies) */
    long long devtype;           /* args["Device Type"] of [memory] events: 0 CPU, 1 CUDA */
    long long regs, smem;        /* registers per thread, shared memory */
    double bps, occ;             /* args["blocks per SM"], args["est. achieved occupancy %"] (kernels) */
    int has_corr, has_ext, has_device, has_stream, has_bytes, has_devtype, has_regs, has_smem, has_bps, has_occ;
    long long total_alloc, total_reserved; /* [memory]: args "Total Allocated" / "Total Reserved", the allocator's after the event */
    int has_total_alloc, has_total_reserved;
    long long seq;               /* args["Sequence number"]: autograd's link of a forward op to its backward */
    long long flops;             /* args.flops: torch's own count (profile(with_flops=True)) */
    int has_seq, has_flops;
    const char *shapes;          /* args["Input Dims"] as Python's str(): "[[2, 3], []]"; NULL if absent */
    const char *grid, *block;    /* "[1, 1, 1]" or NULL */
    const char *types;           /* args["Input type"] as Python's str(): "['float', 'Scalar']"; NULL if absent */
    const char *concrete;        /* args["Concrete Inputs"] likewise: "['', '1']"; NULL if absent */
    const char *json;            /* the whole event as written, args kept; at most INGEST_MAX_EVENT_BYTES */
    size_t json_len;
    int json_ws;                 /* json may still hold whitespace outside strings (ingest_minify: minify.h) */
} ingest_event;


typedef struct ingest_sink {
    void *ctx;
    /* Called once per event, in file order. Return 0 to go on, an ERR_* to stop. */
    int (*on_event)(void *ctx, const ingest_event *ev);
    /* Called for each top-level key other than traceEvents, with its value as JSON. */
    int (*on_meta)(void *ctx, const char *key, const char *json, size_t len);
    /* Optional: the message for an error on_event or on_meta returned (NULL: a generic one). */
    const char *(*message)(void *ctx);
} ingest_sink;

typedef struct ingest ingest;

/* gzip: 1 forces inflate (Content-Encoding: gzip), 0 sniffs the magic bytes.
 * max_inflated caps the decompressed bytes (0: no cap). NULL on allocation failure. */
ingest *ingest_new(const ingest_sink *sink, int gzip, unsigned long long max_inflated);
/* Where the bytes of an SQLite body (an nsys export, plain or gzip) go instead of the
 * JSON parser: fn gets the whole file, decompressed, magic included, in order, and
 * returns 0 or an ERR_*. Without one, an SQLite body fails with ERR_FORMAT. */
typedef int (*ingest_bytes_fn)(void *ctx, const void *buf, size_t len);
void ingest_set_sqlite_sink(ingest *in, ingest_bytes_fn fn, void *ctx);
/* Feeds the next bytes. 0, or ERR_PARSE / ERR_INVALID / ERR_NOTTRACE / ERR_TOOBIG /
 * ERR_FORMAT (an SQLite file and no SQLite sink: see ingest_sniffed_sqlite) or the sink's error. */
int ingest_feed(ingest *in, const void *buf, size_t len);
/* Ends the document: checks it was complete and was a trace (an SQLite body: only that
 * its gzip stream, if any, was complete; the SQLite sink's owner checks the file). */
int ingest_finish(ingest *in);
/* A message for the last error, e.g. "line 3: unexpected '}'" (never NULL). */
const char *ingest_error(const ingest *in);
/* 1 when the first (decompressed) bytes were "SQLite format 3\0" (an nsys export). */
int ingest_sniffed_sqlite(const ingest *in);
/* 1 when the document was a bare array of events (the legacy autograd format). */
int ingest_top_is_array(const ingest *in);
unsigned long long ingest_event_count(const ingest *in);
unsigned long long ingest_bytes_in(const ingest *in);
void ingest_free(ingest *in);

#endif
