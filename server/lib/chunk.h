/* chunk.h: the layout of one stored event chunk (event_chunks.data).
 *
 * Two layouts exist; readers tell them apart by the compressed blob's first bytes.
 *
 * Version 2 (written since 2026-12-03): a zstd frame (magic 28 b5 2f fd). Decompressed it
 * is a column store of n events, the columns one after another:
 *   varint n
 *   u8     cls[n]            enum ev_class (below)
 *   u8     ph[n]             first character of ph
 *   varint name[n], kind[n]  string ids (strings table of the session)
 *   u8     tpos[n]           where "ts" was: 0 none (ts 0), 1..254 cut out of the JSON as
 *                            top-level member tpos-1, 255 left in the JSON (value in traw)
 *   u8     tdec[c]           for each cut ts: digits after the decimal point
 *   varint tval[c]           for each cut ts: zigzag(mantissa - previous cut mantissa)
 *   u8     dpos[n], ddec[c'], varint dval[c']   the same for "dur" (dval: zigzag(mantissa))
 *   f64    traw[k], draw[k'] ts / dur of the events whose tpos / dpos is 255
 *   varint jlen[n]           bytes of each event's JSON, ts/dur members cut out
 *   ...    the JSON of the events, back to back
 * Why: the ts/dur digits are most of what does not compress in an event. A number is cut
 * only when it prints back byte for byte from (mantissa, decimals) and reads as the same
 * double, so the download returns the original member text at its original position;
 * delta-coded mantissas compress to 1-3 bytes where the text took 12-16. With this layout
 * a stored event costs less than its share of the gzip'ed trace (bench/README.md).
 *
 * Version 1 (databases written before): a zlib stream of records, each
 *   OFFSET SIZE  DESCRIPTION
 *   0      8     ts, double, us          (0 when the event had none)
 *   8      8     dur, double, us         (0 when the event had none)
 *   16     4     name string id
 *   20     4     kind string id
 *   24     1     class
 *   25     1     ph, first character
 *   26     2     reserved, 0
 *   28     4     json length N
 *   32     N     the original event, compact JSON
 * chunk_inflate turns both into the version-1 record layout, which chunk_next walks: readers
 * never see the column store. Host byte order (the database does not move between
 * architectures of different byte order). */
#ifndef FP_CHUNK_H
#define FP_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"

/* Event classes: how an event takes part in the analysis (chunk_rec.cls, scratch.ev.cls). */
enum ev_class {
    EV_HOST_OP = 0,   /* cpu_op, user_annotation, legacy ops: nest on their thread */
    EV_HOST_RT = 1,   /* cuda_runtime / cuda_driver: nest, and launch GPU work by correlation */
    EV_GPU = 2,       /* kernel, gpu_memcpy, gpu_memset: GPU activity */
    EV_MEMORY = 3,    /* [memory] instant events: allocation deltas */
    EV_GPU_ANN = 4,   /* gpu_user_annotation: GPU-side ranges */
    EV_OTHER = 5      /* python_function, flows, metadata, Trace spans, cuda_sync...: kept, not analysed */
};

/* Whether an event of class cls is drawn on the timeline (and counted in its tracks'
 * count): the timed classes, not [memory] instants nor the unanalysed rest. */
static inline int chunk_drawn_cls(int cls) { return cls <= EV_GPU_ANN && cls != EV_MEMORY; }

#define CHUNK_EVENTS 2048        /* events per chunk at most */
#define CHUNK_BYTES (512u << 10) /* JSON bytes per chunk, about */
#define CHUNK_HDR 32
#define CHUNK_ZSTD_LEVEL 1       /* measured on these column chunks (300 MB trace): 11.4 MB at 1, 13.9 MB at 3 (the default), and 2 % fewer loader instructions */

typedef struct chunk_rec {
    double ts, dur;
    uint32_t name, kind;
    uint8_t cls, ph; /* cls: enum ev_class */
    uint32_t json_len;
    uint8_t absent;  /* chunk_add only: CHUNK_NO_TS | CHUNK_NO_DUR when the event has no such
                      * top-level number (the parser knows), so its members are not searched */
} chunk_rec;
#define CHUNK_NO_TS 1
#define CHUNK_NO_DUR 2

/* The events of one chunk being built (version 2). Zero-initialise; chunk_builder_free. */
enum { CB_CLS, CB_PH, CB_NAME, CB_KIND, CB_TPOS, CB_TDEC, CB_TVAL, CB_DPOS, CB_DDEC, CB_DVAL,
       CB_TRAW, CB_DRAW, CB_JLEN, CB_JSON, CB_NCOLS };
typedef struct chunk_builder {
    buf col[CB_NCOLS];
    long long n;
    long long drawn, gpu; /* of n: chunk_drawn_cls events, and EV_GPU ones (event_chunks.drawn, .gpu) */
    long long prev_ts; /* mantissa of the last cut ts */
    buf raw;           /* chunk_finish: the columns laid end to end */
} chunk_builder;

/* Adds one event: json is compact JSON (one object) of r->json_len bytes; its top-level
 * "ts"/"dur" members are cut out when they equal r->ts / r->dur exactly (and r->absent
 * does not rule them out). 0 or ERR_NOMEM. */
int chunk_add(chunk_builder *b, const chunk_rec *r, const char *json);
/* JSON bytes held, for the CHUNK_BYTES limit. */
size_t chunk_builder_bytes(const chunk_builder *b);
/* Heap bytes the builder holds: every column's capacity (what a memory budget counts). */
size_t chunk_builder_mem(const chunk_builder *b);
/* Compresses the chunk into z (reset first) and empties the builder (n, drawn and gpu
 * too: read them first; the columns keep their capacity, the laid-out copy does not).
 * cctx is a ZSTD_CCtx
 * (void * so that this header does not need zstd.h). 0, ERR_NOMEM or ERR_IO. */
int chunk_finish(chunk_builder *b, void *cctx, buf *z);
void chunk_builder_free(chunk_builder *b);

/* Decompresses a stored chunk of either version into version-1 records in out (reset
 * first). 0, ERR_NOMEM or ERR_IO (not a chunk, or a malformed one). */
int chunk_inflate(const void *z, size_t zlen, buf *out);

/* Walks inflated records: *off starts at 0; returns 1 with r and *json set, 0 at the
 * end, -1 on a malformed record. */
int chunk_next(const buf *b, size_t *off, chunk_rec *r, const char **json);

#endif
