/* replay.h: a stored session's events read back in the order its upload sent them, for a
 * re-analysis (ingest/reanalyse.h).
 *
 * What is read: the session's meta (its top-level trace keys), source and bytes_in, and
 * its event chunks (chunk.h) but not the synthesized ones (synth.h's SYNTH_TRACK): the
 * events as uploaded, each as its stored JSON text. The order is the replay row's (evorder.h):
 * each track's events in their order, the tracks interleaved as the upload had them; a
 * session stored before that row existed (schema version 9) has none, and its events come
 * a track at a time (track 0's, then 1's...), which keeps each track's order and the
 * tracks' numbering, not their interleaving (reanalyse.h says what that changes).
 *
 * Memory: the inflated chunks the tracks are in the middle of, at most REPLAY_HELD_BYTES
 * (past it the least recently read is let go and read again when its track comes back),
 * plus one (track, seq) pair a chunk. Holds no database connection between calls: each
 * chunk is read by one statement on a pooled connection taken for it, like a download. */
#ifndef FP_REPLAY_H
#define FP_REPLAY_H

#include <jansson.h>
#include <stddef.h>

#include "store/store.h"

#define REPLAY_HELD_BYTES (64u << 20)

typedef struct replay replay;

/* Reads what the replay needs of session id, in one snapshot. 0 with *out, or ERR_NOTFOUND,
 * ERR_DB, ERR_DBDOWN, ERR_NOMEM, ERR_IO (a malformed order), with a message in err. */
int replay_open(store *s, long long id, replay **out, char *err, size_t errlen);
const json_t *replay_meta(const replay *r);       /* borrowed */
const char *replay_source(const replay *r);       /* "kineto", "legacy", "firstpass", "nsys", ... */
unsigned long long replay_bytes_in(const replay *r);
long long replay_events(const replay *r);         /* the events replay_next will give */
/* A seq above every chunk the session holds now: the re-analysis numbers its chunks from
 * it (download.c says why they must not reuse a seq). */
long long replay_seq_base(const replay *r);
/* 1 when the upload's own order is known (the replay row), 0 when a track at a time. */
int replay_exact(const replay *r);
/* The session's analysis_version as it was read. */
int replay_version(const replay *r);
/* The name and labels as the upload gave them (the report's workload line quotes them):
 * NULL when it gave no name; the labels in their order (a session stored before the replay
 * row: the firstpass object's first, then by key). Borrowed. */
const char *replay_name(const replay *r);
const json_t *replay_labels(const replay *r);
/* The nsys export's measured DRAM bandwidths: how many; entry i into *dev, *bw. For a
 * session without the replay row, the efficiency document's when it says "nsys". */
size_t replay_gpu_bw(const replay *r, size_t i, long long *dev, double *bw);
/* The next event's JSON text (valid until the next call): 1, 0 after the last one, or an
 * ERR_* with a message in err: ERR_NOTFOUND (the session was deleted meanwhile), ERR_IO (a
 * chunk or the order is malformed, or they do not agree), ERR_DB, ERR_DBDOWN, ERR_NOMEM. */
int replay_next(replay *r, const char **json, size_t *len, char *err, size_t errlen);
void replay_free(replay *r); /* accepts NULL */

#endif
