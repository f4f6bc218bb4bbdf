/* evorder.h: the order in which an upload's events came, across its tracks, as runs.
 *
 * Event chunks (chunk.h) keep each track's events in order, but not how the tracks'
 * events interleaved in the upload; the analysis sums floating-point figures and breaks
 * ties in that order, so a re-analysis that feeds the events back in another order gives
 * figures that differ in their last digits and lists whose equal rows swap (issue 52). The
 * loader notes each event's track here; store_commit_session keeps the result (the replay
 * table), and a re-analysis reads it back to feed the events in the upload's own order.
 *
 * Format: zstd frames back to back, each of at most RUNS_BLOCK bytes of varint pairs
 * (track, count): count >= 1 events of track in a row. Runs change track at every pair
 * but across a frame boundary (a run cut there continues in the next frame). Real Kineto
 * traces change track every 4 to 6 events (15 to 25 % as many runs as events), about a
 * byte a run once compressed. No SQL, no HTTP. */
#ifndef FP_EVORDER_H
#define FP_EVORDER_H

#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"

#define RUNS_BLOCK (256u << 10) /* raw bytes a frame holds at most: the memory either side takes */

typedef struct runs_writer {
    buf raw;            /* pairs not yet compressed */
    buf out;            /* the frames so far */
    long long track;    /* the run being counted; -1 before the first event */
    unsigned long long count, events;
} runs_writer;

/* Zero-initialise, then runs_writer_init (sets track to -1). */
void runs_writer_init(runs_writer *w);
/* One more event of track (>= 0). cctx is a ZSTD_CCtx (void *: no zstd.h here). 0,
 * ERR_NOMEM or ERR_IO. */
int runs_note(runs_writer *w, void *cctx, long long track);
/* Ends the last run: w->out then holds the whole record (w->events events). 0 or an ERR_*. */
int runs_finish(runs_writer *w, void *cctx);
void runs_writer_free(runs_writer *w);

typedef struct runs_reader {
    const unsigned char *z, *zend; /* the frames not yet read */
    buf raw;                        /* the current frame, decompressed */
    size_t at;                      /* the next pair in raw */
} runs_reader;

/* Reads the record z[0..n) (borrowed: it must outlive the reader). */
void runs_reader_init(runs_reader *r, const void *z, size_t n);
/* The next run: 1 with *track and *count set, 0 at the end, ERR_IO on a malformed record,
 * ERR_NOMEM. */
int runs_next(runs_reader *r, long long *track, unsigned long long *count);
void runs_reader_free(runs_reader *r);

#endif
