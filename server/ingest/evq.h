/* evq.h: hands parsed trace events from the request thread to a loader thread.
 *
 * Why: on the request thread, YAJL's tokenising and the copy of each event's text take
 * about as long as what the loader then does with the event (classification, the scratch
 * INSERT, the chunk columns, zstd). Two threads overlap the two halves of an upload on
 * the two cores the server gets (bench/README.md).
 *
 * evq_push copies the event (its strings and JSON) into a block; full blocks go through a
 * bounded queue (EVQ_BLOCKS of about EVQ_BLOCK_BYTES: memory stays flat whatever the
 * trace size) to one thread that calls consume for each event, in order. consume's first
 * nonzero return stops it: the later events are dropped, and that code is what evq_push
 * and evq_finish return from then on. Nothing else is shared: consume owns whatever it
 * touches until evq_finish or evq_free has returned. */
#ifndef FP_EVQ_H
#define FP_EVQ_H

#include "ingest/parse.h"

#define EVQ_BLOCK_BYTES (256u << 10)
#define EVQ_BLOCKS 8

typedef int (*evq_consume_fn)(void *ctx, const ingest_event *e);
typedef struct evq evq;

/* Starts the thread. NULL when memory or a thread could not be had. */
evq *evq_new(evq_consume_fn consume, void *ctx);
/* Queues a copy of e. 0, ERR_NOMEM, or consume's error. */
int evq_push(evq *q, const ingest_event *e);
/* Hands over the last block and waits until every event was consumed and the thread has
 * ended. 0 or consume's (or ERR_NOMEM's) first error. Call once. */
int evq_finish(evq *q);
/* After evq_finish: how long the request thread waited for room in the queue (the loader
 * was the slower half) and the loader thread for a block (the parser was), in ms. */
void evq_waits(const evq *q, double *full_ms, double *empty_ms);
/* Stops the thread (queued events are dropped) unless evq_finish ended it; frees q.
 * Accepts NULL. */
void evq_free(evq *q);

#endif
